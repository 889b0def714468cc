//! The event types each provider is known to send, kept in the code so that
//! `inboundctl check-config` can warn about route keys no delivery will ever carry.
//!
//! A misspelled route key is otherwise silent: `payment_intent.succeded` is a valid key,
//! no event ever has that type, and every `payment_intent.succeeded` delivery is answered
//! `200 ignored`. [`route_key_warnings`] names such keys, with the closest known type as a
//! "did you mean" hint ([`suggestion`]).
//!
//! This is a warning aid, not a filter. The ingress never refuses an event type because it
//! is missing here, and routing never consults these lists. Providers add types over time
//! (and preview programmes send types that are not listed), so a stale list costs a
//! spurious warning, never an event; add the type here when that happens.
//!
//! Where the lists come from:
//!
//! - [`STRIPE`] lists the generally available types of Stripe's API reference, "Types
//!   of events" (<https://docs.stripe.com/api/events/types>), which is the `enabled_events`
//!   enum of `POST /v1/webhook_endpoints` in Stripe's OpenAPI description
//!   (<https://github.com/stripe/openapi>). Public- and private-preview types (`capital.*`,
//!   `account_notice.*`, `privacy.*`, …) are left out.
//! - [`GITHUB`] follows GitHub's "Webhook events and payloads"
//!   (<https://docs.github.com/en/webhooks/webhook-events-and-payloads>): every event name
//!   (the `X-GitHub-Event` header) and, for events with an `action`, every documented
//!   `event.action`, which are the two route keys a delivery is tried under
//!   ([`inbound_core::event`]). Cross-checked against the generated list of `@octokit/webhooks`
//!   (<https://github.com/octokit/webhooks.js>). `repository_dispatch` is the exception:
//!   its `action` is whatever `event_type` the dispatching client chose, so every
//!   `repository_dispatch.…` key is accepted ([`GITHUB_FREE_FORM_ACTIONS`]).
//! - [`SLACK`] lists the Events API types of Slack's event reference
//!   (<https://docs.slack.dev/reference/events>), cross-checked against the `SlackEvent`
//!   union of `@slack/types` (<https://github.com/slackapi/node-slack-sdk>). The route key
//!   is the inner `event.type`, so RTM-only types, the envelope types `url_verification`
//!   (answered by the ingress itself) and `app_rate_limited` (it carries no inner event),
//!   and the subscription names `message.channels`, `message.im`, … are not listed: those
//!   subscriptions deliver events of type `message`.
//! - [`SHOPIFY`] lists the topics (the `X-Shopify-Topic` header, which is the route key) of
//!   the `WebhookSubscriptionTopic` enum of Shopify's GraphQL Admin API, version 2026-07
//!   (<https://shopify.dev/docs/api/admin-graphql/latest/enums/WebhookSubscriptionTopic>),
//!   each spelled as its description names it. The enum value is the topic upper-cased with
//!   its `/` (or `.`) made `_`, as `topicForStorage` of `@shopify/shopify-api`
//!   (<https://github.com/Shopify/shopify-app-js>) maps a topic, but the separator sits at
//!   no fixed place: `ORDERS_CREATE` is `orders/create`, `APP_SCOPES_UPDATE` is
//!   `app/scopes_update`, `CUSTOMERS_EMAIL_MARKETING_CONSENT_UPDATE` is
//!   `customers_email_marketing_consent/update`, `CUSTOMER_TAGS_ADDED` is
//!   `customer.tags_added`. Added to them, the mandatory compliance topics
//!   `customers/data_request`, `customers/redact` and `shop/redact`, which are subscribed
//!   in the app configuration and are not in the enum
//!   (<https://shopify.dev/docs/apps/build/compliance/privacy-law-compliance>). A pattern
//!   cannot split a topic at its `/`: the configuration refuses `orders/*`, and `prefix.*`
//!   matches only the four `customer.…` topics.
//! - [`PADDLE`] lists the Paddle Billing event types (`event_type`), the `EventName` enum
//!   of `@paddle/paddle-node-sdk` 3.8.0 (<https://github.com/PaddleHQ/paddle-node-sdk>),
//!   cross-checked against the `event_type` values of Paddle's webhook reference
//!   (<https://developer.paddle.com/webhooks>).
//! - [`ZOOM`] lists the `event` names of the webhook events typed in Zoom's `@zoom/rivet`
//!   0.3.0 (<https://github.com/zoom/rivet-javascript>): Meetings (with webinars and cloud
//!   recordings), Phone, Team Chat, Chatbot, Users, Accounts, Marketplace and Video SDK,
//!   spot-checked against Zoom's event reference
//!   (<https://developers.zoom.us/docs/api/webhooks/>). `endpoint.url_validation` is not
//!   listed: the ingress answers it itself and never routes it. Products Rivet does not
//!   cover (Rooms, Contact Center, Zoom Events, Whiteboard, RTMS, …) send events that are
//!   not listed here either: a route for one gets a warning, and routes as configured all
//!   the same.
//! - Standard Webhooks and the configured `hmac` and `token` senders: every sender names
//!   its own types, so there is no list and no warning.
//!
//! Each list is sorted in byte order without duplicates (the tests check it), so lookups
//! binary-search. A pattern key `prefix.*` is known when at least one listed type starts
//! with `prefix.`; the catch-all `*` always is.

use inbound_core::config::{CATCH_ALL, Config, PATTERN_SUFFIX};
use inbound_core::verify::Provider;

/// The largest edit distance at which [`suggestion`] still offers a known type.
pub const MAX_SUGGESTION_DISTANCE: usize = 3;

