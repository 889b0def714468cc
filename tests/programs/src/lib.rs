//! Long-running programs that drive the real binaries, kept beside the suite rather than
//! in its support library ([`inbound_tests`]): [`soak`], the chaos soak behind `make soak`
//! and the suite's short soak, and [`cpu`], a process's CPU time for the benchmark
//! programs: the load generator `inbound-loadgen` and the forged-request cost
//! `inbound-forgery`, binaries of this crate.

pub mod cpu;
pub mod soak;
