//! The torch.compile baseline off the first verdict's critical path (issue 38): a session's
//! task check leaves it out (`warmup_plan::plan`), and the run measures it as it starts,
//! with a task check of its own queued on the device while the first answer is written. The
//! harness's server keeps the figures (per task, inputs, device and mode), so the first
//! candidate's evaluation, queued on that device after it, finds them cached: its verdict
//! waits for torch.compile only where the model answered faster than torch.compile ran, and
//! every verdict shows the same baseline. On several devices the first candidate may go to
//! another one and measure it there itself, as any evaluation does without a cached figure.

use std::path::Path;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ports::EvalPort;
use super::runner::Inner;
use super::warmup_plan::BaselineWarmup;
use crate::config::EvalConfig;
use crate::eval::{Device, EvalError, EvalRequest};
use crate::protocol::{CompileFigures, LogLevel};

/// What measuring the torch.compile baseline by a task check of its own came to.
#[derive(Debug)]
pub enum CompileMeasurement {
    /// Its figures, or why the task has none (`CompileFigures::error`); the judge cached
    /// them (with `[eval] baseline_cache`).
    Figures(CompileFigures),
    /// No figure: why (the task check's summary, or why the evaluator gave no result).
    Failed(String),
    /// Cancelled before it ended.
    Cancelled,
}

/// The torch.compile baseline of `task` on `device`, measured by a reference-only request
/// (a task check with `settings`; the judge caches the figure): a session's warm-up, and
/// one-shot `kforge eval` after its verdict (`launch::evaluate::compile_after_verdict`).
/// `session_candidate`: candidates of a session follow, whose next judge may start after it.
pub async fn measure_compile(
    evaluator: &dyn EvalPort,
    task: &Path,
    device: Device,
    settings: EvalConfig,
    session_candidate: bool,
    cancel: CancellationToken,
) -> CompileMeasurement {
    let mut request = EvalRequest::task_check(task, device, settings);
    request.session_candidate = session_candidate;
    let outcome = evaluator.evaluate(request, cancel.clone(), None).await;
    if cancel.is_cancelled() {
        return CompileMeasurement::Cancelled;
    }
    match outcome {
        Ok(result) => match result.timing.and_then(|t| t.compile) {
            Some(figures) => CompileMeasurement::Figures(figures),
            None => CompileMeasurement::Failed(result.summary),
        },
        Err(EvalError::Cancelled) => CompileMeasurement::Cancelled,
        Err(e) => CompileMeasurement::Failed(e.to_string()),
    }
}

/// A warm-up under way.
pub(super) struct Running {
    cancel: CancellationToken,
    _task: JoinHandle<()>,
}

impl Running {
    /// The run is over: its evaluation, if still under way, is cancelled (the evaluator ends
    /// the job on the server) and nothing more is logged.
    pub(super) fn end(self) {
        self.cancel.cancel();
    }
}

impl Inner {
    /// Starts the warm-up the run was given (none for `Nothing`); `Running::end` (or the run's
    /// stop) cancels it.
    pub(super) fn start_warmup(self: Arc<Self>, warmup: BaselineWarmup) -> Option<Running> {
        let inner = self;
        let BaselineWarmup::Compile { device } = warmup else {
            return None;
        };
        inner.log(
            LogLevel::Info,
            "baseline",
            format!(
                "timing the reference under torch.compile on {device} while the first answer is written"
            ),
        );
        let cancel = inner.control.stop.child_token();
        let ended = cancel.clone();
        let task = tokio::spawn(async move {
            let task = inner.session.file("task.py");
            // The first candidate's judge starts after it, while the model still writes.
            let measured = measure_compile(
                inner.evaluator.as_ref(),
                &task,
                device,
                inner.eval.clone(),
                true,
                ended,
            )
            .await;
            match measured {
                CompileMeasurement::Cancelled => {}
                CompileMeasurement::Figures(figures) => inner.log(
                    LogLevel::Info,
                    "baseline",
                    format!(
                        "torch.compile baseline: {}; the verdicts show it from now on",
                        figures.describe()
                    ),
                ),
                CompileMeasurement::Failed(why) => inner.log(
                    LogLevel::Warn,
                    "baseline",
                    format!(
                        "the torch.compile baseline was not measured ahead ({why}): each evaluation measures it itself"
                    ),
                ),
            }
        });
        Some(Running {
            cancel,
            _task: task,
        })
    }
}