/// The event types Stripe sends (`type` of the event object), from "Types of events".
pub const STRIPE: &[&str] = &[
    "account.application.authorized",
    "account.application.deauthorized",
    "account.external_account.created",
    "account.external_account.deleted",
    "account.external_account.updated",
    "account.updated",
    "application_fee.created",
    "application_fee.refund.updated",
    "application_fee.refunded",
    "balance.available",
    "balance_settings.updated",
    "billing.alert.triggered",
    "billing.credit_balance_transaction.created",
    "billing.credit_grant.created",
    "billing.credit_grant.updated",
    "billing.meter.created",
    "billing.meter.deactivated",
    "billing.meter.reactivated",
    "billing.meter.updated",
    "billing_portal.configuration.created",
    "billing_portal.configuration.updated",
    "billing_portal.session.created",
    "capability.updated",
    "cash_balance.funds_available",
    "charge.captured",
    "charge.dispute.closed",
    "charge.dispute.created",
    "charge.dispute.funds_reinstated",
    "charge.dispute.funds_withdrawn",
    "charge.dispute.updated",
    "charge.expired",
    "charge.failed",
    "charge.pending",
    "charge.refund.updated",
    "charge.refunded",
    "charge.succeeded",
    "charge.updated",
    "checkout.session.async_payment_failed",
    "checkout.session.async_payment_succeeded",
    "checkout.session.completed",
    "checkout.session.expired",
    "climate.order.canceled",
    "climate.order.created",
    "climate.order.delayed",
    "climate.order.delivered",
    "climate.order.product_substituted",
    "climate.product.created",
    "climate.product.pricing_updated",
    "coupon.created",
    "coupon.deleted",
    "coupon.updated",
    "credit_note.created",
    "credit_note.updated",
    "credit_note.voided",
    "customer.created",
    "customer.deleted",
    "customer.discount.created",
    "customer.discount.deleted",
    "customer.discount.updated",
    "customer.source.created",
    "customer.source.deleted",
    "customer.source.expiring",
    "customer.source.updated",
    "customer.subscription.created",
    "customer.subscription.deleted",
    "customer.subscription.paused",
    "customer.subscription.pending_update_applied",
    "customer.subscription.pending_update_expired",
    "customer.subscription.resumed",
    "customer.subscription.trial_will_end",
    "customer.subscription.updated",
    "customer.tax_id.created",
    "customer.tax_id.deleted",
    "customer.tax_id.updated",
    "customer.updated",
    "customer_cash_balance_transaction.created",
    "entitlements.active_entitlement_summary.updated",
    "file.created",
    "financial_connections.account.account_numbers_updated",
    "financial_connections.account.created",
    "financial_connections.account.deactivated",
    "financial_connections.account.disconnected",
    "financial_connections.account.expected_deactivation_date_updated",
    "financial_connections.account.reactivated",
    "financial_connections.account.refreshed_balance",
    "financial_connections.account.refreshed_ownership",
    "financial_connections.account.refreshed_transactions",
    "financial_connections.account.supported_payment_method_types_updated",
    "financial_connections.account.upcoming_account_number_expiry",
    "financial_connections.account.upcoming_deactivation",
    "financial_connections.authorization.expected_deactivation_date_updated",
    "financial_connections.authorization.upcoming_deactivation",
    "identity.verification_session.canceled",
    "identity.verification_session.created",
    "identity.verification_session.processing",
    "identity.verification_session.redacted",
    "identity.verification_session.requires_input",
    "identity.verification_session.verified",
    "invoice.created",
    "invoice.deleted",
    "invoice.finalization_failed",
    "invoice.finalized",
    "invoice.marked_uncollectible",
    "invoice.overdue",
    "invoice.overpaid",
    "invoice.paid",
    "invoice.payment_action_required",
    "invoice.payment_attempt_required",
    "invoice.payment_failed",
    "invoice.payment_succeeded",
    "invoice.sent",
    "invoice.upcoming",
    "invoice.updated",
    "invoice.voided",
    "invoice.will_be_due",
    "invoice_payment.paid",
    "invoiceitem.created",
    "invoiceitem.deleted",
    "issuing_authorization.created",
    "issuing_authorization.request",
    "issuing_authorization.updated",
    "issuing_card.created",
    "issuing_card.updated",
    "issuing_cardholder.created",
    "issuing_cardholder.updated",
    "issuing_dispute.closed",
    "issuing_dispute.created",
    "issuing_dispute.funds_reinstated",
    "issuing_dispute.funds_rescinded",
    "issuing_dispute.submitted",
    "issuing_dispute.updated",
    "issuing_personalization_design.activated",
    "issuing_personalization_design.deactivated",
    "issuing_personalization_design.rejected",
    "issuing_personalization_design.updated",
    "issuing_token.created",
    "issuing_token.updated",
    "issuing_transaction.created",
    "issuing_transaction.purchase_details_receipt_updated",
    "issuing_transaction.updated",
    "mandate.updated",
    "payment_intent.amount_capturable_updated",
    "payment_intent.canceled",
    "payment_intent.created",
    "payment_intent.partially_funded",
    "payment_intent.payment_failed",
    "payment_intent.processing",
    "payment_intent.requires_action",
    "payment_intent.succeeded",
    "payment_link.created",
    "payment_link.updated",
    "payment_method.attached",
    "payment_method.automatically_updated",
    "payment_method.detached",
    "payment_method.updated",
    "payout.canceled",
    "payout.created",
    "payout.failed",
    "payout.paid",
    "payout.reconciliation_completed",
    "payout.updated",
    "person.created",
    "person.deleted",
    "person.updated",
    "plan.created",
    "plan.deleted",
    "plan.updated",
    "price.created",
    "price.deleted",
    "price.updated",
    "product.created",
    "product.deleted",
    "product.updated",
    "promotion_code.created",
    "promotion_code.updated",
    "quote.accepted",
    "quote.canceled",
    "quote.created",
    "quote.finalized",
    "radar.early_fraud_warning.created",
    "radar.early_fraud_warning.updated",
    "refund.created",
    "refund.failed",
    "refund.updated",
    "reporting.report_run.failed",
    "reporting.report_run.succeeded",
    "reporting.report_type.updated",
    "reserve.hold.created",
    "reserve.hold.updated",
    "reserve.plan.created",
    "reserve.plan.disabled",
    "reserve.plan.expired",
    "reserve.plan.updated",
    "reserve.release.created",
    "review.closed",
    "review.opened",
    "setup_intent.canceled",
    "setup_intent.created",
    "setup_intent.requires_action",
    "setup_intent.setup_failed",
    "setup_intent.succeeded",
    "sigma.scheduled_query_run.created",
    "source.canceled",
    "source.chargeable",
    "source.failed",
    "source.mandate_notification",
    "source.refund_attributes_required",
    "source.transaction.created",
    "source.transaction.updated",
    "subscription_schedule.aborted",
    "subscription_schedule.canceled",
    "subscription_schedule.completed",
    "subscription_schedule.created",
    "subscription_schedule.expiring",
    "subscription_schedule.released",
    "subscription_schedule.updated",
    "tax.settings.updated",
    "tax_rate.created",
    "tax_rate.updated",
    "terminal.reader.action_failed",
    "terminal.reader.action_succeeded",
    "terminal.reader.action_updated",
    "test_helpers.test_clock.advancing",
    "test_helpers.test_clock.created",
    "test_helpers.test_clock.deleted",
    "test_helpers.test_clock.internal_failure",
    "test_helpers.test_clock.ready",
    "topup.canceled",
    "topup.created",
    "topup.failed",
    "topup.reversed",
    "topup.succeeded",
    "transfer.created",
    "transfer.reversed",
    "transfer.updated",
    "treasury.credit_reversal.created",
    "treasury.credit_reversal.posted",
    "treasury.debit_reversal.completed",
    "treasury.debit_reversal.created",
    "treasury.debit_reversal.initial_credit_granted",
    "treasury.financial_account.closed",
    "treasury.financial_account.created",
    "treasury.financial_account.features_status_updated",
    "treasury.inbound_transfer.canceled",
    "treasury.inbound_transfer.created",
    "treasury.inbound_transfer.failed",
    "treasury.inbound_transfer.succeeded",
    "treasury.outbound_payment.canceled",
    "treasury.outbound_payment.created",
    "treasury.outbound_payment.expected_arrival_date_updated",
    "treasury.outbound_payment.failed",
    "treasury.outbound_payment.posted",
    "treasury.outbound_payment.returned",
    "treasury.outbound_payment.tracking_details_updated",
    "treasury.outbound_transfer.canceled",
    "treasury.outbound_transfer.created",
    "treasury.outbound_transfer.expected_arrival_date_updated",
    "treasury.outbound_transfer.failed",
    "treasury.outbound_transfer.posted",
    "treasury.outbound_transfer.returned",
    "treasury.outbound_transfer.tracking_details_updated",
    "treasury.received_credit.created",
    "treasury.received_credit.failed",
    "treasury.received_credit.succeeded",
    "treasury.received_debit.created",
];

