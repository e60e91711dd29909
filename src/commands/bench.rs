//! `kforge bench`: figures for docs/benchmarks.md, measured, never asserted in tests.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Executor};
use crate::eval::suite::{self, Manifest};
use crate::eval::{self, EvalRequest};
use crate::launch::options::DeviceArgs;

mod fast_loop;
mod kernelbench;
mod kernelbench_wall;
mod scaling;
mod stats;

use stats::{kernel_work_seconds, median, phase_medians, spread};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchKind,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchKind {
    /// Per-evaluation overhead of the fork server vs a fresh process, same kernel.
    EvalOverhead {
        task: PathBuf,
        kernel: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: u32,
        /// Measure only this executor (both when not given).
        #[arg(long, value_parser = ["fork", "spawn"])]
        executor: Option<String>,
        #[command(flatten)]
        device: DeviceArgs,
    },
    /// The same kernel evaluated several times (fresh baselines, one evaluator): spread of
    /// the timing medians, whether the score intervals overlap, and each result's flags.
    Repeat {
        task: PathBuf,
        kernel: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: u32,
        /// Append each evaluation's whole result (the eval JSON) to this file, one per line.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        device: DeviceArgs,
    },
    /// Run a fixture manifest (tests/fixtures/cases.toml) and print each verdict.
    Fixtures {
        manifest: PathBuf,
        #[command(flatten)]
        device: DeviceArgs,
    },
    /// Check every task of a KernelBench level: verdict, wall time, peak memory, and the
    /// reference timed with kforge's protocol and with KernelBench's (issue 9).
    #[command(name = "kernelbench")]
    KernelBench(kernelbench::KernelBenchArgs),
    /// A batch run through the batch runner on 1 GPU, then on 2 (or the sets given): the
    /// throughput ratio and each device's share of the time spent evaluating.
    BatchScaling(scaling::ScalingArgs),
    /// The interactive loop's figures (issue 38): the by-hand `kforge eval` wall and
    /// verdict, then a session-like sequence of candidate evaluations on one warm
    /// evaluator, each one's wall split into its correctness trials and the rest.
    FastLoop(fast_loop::FastLoopArgs),
}

