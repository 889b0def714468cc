//! `sqlx::migrate!` embeds `migrations/` when the crate compiles, and cargo rebuilds a
//! crate only for the files it knows it reads: without this line, a migration file added
//! later is left out of the next build, and `migrate` applies only the old ones.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
