//! The optimization engine (docs/architecture.md, Pipeline). It knows nothing of the
//! terminal: it emits `protocol::Event`s and obeys `protocol::Command`s.

mod actions;
pub mod control;
pub mod device_pool;
/// Test doubles: for the unit tests, and for integration tests through the `test-support`
/// feature (Cargo.toml); never in a release build.
#[cfg(any(test, feature = "test-support"))]
pub mod fakes;
pub mod llm_backend;
pub mod outcome;
pub mod persistent;
mod pipeline;
pub mod ports;
pub mod prompting;
pub mod recorder;
pub mod replay;
pub mod runner;
mod shapes;
mod steps;
pub mod warmup;
pub mod warmup_plan;

#[cfg(test)]
mod tests;
