//! The example domain's SQL: [`orders`] and [`grants`], in schema `inbound_example`.

pub mod grants;
pub mod orders;