/// GitHub route keys: every webhook event name, and `event.action` for every documented
/// action of the events that carry one.
pub const GITHUB: &[&str] = &[
    "branch_protection_configuration",
    "branch_protection_configuration.disabled",
    "branch_protection_configuration.enabled",
    "branch_protection_rule",
    "branch_protection_rule.created",
    "branch_protection_rule.deleted",
    "branch_protection_rule.edited",
    "check_run",
    "check_run.completed",
    "check_run.created",
    "check_run.requested_action",
    "check_run.rerequested",
    "check_suite",
    "check_suite.completed",
    "check_suite.requested",
    "check_suite.rerequested",
    "code_scanning_alert",
    "code_scanning_alert.appeared_in_branch",
    "code_scanning_alert.closed_by_user",
    "code_scanning_alert.created",
    "code_scanning_alert.fixed",
    "code_scanning_alert.reopened",
    "code_scanning_alert.reopened_by_user",
    "code_scanning_alert.updated_assignment",
    "commit_comment",
    "commit_comment.created",
    "create",
    "custom_property",
    "custom_property.created",
    "custom_property.deleted",
    "custom_property.promote_to_enterprise",
    "custom_property.updated",
    "custom_property_values",
    "custom_property_values.updated",
    "delete",
    "dependabot_alert",
    "dependabot_alert.assignees_changed",
    "dependabot_alert.auto_dismissed",
    "dependabot_alert.auto_reopened",
    "dependabot_alert.created",
    "dependabot_alert.dismissed",
    "dependabot_alert.fixed",
    "dependabot_alert.reintroduced",
    "dependabot_alert.reopened",
    "deploy_key",
    "deploy_key.created",
    "deploy_key.deleted",
    "deployment",
    "deployment.created",
    "deployment_protection_rule",
    "deployment_protection_rule.requested",
    "deployment_review",
    "deployment_review.approved",
    "deployment_review.rejected",
    "deployment_review.requested",
    "deployment_status",
    "deployment_status.created",
    "discussion",
    "discussion.answered",
    "discussion.category_changed",
    "discussion.closed",
    "discussion.created",
    "discussion.deleted",
    "discussion.edited",
    "discussion.labeled",
    "discussion.locked",
    "discussion.pinned",
    "discussion.reopened",
    "discussion.transferred",
    "discussion.unanswered",
    "discussion.unlabeled",
    "discussion.unlocked",
    "discussion.unpinned",
    "discussion_comment",
    "discussion_comment.created",
    "discussion_comment.deleted",
    "discussion_comment.edited",
    "fork",
    "github_app_authorization",
    "github_app_authorization.revoked",
    "gollum",
    "installation",
    "installation.created",
    "installation.deleted",
    "installation.new_permissions_accepted",
    "installation.suspend",
    "installation.unsuspend",
    "installation_repositories",
    "installation_repositories.added",
    "installation_repositories.removed",
    "installation_target",
    "installation_target.renamed",
    "issue_comment",
    "issue_comment.created",
    "issue_comment.deleted",
    "issue_comment.edited",
    "issue_dependencies",
    "issue_dependencies.blocked_by_added",
    "issue_dependencies.blocked_by_removed",
    "issue_dependencies.blocking_added",
    "issue_dependencies.blocking_removed",
    "issues",
    "issues.assigned",
    "issues.closed",
    "issues.deleted",
    "issues.demilestoned",
    "issues.edited",
    "issues.labeled",
    "issues.locked",
    "issues.milestoned",
    "issues.opened",
    "issues.pinned",
    "issues.reopened",
    "issues.transferred",
    "issues.typed",
    "issues.unassigned",
    "issues.unlabeled",
    "issues.unlocked",
    "issues.unpinned",
    "issues.untyped",
    "label",
    "label.created",
    "label.deleted",
    "label.edited",
    "marketplace_purchase",
    "marketplace_purchase.cancelled",
    "marketplace_purchase.changed",
    "marketplace_purchase.pending_change",
    "marketplace_purchase.pending_change_cancelled",
    "marketplace_purchase.purchased",
    "member",
    "member.added",
    "member.edited",
    "member.removed",
    "membership",
    "membership.added",
    "membership.removed",
    "merge_group",
    "merge_group.checks_requested",
    "merge_group.destroyed",
    "meta",
    "meta.deleted",
    "milestone",
    "milestone.closed",
    "milestone.created",
    "milestone.deleted",
    "milestone.edited",
    "milestone.opened",
    "org_block",
    "org_block.blocked",
    "org_block.unblocked",
    "organization",
    "organization.deleted",
    "organization.member_added",
    "organization.member_invited",
    "organization.member_removed",
    "organization.renamed",
    "package",
    "package.published",
    "package.updated",
    "page_build",
    "personal_access_token_request",
    "personal_access_token_request.approved",
    "personal_access_token_request.cancelled",
    "personal_access_token_request.created",
    "personal_access_token_request.denied",
    "ping",
    "project",
    "project.closed",
    "project.created",
    "project.deleted",
    "project.edited",
    "project.reopened",
    "project_card",
    "project_card.converted",
    "project_card.created",
    "project_card.deleted",
    "project_card.edited",
    "project_card.moved",
    "project_column",
    "project_column.created",
    "project_column.deleted",
    "project_column.edited",
    "project_column.moved",
    "projects_v2",
    "projects_v2.closed",
    "projects_v2.created",
    "projects_v2.deleted",
    "projects_v2.edited",
    "projects_v2.reopened",
    "projects_v2_item",
    "projects_v2_item.archived",
    "projects_v2_item.converted",
    "projects_v2_item.created",
    "projects_v2_item.deleted",
    "projects_v2_item.edited",
    "projects_v2_item.reordered",
    "projects_v2_item.restored",
    "projects_v2_status_update",
    "projects_v2_status_update.created",
    "projects_v2_status_update.deleted",
    "projects_v2_status_update.edited",
    "public",
    "pull_request",
    "pull_request.assigned",
    "pull_request.auto_merge_disabled",
    "pull_request.auto_merge_enabled",
    "pull_request.closed",
    "pull_request.converted_to_draft",
    "pull_request.demilestoned",
    "pull_request.dequeued",
    "pull_request.edited",
    "pull_request.enqueued",
    "pull_request.labeled",
    "pull_request.locked",
    "pull_request.milestoned",
    "pull_request.opened",
    "pull_request.ready_for_review",
    "pull_request.reopened",
    "pull_request.review_request_removed",
    "pull_request.review_requested",
    "pull_request.stacked",
    "pull_request.synchronize",
    "pull_request.unassigned",
    "pull_request.unlabeled",
    "pull_request.unlocked",
    "pull_request_review",
    "pull_request_review.dismissed",
    "pull_request_review.edited",
    "pull_request_review.submitted",
    "pull_request_review_comment",
    "pull_request_review_comment.created",
    "pull_request_review_comment.deleted",
    "pull_request_review_comment.edited",
    "pull_request_review_thread",
    "pull_request_review_thread.resolved",
    "pull_request_review_thread.unresolved",
    "push",
    "registry_package",
    "registry_package.published",
    "registry_package.updated",
    "release",
    "release.created",
    "release.deleted",
    "release.edited",
    "release.prereleased",
    "release.published",
    "release.released",
    "release.unpublished",
    "repository",
    "repository.archived",
    "repository.created",
    "repository.deleted",
    "repository.edited",
    "repository.privatized",
    "repository.publicized",
    "repository.renamed",
    "repository.transferred",
    "repository.unarchived",
    "repository_advisory",
    "repository_advisory.published",
    "repository_advisory.reported",
    "repository_dispatch",
    "repository_import",
    "repository_ruleset",
    "repository_ruleset.created",
    "repository_ruleset.deleted",
    "repository_ruleset.edited",
    "repository_vulnerability_alert",
    "repository_vulnerability_alert.create",
    "repository_vulnerability_alert.dismiss",
    "repository_vulnerability_alert.reopen",
    "repository_vulnerability_alert.resolve",
    "secret_scanning_alert",
    "secret_scanning_alert.assigned",
    "secret_scanning_alert.created",
    "secret_scanning_alert.publicly_leaked",
    "secret_scanning_alert.reopened",
    "secret_scanning_alert.resolved",
    "secret_scanning_alert.unassigned",
    "secret_scanning_alert.validated",
    "secret_scanning_alert_location",
    "secret_scanning_alert_location.created",
    "secret_scanning_scan",
    "secret_scanning_scan.completed",
    "security_advisory",
    "security_advisory.published",
    "security_advisory.updated",
    "security_advisory.withdrawn",
    "security_and_analysis",
    "sponsorship",
    "sponsorship.cancelled",
    "sponsorship.created",
    "sponsorship.edited",
    "sponsorship.pending_cancellation",
    "sponsorship.pending_tier_change",
    "sponsorship.tier_changed",
    "star",
    "star.created",
    "star.deleted",
    "status",
    "sub_issues",
    "sub_issues.parent_issue_added",
    "sub_issues.parent_issue_removed",
    "sub_issues.sub_issue_added",
    "sub_issues.sub_issue_removed",
    "team",
    "team.added_to_repository",
    "team.created",
    "team.deleted",
    "team.edited",
    "team.removed_from_repository",
    "team_add",
    "watch",
    "watch.started",
    "workflow_dispatch",
    "workflow_job",
    "workflow_job.completed",
    "workflow_job.in_progress",
    "workflow_job.queued",
    "workflow_job.waiting",
    "workflow_run",
    "workflow_run.completed",
    "workflow_run.in_progress",
    "workflow_run.requested",
];

/// GitHub events whose `action` is chosen by the sender rather than by GitHub
/// (`repository_dispatch` carries the client's `event_type`): any `event.…` key is known.
pub const GITHUB_FREE_FORM_ACTIONS: &[&str] = &["repository_dispatch"];

