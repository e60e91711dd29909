//! The command line. Each subcommand's arguments and behaviour live in
//! `kforge::commands`; this file only parses and dispatches.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kforge::commands;

#[derive(Parser)]
#[command(
    name = "kforge",
    version,
    about = "Interactive, LLM-driven GPU kernel optimization"
)]
struct Cli {
    /// Extra config file, read after ~/.config/kforge/config.toml and ./kforge.toml.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

const RUN_EXIT_CODES: &str = "Exit codes:
  0    complete (a correct kernel), or stopped by a budget or by you
  1    failed: the provider refuses the run, the evaluator broke, a write failed (disk full)
  2    usage error, no LLM configured, or the task was refused (no LLM call made)
  3    no answer (every LLM call failed) or nothing evaluated (no answer had code)
  4    no correct kernel among the evaluated candidates
  130  interrupted (Ctrl-C)
Every end but 0-complete and 4 leaves the session resumable.";

#[derive(Subcommand)]
enum Command {
    /// Run an optimization session on a KernelBench task.
    #[command(after_help = RUN_EXIT_CODES)]
    Run(commands::run::RunArgs),
    /// Continue a session after Ctrl-C, a crash, a full disk or a provider outage.
    #[command(after_help = RUN_EXIT_CODES)]
    Resume(commands::run::ResumeArgs),
    /// Run many tasks (files, directories, a KernelBench checkout), here over every GPU or
    /// through Slurm; `batch status|resume|report BATCH` follow and continue one.
    Batch(Box<commands::batch::BatchArgs>),
    /// (Re)write a session's report.md (with score_timeline.svg), summary.json and usage.csv.
    Report(commands::run::ReportArgs),
    /// Check a Triton kernel against a KernelBench task: correctness, then timing.
    Eval(kforge::launch::evaluate::EvalArgs),
    /// Report Python, torch, triton, GPUs, Nsight Compute and the cache, with fixes.
    Doctor(commands::doctor::DoctorArgs),
    /// Send one prompt to a provider and stream the answer (checks a provider works).
    Ask(commands::ask::AskArgs),
    /// Measure the evaluator (figures for docs/benchmarks.md).
    Bench(commands::bench::BenchArgs),
    /// List the configured providers, the default, and whether each key is present.
    Providers(commands::providers::ProvidersArgs),
    /// Browse a session in the TUI; attach to it live if another process is running it.
    Open(commands::open::OpenArgs),
    /// Serve kforge's evaluator and sessions to coding agents: a Model Context Protocol
    /// server on stdin/stdout (docs/mcp.md).
    Mcp(commands::mcp::McpArgs),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Run(_) => "run",
            Command::Resume(_) => "resume",
            Command::Batch(_) => "batch",
            Command::Report(_) => "report",
            Command::Eval(_) => "eval",
            Command::Doctor(_) => "doctor",
            Command::Ask(_) => "ask",
            Command::Bench(_) => "bench",
            Command::Providers(_) => "providers",
            Command::Open(_) => "open",
            Command::Mcp(_) => "mcp",
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _log = kforge::logging::init();
    // The subcommand only: arguments can hold a prompt.
    let name = cli.command.name();
    tracing::info!(version = env!("CARGO_PKG_VERSION"), command = %name, "kforge started");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let config = cli.config.as_deref();
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run::run(args, config).await,
            Command::Resume(args) => commands::run::resume(args, config).await,
            Command::Batch(args) => commands::batch::run(*args, config).await,
            Command::Report(args) => commands::run::report(args, config).await,
            Command::Eval(args) => commands::eval::run(args, config).await,
            Command::Doctor(args) => commands::doctor::run(args, config).await,
            Command::Ask(args) => commands::ask::run(args, config).await,
            Command::Bench(args) => commands::bench::run(args, config).await,
            Command::Providers(args) => commands::providers::run(args, config).await,
            Command::Open(args) => commands::open::run(args, config).await,
            Command::Mcp(args) => commands::mcp::run(args, config).await,
        }
    });
    match result {
        Ok(code) => {
            tracing::info!(command = %name, "kforge finished: {code:?}");
            code
        }
        Err(e) => {
            tracing::warn!(command = %name, "kforge stopped with an error: {e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
