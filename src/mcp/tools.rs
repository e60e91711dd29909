//! The tools `kforge mcp` serves: `eval` and `task_check` through the same evaluator,
//! sandbox and config as `kforge eval`, and read-only views of a session.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::eval::verdict::{self, Style};
use crate::eval::{self, Device, EvalProgress, Evaluator};
use crate::launch::evaluate::{EvalArgs, EvalOutcome};
use crate::launch::options::{CheckArgs, DeviceArgs, parse_precision};
use crate::launch::{TaskCheck, check_task};
use crate::protocol::PrecisionPolicy;

pub use super::catalog::Tool;
use super::progress::{EvalPlan, ProgressCounter, ProgressUpdate};
use super::result::params;
pub use super::result::{ToolOutcome, ToolResult};
use super::session_tools::{candidate_code, session_summary};

/// A task or a kernel: a file, or its text.
struct Source {
    path: PathBuf,
    /// Holds the file written from the text for as long as the evaluation needs it.
    _dir: Option<tempfile::TempDir>,
}

fn source(path: Option<String>, text: Option<String>, what: &str, file: &str) -> Result<Source> {
    match (path, text) {
        (Some(path), None) => Ok(Source {
            path: PathBuf::from(path),
            _dir: None,
        }),
        (None, Some(text)) => {
            let dir = tempfile::Builder::new().prefix("kforge-mcp-").tempdir()?;
            let path = dir.path().join(file);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(Source {
                path,
                _dir: Some(dir),
            })
        }
        (Some(_), Some(_)) => bail!("give either `{what}` or `{what}_source`, not both"),
        (None, None) => bail!("missing `{what}` (a path) or `{what}_source` (its text)"),
    }
}

/// The `device` argument: a string (`cpu`, `cuda`, `cuda:N`, `N`: the schema's form) or an
/// integer N.
fn device_arg(device: Option<Value>) -> Result<DeviceArgs> {
    let unknown = |shown: &str| {
        anyhow!("unknown device {shown}: \"cpu\", \"cuda\", \"cuda:N\" or a CUDA device index")
    };
    let device = match device {
        None | Some(Value::Null) => return Ok(DeviceArgs::default()),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Device::Cuda)
            .ok_or_else(|| unknown(&n.to_string()))?,
        Some(Value::String(name)) => Device::parse(&name)
            .or_else(|| name.trim().parse().ok().map(Device::Cuda))
            .ok_or_else(|| unknown(&format!("`{name}`")))?,
        Some(other) => return Err(unknown(&other.to_string())),
    };
    Ok(device_args(device))
}

fn precision(name: Option<String>) -> Result<Option<PrecisionPolicy>> {
    name.map(|p| parse_precision(&p).map_err(|e| anyhow!(e)))
        .transpose()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalParams {
    task: Option<String>,
    task_source: Option<String>,
    kernel: Option<String>,
    kernel_source: Option<String>,
    device: Option<Value>,
    precision: Option<String>,
    trials: Option<u32>,
    timing: Option<bool>,
    seed: Option<u64>,
    task_sizes: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskCheckParams {
    task: Option<String>,
    task_source: Option<String>,
    device: Option<Value>,
    precision: Option<String>,
}

/// Device arguments naming exactly `device`.
fn device_args(device: Device) -> DeviceArgs {
    match device {
        Device::Cpu => DeviceArgs {
            device: None,
            cpu: true,
        },
        Device::Cuda(n) => DeviceArgs {
            device: Some(n),
            cpu: false,
        },
    }
}

/// A sender of an evaluation's progress whose phases reach `sink` numbered by `counter`;
/// it ends when the sender is dropped (the evaluation is over).
fn forward_phases(
    sink: UnboundedSender<ProgressUpdate>,
    mut counter: ProgressCounter,
) -> UnboundedSender<EvalProgress> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let message = match p {
                EvalProgress::Phase(phase) => phase,
                EvalProgress::Queued { ahead } if ahead > 0 => {
                    format!("waiting for the device: {ahead} evaluation(s) ahead")
                }
                EvalProgress::Queued { .. } | EvalProgress::Started => continue,
            };
            let update = ProgressUpdate {
                progress: counter.next(&message),
                total: counter.total(),
                message,
            };
            if sink.send(update).is_err() {
                break;
            }
        }
    });
    tx
}

/// What the tools share: the config and one evaluator, started on first use.
pub struct Tools {
    config: Config,
    evaluator: OnceCell<Evaluator>,
}

impl Tools {
    pub fn new(config: Config) -> Tools {
        Tools {
            config,
            evaluator: OnceCell::new(),
        }
    }

    async fn evaluator(&self) -> Result<&Evaluator> {
        self.evaluator
            .get_or_try_init(|| async {
                let config = self.config.clone();
                tokio::task::spawn_blocking(move || {
                    eval::evaluator_from_config(&config, &crate::paths::cache_dir(), &mut |line| {
                        eprintln!("kforge: {line}")
                    })
                })
                .await?
            })
            .await
    }

    /// Stops the evaluator's servers, if any started.
    pub async fn shutdown(&self) {
        if let Some(evaluator) = self.evaluator.get() {
            evaluator.shutdown().await;
        }
    }

