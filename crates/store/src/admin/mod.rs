//! What operators read and change, by concern: [`counts`] (the gauges and `inboundctl
//! status`), [`listing`] (receipts by filter, by event id, in detail), [`decisions`]
//! (replay, quarantine, fail, close), [`review`] (the console's review queue and its
//! counts), [`overview`](mod@overview) (the console's overview as one read model),
//! [`reads`] (who read which payload), [`purge`] (retention) and [`subjects`] (one business
//! object's timeline, and the ordered subjects held). Everything is re-exported
//! here, so callers name `store::admin::…`.

pub mod counts;
pub mod decisions;
pub mod listing;
pub mod overview;
pub mod purge;
pub mod reads;
pub mod review;
pub mod subjects;

pub use counts::*;
pub use decisions::*;
pub use listing::*;
pub use overview::*;
pub use purge::*;
pub use reads::*;
pub use review::*;
pub use subjects::*;
