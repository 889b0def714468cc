//! Every state a receipt or an effect can be in, and what ends a receipt, written once.
//! The database stores them as text and enforces the same sets with CHECK constraints; a
//! test (`tests/tests/it/states.rs`) reads those constraints back and fails when either
//! side gains or loses a value, and another checks that ARCHITECTURE.md's state machines
//! name every one. Transitions live with the code that makes them: the worker's claim
//! and finish (`inbound_store::queue`), the dispatcher's decisions (`effects::decide`) and the
//! operators' resolutions (`inbound_store::effects::Resolution`, `inbound_store::admin`).

use std::fmt;
use std::str::FromStr;

#[cfg(feature = "sqlx")]
use sqlx::encode::IsNull;
#[cfg(feature = "sqlx")]
use sqlx::error::BoxDynError;
#[cfg(feature = "sqlx")]
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef};
#[cfg(feature = "sqlx")]
use sqlx::{Decode, Encode, Postgres, Type};

/// An enum stored as one of a fixed set of texts: `as_str`, `ALL`, `FromStr`, `Display`,
/// `Serialize` (as stored) and (feature `sqlx`) the mapping to and from `text` (no
/// PostgreSQL enum type: adding a value is a CHECK change, never a type change, and
/// poolers see plain text).
macro_rules! text_states {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every value, in the order they are reported.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// As stored.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// Every value as stored, in order.
            pub fn names() -> impl Iterator<Item = &'static str> {
                Self::ALL.iter().map(|value| value.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownState;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownState {
                        kind: stringify!($name),
                        value: text.to_owned(),
                        expected: Self::names().collect::<Vec<_>>().join(", "),
                    }),
                }
            }
        }

        // As stored, never the variant's name: `--json` and the database say one word.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // `pad`: table columns (`{:<10}`) line up.
                f.pad(self.as_str())
            }
        }

        #[cfg(feature = "sqlx")]
        impl Type<Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                <&str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <&str as Type<Postgres>>::compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl PgHasArrayType for $name {
            fn array_type_info() -> PgTypeInfo {
                <&str as PgHasArrayType>::array_type_info()
            }

            fn array_compatible(ty: &PgTypeInfo) -> bool {
                <&str as PgHasArrayType>::array_compatible(ty)
            }
        }

        #[cfg(feature = "sqlx")]
        impl Encode<'_, Postgres> for $name {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }

        #[cfg(feature = "sqlx")]
        impl<'r> Decode<'r, Postgres> for $name {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <&str as Decode<Postgres>>::decode(value)?;
                Ok(text.parse()?)
            }
        }
    };
}

/// A stored text that names no value of its kind (a row written by a newer version).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a {kind} (expected one of {expected})")]
pub struct UnknownState {
    /// Which kind of state.
    pub kind: &'static str,
    /// What was stored.
    pub value: String,
    /// The values there are.
    pub expected: String,
}

text_states! {
    /// Where a receipt stands (`receipts.status`).
    pub enum ReceiptStatus {
        /// Waiting for a worker: claimable, leased, or waiting out a retry delay.
        Pending => "pending",
        /// Its transition committed (or it was judged a duplicate, ignored, or closed).
        Done => "done",
        /// A permanent inconsistency: a person must look.
        Quarantined => "quarantined",
        /// Attempts exhausted, or failed by an operator.
        Failed => "failed",
    }
}

text_states! {
    /// Where an unfinished or stuck receipt stands as the queue gauge
    /// (`inbound_receipts{state}`) and `inboundctl status` count it: a pending receipt is
    /// claimable, leased or waiting out a retry delay.
    pub enum QueueState {
        /// Pending and claimable now (an expired lease included).
        Pending => "pending",
        /// Pending, held by a worker under a live lease.
        Leased => "leased",
        /// Pending, backing off after a transient failure.
        Waiting => "waiting",
        /// Needs a person: a permanent inconsistency.
        Quarantined => "quarantined",
        /// Needs a person: attempts exhausted, or failed by an operator.
        Failed => "failed",
    }
}

impl ReceiptStatus {
    /// The statuses that need a person (the alert's, and `receipts close`'s).
    pub const NEEDS_A_PERSON: &'static [Self] = &[Self::Failed, Self::Quarantined];
}

text_states! {
    /// How a done receipt ended (`receipts.outcome`).
    pub enum ReceiptOutcome {
        /// The business transition happened.
        Applied => "applied",
        /// The business key says it had happened already.
        Duplicate => "duplicate",
        /// Nothing to do: outside the handler's domain.
        Ignored => "ignored",
        /// An operator decided it will not be processed (`receipts close`).
        Closed => "closed",
    }
}

text_states! {
    /// What an operator decided about a receipt (`receipt_replays` are replays;
    /// `receipt_resolutions.action` holds the others).
    pub enum ReceiptAction {
        /// Queued again (failed or quarantined), or made due now (pending).
        Replay => "replay",
        /// A pending receipt taken out as quarantined.
        Quarantine => "quarantine",
        /// A pending receipt taken out as failed.
        Fail => "fail",
        /// A failed or quarantined receipt ended `done` / `closed`.
        Close => "close",
    }
}