pub async fn run(args: BenchArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    let code = match args.what {
        BenchKind::EvalOverhead {
            task,
            kernel,
            runs,
            executor,
            device,
        } => {
            let device = device.pick(&evaluator).await?;
            println!(
                "eval-overhead: {} on {device}, {runs} evaluations per executor",
                kernel.display()
            );
            println!(
                "{:<8} {:>9} {:>12} {:>11} {:>11}",
                "executor", "wall s", "kernel work s", "overhead s", "(median)"
            );
            let executors = match executor.as_deref() {
                Some("fork") => vec![Executor::Fork],
                Some(_) => vec![Executor::Spawn],
                None => vec![Executor::Fork, Executor::Spawn],
            };
            for executor in executors {
                let mut settings = config.eval.clone();
                settings.executor = executor;
                let mut walls = Vec::new();
                let mut overheads = Vec::new();
                let mut works = Vec::new();
                let mut results = Vec::new();
                for _ in 0..runs.max(1) {
                    let request = EvalRequest::new(&task, &kernel, device, settings.clone());
                    let started = Instant::now();
                    let result = evaluator
                        .evaluate(request, CancellationToken::new(), None)
                        .await?;
                    let wall = started.elapsed().as_secs_f64();
                    if !result.correct {
                        bail!(
                            "the kernel must be correct to measure overhead: {}",
                            result.summary
                        );
                    }
                    let work = kernel_work_seconds(&result.phases_s).unwrap_or(0.0);
                    walls.push(wall);
                    works.push(work);
                    overheads.push(wall - work);
                    results.push(result);
                }
                println!(
                    "{:<8} {:>9.3} {:>12.3} {:>11.3} {:>11}",
                    format!("{executor:?}").to_lowercase(),
                    median(&walls),
                    median(&works),
                    median(&overheads),
                    "median"
                );
                let phases = phase_medians(&results.iter().collect::<Vec<_>>());
                println!(
                    "  phases (s, median): {}",
                    phases
                        .iter()
                        .map(|(name, s)| format!("{name} {s:.3}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            ExitCode::SUCCESS
        }
        BenchKind::Repeat {
            task,
            kernel,
            runs,
            out,
            device,
        } => {
            let device = device.pick(&evaluator).await?;
            let mut settings = config.eval.clone();
            settings.baseline_cache = false;
            // The eager score's repeatability: a torch.compile baseline measured again in
            // each evaluation would only add its compile to each.
            settings.compile_baseline = false;
            println!(
                "repeat: {} on {device}, {runs} evaluations",
                kernel.display()
            );
            println!(
                "{:>3} {:>13} {:>13} {:>8} {:>17}  flags",
                "run", "reference ms", "kernel ms", "score", "95% interval"
            );
            let mut out = match &out {
                Some(path) => Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .with_context(|| format!("cannot open {}", path.display()))?,
                ),
                None => None,
            };
            let mut kernel_medians = Vec::new();
            let mut reference_medians = Vec::new();
            let mut intervals = Vec::new();
            let mut untimed = 0;
            for i in 0..runs.max(1) {
                let request = EvalRequest::new(&task, &kernel, device, settings.clone());
                let result = evaluator
                    .evaluate(request, CancellationToken::new(), None)
                    .await?;
                if let Some(file) = out.as_mut() {
                    use std::io::Write;
                    let line = serde_json::to_string(&result)?;
                    writeln!(file, "{line}").context("cannot write the results file")?;
                }
                let flags = result.flags.join(",");
                let Some(timing) = result.timing.filter(|t| t.meaningful) else {
                    // The others still run: one failure among many is itself a figure.
                    println!("{:>3} no timing: {}", i + 1, result.summary);
                    untimed += 1;
                    continue;
                };
                let interval = timing.score_low.zip(timing.score_high);
                println!(
                    "{:>3} {:>13.4} {:>13.4} {:>7.3}x {:>17}  {}",
                    i + 1,
                    timing.reference.median_ms,
                    timing.kernel.median_ms,
                    timing.score.unwrap_or(0.0),
                    interval
                        .map(|(lo, hi)| format!("[{lo:.3}-{hi:.3}]"))
                        .unwrap_or_default(),
                    if flags.is_empty() { "-" } else { &flags }
                );
                kernel_medians.push(timing.kernel.median_ms);
                reference_medians.push(timing.reference.median_ms);
                intervals.extend(interval);
            }
            if !kernel_medians.is_empty() {
                println!(
                    "spread (max-min)/median: kernel {:.2}%, reference {:.2}%; intervals overlap: {}",
                    spread(&kernel_medians),
                    spread(&reference_medians),
                    if intervals.len() < 2 {
                        "n/a".to_string()
                    } else {
                        all_overlap(&intervals).to_string()
                    }
                );
            }
            if untimed > 0 {
                println!(
                    "{untimed} evaluation(s) without timing (a GPU and a correct kernel give one)"
                );
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        BenchKind::Fixtures { manifest, device } => {
            let device = device.pick(&evaluator).await?;
            let manifest = Manifest::load(&manifest)?;
            let mut settings = config.eval.clone();
            settings.timeout_s = settings.timeout_s.min(120.0);
            // Verdicts and their scores against eager: no fixture compiles its reference.
            settings.compile_baseline = false;
            let outcomes = suite::run(&evaluator, &manifest, device, &settings).await;
            println!("fixtures on {device}");
            print!("{}", suite::table(&outcomes));
            if outcomes.iter().all(|o| o.problem.is_none()) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        BenchKind::KernelBench(args) => kernelbench::run(args, &config, &evaluator).await?,
        BenchKind::FastLoop(args) => {
            if fast_loop::run(args, &config, &evaluator).await? {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        BenchKind::BatchScaling(args) => {
            scaling::run(args, &config, &evaluator).await?;
            ExitCode::SUCCESS
        }
    };
    evaluator.shutdown().await;
    Ok(code)
}

/// Whether every pair of intervals shares a point.
fn all_overlap(intervals: &[(f64, f64)]) -> bool {
    let highest_low = intervals.iter().map(|i| i.0).fold(f64::MIN, f64::max);
    let lowest_high = intervals.iter().map(|i| i.1).fold(f64::MAX, f64::min);
    highest_low <= lowest_high
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_overlap_only_when_all_share_a_point() {
        assert!(all_overlap(&[(1.0, 1.1), (1.05, 1.2), (1.08, 1.09)]));
        assert!(!all_overlap(&[(1.0, 1.1), (1.05, 1.2), (1.11, 1.3)]));
    }
}
