//! `kforge eval TASK KERNEL`: a thin user of the `Evaluator` (the evaluation itself is
//! `crate::launch::evaluate`).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::eval::verdict::{self, Style};
use crate::eval::{self, EvalProgress};
use crate::launch::evaluate::{EvalArgs, EvalOutcome, check_inputs, evaluate};
use crate::protocol::EvalResult;
use crate::shapes::{self, ShapeCheck};

pub async fn run(args: EvalArgs, config_file: Option<&Path>) -> Result<ExitCode> {
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
    let outcome = evaluate(&args, &config, &evaluator, cancel, Some(progress_tx)).await;
    let _ = printer.await;
    evaluator.shutdown().await;
    let (result, saved, shapes) = match outcome? {
        EvalOutcome::Done {
            result,
            saved,
            shapes,
        } => (result, saved, shapes),
        EvalOutcome::Cancelled => {
            eprintln!("kforge: evaluation cancelled");
            return Ok(ExitCode::from(130));
        }
    };

    if args.json {
        let mut json = serde_json::to_value(&result)?;
        if let (Some(check), Some(object)) = (&shapes, json.as_object_mut()) {
            object.insert("shapes".into(), serde_json::to_value(check)?);
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let style = Style::detect(std::io::stdout().is_terminal());
        print!("{}", verdict::render(&result, saved.as_deref(), style));
        if let Some(check) = &shapes {
            print!("{}", shapes::describe(check));
        }
    }
    Ok(ExitCode::from(exit_code(&result, shapes.as_ref())))
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