impl ReceiptAction {
    /// What the action made of the receipt, as a past participle (`replayed`, …).
    pub fn done(self) -> &'static str {
        match self {
            Self::Replay => "replayed",
            Self::Quarantine => "quarantined",
            Self::Fail => "failed",
            Self::Close => "closed",
        }
    }
}

text_states! {
    /// What an operator decided about an effect (`effect_resolutions.action`).
    pub enum EffectAction {
        /// Recorded as completed: the person checked the sink has it.
        Complete => "completed",
        /// Sent again (or made due now, when pending).
        Retry => "retry",
        /// Given up.
        Abandon => "abandon",
    }
}

impl EffectAction {
    /// The statuses this action may start from: `in_flight` never (a delivery may be
    /// running), `completed` and `abandoned` never (closed). A retry of a `pending`
    /// effect only makes it due (its history stands).
    pub fn allowed_from(self) -> &'static [EffectStatus] {
        use EffectStatus::{Failed, Pending, Review, Uncertain};
        match self {
            Self::Complete => &[Uncertain, Review, Failed],
            Self::Retry | Self::Abandon => &[Pending, Uncertain, Review, Failed],
        }
    }

    /// Whether an effect in `status` may be resolved so (what the console offers; the
    /// database's decision function checks again under the row lock).
    pub fn allows(self, status: EffectStatus) -> bool {
        self.allowed_from().contains(&status)
    }
}

text_states! {
    /// Where an effect stands (`effects.status`).
    pub enum EffectStatus {
        /// To be delivered (first, or again after a retry delay).
        Pending => "pending",
        /// A delivery is in progress (its attempt is committed before the request).
        InFlight => "in_flight",
        /// The sink confirmed it.
        Completed => "completed",
        /// The sink refused it: a verdict, not a timeout.
        Failed => "failed",
        /// Its outcome is unknown; it is being reconciled.
        Uncertain => "uncertain",
        /// A person must decide.
        Review => "review",
        /// Given up by an operator.
        Abandoned => "abandoned",
    }
}

impl EffectStatus {
    /// Still to happen, or waiting for a person: gauged (their counts are cheap, through
    /// the status index; the finished ones grow with retention).
    pub const OPEN: &'static [Self] =
        &[Self::Pending, Self::InFlight, Self::Uncertain, Self::Review];

    /// Final: no transition leaves them, so purge may remove them with their receipt.
    pub const CLOSED: &'static [Self] = &[Self::Completed, Self::Abandoned];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Status columns are aligned with `{:<10}`: their Display honours width.
    #[test]
    fn states_honour_width_and_alignment() {
        assert_eq!(format!("{:<8}|", ReceiptStatus::Done), "done    |");
        assert_eq!(format!("{:>9}|", EffectStatus::Failed), "   failed|");
    }

    #[test]
    fn every_state_round_trips_through_its_text_and_nothing_else_parses() {
        for status in EffectStatus::ALL {
            assert_eq!(status.as_str().parse::<EffectStatus>(), Ok(*status));
        }
        for status in ReceiptStatus::ALL {
            assert_eq!(status.as_str().parse::<ReceiptStatus>(), Ok(*status));
        }
        for outcome in ReceiptOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<ReceiptOutcome>(), Ok(*outcome));
        }
        let unknown = "in-flight"
            .parse::<EffectStatus>()
            .expect_err("not a status");
        assert!(
            unknown
                .to_string()
                .contains("expected one of pending, in_flight"),
            "{unknown}"
        );
        assert_eq!(
            serde_json::to_string(&EffectStatus::InFlight).expect("json"),
            "\"in_flight\""
        );
    }

    /// What `--json` prints is what the database stores: `effects show --json` says an
    /// effect was resolved `completed`, as `effect_resolutions.action` holds it, not the
    /// variant's name (`complete`).
    #[test]
    fn every_state_serialises_as_it_is_stored() {
        fn as_json<T: serde::Serialize>(value: T) -> String {
            serde_json::to_value(value)
                .expect("json")
                .as_str()
                .expect("a string")
                .to_owned()
        }
        for value in EffectAction::ALL {
            assert_eq!(as_json(value), value.as_str());
        }
        for value in ReceiptAction::ALL {
            assert_eq!(as_json(value), value.as_str());
        }
        for value in EffectStatus::ALL {
            assert_eq!(as_json(value), value.as_str());
        }
        for value in ReceiptStatus::ALL {
            assert_eq!(as_json(value), value.as_str());
        }
        for value in ReceiptOutcome::ALL {
            assert_eq!(as_json(value), value.as_str());
        }
    }

    #[test]
    fn open_and_closed_effect_states_do_not_overlap_and_failed_is_neither() {
        for status in EffectStatus::OPEN {
            assert!(!EffectStatus::CLOSED.contains(status));
        }
        assert!(!EffectStatus::OPEN.contains(&EffectStatus::Failed));
        assert!(!EffectStatus::CLOSED.contains(&EffectStatus::Failed));
    }
}
