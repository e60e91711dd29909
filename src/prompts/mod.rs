//! Prompt templates (minijinja) and their rendering. See `docs/prompts.md`.
//!
//! The templates in `prompts/` are embedded in the binary as defaults. A user directory
//! (config `[prompts] dir`, else `./prompts` when it exists, else `~/.config/kforge/prompts`)
//! overrides them file by file. A changed, added or removed override is picked up at the
//! next render (its modification time and size are checked at every lookup): no restart.
//! `PromptSet::snapshot_into` writes the effective templates into a session's `prompts/`.
//!
//! `templates` holds the shipped files and the set that loads overrides (by
//! `protocol::TemplateName`, the names calls render); `context` what a template can use; `metrics` the Nsight Compute
//! figures in it; `markdown` a rendered prompt's editable form; `hints` the targeted repair
//! hints, `mismatch` the one read from a wrong result's records; `directions` each seed's
//! strategy; `designs` a kernel's design in one line; `sizes` what the prompts say about
//! unseen sizes. An error's text is shortened by `crate::pysource::traceback`.
//! What the task's `forward` returns is read by `crate::pysource::task_reader`.

pub mod context;
pub mod designs;
pub mod directions;
pub mod hints;
pub mod markdown;
pub mod metrics;
pub mod mismatch;
pub mod sizes;
pub mod templates;

pub use crate::protocol::TemplateName;
pub use context::{AttemptFailure, EarlierStage, PromptContext, UnusableAnswer};
pub use designs::{SiblingDesign, design_summary};
pub use directions::{SeedDirection, seed_direction};
pub use sizes::UnseenSizes;
pub use templates::{DEFAULT_TEMPLATES, PromptSet, SNAPSHOT_SOURCES_FILE, user_dir};