/// The inner `event.type` values Slack's Events API delivers.
pub const SLACK: &[&str] = &[
    "agent_session_stopped",
    "agent_session_title_changed",
    "app_context_changed",
    "app_deleted",
    "app_home_opened",
    "app_installed",
    "app_mention",
    "app_requested",
    "app_uninstalled",
    "app_uninstalled_team",
    "assistant_thread_context_changed",
    "assistant_thread_started",
    "call_rejected",
    "channel_archive",
    "channel_created",
    "channel_deleted",
    "channel_history_changed",
    "channel_id_changed",
    "channel_left",
    "channel_rename",
    "channel_shared",
    "channel_unarchive",
    "channel_unshared",
    "dnd_updated",
    "dnd_updated_user",
    "email_domain_changed",
    "emoji_changed",
    "entity_details_requested",
    "file_change",
    "file_comment_added",
    "file_comment_deleted",
    "file_comment_edited",
    "file_created",
    "file_deleted",
    "file_public",
    "file_shared",
    "file_unshared",
    "function_executed",
    "grid_migration_finished",
    "grid_migration_started",
    "group_archive",
    "group_close",
    "group_deleted",
    "group_history_changed",
    "group_left",
    "group_open",
    "group_rename",
    "group_unarchive",
    "im_close",
    "im_created",
    "im_history_changed",
    "im_open",
    "invite_requested",
    "link_shared",
    "member_joined_channel",
    "member_left_channel",
    "message",
    "message_metadata_deleted",
    "message_metadata_posted",
    "message_metadata_updated",
    "pin_added",
    "pin_removed",
    "reaction_added",
    "reaction_removed",
    "resources_added",
    "resources_removed",
    "scope_denied",
    "scope_granted",
    "shared_channel_invite_accepted",
    "shared_channel_invite_approved",
    "shared_channel_invite_declined",
    "shared_channel_invite_received",
    "shared_channel_invite_requested",
    "star_added",
    "star_removed",
    "subteam_created",
    "subteam_members_changed",
    "subteam_self_added",
    "subteam_self_removed",
    "subteam_updated",
    "team_access_granted",
    "team_access_revoked",
    "team_domain_change",
    "team_join",
    "team_rename",
    "tokens_revoked",
    "user_change",
    "user_huddle_changed",
    "user_profile_changed",
    "user_resource_denied",
    "user_resource_granted",
    "user_resource_removed",
    "user_status_changed",
    "workflow_deleted",
    "workflow_published",
    "workflow_step_deleted",
    "workflow_step_execute",
    "workflow_unpublished",
];

/// Shopify webhook topics (`X-Shopify-Topic`): the `WebhookSubscriptionTopic` enum, spelled
/// as delivered, and the mandatory compliance topics.
pub const SHOPIFY: &[&str] = &[
    "app/scopes_update",
    "app/uninstalled",
    "app_purchases_one_time/update",
    "app_subscriptions/approaching_capped_amount",
    "app_subscriptions/update",
    "audit_events/admin_api_activity",
    "bulk_operations/finish",
    "carts/create",
    "carts/update",
    "channels/delete",
    "checkouts/create",
    "checkouts/delete",
    "checkouts/update",
    "collection_listings/add",
    "collection_listings/remove",
    "collection_listings/update",
    "collection_publications/create",
    "collection_publications/delete",
    "collection_publications/update",
    "collections/create",
    "collections/delete",
    "collections/update",
    "companies/create",
    "companies/delete",
    "companies/update",
    "company_contact_roles/assign",
    "company_contact_roles/revoke",
    "company_contacts/create",
    "company_contacts/delete",
    "company_contacts/update",
    "company_locations/create",
    "company_locations/delete",
    "company_locations/update",
    "customer.joined_segment",
    "customer.left_segment",
    "customer.tags_added",
    "customer.tags_removed",
    "customer_account_settings/update",
    "customer_groups/create",
    "customer_groups/delete",
    "customer_groups/update",
    "customer_payment_methods/create",
    "customer_payment_methods/revoke",
    "customer_payment_methods/update",
    "customers/create",
    "customers/data_request",
    "customers/delete",
    "customers/disable",
    "customers/enable",
    "customers/merge",
    "customers/purchasing_summary",
    "customers/redact",
    "customers/update",
    "customers_email_marketing_consent/update",
    "customers_marketing_consent/update",
    "customers_whats_app_marketing_consent/update",
    "delivery_promise_settings/update",
    "discounts/create",
    "discounts/delete",
    "discounts/redeemcode_added",
    "discounts/redeemcode_removed",
    "discounts/update",
    "disputes/create",
    "disputes/update",
    "domains/create",
    "domains/destroy",
    "domains/update",
    "draft_orders/create",
    "draft_orders/delete",
    "draft_orders/update",
    "finance_app_staff_member/delete",
    "finance_app_staff_member/grant",
    "finance_app_staff_member/revoke",
    "finance_app_staff_member/update",
    "finance_kyc_information/update",
    "fulfillment_events/create",
    "fulfillment_events/delete",
    "fulfillment_holds/added",
    "fulfillment_holds/released",
    "fulfillment_orders/cancellation_request_accepted",
    "fulfillment_orders/cancellation_request_rejected",
    "fulfillment_orders/cancellation_request_submitted",
    "fulfillment_orders/cancelled",
    "fulfillment_orders/fulfillment_request_accepted",
    "fulfillment_orders/fulfillment_request_rejected",
    "fulfillment_orders/fulfillment_request_submitted",
    "fulfillment_orders/fulfillment_service_failed_to_complete",
    "fulfillment_orders/hold_released",
    "fulfillment_orders/line_items_prepared_for_local_delivery",
    "fulfillment_orders/line_items_prepared_for_pickup",
    "fulfillment_orders/manually_reported_progress_stopped",
    "fulfillment_orders/merged",
    "fulfillment_orders/moved",
    "fulfillment_orders/order_routing_complete",
    "fulfillment_orders/placed_on_hold",
    "fulfillment_orders/progress_reported",
    "fulfillment_orders/rescheduled",
    "fulfillment_orders/scheduled_fulfillment_order_ready",
    "fulfillment_orders/split",
    "fulfillments/create",
    "fulfillments/update",
    "inventory_items/create",
    "inventory_items/delete",
    "inventory_items/update",
    "inventory_levels/connect",
    "inventory_levels/disconnect",
    "inventory_levels/update",
    "inventory_shipments/add_items",
    "inventory_shipments/create",
    "inventory_shipments/delete",
    "inventory_shipments/mark_in_transit",
    "inventory_shipments/receive_items",
    "inventory_shipments/remove_items",
    "inventory_shipments/update_item_quantities",
    "inventory_shipments/update_tracking",
    "inventory_transfers/add_items",
    "inventory_transfers/cancel",
    "inventory_transfers/complete",
    "inventory_transfers/ready_to_ship",
    "inventory_transfers/remove_items",
    "inventory_transfers/update_item_quantities",
    "inventory_transfers/updated",
    "locales/create",
    "locales/destroy",
    "locales/update",
    "locations/activate",
    "locations/create",
    "locations/deactivate",
    "locations/delete",
    "locations/update",
    "markets/create",
    "markets/delete",
    "markets/update",
    "markets_backup_region/update",
    "metafield_definitions/create",
    "metafield_definitions/delete",
    "metafield_definitions/update",
    "metaobjects/create",
    "metaobjects/delete",
    "metaobjects/update",
    "order_transactions/create",
    "orders/cancelled",
    "orders/create",
    "orders/delete",
    "orders/edited",
    "orders/fulfilled",
    "orders/link_requested",
    "orders/paid",
    "orders/partially_fulfilled",
    "orders/risk_assessment_changed",
    "orders/shopify_protect_eligibility_changed",
    "orders/updated",
    "payment_schedules/due",
    "payment_terms/create",
    "payment_terms/delete",
    "payment_terms/update",
    "product_feeds/create",
    "product_feeds/full_sync",
    "product_feeds/full_sync_finish",
    "product_feeds/incremental_sync",
    "product_feeds/update",
    "product_listings/add",
    "product_listings/remove",
    "product_listings/update",
    "product_publications/create",
    "product_publications/delete",
    "product_publications/update",
    "products/create",
    "products/delete",
    "products/update",
    "profiles/create",
    "profiles/delete",
    "profiles/update",
    "refunds/create",
    "returns/approve",
    "returns/cancel",
    "returns/close",
    "returns/decline",
    "returns/process",
    "returns/reopen",
    "returns/request",
    "returns/update",
    "reverse_deliveries/attach_deliverable",
    "reverse_fulfillment_orders/dispose",
    "scheduled_product_listings/add",
    "scheduled_product_listings/remove",
    "scheduled_product_listings/update",
    "segments/create",
    "segments/delete",
    "segments/update",
    "selling_plan_groups/create",
    "selling_plan_groups/delete",
    "selling_plan_groups/update",
    "shipping_addresses/create",
    "shipping_addresses/update",
    "shop/redact",
    "shop/update",
    "subscription_billing_attempts/challenged",
    "subscription_billing_attempts/failure",
    "subscription_billing_attempts/success",
    "subscription_billing_cycle_edits/create",
    "subscription_billing_cycle_edits/delete",
    "subscription_billing_cycle_edits/update",
    "subscription_billing_cycles/skip",
    "subscription_billing_cycles/unskip",
    "subscription_contracts/activate",
    "subscription_contracts/cancel",
    "subscription_contracts/create",
    "subscription_contracts/expire",
    "subscription_contracts/fail",
    "subscription_contracts/pause",
    "subscription_contracts/update",
    "tax_services/create",
    "tax_services/update",
    "tender_transactions/create",
    "themes/create",
    "themes/delete",
    "themes/publish",
    "themes/update",
    "variants/in_stock",
    "variants/out_of_stock",
];

