//! Batches: many tasks, each an ordinary session, run here over every GPU of the machine or
//! submitted to Slurm (docs/batch.md). `select` finds the tasks, `manifest` is batch.json,
//! `runner` runs them in this process, `shared_llm` bounds and counts their LLM calls,
//! `results`, `summary` and `export` turn their sessions into figures.

pub mod export;
pub mod manifest;
pub mod results;
pub mod runner;
pub mod select;
pub mod shared_llm;
pub mod slurm;
pub mod summary;
