//! One evaluation of a kernel against its task with the config's settings overridden by
//! the caller's: `kforge eval` and the MCP server's `eval` tool.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tokio_util::sync::CancellationToken;

use super::options::{CheckArgs, DeviceArgs};
use crate::config::{Config, EvalConfig, Executor};
use crate::engine::warmup::{self, CompileMeasurement};
use crate::engine::warmup_plan::{self, BaselineWarmup};
use crate::eval::{self, EvalError, EvalProgress, EvalRequest, Evaluator};
use crate::protocol::{CompileDeferral, CompileSource, EvalResult, Timing};
use crate::shapes::ShapeCheck;
use crate::task::TaskFile;

#[derive(clap::Args, Debug, Default)]
pub struct EvalArgs {
    /// KernelBench task file (`class Model`, `get_inputs()`, `get_init_inputs()`).
    pub task: PathBuf,
    /// Candidate kernel file (`class ModelNew` launching @triton.jit kernels).
    pub kernel: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub check: CheckArgs,
    /// Most timed runs per model (a time budget may use fewer).
    #[arg(long)]
    pub timing_trials: Option<u32>,
    /// Check correctness only.
    #[arg(long)]
    pub no_timing: bool,
    /// Collect Nsight Compute metrics for a correct kernel (GPU only).
    #[arg(long)]
    pub profile: bool,
    /// Base seed for the model's parameters and the inputs of every trial (default 42,
    /// `[eval] seed`): the same seed reproduces the same inputs.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Fail kernels that call PyTorch compute ops in forward (default: warn).
    #[arg(long)]
    pub reject_torch_ops: bool,
    /// Measure the reference again instead of using a cached baseline.
    #[arg(long)]
    pub fresh_baseline: bool,
    /// `fork` from a warm server (default) or `spawn` a fresh interpreter per evaluation.
    #[arg(long, value_parser = ["fork", "spawn"])]
    pub executor: Option<String>,
    /// Print the full result as JSON (schema: docs/eval-result.md).
    #[arg(long)]
    pub json: bool,
    /// After a correct verdict, re-check the kernel for correctness on variants of the
    /// task's size constants, each with a fresh seed (docs/eval-result.md, "Unseen shapes").
    #[arg(long)]
    pub shapes: bool,
    /// On the CPU, run the task at its own sizes (default: sizes too large for Triton's
    /// interpreter are shrunk, and the verdict says to what; `[eval] interpreter_sizes`).
    #[arg(long)]
    pub task_sizes: bool,
    /// One of a sequence of candidates for the task (an MCP client's loop), not a one-off:
    /// the harness starts the next one's judge ahead (`[eval] start_ahead`).
    #[arg(skip)]
    pub session_candidate: bool,
    /// A one-shot `kforge eval`, whose verdict does not wait for the torch.compile figure
    /// (`defers_compile`): the caller measures it after the verdict (`compile_after_verdict`).
    #[arg(skip)]
    pub defer_compile: bool,
}

impl EvalArgs {
    /// The config's `[eval]` settings with these arguments applied.
    pub fn settings(&self, base: &EvalConfig) -> EvalConfig {
        let mut s = base.clone();
        self.check.apply(&mut s);
        if let Some(v) = self.timing_trials {
            s.timing_trials = v;
        }
        if let Some(v) = self.seed {
            s.seed = v;
        }
        if self.reject_torch_ops {
            s.reject_torch_ops = true;
        }
        if self.fresh_baseline {
            s.baseline_cache = false;
        }
        if self.task_sizes {
            s.interpreter_sizes = Some(crate::protocol::shapes::InterpreterSizePolicy::Task);
        }
        if let Some(e) = &self.executor {
            s.executor = if e == "spawn" {
                Executor::Spawn
            } else {
                Executor::Fork
            };
        }
        s
    }
}

/// What one evaluation of `kforge eval` (or the MCP server's `eval` tool) ended with.
pub enum EvalOutcome {
    /// A verdict, and where the full result was saved (when it could be).
    Done {
        result: Box<crate::protocol::EvalResult>,
        saved: Option<PathBuf>,
        /// The unseen-shapes re-check, when asked for (`--shapes`).
        shapes: Option<ShapeCheck>,
        /// Where it ran.
        device: eval::Device,
    },
    Cancelled,
}