/// The event types Paddle Billing sends (`event_type`).
pub const PADDLE: &[&str] = &[
    "address.created",
    "address.imported",
    "address.updated",
    "adjustment.created",
    "adjustment.updated",
    "api_key.created",
    "api_key.expired",
    "api_key.expiring",
    "api_key.revoked",
    "api_key.updated",
    "api_key_exposure.created",
    "business.created",
    "business.imported",
    "business.updated",
    "client_token.created",
    "client_token.revoked",
    "client_token.updated",
    "customer.created",
    "customer.imported",
    "customer.updated",
    "discount.created",
    "discount.imported",
    "discount.updated",
    "discount_group.created",
    "discount_group.updated",
    "payment_method.deleted",
    "payment_method.saved",
    "payout.created",
    "payout.paid",
    "price.created",
    "price.imported",
    "price.updated",
    "product.created",
    "product.imported",
    "product.updated",
    "report.created",
    "report.updated",
    "subscription.activated",
    "subscription.canceled",
    "subscription.created",
    "subscription.imported",
    "subscription.past_due",
    "subscription.paused",
    "subscription.resumed",
    "subscription.trialing",
    "subscription.updated",
    "transaction.billed",
    "transaction.canceled",
    "transaction.completed",
    "transaction.created",
    "transaction.paid",
    "transaction.past_due",
    "transaction.payment_failed",
    "transaction.ready",
    "transaction.revised",
    "transaction.updated",
];

/// The `event` names Zoom's webhooks carry, for the products `@zoom/rivet` covers, without
/// `endpoint.url_validation` (answered by the ingress).
pub const ZOOM: &[&str] = &[
    "account.created",
    "account.disassociated",
    "account.lock_settings_updated",
    "account.settings_updated",
    "account.updated",
    "account.vanity_url_approved",
    "account.vanity_url_rejected",
    "app.authorization_request_created",
    "app_deauthorized",
    "bot_installed",
    "bot_notification",
    "chat_channel.created",
    "chat_channel.deleted",
    "chat_channel.member_invited",
    "chat_channel.member_joined",
    "chat_channel.member_left",
    "chat_channel.member_removed",
    "chat_channel.updated",
    "chat_message.deleted",
    "chat_message.replied",
    "chat_message.sent",
    "chat_message.updated",
    "group.admin_added",
    "group.admin_deleted",
    "group.created",
    "group.deleted",
    "group.lock_settings_updated",
    "group.member_added",
    "group.member_deleted",
    "group.settings_updated",
    "group.updated",
    "information_barriers.policy_created",
    "information_barriers.policy_deleted",
    "information_barriers.policy_updated",
    "interactive_message_actions",
    "interactive_message_editable",
    "interactive_message_fields_editable",
    "interactive_message_select",
    "meeting.alert",
    "meeting.breakout_room_sharing_ended",
    "meeting.breakout_room_sharing_started",
    "meeting.chat_message_file_sent",
    "meeting.chat_message_sent",
    "meeting.created",
    "meeting.deleted",
    "meeting.device_tested",
    "meeting.ended",
    "meeting.live_streaming_started",
    "meeting.live_streaming_stopped",
    "meeting.participant_admitted",
    "meeting.participant_bind",
    "meeting.participant_feedback",
    "meeting.participant_jbh_joined",
    "meeting.participant_jbh_waiting",
    "meeting.participant_jbh_waiting_left",
    "meeting.participant_joined",
    "meeting.participant_joined_breakout_room",
    "meeting.participant_joined_waiting_room",
    "meeting.participant_left",
    "meeting.participant_left_breakout_room",
    "meeting.participant_left_waiting_room",
    "meeting.participant_phone_callout_accepted",
    "meeting.participant_phone_callout_missed",
    "meeting.participant_phone_callout_rejected",
    "meeting.participant_phone_callout_ringing",
    "meeting.participant_put_in_waiting_room",
    "meeting.participant_role_changed",
    "meeting.participant_room_system_callout_accepted",
    "meeting.participant_room_system_callout_failed",
    "meeting.participant_room_system_callout_missed",
    "meeting.participant_room_system_callout_rejected",
    "meeting.participant_room_system_callout_ringing",
    "meeting.permanently_deleted",
    "meeting.recovered",
    "meeting.registration_approved",
    "meeting.registration_cancelled",
    "meeting.registration_created",
    "meeting.registration_denied",
    "meeting.risk_alert",
    "meeting.sharing_ended",
    "meeting.sharing_started",
    "meeting.started",
    "meeting.summary_completed",
    "meeting.summary_deleted",
    "meeting.summary_recovered",
    "meeting.summary_shared",
    "meeting.summary_trashed",
    "meeting.summary_updated",
    "meeting.updated",
    "phone.account_settings_updated",
    "phone.blind_transfer_initiated",
    "phone.call_history_deleted",
    "phone.call_log_deleted",
    "phone.call_log_permanently_deleted",
    "phone.callee_answered",
    "phone.callee_call_history_completed",
    "phone.callee_call_log_completed",
    "phone.callee_ended",
    "phone.callee_hold",
    "phone.callee_meeting_inviting",
    "phone.callee_missed",
    "phone.callee_mute",
    "phone.callee_parked",
    "phone.callee_rejected",
    "phone.callee_ringing",
    "phone.callee_unhold",
    "phone.callee_unmute",
    "phone.caller_call_history_completed",
    "phone.caller_call_log_completed",
    "phone.caller_connected",
    "phone.caller_ended",
    "phone.caller_hold",
    "phone.caller_meeting_inviting",
    "phone.caller_mute",
    "phone.caller_ringing",
    "phone.caller_unhold",
    "phone.caller_unmute",
    "phone.conference_started",
    "phone.device_registration",
    "phone.emergency_alert",
    "phone.generic_device_provision",
    "phone.group_settings_updated",
    "phone.peering_number_cnam_updated",
    "phone.peering_number_emergency_address_updated",
    "phone.recording_completed",
    "phone.recording_completed_for_access_member",
    "phone.recording_deleted",
    "phone.recording_failed",
    "phone.recording_paused",
    "phone.recording_permanently_deleted",
    "phone.recording_resumed",
    "phone.recording_started",
    "phone.recording_stopped",
    "phone.recording_transcript_completed",
    "phone.sms_campaign_number_opt_in",
    "phone.sms_campaign_number_opt_out",
    "phone.sms_received",
    "phone.sms_sent",
    "phone.sms_sent_failed",
    "phone.transfer_call_to_voicemail_initiated",
    "phone.voicemail_deleted",
    "phone.voicemail_permanently_deleted",
    "phone.voicemail_received",
    "phone.voicemail_received_for_access_member",
    "phone.voicemail_transcript_completed",
    "recording.archive_files_completed",
    "recording.batch_deleted",
    "recording.batch_recovered",
    "recording.batch_trashed",
    "recording.cloud_storage_usage_updated",
    "recording.completed",
    "recording.deleted",
    "recording.paused",
    "recording.recovered",
    "recording.registration_approved",
    "recording.registration_created",
    "recording.registration_denied",
    "recording.renamed",
    "recording.resumed",
    "recording.started",
    "recording.stopped",
    "recording.transcript_completed",
    "recording.trashed",
    "session.alert",
    "session.ended",
    "session.live_streaming_started",
    "session.live_streaming_stopped",
    "session.recording_completed",
    "session.recording_deleted",
    "session.recording_paused",
    "session.recording_recovered",
    "session.recording_resumed",
    "session.recording_started",
    "session.recording_stopped",
    "session.recording_transcript_completed",
    "session.recording_transcript_failed",
    "session.recording_trashed",
    "session.sharing_ended",
    "session.sharing_started",
    "session.started",
    "session.user_joined",
    "session.user_left",
    "session.user_phone_callout_accepted",
    "session.user_phone_callout_missed",
    "session.user_phone_callout_rejected",
    "session.user_phone_callout_ringing",
    "session.user_room_system_callout_accepted",
    "session.user_room_system_callout_failed",
    "session.user_room_system_callout_missed",
    "session.user_room_system_callout_rejected",
    "session.user_room_system_callout_ringing",
    "team_chat.bookmark_added",
    "team_chat.bookmark_removed",
    "team_chat.channel_app_added",
    "team_chat.channel_app_removed",
    "team_chat.channel_archived",
    "team_chat.channel_invitation_accepted",
    "team_chat.channel_invitation_approval_requested",
    "team_chat.channel_invitation_approved",
    "team_chat.channel_invitation_created",
    "team_chat.channel_invitation_declined",
    "team_chat.channel_invitation_rejected",
    "team_chat.channel_invitation_removed",
    "team_chat.channel_join_approval_requested",
    "team_chat.channel_join_approved",
    "team_chat.channel_join_declined",
    "team_chat.channel_join_requested",
    "team_chat.channel_message_deleted",
    "team_chat.channel_message_posted",
    "team_chat.channel_message_updated",
    "team_chat.channel_pin_added",
    "team_chat.channel_pin_removed",
    "team_chat.channel_reaction_added",
    "team_chat.channel_reaction_removed",
    "team_chat.channel_unarchived",
    "team_chat.dm_message_deleted",
    "team_chat.dm_message_posted",
    "team_chat.dm_message_updated",
    "team_chat.dm_reaction_added",
    "team_chat.dm_reaction_removed",
    "team_chat.emoji_added",
    "team_chat.emoji_removed",
    "team_chat.file_changed",
    "team_chat.file_deleted",
    "team_chat.file_downloaded",
    "team_chat.file_shared",
    "team_chat.file_unshared",
    "team_chat.file_uploaded",
    "team_chat.link_shared",
    "team_chat.shared_spaces_edited",
    "team_chat.shared_spaces_member_invited",
    "team_chat.shared_spaces_member_left",
    "team_chat.shared_spaces_member_removed",
    "team_chat.starred",
    "team_chat.unstarred",
    "user.activated",
    "user.created",
    "user.deactivated",
    "user.deleted",
    "user.disassociated",
    "user.invitation_accepted",
    "user.personal_notes_updated",
    "user.presence_status_updated",
    "user.settings_updated",
    "user.signed_in",
    "user.signed_out",
    "user.tsp_created",
    "user.tsp_deleted",
    "user.tsp_updated",
    "user.updated",
    "webinar.alert",
    "webinar.chat_message_file_sent",
    "webinar.chat_message_sent",
    "webinar.created",
    "webinar.deleted",
    "webinar.ended",
    "webinar.participant_bind",
    "webinar.participant_feedback",
    "webinar.participant_joined",
    "webinar.participant_left",
    "webinar.participant_role_changed",
    "webinar.permanently_deleted",
    "webinar.recovered",
    "webinar.registration_approved",
    "webinar.registration_cancelled",
    "webinar.registration_created",
    "webinar.registration_denied",
    "webinar.sharing_ended",
    "webinar.sharing_started",
    "webinar.started",
    "webinar.updated",
];

