//! Sessions on disk (DESIGN.md section 5) and the session state as a fold over events.

pub mod state;
pub mod store;
