//! `inboundctl check-config` (and the worker's offline check) and the usage lines: what a
//! configuration is refused or warned for, said in one line without printing a secret.

use super::*;

#[test]
fn check_config_accepts_a_valid_file() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let output = inboundctl(
        &["check-config", "--config", &path],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("ok (9 integrations, 1 sinks)"),
        "{}",
        text(&output.stdout)
    );
}

/// A misspelled event type in a route would be answered 200 `ignored` for ever:
/// check-config warns with the closest type the provider sends, still exits 0 (a provider
/// may send types the list does not know yet), and exits 1 with `--deny-warnings`.
#[test]
fn check_config_warns_about_route_keys_the_provider_never_sends() {
    let scratch = ScratchDir::new();
    let clean = write_config(&scratch, |_| {});
    let output = inboundctl(
        &["check-config", "--config", &clean],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("warning"),
        "{}",
        text(&output.stderr)
    );

    let typo = write_config(&scratch, |config| {
        config.rename_route(
            "stripe-acme",
            "payment_intent.succeeded",
            "payment_intent.succeded",
        );
    });
    let warned = inboundctl(
        &["check-config", "--config", &typo],
        &fixtures::secret_env(),
    );
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    let stderr = text(&warned.stderr);
    assert!(
        stderr.contains("warning: integration stripe-acme: route \"payment_intent.succeded\"")
            && stderr.contains("did you mean \"payment_intent.succeeded\""),
        "{stderr}"
    );
    let denied = inboundctl(
        &words(&format!("check-config --config {typo} --deny-warnings")),
        &fixtures::secret_env(),
    );
    assert_eq!(denied.status.code(), Some(1), "{}", text(&denied.stderr));
}

/// Shopify topics are checked too, `/` and all: `orders/created` is no topic, and the
/// warning names `orders/create`.
#[test]
fn check_config_warns_about_a_shopify_topic_typo() {
    let scratch = ScratchDir::new();
    let typo = write_config(&scratch, |config| {
        config.rename_route("shop-acme", "orders/create", "orders/created");
    });
    let warned = inboundctl(
        &["check-config", "--config", &typo],
        &fixtures::secret_env(),
    );
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    let stderr = text(&warned.stderr);
    assert!(
        stderr.contains("warning: integration shop-acme: route \"orders/created\"")
            && stderr.contains("did you mean \"orders/create\""),
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
}

/// `inboundctl … | head` closes the pipe early: the command stops printing and finishes
/// with its own exit status instead of panicking on the failed write.
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let mut child = Inboundctl::new()
        .with_fixture_secrets()
        .command(&["check-config", "--config", &path])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run inboundctl");
    // The reader is gone before the first line is written.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
}

#[test]
fn check_config_names_the_bad_field_in_one_line() {
    let scratch = ScratchDir::new();
    type Edit = fn(&mut ConfigEdit);
    let cases: [(Edit, &str); 3] = [
        (
            |config| {
                config.set("slack-acme", "provider", "slak");
            },
            "integration[2] (slack-acme).provider: unknown provider \"slak\"",
        ),
        (
            |config| {
                config.set("gh-acme", "id", "stripe-acme");
            },
            "integration[1] (stripe-acme).id: duplicate integration id",
        ),
        (
            |config| {
                config
                    .route("gh-acme", "pull_request.opened")
                    .insert("sink".to_owned(), "elsewhere".into());
            },
            "integration[1] (gh-acme).routes.\"pull_request.opened\".sink: unknown sink \"elsewhere\"",
        ),
    ];
    for (edit, expected) in cases {
        let path = write_config(&scratch, edit);
        let output = inboundctl(
            &["check-config", "--config", &path],
            &fixtures::secret_env(),
        );
        assert_eq!(output.status.code(), Some(1), "{expected}");
        let stderr = text(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in {stderr:?}"
        );
    }
    let missing = inboundctl(
        &["check-config", "--config", "/nonexistent/inbound.toml"],
        &[],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("cannot read config file /nonexistent/inbound.toml"));
}

