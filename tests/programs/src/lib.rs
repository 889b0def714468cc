//! Long-running programs that drive the real binaries, kept beside the suite rather than
//! in its support library ([`inbound_tests`]): [`soak`], the chaos soak behind `make soak`
//! and the suite's short soak. The benchmark's load generator is the `inbound-loadgen`
//! binary of this crate.

pub mod soak;