    /// Runs one tool. Wrong arguments and failures are results with `isError`. An
    /// evaluation's phases go to `progress` when given.
    pub async fn call(
        &self,
        tool: Tool,
        arguments: Value,
        cancel: CancellationToken,
        progress: Option<UnboundedSender<ProgressUpdate>>,
    ) -> ToolOutcome {
        let outcome = match tool {
            Tool::Eval => self.eval(arguments, cancel, progress).await,
            Tool::TaskCheck => self.task_check(arguments).await.map(ToolOutcome::Done),
            Tool::SessionSummary => session_summary(arguments).map(ToolOutcome::Done),
            Tool::CandidateCode => candidate_code(arguments).map(ToolOutcome::Done),
        };
        outcome.unwrap_or_else(|e| ToolOutcome::Done(ToolResult::error(&e)))
    }

    async fn eval(
        &self,
        arguments: Value,
        cancel: CancellationToken,
        progress: Option<UnboundedSender<ProgressUpdate>>,
    ) -> Result<ToolOutcome> {
        let p: EvalParams = params(arguments)?;
        let task = source(p.task, p.task_source, "task", "task.py")?;
        let kernel = source(p.kernel, p.kernel_source, "kernel", "kernel.py")?;
        let mut args = EvalArgs {
            task: task.path.clone(),
            kernel: kernel.path.clone(),
            device: device_arg(p.device)?,
            check: CheckArgs {
                precision: precision(p.precision)?,
                trials: p.trials,
                ..CheckArgs::default()
            },
            no_timing: p.timing == Some(false),
            seed: p.seed,
            task_sizes: p.task_sizes == Some(true),
            // A client evaluates candidate after candidate: the next one's judge starts ahead.
            session_candidate: true,
            ..EvalArgs::default()
        };
        let evaluator = self.evaluator().await?;
        // The device first, so that the progress plan knows whether there will be timing.
        let device = args.device.pick(evaluator).await?;
        args.device = device_args(device);
        let progress = progress.map(|sink| {
            let timed = device != Device::Cpu && !args.no_timing;
            let plan = EvalPlan::new(&args.settings(&self.config.eval), timed);
            forward_phases(sink, ProgressCounter::new(plan))
        });
        let outcome =
            crate::launch::evaluate::evaluate(&args, &self.config, evaluator, cancel, progress)
                .await?;
        Ok(match outcome {
            EvalOutcome::Done { result, saved, .. } => ToolOutcome::Done(ToolResult::ok(
                verdict::render(&result, saved.as_deref(), Style::plain()),
                serde_json::to_value(&*result)?,
            )),
            EvalOutcome::Cancelled => ToolOutcome::Cancelled,
        })
    }

    async fn task_check(&self, arguments: Value) -> Result<ToolResult> {
        let p: TaskCheckParams = params(arguments)?;
        let task = source(p.task, p.task_source, "task", "task.py")?;
        let task_file = crate::task::TaskFile::load(&task.path)?;
        let mut settings = self.config.eval.clone();
        CheckArgs {
            precision: precision(p.precision)?,
            ..CheckArgs::default()
        }
        .apply(&mut settings);
        let device_args = device_arg(p.device)?;
        let evaluator = self.evaluator().await?;
        let device: Device = device_args.pick(evaluator).await?;
        let check = check_task(evaluator, &task.path, device, &settings).await;
        let status = match &check {
            TaskCheck::Ready(..) => "ready",
            TaskCheck::Refused(_) => "refused",
            TaskCheck::EvaluatorFailed(_) => "evaluator_failed",
        };
        let line = check.line(&task_file.name, device);
        Ok(ToolResult {
            structured: Some(json!({
                "task": task_file.name,
                "device": device,
                "status": status,
                "ready": check.is_ready(),
                "line": line,
            })),
            text: line,
            is_error: matches!(check, TaskCheck::EvaluatorFailed(_)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_arguments() {
        let cpu = device_arg(Some(json!("cpu"))).unwrap();
        assert!(cpu.cpu && cpu.device.is_none());
        let one = device_arg(Some(json!(1))).unwrap();
        assert_eq!((one.cpu, one.device), (false, Some(1)));
        assert_eq!(device_arg(Some(json!("cuda:2"))).unwrap().device, Some(2));
        assert_eq!(device_arg(Some(json!("3"))).unwrap().device, Some(3));
        let none = device_arg(None).unwrap();
        assert_eq!((none.cpu, none.device), (false, None));
        for bad in [json!("tpu"), json!(-1), json!(true), json!(["cpu"])] {
            let err = device_arg(Some(bad.clone())).err().unwrap().to_string();
            assert!(err.starts_with("unknown device"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_task_is_a_path_or_its_text_not_both_nor_neither() {
        let s = source(None, Some("x = 1\n".into()), "task", "task.py").unwrap();
        assert_eq!(std::fs::read_to_string(&s.path).unwrap(), "x = 1\n");
        let err = source(Some("a".into()), Some("b".into()), "task", "task.py");
        assert!(err.is_err());
        let err = source(None, None, "kernel", "kernel.py").err().unwrap();
        assert!(err.to_string().contains("missing `kernel`"), "{err}");
    }

    #[test]
    fn unknown_arguments_are_refused() {
        let err = params::<TaskCheckParams>(json!({"task": "t", "extra": 1}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("invalid arguments"), "{err}");
        assert!(params::<EvalParams>(Value::Null).is_ok());
    }
}
