//! Evaluation of untrusted kernels (docs/architecture.md, Evaluation): the embedded Python harness,
//! the interpreter that runs it, one server per device, and the async `Evaluator`.

pub mod devices;
pub mod envelope;
pub mod evaluator;
pub mod harness;
pub mod interpreter;
pub mod protocol;
pub mod python_env;
pub mod server;
pub mod suite;
pub mod verdict;
pub mod wire_schema;

use std::path::Path;

use anyhow::Result;

pub use evaluator::{EvalError, EvalProgress, Evaluator};
pub use protocol::{Device, EvalRequest};

use crate::config::Config;

/// Resolves the interpreter (creating the managed environment if needed), installs the
/// harness, and returns an evaluator. `report` gets progress lines for slow steps.
pub fn evaluator_from_config(
    config: &Config,
    cache_dir: &Path,
    report: &mut dyn FnMut(&str),
) -> Result<Evaluator> {
    let python = python_env::resolve(&config.python, cache_dir, report)?;
    let harness = harness::install(cache_dir)?;
    Ok(Evaluator::new(python, harness, cache_dir.to_path_buf()))
}