/// Checks the arguments (trials, the task file, the kernel file) before the evaluator starts,
/// so that what is wrong with them is said first.
pub fn check_inputs(args: &EvalArgs, settings: &EvalConfig) -> Result<()> {
    if settings.trials == 0 {
        bail!("--trials must be at least 1");
    }
    TaskFile::load(&args.task)?;
    // Read now, so the reason a kernel cannot be read (missing, a directory, no permission)
    // is said before the evaluator starts.
    match std::fs::metadata(&args.kernel) {
        Ok(m) if m.is_dir() => bail!(
            "cannot read the kernel file {}: it is a directory",
            args.kernel.display()
        ),
        _ => {
            std::fs::read(&args.kernel).with_context(|| {
                format!("cannot read the kernel file {}", args.kernel.display())
            })?;
        }
    }
    Ok(())
}

/// Evaluates `args.kernel` against `args.task` on `evaluator` with the config's settings
/// overridden by the arguments, and saves the full result under the logs dir.
pub async fn evaluate(
    args: &EvalArgs,
    config: &Config,
    evaluator: &Evaluator,
    cancel: CancellationToken,
    progress: Option<tokio::sync::mpsc::UnboundedSender<EvalProgress>>,
) -> Result<EvalOutcome> {
    let settings = args.settings(&config.eval);
    check_inputs(args, &settings)?;
    let device = args.device.pick(evaluator).await?;
    let mut request = EvalRequest::new(&args.task, &args.kernel, device, settings.clone());
    request.timing = !args.no_timing;
    request.profile = args.profile;
    request.session_candidate = args.session_candidate;
    if args.defer_compile && defers_compile(&settings, device, request.timing) {
        request.compile_source = CompileSource::CacheOnly;
    }
    let result = match evaluator.evaluate(request, cancel.clone(), progress).await {
        Ok(r) => r,
        Err(EvalError::Cancelled) => return Ok(EvalOutcome::Cancelled),
        Err(e) => return Err(e.into()),
    };
    let saved = save_result(&result)
        .map_err(|e| eprintln!("kforge: cannot save the eval result: {e:#}"))
        .ok();
    let shapes = if args.shapes {
        match check_shapes(args, &result, device, &settings, evaluator, cancel).await {
            Ok(check) => Some(check),
            Err(EvalError::Cancelled) => return Ok(EvalOutcome::Cancelled),
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };
    Ok(EvalOutcome::Done {
        result: Box::new(result),
        saved,
        shapes,
        device,
    })
}

/// Whether a one-shot evaluation takes a cached torch.compile figure only, leaving one not
/// cached yet to be measured after its verdict (issue 38): on a GPU, timed, with the compile
/// baseline and the cache on, as a session's task check leaves it to the session's warm-up
/// (`warmup_plan::plan`). Elsewhere the evaluation is as it always was.
pub fn defers_compile(settings: &EvalConfig, device: eval::Device, timing: bool) -> bool {
    timing
        && matches!(
            warmup_plan::plan(settings, device).1,
            BaselineWarmup::Compile { .. }
        )
}

/// Whether `result`'s verdict left its torch.compile figure to be measured after it.
pub fn compile_pending(result: &EvalResult) -> bool {
    result
        .timing
        .as_ref()
        .is_some_and(|t| t.compile_deferred == Some(CompileDeferral::Pending))
}

/// What measuring a deferred torch.compile figure after the verdict came to.
#[derive(Debug)]
pub enum AfterVerdict {
    /// Measured (or why the task has none) and the verdict's timing re-scored against it.
    Rescored(Box<Timing>),
    /// Not had: why (the measurement failed, or the re-scoring).
    Failed(String),
    /// Interrupted (Ctrl-C).
    Cancelled,
}

/// The torch.compile figure a verdict deferred (`compile_pending`), measured now by a
/// reference-only request as a session's warm-up measures it (`warmup::measure_compile`:
/// cached for the evaluations that follow), and the verdict's timing re-scored against it by
/// the harness (`Evaluator::rescore`: the judge's own scoring).
pub async fn compile_after_verdict(
    args: &EvalArgs,
    config: &Config,
    evaluator: &Evaluator,
    device: eval::Device,
    result: &EvalResult,
    cancel: CancellationToken,
) -> AfterVerdict {
    let settings = args.settings(&config.eval);
    let Some(timing) = result.timing.as_ref() else {
        return AfterVerdict::Failed("the verdict has no timing to re-score".into());
    };
    // The re-scoring's server starts while the figure is measured.
    let (measured, _) = tokio::join!(
        warmup::measure_compile(
            evaluator,
            &args.task,
            device,
            settings.clone(),
            false,
            cancel
        ),
        evaluator.hello()
    );
    let figures = match measured {
        CompileMeasurement::Figures(figures) => figures,
        CompileMeasurement::Failed(why) => return AfterVerdict::Failed(why),
        CompileMeasurement::Cancelled => return AfterVerdict::Cancelled,
    };
    match evaluator
        .rescore(timing, Some(&figures), settings.baseline)
        .await
    {
        Ok(timing) => AfterVerdict::Rescored(Box::new(timing)),
        Err(e) => AfterVerdict::Failed(format!("cannot re-score the verdict: {e:#}")),
    }
}

/// `--shapes`: the kernel re-checked on the task's size variants (written to a temporary
/// directory), each evaluation correctness only with its own seed.
async fn check_shapes(
    args: &EvalArgs,
    result: &crate::protocol::EvalResult,
    device: eval::Device,
    settings: &EvalConfig,
    evaluator: &Evaluator,
    cancel: CancellationToken,
) -> Result<ShapeCheck, EvalError> {
    if !result.correct {
        return Ok(crate::shape_check::not_run(
            "the kernel is not correct on the task's own sizes".into(),
        ));
    }
    let source = match TaskFile::load(&args.task) {
        Ok(task) => task.source,
        Err(e) => return Ok(crate::shape_check::not_run(format!("{e:#}"))),
    };
    let dir = match tempfile::Builder::new().prefix("kforge-shapes-").tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            return Ok(crate::shape_check::not_run(format!(
                "cannot create a directory for the variants: {e}"
            )));
        }
    };
    crate::shape_check::check_kernel(
        &source,
        &args.kernel,
        dir.path(),
        device,
        settings,
        &|request| Box::pin(evaluator.evaluate(request, cancel.child_token(), None)),
    )
    .await
}

