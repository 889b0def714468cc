//! `<worker> migrate`: a worker carries its team's migrations
//! ([`crate::WorkerBuilder::migrations`]), so a team needs no migrate binary of its own.
//! It applies inbound's migrations, then each registered schema's, with inbound's
//! migrator (its lock, lock timeout and repair of interrupted index builds, the history
//! kept in each schema); with `--create-roles` it then creates and grants the
//! per-process roles, the registered schemas granted to the worker role — in that order,
//! so the schemas exist when they are granted.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use inbound_store::{self as store, Schema, roles};
use sqlx::migrate::Migrator;
use sqlx::{ConnectOptions, Connection};

/// A team's migrations and the schema they create.
#[derive(Debug, Clone)]
pub struct SchemaMigrations {
    /// The schema (its tables, and its migration history).
    pub schema: Schema,
    /// The embedded migrations (`sqlx::migrate!("./migrations")`).
    pub migrator: &'static Migrator,
    /// The directory they were embedded from, when the worker names it
    /// ([`crate::WorkerBuilder::migrations_from`]): where it still exists (a developer's
    /// checkout, a CI build), `migrate` refuses a binary built before a file was added.
    pub source: Option<&'static str>,
}

/// `<worker> migrate`'s flags.
#[derive(Debug, clap::Parser)]
#[command(
    about = "Apply inbound's migrations and this worker's, then (with --create-roles) grant the roles"
)]
pub struct MigrateArgs {
    /// PostgreSQL URL: a direct connection (or a session-mode pool), as a role that owns
    /// the tables.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// The schema of inbound's tables.
    #[arg(long, env = "INBOUND_SCHEMA", default_value = store::DEFAULT_SCHEMA,
          value_parser = Schema::parse_own)]
    pub schema: Schema,
    /// Also create (when missing) and grant one login role per process, this worker's
    /// schemas granted to the worker role. Idempotent: run it with every migration.
    #[arg(long)]
    pub create_roles: bool,
    /// The roles' name prefix (`inbound_` gives `inbound_ingress`, …).
    #[arg(long, default_value = roles::RolePrefix::DEFAULT,
          value_parser = roles::RolePrefix::parse)]
    pub role_prefix: roles::RolePrefix,
    /// Give up connecting after this many seconds.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout_secs: u64,
    /// Accept a database a newer release migrated (a rollback, or an older pod started
    /// mid-rollout: migrations only add, so the older release runs on it) instead of
    /// refusing it as a build that may have missed a migration file.
    #[arg(long)]
    pub accept_newer: bool,
}

/// Whether the command line asks for `migrate` (its first argument).
pub fn requested() -> bool {
    std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "migrate")
}

