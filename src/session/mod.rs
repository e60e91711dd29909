//! Sessions on disk (docs/architecture.md, Sessions) and the session state as a fold over events.

pub mod sol;
pub mod state;
pub mod store;