/// The known event types of `provider`, sorted; `None` when every sender chooses its own
/// (Standard Webhooks, `hmac`, `token`).
pub fn known_types(provider: Provider) -> Option<&'static [&'static str]> {
    match provider {
        Provider::Stripe => Some(STRIPE),
        Provider::Github => Some(GITHUB),
        Provider::Slack => Some(SLACK),
        Provider::Shopify => Some(SHOPIFY),
        Provider::Paddle => Some(PADDLE),
        Provider::Zoom => Some(ZOOM),
        Provider::Standard | Provider::Hmac | Provider::Token => None,
    }
}

/// Whether `provider` is known to send events that `route_key` matches: an exact type, a
/// pattern `prefix.*` that at least one known type falls under, or the catch-all `*`.
/// `None` when the provider has no list (Standard Webhooks, `hmac`, `token`).
pub fn is_known(provider: Provider, route_key: &str) -> Option<bool> {
    let types = known_types(provider)?;
    if route_key == CATCH_ALL {
        return Some(true);
    }
    let known = match pattern_prefix(route_key) {
        // `prefix.` (with its dot), as routing compares it.
        Some(prefix) => {
            let dotted = &route_key[..=prefix.len()];
            has_type_starting_with(types, dotted) || is_free_form(provider, dotted, true)
        }
        None => types.binary_search(&route_key).is_ok() || is_free_form(provider, route_key, false),
    };
    Some(known)
}

/// The closest known type to `route_key`, for a "did you mean" hint: at most
/// [`MAX_SUGGESTION_DISTANCE`] edits away (and at most a third of the key's length, so
/// short keys are not matched to anything), transposed neighbours counting as one edit.
/// For a pattern `prefix.*` it is the closest prefix that known types have, without `.*`
/// (`customer` for `custmer.*`). A Slack key `message.…` (a subscription name such as
/// `message.channels`) suggests `message`, the type those subscriptions deliver.
///
/// `None` when the key is known, the provider has no list, or nothing is close enough.
pub fn suggestion(provider: Provider, route_key: &str) -> Option<&'static str> {
    if is_known(provider, route_key)? {
        return None;
    }
    let types = known_types(provider)?;
    match pattern_prefix(route_key) {
        Some(prefix) => closest(
            prefix,
            types
                .iter()
                .flat_map(|known| known.match_indices('.').map(move |(dot, _)| &known[..dot])),
        ),
        None if provider == Provider::Slack && route_key.starts_with("message.") => Some("message"),
        None => closest(route_key, types.iter().copied()),
    }
}

/// One line per route key whose provider is not known to send it, in file order, e.g.
/// `integration stripe-acme: route "payment_intent.succeded" is not an event type stripe
/// sends (did you mean "payment_intent.succeeded"?): deliveries of it would be answered
/// 200 ignored`. Empty when every key is known (or belongs to a provider without a list).
pub fn route_key_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    for integration in config.integrations() {
        let provider = integration.provider;
        for route_key in integration.routes.keys() {
            if is_known(provider, route_key) != Some(false) {
                continue;
            }
            let is_pattern = pattern_prefix(route_key).is_some();
            let what = if is_pattern {
                "matches no event type"
            } else {
                "is not an event type"
            };
            let hint = match suggestion(provider, route_key) {
                Some(prefix) if is_pattern => {
                    format!(" (did you mean {:?}?)", format!("{prefix}{PATTERN_SUFFIX}"))
                }
                Some(known) => format!(" (did you mean {known:?}?)"),
                None => String::new(),
            };
            let outcome = if integration.routes.contains_key(CATCH_ALL) {
                format!(
                    "it never matches, so deliveries meant for it go to the catch-all route {CATCH_ALL:?}"
                )
            } else {
                "deliveries of it would be answered 200 ignored".to_owned()
            };
            warnings.push(format!(
                "integration {}: route {route_key:?} {what} {} sends{hint}: {outcome}",
                integration.id,
                provider.name(),
            ));
        }
    }
    warnings
}

/// `prefix` of a pattern key `prefix.*`; `None` for an exact key or the catch-all.
fn pattern_prefix(route_key: &str) -> Option<&str> {
    route_key
        .strip_suffix(PATTERN_SUFFIX)
        .filter(|prefix| !prefix.is_empty())
}

/// Whether some type of the sorted `types` starts with `prefix`: they all sort together,
/// from the first type not below `prefix`.
fn has_type_starting_with(types: &[&str], prefix: &str) -> bool {
    let first = types.partition_point(|known| *known < prefix);
    types
        .get(first)
        .is_some_and(|known| known.starts_with(prefix))
}

/// Whether `key` is a GitHub `event.action` of an event whose actions are free-form, or
/// (`is_prefix`) a pattern prefix `event.…` of one.
fn is_free_form(provider: Provider, key: &str, is_prefix: bool) -> bool {
    provider == Provider::Github
        && GITHUB_FREE_FORM_ACTIONS.iter().any(|event| {
            key.strip_prefix(event)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|action| is_prefix || !action.is_empty())
        })
}

