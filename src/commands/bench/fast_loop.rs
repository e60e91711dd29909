//! `kforge bench fast-loop TASK KERNEL` (issue 38): the figures of the interactive loop.
//! First the by-hand example: `kforge eval TASK KERNEL` run as a user runs it (this binary,
//! a fresh process, the server started from nothing), its wall and verdict. Then a
//! session-like sequence: one evaluator warmed up as a session warms it, `N` candidate
//! evaluations of the kernel one after another, each one's wall from the request to the
//! verdict split into its correctness trials and the rest (the cost a session pays per
//! candidate beyond the kernel's own checking), and the judge's phases behind the rest.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::kernelbench_wall;
use super::stats::{median, phase_medians};
use crate::config::Config;
use crate::eval::{Device, EvalRequest, Evaluator};
use crate::launch::options::DeviceArgs;
use crate::protocol::EvalResult;

/// The targets on the CPU: the by-hand example's verdict within this many
/// seconds on a 2-core machine, and a candidate's cost beyond its correctness trials.
const BY_HAND_TARGET_S: f64 = 90.0;
const BEYOND_CORRECTNESS_TARGET_S: f64 = 1.0;

#[derive(clap::Args, Debug)]
pub struct FastLoopArgs {
    pub task: PathBuf,
    pub kernel: PathBuf,
    /// Candidate evaluations in the session-like sequence.
    #[arg(long, default_value_t = 5)]
    pub candidates: u32,
    /// Seconds between a verdict and the next candidate's request: the time a model takes
    /// to write the next candidate, which a session's evaluator spends starting that
    /// candidate's judge ahead (`[eval] start_ahead`). 0 sends them back to back.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub answer_gap_s: f64,
    /// Skip the by-hand `kforge eval` run.
    #[arg(long)]
    pub no_by_hand: bool,
    /// A KernelBench checkout: run its `eval_kernel_against_ref` on the same task and
    /// kernel in one process (GPU only) and compare the one-shot and warm walls (issue 38's
    /// GPU targets). KernelBench runs the kernel unsandboxed, as it always does: only for
    /// kernels you trust.
    #[arg(long, value_name = "DIR")]
    pub kernelbench: Option<PathBuf>,
    /// KernelBench evaluations in its process (the first is its one-shot).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub kernelbench_evals: u32,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// One candidate's figures.
struct Candidate {
    wall_s: f64,
    correctness_s: f64,
    result: EvalResult,
}

impl Candidate {
    fn beyond_correctness_s(&self) -> f64 {
        self.wall_s - self.correctness_s
    }
}

pub async fn run(args: FastLoopArgs, config: &Config, evaluator: &Evaluator) -> Result<bool> {
    let device = args.device.pick(evaluator).await?;
    if args.kernelbench.is_some() && device == Device::Cpu {
        anyhow::bail!("--kernelbench needs a GPU: KernelBench's evaluator runs on CUDA only");
    }
    println!(
        "fast-loop: {} against {} on {device}",
        args.kernel.display(),
        args.task.display()
    );
    let mut met = true;
    let mut one_shot_s = None;
    if !args.no_by_hand {
        let (by_hand_met, wall) = by_hand(&args.task, &args.kernel, device)?;
        met &= by_hand_met;
        one_shot_s = Some(wall);
    }
    let (session_met, warm_s) = session(&args, config, evaluator, device).await?;
    met &= session_met;
    if let (Some(repo), Device::Cuda(n)) = (&args.kernelbench, device) {
        let walls = kernelbench_wall::measure(
            &evaluator.python().executable,
            repo,
            &args.task,
            &args.kernel,
            n,
            args.kernelbench_evals,
        )?;
        let (lines, warm_met) = kernelbench_wall::compare(&walls, one_shot_s, warm_s);
        for line in lines {
            println!("{line}");
        }
        met &= warm_met;
    }
    Ok(met)
}

/// The phases' medians over `results` as "name seconds, ...", those under `at_least_s` left out.
fn phases_line(results: &[&EvalResult], at_least_s: f64) -> String {
    phase_medians(results)
        .iter()
        .filter(|(_, s)| *s >= at_least_s)
        .map(|(name, s)| format!("{name} {s:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `kforge eval TASK KERNEL` in a fresh process, as the README has a user run it: whether
/// the CPU target is met (always on a GPU), and its wall.
fn by_hand(task: &Path, kernel: &Path, device: Device) -> Result<(bool, f64)> {
    let exe = std::env::current_exe().context("cannot find this kforge binary")?;
    let mut command = std::process::Command::new(exe);
    command.arg("eval").arg(task).arg(kernel).arg("--json");
    match device {
        Device::Cpu => command.arg("--cpu"),
        Device::Cuda(n) => command.arg("--device").arg(n.to_string()),
    };
    let started = Instant::now();
    let output = command.output().context("cannot run kforge eval")?;
    let wall = started.elapsed().as_secs_f64();
    let result: Option<EvalResult> = serde_json::from_slice(&output.stdout).ok();
    let verdict = match &result {
        Some(r) if r.correct => "correct".to_string(),
        Some(r) => format!(
            "{}: {}",
            r.category.map_or("failed", |c| c.as_str()),
            r.summary
        ),
        None => format!(
            "no result (exit {}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    };
    println!("by hand: `kforge eval TASK KERNEL` {wall:.1} s wall, {verdict}");
    if let Some(result) = &result {
        // Where a one-shot's seconds go (its server's start, the compile baseline...).
        println!("  phases (s): {}", phases_line(&[result], 0.05));
    }
    if let Some(sizes) = result.as_ref().and_then(|r| r.interpreter_sizes.as_ref()) {
        println!("  at the interpreter's sizes: {}", sizes.changes_text());
    }
    let correct = result.as_ref().is_some_and(|r| r.correct);
    let met = device != Device::Cpu || (correct && wall <= BY_HAND_TARGET_S);
    if device == Device::Cpu {
        println!(
            "  target (CPU): a correct verdict within {BY_HAND_TARGET_S:.0} s: {}",
            if met { "met" } else { "MISSED" }
        );
    }
    Ok((met, wall))
}

/// A session's sequence of candidate evaluations on one warm evaluator: whether every
/// verdict is correct (and the CPU target met), and the median warm candidate's wall.
async fn session(
    args: &FastLoopArgs,
    config: &Config,
    evaluator: &Evaluator,
    device: Device,
) -> Result<(bool, f64)> {
    // A session starts its device's server while the first candidate is written.
    evaluator.prepare(device).await;
    println!(
        "session: {} candidate evaluations, one warm evaluator, {:.1} s from a verdict to the next request (the model writing it)",
        args.candidates.max(1),
        args.answer_gap_s.max(0.0)
    );
    println!(
        "{:>9} {:>8} {:>13} {:>18}  verdict",
        "candidate", "wall s", "correctness s", "beyond correctness"
    );
    let mut candidates = Vec::new();
    for i in 0..args.candidates.max(1) {
        if i > 0 && args.answer_gap_s > 0.0 {
            tokio::time::sleep(std::time::Duration::from_secs_f64(args.answer_gap_s)).await;
        }
        let mut request = EvalRequest::new(&args.task, &args.kernel, device, config.eval.clone());
        request.session_candidate = true;
        let started = Instant::now();
        let result = evaluator
            .evaluate(request, CancellationToken::new(), None)
            .await?;
        let candidate = Candidate {
            wall_s: started.elapsed().as_secs_f64(),
            correctness_s: result.phases_s.get("correctness").copied().unwrap_or(0.0),
            result,
        };
        println!(
            "{:>9} {:>8.2} {:>13.2} {:>18.2}  {}",
            i + 1,
            candidate.wall_s,
            candidate.correctness_s,
            candidate.beyond_correctness_s(),
            if candidate.result.correct {
                "correct".to_string()
            } else {
                candidate.result.summary.clone()
            }
        );
        candidates.push(candidate);
    }
    if let Some(sizes) = candidates
        .first()
        .and_then(|c| c.result.interpreter_sizes.as_ref())
    {
        println!("  at the interpreter's sizes: {}", sizes.changes_text());
    }
    // The first candidate pays for what a session computes once (the server's warm-up);
    // the loop's steady cost is the rest's.
    let steady: Vec<&Candidate> = candidates.iter().skip(1).collect();
    let steady = if steady.is_empty() {
        candidates.iter().collect()
    } else {
        steady
    };
    let beyond = median(
        &steady
            .iter()
            .map(|c| c.beyond_correctness_s())
            .collect::<Vec<_>>(),
    );
    let warm_s = median(&steady.iter().map(|c| c.wall_s).collect::<Vec<_>>());
    println!(
        "median (candidates 2..): wall {warm_s:.2} s, correctness {:.2} s, beyond correctness {beyond:.2} s",
        median(&steady.iter().map(|c| c.correctness_s).collect::<Vec<_>>()),
    );
    let results: Vec<&EvalResult> = steady.iter().map(|c| &c.result).collect();
    println!("  phases (s, median): {}", phases_line(&results, 0.0));
    let all_correct = candidates.iter().all(|c| c.result.correct);
    let met = all_correct && (device != Device::Cpu || beyond <= BEYOND_CORRECTNESS_TARGET_S);
    if device == Device::Cpu {
        println!(
            "  target (CPU): at most {BEYOND_CORRECTNESS_TARGET_S:.0} s a candidate beyond its correctness trials: {}",
            if met { "met" } else { "MISSED" }
        );
    }
    Ok((met, warm_s))
}
