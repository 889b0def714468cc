//! Usage lines that do not demand what the environment gives. clap writes every required
//! flag into a command's usage line, also one an environment variable satisfies
//! (`--database-url` from `DATABASE_URL`), so a person reading `Usage: … --database-url
//! <DATABASE_URL>` passes it by hand. [`env_flags_out_of_usage`] takes such flags out of
//! every usage line; the help still lists them with their `[env: …]`, and leaving out both
//! flag and variable is still a usage error (exit 2) naming the flag.

use clap::{Command, Parser};

/// `T` parsed from the command line and environment, its usage lines without the flags
/// the environment gives; a bad command line is clap's error (exit 2 on `exit`).
pub fn try_parse<T: Parser>() -> Result<T, clap::Error> {
    let mut command = env_flags_out_of_usage(T::command());
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    T::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
}

/// `T` parsed from `args` (the first is the program's name, shown in usage lines), as
/// [`parse`] does.
pub fn parse_from<T: Parser>(name: &str, args: impl IntoIterator<Item = std::ffi::OsString>) -> T {
    let mut command = env_flags_out_of_usage(T::command().bin_name(name));
    command
        .try_get_matches_from_mut(args)
        .and_then(|matches| T::from_arg_matches(&matches))
        .map_err(|error| error.format(&mut command))
        .unwrap_or_else(|error| error.exit())
}

/// [`try_parse`], printing the error (or the help) and exiting as clap does.
pub fn parse<T: Parser>() -> T {
    try_parse().unwrap_or_else(|error| error.exit())
}

/// `command` with every required flag that has an environment twin left out of its usage
/// line, and of each subcommand's.
pub fn env_flags_out_of_usage(mut command: Command) -> Command {
    command.build();
    without_env_flags(command)
}

fn without_env_flags(mut command: Command) -> Command {
    let mut usage = command.render_usage().to_string();
    for arg in command.get_arguments() {
        let (true, Some(_), Some(long)) = (arg.is_required_set(), arg.get_env(), arg.get_long())
        else {
            continue;
        };
        let value = arg
            .get_value_names()
            .map(|names| {
                names
                    .iter()
                    .map(|name| format!("<{name}>"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
        usage = usage.replace(&format!(" --{long} {value}"), "");
    }
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage).to_owned();
    command = command.override_usage(usage);
    let names: Vec<String> = command
        .get_subcommands()
        .map(|subcommand| subcommand.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, without_env_flags);
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    #[command(name = "tool")]
    struct Tool {
        #[arg(long, env = "TOOL_DATABASE_URL")]
        database_url: String,
        #[arg(long)]
        name: String,
        #[command(subcommand)]
        command: Option<Sub>,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Sub {
        Status {
            #[arg(long, env = "TOOL_CONFIG")]
            config: String,
        },
    }

    #[test]
    fn only_flags_with_an_environment_twin_leave_the_usage_line() {
        use clap::CommandFactory;
        let mut command = env_flags_out_of_usage(Tool::command());
        let usage = command.render_usage().to_string();
        assert!(!usage.contains("--database-url"), "{usage}");
        assert!(usage.contains("--name <NAME>"), "{usage}");
        let status = command
            .find_subcommand_mut("status")
            .expect("status")
            .render_usage()
            .to_string();
        assert!(!status.contains("--config"), "{status}");
    }
}
