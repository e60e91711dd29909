//! The optimization engine (DESIGN.md sections 1 and 2). It knows nothing of the
//! terminal: it emits `events::Event`s and obeys `events::Command`s.

pub mod config;
pub mod control;
pub mod events;
pub mod hints;
pub mod llm_backend;
pub mod persistent;
pub mod prompting;
pub mod recorder;
pub mod runner;
