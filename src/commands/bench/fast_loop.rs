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
use crate::protocol::{CompileAfterVerdict, CompileDeferral, EvalResult};

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
    // The by-hand run's wall to its verdict (its torch.compile figure may follow it).
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
/// the CPU target is met (always on a GPU), and its wall to the verdict (what the issue's
/// one-shot target compares with KernelBench's).
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
    let run = ByHand::read(started.elapsed().as_secs_f64(), &output.stdout);
    let verdict = match &run.result {
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
    println!(
        "by hand: `kforge eval TASK KERNEL` {}, {verdict}",
        run.walls()
    );
    if let Some(result) = &run.result {
        // Where a one-shot's seconds go (its server's start, the compile baseline...).
        println!("  phases (s): {}", phases_line(&[result], 0.05));
    }
    if let Some(sizes) = run
        .result
        .as_ref()
        .and_then(|r| r.interpreter_sizes.as_ref())
    {
        println!("  at the interpreter's sizes: {}", sizes.changes_text());
    }
    let correct = run.result.as_ref().is_some_and(|r| r.correct);
    let met = device != Device::Cpu || (correct && run.verdict_s <= BY_HAND_TARGET_S);
    if device == Device::Cpu {
        println!(
            "  target (CPU): a correct verdict within {BY_HAND_TARGET_S:.0} s: {}",
            if met { "met" } else { "MISSED" }
        );
    }
    Ok((met, run.verdict_s))
}

/// What a by-hand `kforge eval --json` came to: its result, and its walls to the verdict and
/// to the end (they differ where the torch.compile figure was measured after the verdict).
struct ByHand {
    result: Option<EvalResult>,
    /// The document's `compile_after_verdict`, where the verdict deferred the figure.
    after: Option<CompileAfterVerdict>,
    verdict_s: f64,
    end_s: f64,
}

impl ByHand {
    /// `stdout`, the one JSON document, read with the process's wall: the verdict's wall is
    /// that wall less the seconds the document says followed the verdict.
    fn read(wall_s: f64, stdout: &[u8]) -> ByHand {
        let document: Option<serde_json::Value> = serde_json::from_slice(stdout).ok();
        let result = document
            .as_ref()
            .and_then(|d| serde_json::from_value(d.clone()).ok());
        let after: Option<CompileAfterVerdict> = document
            .as_ref()
            .and_then(|d| d.get("compile_after_verdict"))
            .and_then(|a| serde_json::from_value(a.clone()).ok());
        let verdict_s = after
            .as_ref()
            .map_or(wall_s, |a| (wall_s - a.after_verdict_s).max(0.0));
        ByHand {
            result,
            after,
            verdict_s,
            end_s: wall_s,
        }
    }

    /// `12.3 s wall`, or `3.1 s wall to the verdict, 17.9 s to the end (torch.compile
    /// measured after the verdict)`.
    fn walls(&self) -> String {
        match &self.after {
            None => format!("{:.1} s wall", self.end_s),
            Some(after) => format!(
                "{:.1} s wall to the verdict, {:.1} s to the end (torch.compile {} after the verdict{})",
                self.verdict_s,
                self.end_s,
                match after.outcome {
                    CompileDeferral::Failed => "not measured",
                    _ => "measured",
                },
                after
                    .why
                    .as_ref()
                    .map_or(String::new(), |why| format!(": {why}"))
            ),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn document(after: Option<serde_json::Value>) -> Vec<u8> {
        let mut json = serde_json::to_value(EvalResult {
            correct: true,
            summary: "correct".into(),
            ..EvalResult::default()
        })
        .unwrap();
        if let Some(after) = after {
            json["compile_after_verdict"] = after;
        }
        serde_json::to_vec_pretty(&json).unwrap()
    }

    /// The verdict's wall is the process's less the seconds its document says followed the
    /// verdict (the torch.compile figure measured after it); without them the two are one.
    #[test]
    fn the_wall_to_the_verdict_leaves_out_the_compile_figure_measured_after_it() {
        let later = ByHand::read(
            19.0,
            &document(Some(serde_json::json!({
                "outcome": "after_verdict", "after_verdict_s": 14.5, "why": null
            }))),
        );
        assert!(later.result.as_ref().is_some_and(|r| r.correct));
        assert!((later.verdict_s - 4.5).abs() < 1e-9, "{}", later.verdict_s);
        assert_eq!(later.end_s, 19.0);
        assert_eq!(
            later.walls(),
            "4.5 s wall to the verdict, 19.0 s to the end (torch.compile measured after the verdict)"
        );

        let failed = ByHand::read(
            6.0,
            &document(Some(serde_json::json!({
                "outcome": "failed", "after_verdict_s": 2.0, "why": "interrupted"
            }))),
        );
        assert_eq!(
            failed.walls(),
            "4.0 s wall to the verdict, 6.0 s to the end (torch.compile not measured after the verdict: interrupted)"
        );

        let plain = ByHand::read(7.31, &document(None));
        assert_eq!((plain.verdict_s, plain.end_s), (7.31, 7.31));
        assert_eq!(plain.walls(), "7.3 s wall");

        let nothing = ByHand::read(3.0, b"Traceback: not a document");
        assert!(nothing.result.is_none() && nothing.after.is_none());
        assert_eq!(nothing.verdict_s, 3.0);
    }
}