/// The candidate nearest to `wanted` within the suggestion limits; the first one on a tie.
fn closest(wanted: &str, candidates: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    let limit = MAX_SUGGESTION_DISTANCE.min(wanted.len() / 3);
    let mut best: Option<(usize, &'static str)> = None;
    for candidate in candidates {
        let bound = best.map_or(limit, |(distance, _)| distance.saturating_sub(1));
        if candidate.len().abs_diff(wanted.len()) > bound {
            continue;
        }
        let distance = edit_distance(wanted.as_bytes(), candidate.as_bytes());
        if distance <= bound && distance > 0 {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The optimal-string-alignment distance: insertions, deletions, substitutions and swaps
/// of two adjacent bytes each cost one.
fn edit_distance(from: &[u8], to: &[u8]) -> usize {
    let mut before_previous: Vec<usize> = vec![0; to.len() + 1];
    let mut previous: Vec<usize> = (0..=to.len()).collect();
    let mut current: Vec<usize> = vec![0; to.len() + 1];
    for (i, &from_byte) in from.iter().enumerate() {
        current[0] = i + 1;
        for (j, &to_byte) in to.iter().enumerate() {
            let substitution = previous[j] + usize::from(from_byte != to_byte);
            let mut distance = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            if i > 0 && j > 0 && from_byte == to[j - 1] && from[i - 1] == to_byte {
                distance = distance.min(before_previous[j - 1] + 1);
            }
            current[j + 1] = distance;
        }
        std::mem::swap(&mut before_previous, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[to.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTS: [(&str, &[&str]); 6] = [
        ("stripe", STRIPE),
        ("github", GITHUB),
        ("slack", SLACK),
        ("shopify", SHOPIFY),
        ("paddle", PADDLE),
        ("zoom", ZOOM),
    ];

    #[test]
    fn lists_are_sorted_without_duplicates() {
        for (name, list) in LISTS {
            assert!(!list.is_empty(), "{name} is empty");
            for pair in list.windows(2) {
                assert!(
                    pair[0] < pair[1],
                    "{name}: {:?} must sort after {:?} (byte order, no duplicates)",
                    pair[1],
                    pair[0]
                );
            }
        }
    }

    #[test]
    fn listed_types_are_plain_route_keys() {
        for (name, list) in LISTS {
            for known in list {
                assert!(
                    !known.is_empty()
                        && !known.contains('*')
                        && !known.starts_with('.')
                        && !known.ends_with('.')
                        && known.bytes().all(|byte| byte.is_ascii_graphic()),
                    "{name}: {known:?}"
                );
            }
        }
    }

    #[test]
    fn every_github_action_belongs_to_a_listed_event() {
        for known in GITHUB {
            if let Some((event, _action)) = known.split_once('.') {
                assert!(
                    GITHUB.binary_search(&event).is_ok(),
                    "{known:?}: event {event:?} is not listed"
                );
            }
        }
    }

    #[test]
    fn known_types_are_known() {
        let cases = [
            (Provider::Stripe, "payment_intent.succeeded"),
            (Provider::Stripe, "charge.refunded"),
            (Provider::Stripe, "charge.dispute.created"),
            (Provider::Stripe, "invoice.paid"),
            (Provider::Stripe, "customer.subscription.updated"),
            (Provider::Stripe, "checkout.session.completed"),
            (Provider::Stripe, "account.application.authorized"),
            (Provider::Stripe, "treasury.received_debit.created"),
            (Provider::Github, "push"),
            (Provider::Github, "ping"),
            (Provider::Github, "pull_request"),
            (Provider::Github, "pull_request.opened"),
            (Provider::Github, "issues.closed"),
            (Provider::Github, "installation.created"),
            (Provider::Github, "workflow_run.completed"),
            (Provider::Slack, "message"),
            (Provider::Slack, "app_mention"),
            (Provider::Slack, "reaction_added"),
            (Provider::Slack, "team_join"),
            (Provider::Slack, "app_uninstalled"),
            (Provider::Shopify, "orders/create"),
            (Provider::Shopify, "orders/paid"),
            (Provider::Shopify, "app/uninstalled"),
            (Provider::Shopify, "app/scopes_update"),
            (Provider::Shopify, "customers/data_request"),
            (Provider::Shopify, "customers/redact"),
            (Provider::Shopify, "shop/redact"),
            (Provider::Shopify, "customer.tags_added"),
            (Provider::Paddle, "transaction.completed"),
            (Provider::Paddle, "subscription.created"),
            (Provider::Paddle, "subscription.canceled"),
            (Provider::Paddle, "api_key_exposure.created"),
            (Provider::Zoom, "meeting.started"),
            (Provider::Zoom, "meeting.ended"),
            (Provider::Zoom, "recording.completed"),
            (Provider::Zoom, "phone.callee_answered"),
            (Provider::Zoom, "bot_notification"),
        ];
        for (provider, key) in cases {
            assert_eq!(is_known(provider, key), Some(true), "{provider:?} {key}");
            assert_eq!(suggestion(provider, key), None, "{provider:?} {key}");
        }
    }

    #[test]
    fn patterns_are_known_when_a_type_falls_under_them() {
        let cases = [
            (Provider::Stripe, "customer.*", true),
            (Provider::Stripe, "customer.subscription.*", true),
            (Provider::Stripe, "charge.dispute.*", true),
            (Provider::Stripe, "treasury.*", true),
            (Provider::Stripe, "custmer.*", false),
            // No type continues past a full type name.
            (Provider::Stripe, "payment_intent.succeeded.*", false),
            // `prefix.*` needs the dot: `charge` alone is not a prefix of `charges.x`.
            (Provider::Stripe, "charg.*", false),
            (Provider::Github, "pull_request.*", true),
            (Provider::Github, "issues.*", true),
            (Provider::Github, "push.*", false),
            (Provider::Github, "pull_requests.*", false),
            // Slack types have no dots: no pattern can match one.
            (Provider::Slack, "message.*", false),
            // Shopify topics split at `/`; only the `customer.…` ones have a dot.
            (Provider::Shopify, "customer.*", true),
            (Provider::Shopify, "orders.*", false),
            (Provider::Paddle, "transaction.*", true),
            (Provider::Paddle, "transactions.*", false),
            (Provider::Zoom, "meeting.*", true),
            (Provider::Zoom, "team_chat.*", true),
            // Answered by the ingress, never routed.
            (Provider::Zoom, "endpoint.*", false),
        ];
        for (provider, key, known) in cases {
            assert_eq!(is_known(provider, key), Some(known), "{provider:?} {key}");
        }
    }

    #[test]
    fn catch_all_is_always_known_where_there_is_a_list() {
        for provider in [
            Provider::Stripe,
            Provider::Github,
            Provider::Slack,
            Provider::Shopify,
            Provider::Paddle,
            Provider::Zoom,
        ] {
            assert_eq!(is_known(provider, CATCH_ALL), Some(true), "{provider:?}");
            assert_eq!(suggestion(provider, CATCH_ALL), None, "{provider:?}");
        }
    }

    #[test]
    fn standard_webhooks_has_no_list() {
        assert_eq!(known_types(Provider::Standard), None);
        assert_eq!(known_types(Provider::Hmac), None);
        assert_eq!(known_types(Provider::Token), None);
        for key in [
            "payment_intent.succeded",
            "user.created",
            "anything.*",
            CATCH_ALL,
        ] {
            assert_eq!(is_known(Provider::Standard, key), None, "{key}");
            assert_eq!(suggestion(Provider::Standard, key), None, "{key}");
        }
    }

    #[test]
    fn typos_are_unknown_with_the_closest_type_suggested() {
        let cases = [
            (
                Provider::Stripe,
                "payment_intent.succeded",
                "payment_intent.succeeded",
            ),
            (
                Provider::Stripe,
                "payment_intnet.succeeded",
                "payment_intent.succeeded",
            ),
            (Provider::Stripe, "Charge.refunded", "charge.refunded"),
            (Provider::Stripe, "invoice.payed", "invoice.paid"),
            (
                Provider::Github,
                "pull_request.opend",
                "pull_request.opened",
            ),
            (Provider::Github, "pull_requests", "pull_request"),
            (Provider::Github, "issue.closed", "issues.closed"),
            (Provider::Slack, "app_menton", "app_mention"),
            (Provider::Slack, "reaction_add", "reaction_added"),
            // A subscription name, not a type: those subscriptions deliver `message`.
            (Provider::Slack, "message.channels", "message"),
            (Provider::Slack, "message.im", "message"),
            (Provider::Shopify, "orders/created", "orders/create"),
            (Provider::Shopify, "orders.create", "orders/create"),
            (Provider::Shopify, "order/paid", "orders/paid"),
            (Provider::Shopify, "app/uninstall", "app/uninstalled"),
            (Provider::Shopify, "customer/redact", "customers/redact"),
            (
                Provider::Paddle,
                "subscription.cancelled",
                "subscription.canceled",
            ),
            (
                Provider::Paddle,
                "transaction.complete",
                "transaction.completed",
            ),
            (Provider::Zoom, "meeting.strated", "meeting.started"),
            (Provider::Zoom, "recording.complete", "recording.completed"),
        ];
        for (provider, key, expected) in cases {
            assert_eq!(is_known(provider, key), Some(false), "{provider:?} {key}");
            assert_eq!(
                suggestion(provider, key),
                Some(expected),
                "{provider:?} {key}"
            );
        }
    }

    #[test]
    fn pattern_typos_suggest_a_known_prefix() {
        assert_eq!(suggestion(Provider::Stripe, "custmer.*"), Some("customer"));
        assert_eq!(
            suggestion(Provider::Stripe, "customer.subscriptions.*"),
            Some("customer.subscription")
        );
        assert_eq!(
            suggestion(Provider::Github, "pull_reqest.*"),
            Some("pull_request")
        );
    }

    #[test]
    fn nothing_is_suggested_when_nothing_is_close() {
        for (provider, key) in [
            (Provider::Stripe, "zzz_unrelated"),
            (Provider::Stripe, "customer.subscription"),
            (
                Provider::Github,
                "deployment_protection_rules.requested_now",
            ),
            // Keys shorter than three bytes get no suggestion: one edit from them is
            // anything.
            (Provider::Github, "pr"),
            (Provider::Slack, "message.*"),
            // No Shopify topic has the prefix `orders.`, and `customer` is too far from it.
            (Provider::Shopify, "orders.*"),
            (Provider::Zoom, "endpoint.url_validation"),
        ] {
            assert_eq!(is_known(provider, key), Some(false), "{provider:?} {key}");
            assert_eq!(suggestion(provider, key), None, "{provider:?} {key}");
        }
    }

    #[test]
    fn repository_dispatch_actions_are_free_form() {
        for key in [
            "repository_dispatch",
            "repository_dispatch.deploy",
            "repository_dispatch.sample.collected",
            "repository_dispatch.*",
            "repository_dispatch.deploy.*",
        ] {
            assert_eq!(is_known(Provider::Github, key), Some(true), "{key}");
        }
        assert_eq!(
            is_known(Provider::Github, "repository_dispach.deploy"),
            Some(false)
        );
        // Only GitHub's own event is free-form.
        assert_eq!(
            is_known(Provider::Stripe, "repository_dispatch.deploy"),
            Some(false)
        );
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        let cases = [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("abc", "abc", 0),
            ("abc", "abd", 1),
            ("abc", "abxc", 1),
            ("abc", "ac", 1),
            ("ab", "ba", 1),
            ("intnet", "intent", 1),
            ("kitten", "sitting", 3),
            ("ca", "abc", 3),
        ];
        for (from, to, expected) in cases {
            assert_eq!(
                edit_distance(from.as_bytes(), to.as_bytes()),
                expected,
                "{from:?} → {to:?}"
            );
        }
    }

    const CONFIG: &str = r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"payment_intent.succeded" = { handler = "orders.mark_paid" }
"charge.refunded" = { handler = "orders.refund" }
"customer.*" = { handler = "crm.sync" }
"custmer.subscription.*" = { handler = "crm.sync" }
"zzz_unrelated" = { handler = "crm.sync" }

[[integration]]
id = "gh"
provider = "github"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"*" = { handler = "audit.log" }
"pull_request.opend" = { handler = "ci.start" }
"push" = { handler = "ci.start" }
"repository_dispatch.deploy" = { handler = "ci.deploy" }

[[integration]]
id = "slack-acme"
provider = "slack"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"app_menton" = { handler = "bot.reply" }
"message" = { handler = "bot.reply" }
"message.channels" = { handler = "bot.reply" }

[[integration]]
id = "hooks"
provider = "standard"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"anything.goes" = { handler = "hooks.take" }
"#;

    fn config(text: &str) -> Config {
        Config::from_toml(text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        })
        .expect("the test configuration is valid")
    }

    #[test]
    fn route_key_warnings_name_each_unknown_key_once() {
        assert_eq!(
            route_key_warnings(&config(CONFIG)),
            [
                r#"integration stripe-acme: route "custmer.subscription.*" matches no event type stripe sends (did you mean "customer.subscription.*"?): deliveries of it would be answered 200 ignored"#,
                r#"integration stripe-acme: route "payment_intent.succeded" is not an event type stripe sends (did you mean "payment_intent.succeeded"?): deliveries of it would be answered 200 ignored"#,
                r#"integration stripe-acme: route "zzz_unrelated" is not an event type stripe sends: deliveries of it would be answered 200 ignored"#,
                r#"integration gh: route "pull_request.opend" is not an event type github sends (did you mean "pull_request.opened"?): it never matches, so deliveries meant for it go to the catch-all route "*""#,
                r#"integration slack-acme: route "app_menton" is not an event type slack sends (did you mean "app_mention"?): deliveries of it would be answered 200 ignored"#,
                r#"integration slack-acme: route "message.channels" is not an event type slack sends (did you mean "message"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
    }

    #[test]
    fn route_key_warnings_are_empty_when_every_key_is_known() {
        let text = CONFIG
            .replace("payment_intent.succeded", "payment_intent.succeeded")
            .replace("custmer.subscription.*", "customer.subscription.*")
            .replace("\"zzz_unrelated\"", "\"invoice.paid\"")
            .replace("pull_request.opend", "pull_request.opened")
            .replace("app_menton", "app_mention")
            .replace("\"message.channels\"", "\"reaction_added\"");
        assert_eq!(route_key_warnings(&config(&text)), Vec::<String>::new());
    }

    const SHOPIFY_CONFIG: &str = r#"
[[integration]]
id = "shop-acme"
provider = "shopify"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"orders/created" = { handler = "orders.create" }
"orders/paid" = { handler = "orders.mark_paid" }
"customers/data_request" = { handler = "privacy.export" }
"customers/redact" = { handler = "privacy.erase" }
"shop/redact" = { handler = "privacy.erase_shop" }
"#;

    #[test]
    fn shopify_typos_warn_and_compliance_topics_do_not() {
        assert_eq!(
            route_key_warnings(&config(SHOPIFY_CONFIG)),
            [
                r#"integration shop-acme: route "orders/created" is not an event type shopify sends (did you mean "orders/create"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
        let fixed = SHOPIFY_CONFIG.replace("orders/created", "orders/create");
        assert_eq!(route_key_warnings(&config(&fixed)), Vec::<String>::new());
    }

    /// A pattern ends in `.*`, so no pattern can stand for the topics of one Shopify
    /// resource: the configuration refuses `orders/*` before any warning is looked for.
    #[test]
    fn shopify_topics_cannot_be_patterned_at_their_slash() {
        let text = SHOPIFY_CONFIG.replace("\"orders/created\"", "\"orders/*\"");
        let Err(error) = Config::from_toml(&text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        }) else {
            panic!("orders/* must be refused");
        };
        assert!(error.to_string().contains("`prefix.*`"), "{error}");
    }

    #[test]
    fn paddle_and_zoom_typos_warn() {
        let text = r#"
[[integration]]
id = "paddle-acme"
provider = "paddle"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"transaction.completed" = { handler = "billing.fulfil" }
"subscription.cancelled" = { handler = "billing.revoke" }

[[integration]]
id = "zoom-acme"
provider = "zoom"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"meeting.ended" = { handler = "meetings.close" }
"recording.complete" = { handler = "meetings.archive" }
"#;
        assert_eq!(
            route_key_warnings(&config(text)),
            [
                r#"integration paddle-acme: route "subscription.cancelled" is not an event type paddle sends (did you mean "subscription.canceled"?): deliveries of it would be answered 200 ignored"#,
                r#"integration zoom-acme: route "recording.complete" is not an event type zoom sends (did you mean "recording.completed"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
    }
}
