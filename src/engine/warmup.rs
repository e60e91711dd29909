//! The torch.compile baseline off the first verdict's critical path (issue 38): a session's
//! task check leaves it out (`warmup_plan::plan`), and the run measures it as it starts,
//! with a task check of its own queued on the device while the first answer is written. The
//! harness's server keeps the figures (per task, inputs, device and mode), so the first
//! candidate's evaluation, queued on that device after it, finds them cached: its verdict
//! waits for torch.compile only where the model answered faster than torch.compile ran, and
//! every verdict shows the same baseline. On several devices the first candidate may go to
//! another one and measure it there itself, as any evaluation does without a cached figure.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::runner::Inner;
use super::warmup_plan::BaselineWarmup;
use crate::eval::EvalRequest;
use crate::protocol::LogLevel;

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
        let mut request =
            EvalRequest::task_check(inner.session.file("task.py"), device, inner.eval.clone());
        // The first candidate's judge starts after it, while the model still writes.
        request.session_candidate = true;
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
            let outcome = inner.evaluator.evaluate(request, ended.clone(), None).await;
            if ended.is_cancelled() {
                return;
            }
            let compiled = outcome
                .as_ref()
                .ok()
                .and_then(|r| r.timing.as_ref()?.compile.as_ref());
            match compiled {
                Some(figures) => inner.log(
                    LogLevel::Info,
                    "baseline",
                    format!(
                        "torch.compile baseline: {}; the verdicts show it from now on",
                        figures.describe()
                    ),
                ),
                None => {
                    let why = match &outcome {
                        Ok(result) => result.summary.clone(),
                        Err(e) => e.to_string(),
                    };
                    inner.log(
                        LogLevel::Warn,
                        "baseline",
                        format!(
                            "the torch.compile baseline was not measured ahead ({why}): each evaluation measures it itself"
                        ),
                    );
                }
            }
        });
        Some(Running {
            cancel,
            _task: task,
        })
    }
}
