//! Front ends of the CLI subcommands. Each module has an `Args` (clap) and an async
//! `run(args, config_file) -> Result<ExitCode>`; errors become exit code 2 in `main`.

pub mod ask;
pub mod batch;
pub mod bench;
pub mod doctor;
pub mod eval;
pub mod mcp;
pub mod open;
pub mod providers;
pub mod run;
pub mod session_args;
