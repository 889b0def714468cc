//! Installs the team's tables (schema `subscriptions_example`) into `DATABASE_URL`.
//! inbound's own tables come from `inboundctl migrate`.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("custom-worker-migrate: set DATABASE_URL");
        return ExitCode::FAILURE;
    };
    let options = match url.parse() {
        Ok(options) => options,
        Err(_) => {
            eprintln!("custom-worker-migrate: DATABASE_URL is not a postgres:// URL");
            return ExitCode::FAILURE;
        }
    };
    match custom_worker::migrate(&options).await {
        Ok(_) => {
            println!("subscriptions_example migrated");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("custom-worker-migrate: {error}");
            ExitCode::FAILURE
        }
    }
}
