//! `kforge bench`: figures for docs/benchmarks.md, measured, never asserted in tests.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use tokio_util::sync::CancellationToken;

use super::common::DeviceArgs;
use crate::config::{Config, Executor};
use crate::eval::suite::{self, Manifest};
use crate::eval::{self, EvalRequest};

mod kernelbench;
mod scaling;

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
        #[command(flatten)]
        device: DeviceArgs,
    },
    /// The same kernel evaluated several times: spread of the timing medians.
    Repeat {
        task: PathBuf,
        kernel: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: u32,
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
            for executor in [Executor::Fork, Executor::Spawn] {
                let mut settings = config.eval.clone();
                settings.executor = executor;
                let mut walls = Vec::new();
                let mut overheads = Vec::new();
                let mut works = Vec::new();
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
                }
                println!(
                    "{:<8} {:>9.3} {:>12.3} {:>11.3} {:>11}",
                    format!("{executor:?}").to_lowercase(),
                    median(&walls),
                    median(&works),
                    median(&overheads),
                    "median"
                );
            }
            ExitCode::SUCCESS
        }
        BenchKind::Repeat {
            task,
            kernel,
            runs,
            device,
        } => {
            let device = device.pick(&evaluator).await?;
            let mut settings = config.eval.clone();
            settings.baseline_cache = false;
            println!(
                "repeat: {} on {device}, {runs} evaluations",
                kernel.display()
            );
            println!(
                "{:>3} {:>13} {:>13} {:>8}",
                "run", "reference ms", "kernel ms", "score"
            );
            let mut kernel_medians = Vec::new();
            let mut reference_medians = Vec::new();
            for i in 0..runs.max(1) {
                let request = EvalRequest::new(&task, &kernel, device, settings.clone());
                let result = evaluator
                    .evaluate(request, CancellationToken::new(), None)
                    .await?;
                let Some(timing) = result.timing.filter(|t| t.meaningful) else {
                    bail!(
                        "no timing ({}): run on a GPU with a correct kernel",
                        result.summary
                    );
                };
                println!(
                    "{:>3} {:>13.4} {:>13.4} {:>7.3}x",
                    i + 1,
                    timing.reference.median_ms,
                    timing.kernel.median_ms,
                    timing.score.unwrap_or(0.0)
                );
                kernel_medians.push(timing.kernel.median_ms);
                reference_medians.push(timing.reference.median_ms);
            }
            println!(
                "spread (max-min)/median: kernel {:.2}%, reference {:.2}%",
                spread(&kernel_medians),
                spread(&reference_medians)
            );
            ExitCode::SUCCESS
        }
        BenchKind::Fixtures { manifest, device } => {
            let device = device.pick(&evaluator).await?;
            let manifest = Manifest::load(&manifest)?;
            let mut settings = config.eval.clone();
            settings.timeout_s = settings.timeout_s.min(120.0);
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
        BenchKind::BatchScaling(args) => {
            scaling::run(args, &config, &evaluator).await?;
            ExitCode::SUCCESS
        }
    };
    evaluator.shutdown().await;
    Ok(code)
}

/// Seconds an evaluation spent on the kernel's own work: its correctness trials (the first
/// includes Triton's compile), its timed runs and the re-check after timing; None for a
/// result that never reached its correctness trials. Everything else in the wall time is
/// overhead: process creation, CUDA initialization, imports, IPC (docs/benchmarks.md).
fn kernel_work_seconds(phases: &std::collections::BTreeMap<String, f64>) -> Option<f64> {
    let correctness = phases.get("correctness")?;
    Some(
        correctness
            + phases.get("timing").copied().unwrap_or(0.0)
            + phases.get("recheck").copied().unwrap_or(0.0),
    )
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn spread(values: &[f64]) -> f64 {
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    100.0 * (max - min) / median(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((spread(&[1.0, 1.02, 1.01]) - 1.9801980198).abs() < 1e-6);
    }

    /// The kernel's own work is its correctness trials, timed runs and re-check; a result
    /// without a correctness phase (it failed before) has no overhead figure.
    #[test]
    fn kernel_work_counts_correctness_timing_and_recheck() {
        let phases: std::collections::BTreeMap<String, f64> = [
            ("startup", 0.07),
            ("reference", 0.4),
            ("correctness", 1.5),
            ("timing", 0.5),
            ("recheck", 0.01),
            ("audit", 0.02),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert!((kernel_work_seconds(&phases).unwrap() - 2.01).abs() < 1e-9);
        let failed: std::collections::BTreeMap<String, f64> = [("startup".to_string(), 0.1)].into();
        assert_eq!(kernel_work_seconds(&failed), None);
    }
}