/// Keeps the full result (with its log) where the verdict can point to it.
fn save_result(result: &crate::protocol::EvalResult) -> Result<PathBuf> {
    let dir = crate::paths::logs_dir();
    std::fs::create_dir_all(&dir)?;
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let path = dir.join(format!("eval-{stamp}-{}.json", std::process::id()));
    save_result_at(&path, result)?;
    Ok(path)
}

/// Writes the full result at `path` (once saved, again when re-scored after the verdict).
pub fn save_result_at(path: &std::path::Path, result: &EvalResult) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(result)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::Device;

    #[test]
    fn only_a_timed_gpu_evaluation_with_the_compile_baseline_and_a_cache_defers_it() {
        let on = EvalConfig::default();
        assert!(on.compile_baseline && on.baseline_cache);
        assert!(defers_compile(&on, Device::Cuda(0), true));
        assert!(defers_compile(&on, Device::Cuda(3), true));
        assert!(
            !defers_compile(&on, Device::Cpu, true),
            "the CPU times nothing"
        );
        assert!(!defers_compile(&on, Device::Cuda(0), false), "--no-timing");
        let off = EvalConfig {
            compile_baseline: false,
            ..EvalConfig::default()
        };
        assert!(!defers_compile(&off, Device::Cuda(0), true));
        // --fresh-baseline: the figure is measured afresh by the evaluation itself.
        let fresh = EvalArgs {
            fresh_baseline: true,
            ..EvalArgs::default()
        }
        .settings(&on);
        assert!(!defers_compile(&fresh, Device::Cuda(0), true));
    }

    #[test]
    fn only_a_verdict_whose_figure_is_pending_measures_it_after() {
        let mut result = EvalResult::default();
        assert!(!compile_pending(&result), "no timing: nothing to re-score");
        result.timing = Some(Timing::default());
        assert!(
            !compile_pending(&result),
            "the figure was cached, or not asked for"
        );
        for (deferral, pending) in [
            (CompileDeferral::Pending, true),
            (CompileDeferral::AfterVerdict, false),
            (CompileDeferral::Failed, false),
        ] {
            result.timing.as_mut().unwrap().compile_deferred = Some(deferral);
            assert_eq!(compile_pending(&result), pending, "{deferral:?}");
        }
    }
}
