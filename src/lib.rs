//! kforge: interactive, LLM-driven GPU kernel optimization.
//!
//! The library holds everything; `main.rs` is only the command line. Layout follows
//! docs/architecture.md, Code layout: `eval` runs untrusted kernels through the Python harness, `llm`
//! talks to model providers, `commands` are the thin front ends of the CLI. The modules form
//! the layers of docs/architecture.md, Layers (`protocol` and `config` at the bottom,
//! `commands` at the top), which `tests/layers.rs` checks.

pub mod batch;
pub mod charts;
pub mod commands;
pub mod config;
pub mod engine;
pub mod eval;
pub mod external_editor;
pub mod launch;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod paths;
pub mod prompts;
pub mod protocol;
pub mod pysource;
pub mod report;
pub mod session;
pub mod shape_check;
pub mod shapes;
pub mod task;
pub mod tui;
