//! `kforge eval TASK KERNEL`: a thin user of the `Evaluator` (the evaluation itself is
//! `crate::launch::evaluate`).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::eval::verdict::{self, Style};
use crate::eval::{self, EvalProgress};
use crate::launch::evaluate::{
    AfterVerdict, EvalArgs, EvalOutcome, check_inputs, compile_after_verdict, compile_pending,
    evaluate, save_result_at,
};
use crate::protocol::{CompileAfterVerdict, CompileDeferral, EvalResult};
use crate::shapes::{self, ShapeCheck};

pub async fn run(mut args: EvalArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    // A one-shot: on a GPU its verdict does not wait for a torch.compile figure not cached
    // yet, measured after it (docs/eval-result.md, "The compile figure after the verdict").
    args.defer_compile = true;
    let config = Config::load(config_file)?;
    check_inputs(&args, &args.settings(&config.eval))?;
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let show_progress = std::io::stderr().is_terminal();
    let printer = tokio::spawn(async move {
        while let Some(p) = progress_rx.recv().await {
            if let (true, EvalProgress::Phase(phase)) = (show_progress, p) {
                eprint!("\r\x1b[K{phase}");
                let _ = std::io::stderr().flush();
            }
        }
        if show_progress {
            eprint!("\r\x1b[K");
        }
    });
    let outcome = evaluate(
        &args,
        &config,
        &evaluator,
        cancel.clone(),
        Some(progress_tx),
    )
    .await;
    let _ = printer.await;
    let (mut result, saved, shapes, device) = match outcome {
        Ok(EvalOutcome::Done {
            result,
            saved,
            shapes,
            device,
        }) => (result, saved, shapes, device),
        Ok(EvalOutcome::Cancelled) => {
            evaluator.shutdown().await;
            eprintln!("kforge: evaluation cancelled");
            return Ok(ExitCode::from(130));
        }
        Err(e) => {
            evaluator.shutdown().await;
            return Err(e);
        }
    };
    // The verdict's: whatever happens to the compile figure after it.
    let code = exit_code(&result, shapes.as_ref());
    let style = Style::detect(std::io::stdout().is_terminal());
    if !args.json {
        print!("{}", verdict::render(&result, saved.as_deref(), style));
        if let Some(check) = &shapes {
            print!("{}", shapes::describe(check));
        }
        let _ = std::io::stdout().flush();
    }
    let after = if compile_pending(&result) {
        if args.json {
            eprintln!(
                "kforge: verdict in ({}); measuring the torch.compile baseline after it",
                result.summary
            );
        }
        let verdict_at = Instant::now();
        let after =
            compile_after_verdict(&args, &config, &evaluator, device, &result, cancel).await;
        Some(settle(
            &mut result,
            after,
            verdict_at.elapsed().as_secs_f64(),
        ))
    } else {
        None
    };
    evaluator.shutdown().await;
    if let Some(after) = &after {
        match &after.why {
            None if !args.json => print!(
                "{}",
                verdict::render_compile_after_verdict(
                    result
                        .timing
                        .as_ref()
                        .expect("a re-scored verdict has its timing"),
                    style
                )
            ),
            None => {}
            Some(why) => eprintln!("kforge: {}", not_measured_note(why)),
        }
        if let Some(path) = &saved
            && let Err(e) = save_result_at(path, &result)
        {
            eprintln!(
                "kforge: cannot save the re-scored eval result to {}: {e:#}",
                path.display()
            );
        }
    }
    if args.json {
        let mut json = serde_json::to_value(&result)?;
        if let Some(object) = json.as_object_mut() {
            if let Some(check) = &shapes {
                object.insert("shapes".into(), serde_json::to_value(check)?);
            }
            if let Some(after) = &after {
                object.insert("compile_after_verdict".into(), serde_json::to_value(after)?);
            }
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(ExitCode::from(code))
}

/// The verdict's timing once the deferred figure was measured (re-scored), or marked
/// `failed` where it was not; what the JSON document says of it.
fn settle(result: &mut EvalResult, after: AfterVerdict, seconds: f64) -> CompileAfterVerdict {
    let why = match after {
        AfterVerdict::Rescored(timing) => {
            result.timing = Some(*timing);
            None
        }
        AfterVerdict::Failed(why) => Some(why),
        AfterVerdict::Cancelled => Some("interrupted".to_string()),
    };
    if why.is_some()
        && let Some(timing) = result.timing.as_mut()
    {
        timing.compile_deferred = Some(CompileDeferral::Failed);
    }
    CompileAfterVerdict {
        outcome: if why.is_some() {
            CompileDeferral::Failed
        } else {
            CompileDeferral::AfterVerdict
        },
        after_verdict_s: seconds,
        why,
    }
}

/// What `kforge eval` says where the figure its verdict deferred was not had.
fn not_measured_note(why: &str) -> String {
    format!(
        "the torch.compile baseline was not measured after the verdict ({why}); the verdict above stands, scored against eager, and the next evaluation of this task measures it again"
    )
}

/// `kforge eval`'s exit code (docs/eval-result.md): 0 for a correct kernel whose unseen-shapes
/// check, when asked for, passes. A kernel shown wrong on an unseen shape is not a win, and
/// neither is one whose check did not run (`not_run`): it fails like a wrong kernel.
fn exit_code(result: &EvalResult, shapes: Option<&ShapeCheck>) -> u8 {
    if result.correct && shapes.is_none_or(ShapeCheck::passes) {
        0
    } else if result.is_task_fault() {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::shapes::ShapeVerdict;

    fn check(verdict: ShapeVerdict) -> ShapeCheck {
        ShapeCheck {
            verdict,
            original: Default::default(),
            kept: Default::default(),
            variants: Vec::new(),
            line: String::new(),
            family_seed: None,
        }
    }

    /// After the verdict: a re-scored timing replaces the verdict's; a failure or an
    /// interruption leaves it (against eager), marked `failed`, and the exit code is the
    /// verdict's either way.
    #[test]
    fn the_figure_after_the_verdict_rescores_it_or_leaves_it_standing() {
        use crate::protocol::{Baseline, Timing};
        let pending = || EvalResult {
            correct: true,
            timing: Some(Timing {
                meaningful: true,
                score: Some(1.2),
                compile_deferred: Some(CompileDeferral::Pending),
                baseline: Some(Baseline::Eager),
                ..Timing::default()
            }),
            ..EvalResult::default()
        };
        let mut result = pending();
        let rescored = Timing {
            meaningful: true,
            score: Some(1.2),
            score_vs_compile: Some(0.8),
            compile_deferred: Some(CompileDeferral::AfterVerdict),
            baseline: Some(Baseline::Compile),
            ..Timing::default()
        };
        let after = settle(
            &mut result,
            AfterVerdict::Rescored(Box::new(rescored)),
            14.5,
        );
        assert_eq!(
            after,
            CompileAfterVerdict {
                outcome: CompileDeferral::AfterVerdict,
                after_verdict_s: 14.5,
                why: None
            }
        );
        assert_eq!(result.score(), Some(0.8));
        assert_eq!(exit_code(&result, None), 0);
        assert_eq!(
            serde_json::to_value(&after).unwrap(),
            serde_json::json!({"outcome": "after_verdict", "after_verdict_s": 14.5, "why": null})
        );

        for (outcome, why) in [
            (
                AfterVerdict::Failed("the harness exited".into()),
                "the harness exited",
            ),
            (AfterVerdict::Cancelled, "interrupted"),
        ] {
            let mut result = pending();
            let after = settle(&mut result, outcome, 3.0);
            assert_eq!(after.outcome, CompileDeferral::Failed);
            assert_eq!(after.why.as_deref(), Some(why));
            let timing = result.timing.as_ref().unwrap();
            assert_eq!(timing.compile_deferred, Some(CompileDeferral::Failed));
            assert_eq!(result.score(), Some(1.2), "still against eager");
            assert_eq!(exit_code(&result, None), 0);
        }
        let note = not_measured_note("interrupted");
        assert!(
            note.contains("(interrupted)") && note.contains("the verdict above stands"),
            "{note}"
        );
    }

    #[test]
    fn a_shape_check_that_did_not_run_is_never_a_pass() {
        let correct = EvalResult {
            correct: true,
            ..EvalResult::default()
        };
        assert_eq!(exit_code(&correct, None), 0);
        let passing = [
            ShapeVerdict::Generalizes {
                passed: 5,
                checked: 5,
            },
            ShapeVerdict::NotVariable { why: "none".into() },
        ];
        for verdict in passing {
            assert_eq!(exit_code(&correct, Some(&check(verdict))), 0);
        }
        let failing = [
            ShapeVerdict::FailsOn {
                failed: 1,
                checked: 5,
            },
            // Every variant skipped: a kernel that forged "out of memory before I was loaded"
            // on every variant got here, and exit code 0.
            ShapeVerdict::NotRun {
                why: "every variant was skipped".into(),
            },
        ];
        for verdict in failing {
            assert_eq!(exit_code(&correct, Some(&check(verdict))), 1);
        }
    }
}