#[test]
fn check_config_accepts_any_handler_unless_told_which_the_worker_has() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |config| {
        config
            .route("stripe-acme", "payment_intent.succeeded")
            .insert("handler".to_owned(), "orders.pay".into());
    });
    // Only the worker that runs a handler knows it: the ingress's check passes.
    let output = inboundctl(
        &["check-config", "--config", &path],
        &fixtures::secret_env(),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    // Told the worker's registry (e.g. `inbound-worker --list-handlers`, which needs no
    // configuration and no database), it names the route.
    let listed = std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
        .arg("--list-handlers")
        .env_remove("INBOUND_CONFIG")
        .env_remove("DATABASE_URL")
        .output()
        .expect("inbound-worker --list-handlers");
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let handlers = text(&listed.stdout);
    assert_eq!(
        handlers.lines().collect::<Vec<_>>(),
        [
            "entitlements.grant",
            "forward",
            "orders.mark_paid",
            "orders.refund"
        ]
    );
    let handlers = handlers.lines().collect::<Vec<_>>().join(",");
    let output = inboundctl(
        &words(&format!(
            "check-config --config {path} --handlers {handlers}"
        )),
        &fixtures::secret_env(),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("integration[0] (stripe-acme).routes.\"payment_intent.succeeded\".handler: handler \"orders.pay\" is not registered"),
        "{stderr}"
    );
}

/// What `check-config --handlers` cannot know — a handler's own start-up checks (a
/// Stripe business handler needs `expect.livemode`) — the worker checks offline:
/// `inbound-worker --check-config` reads no database.
#[test]
fn the_worker_checks_a_configuration_offline_with_its_handlers_own_checks() {
    let scratch = ScratchDir::new();
    let check = |path: &str| {
        std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
            .args(["--check-config", "--config", path])
            .env_remove("DATABASE_URL")
            .envs(fixtures::secret_env())
            .output()
            .expect("inbound-worker --check-config")
    };
    let fine = write_config(&scratch, |_| {});
    let output = check(&fine);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let unpinned = write_config(&scratch, |config| {
        config.set(
            "stripe-acme",
            "expect",
            toml::toml! { account = "acct_123" },
        );
    });
    let output = check(&unpinned);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    assert!(
        text(&output.stderr).contains("expect.livemode"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn check_config_refuses_a_bad_standard_secret_without_printing_it() {
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let mut env = fixtures::secret_env();
    for (name, value) in &mut env {
        if name == "TEST_STANDARD_SECRET" {
            *value = "whsec_%%%definitely-not-base64%%%".to_owned();
        }
    }
    let output = inboundctl(&["check-config", "--config", &path], &env);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("integration[3] (std-acme).secrets[0]: env:TEST_STANDARD_SECRET is not a Standard Webhooks secret"), "{stderr}");
    assert!(!stderr.contains("definitely-not-base64"), "{stderr}");
}

/// Usage lines do not mark a flag the environment can give (`--database-url` from
/// `DATABASE_URL`, `--config` from `INBOUND_CONFIG`) as required; the help says where it
/// comes from, and leaving both out is still a usage error naming the flag and variable.
#[test]
fn usage_lines_do_not_demand_flags_the_environment_gives() {
    for (binary_name, args) in [
        ("inboundctl", &["status", "--help"][..]),
        ("inboundctl", &["receipts", "replay", "--help"][..]),
        ("inbound-ingress", &["--help"][..]),
        ("inbound-worker", &["--help"][..]),
    ] {
        let output = Command::new(binary(binary_name))
            .args(args)
            .output()
            .expect("help");
        let help = text(&output.stdout);
        let usage = help
            .lines()
            .find(|line| line.starts_with("Usage:"))
            .unwrap_or_else(|| panic!("{binary_name} {args:?}: no usage line: {help}"));
        assert!(
            !usage.contains("--database-url") && !usage.contains("--config <"),
            "{binary_name} {args:?}: {usage}"
        );
        assert!(
            help.contains("[env: DATABASE_URL]"),
            "{binary_name} {args:?}: {help}"
        );
    }
    let missing = inboundctl(&["status"], &[]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    let error = text(&missing.stderr);
    assert!(
        error.contains("--database-url") && error.contains("DATABASE_URL"),
        "{error}"
    );
}
