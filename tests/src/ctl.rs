//! `inboundctl` as the suites run it: one environment policy for every suite, so that what a
//! test sees is what it set. The process's own environment never leaks in — no database,
//! no configuration, no pooler mode, no Stripe key, no `$USER` — and the operator is
//! `ops-test`, as a pod would set `INBOUND_OPERATOR`.

use std::process::{Command, Output};

use crate::fixtures;
use crate::process::binary;

/// An `inboundctl` invocation being prepared.
pub struct Inboundctl {
    command: Command,
}

impl Inboundctl {
    /// `inboundctl` on a clean environment (see the module header).
    pub fn new() -> Self {
        let mut command = Command::new(binary("inboundctl"));
        command
            .env_remove("DATABASE_URL")
            .env_remove("INBOUND_CONFIG")
            .env_remove("STRIPE_API_KEY")
            .env_remove("INBOUND_DB_POOLER")
            .env_remove("USER")
            .env("INBOUND_OPERATOR", "ops-test");
        Self { command }
    }

    /// With the fixture configuration's secrets in the environment (the ingress's).
    pub fn with_fixture_secrets(mut self) -> Self {
        self.command.envs(fixtures::secret_env());
        self
    }

    /// With `DATABASE_URL` set to `url`.
    pub fn database(mut self, url: &str) -> Self {
        self.command.env("DATABASE_URL", url);
        self
    }

    /// With these variables set, after everything above.
    pub fn envs<Name: AsRef<str>, Value: AsRef<str>>(mut self, env: &[(Name, Value)]) -> Self {
        self.command.envs(
            env.iter()
                .map(|(name, value)| (name.as_ref(), value.as_ref())),
        );
        self
    }

    /// Runs `inboundctl args…` to its end.
    pub fn run(mut self, args: &[&str]) -> Output {
        self.command.args(args).output().expect("run inboundctl")
    }

    /// The command, to spawn it (a long-running `dev-sink`, stdin to write).
    pub fn command(mut self, args: &[&str]) -> Command {
        self.command.args(args);
        self.command
    }
}

impl Default for Inboundctl {
    fn default() -> Self {
        Self::new()
    }
}

/// A command line's words (`"receipts list --status failed"`), for [`Inboundctl::run`]:
/// one line to read where an argument array takes one line per word. Arguments holding
/// spaces (a reason, a note) are passed as an array instead; scratch paths hold none
/// (`ScratchDir::new` sees to it).
pub fn words(command: &str) -> Vec<&str> {
    command.split_whitespace().collect()
}