/// The whole `<worker> migrate` process: exit 0 when everything applied, 1 otherwise (2
/// for a bad command line).
pub fn main(migrations: &[SchemaMigrations]) -> ExitCode {
    let program = std::env::args()
        .next()
        .and_then(|path| {
            std::path::Path::new(&path)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "worker".to_owned());
    let args: MigrateArgs = inbound_runtime::usage::parse_from(
        &format!("{program} migrate"),
        std::env::args_os().skip(1),
    );
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("migrate: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args, migrations)) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("migrate: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Applies inbound's migrations and `migrations`, then grants the roles when asked;
/// what was done, a line each.
pub async fn run(
    args: &MigrateArgs,
    migrations: &[SchemaMigrations],
) -> anyhow::Result<Vec<String>> {
    if let Some(own) = migrations.iter().find(|team| team.schema == args.schema) {
        anyhow::bail!(
            "the worker's migrations name inbound's own schema {}: give your tables a schema of their own",
            own.schema
        );
    }
    let target = store::SessionTarget {
        schema: args.schema.clone(),
        pooler: store::Pooler::None,
    };
    let options = store::connect_options(&args.database_url, &target)?;
    let timeout = Duration::from_secs(args.connect_timeout_secs);
    let mut connection = tokio::time::timeout(timeout, options.connect())
        .await
        .map_err(|_| anyhow::anyhow!("cannot reach PostgreSQL: no answer within {timeout:?}"))?
        .context("cannot reach PostgreSQL")?;
    let mut done = Vec::new();
    for team in migrations {
        check_embedded(team)?;
    }
    let inbound =
        store::migrations::migrate_with(&options, &args.schema, store::migrations::MAX_RUNS)
            .await
            .context("inbound's migrations failed")?;
    done.push(inbound.report(&args.schema, args.accept_newer)?);
    for team in migrations {
        let migrated = store::migrate_schema(&options, team.migrator, &team.schema)
            .await
            .with_context(|| format!("the migrations of schema {} failed", team.schema))?;
        done.push(migrated.report(&team.schema, args.accept_newer)?);
    }
    if args.create_roles {
        let schemas: Vec<Schema> = migrations.iter().map(|team| team.schema.clone()).collect();
        let granted = tokio::time::timeout(
            timeout,
            roles::create_roles(&mut connection, &args.schema, &args.role_prefix, &schemas),
        )
        .await
        .map_err(|_| {
            anyhow::anyhow!("cannot create or grant the roles: no answer within {timeout:?}")
        })?
        .context("cannot create or grant the roles (needs CREATEROLE and the tables' owner)")?;
        done.push(format!("roles granted: {}", granted.join(", ")));
    }
    connection.close().await.ok();
    Ok(done)
}

/// Refuses a binary that does not carry every migration file beside it: `sqlx::migrate!`
/// embeds the directory when the crate compiles, and cargo does not rebuild a crate for
/// a file added to it (unless its build.rs says so), so a stale build would apply only
/// the old ones and say nothing.
fn check_embedded(team: &SchemaMigrations) -> anyhow::Result<()> {
    let Some(source) = team.source else {
        return Ok(());
    };
    let Ok(entries) = std::fs::read_dir(source) else {
        // Not where it was built (a container image): nothing to compare with.
        return Ok(());
    };
    let mut missing: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sql"))
        .filter(|name| {
            let version = name
                .split('_')
                .next()
                .and_then(|digits| digits.parse::<i64>().ok());
            version.is_some_and(|version| {
                team.migrator
                    .iter()
                    .all(|migration| migration.version != version)
            })
        })
        .collect();
    missing.sort();
    if missing.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "schema {}: {} in {source} {} not in this binary: it was built before they were added — rebuild it (a build.rs with `println!(\"cargo:rerun-if-changed=migrations\")` makes cargo notice new files)",
        team.schema,
        missing.join(", "),
        if missing.len() == 1 { "is" } else { "are" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migration file added beside the migrations a binary embedded (cargo did not
    /// rebuild it) is named and refused before anything is applied; a directory that
    /// matches, or one that is gone (an image), passes.
    #[test]
    fn a_binary_built_before_a_migration_file_was_added_is_refused() {
        static EMBEDDED: Migrator = sqlx::migrate!("../example/migrations");
        let directory = std::env::temp_dir().join(format!(
            "inbound-migrate-check-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&directory).expect("a directory");
        std::fs::write(directory.join("0001_domain.sql"), "SELECT 1;").expect("a file");
        let source: &'static str = directory.to_string_lossy().into_owned().leak();
        let team = |source| SchemaMigrations {
            schema: "team".parse().expect("a schema"),
            migrator: &EMBEDDED,
            source,
        };
        check_embedded(&team(Some(source))).expect("every file embedded");
        std::fs::write(directory.join("0002_added.sql"), "SELECT 2;").expect("a file");
        let refused = check_embedded(&team(Some(source)))
            .expect_err("a file the binary lacks")
            .to_string();
        assert!(
            refused.contains("schema team: 0002_added.sql in")
                && refused.contains("is not in this binary"),
            "{refused}"
        );
        std::fs::remove_dir_all(&directory).expect("cleaned up");
        check_embedded(&team(Some(source))).expect("no directory to compare with");
        check_embedded(&team(None)).expect("no directory named");
    }
}
