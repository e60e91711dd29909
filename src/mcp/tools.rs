//! The tools `kforge mcp` serves: `eval` and `task_check` through the same evaluator,
//! sandbox and config as `kforge eval`, and read-only views of a session.

use std::path::{Path, PathBuf};

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
use crate::protocol::{CandidateId, PrecisionPolicy};
use crate::session::state::SessionState;
use crate::session::store::SessionDir;

/// The tools, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Eval,
    TaskCheck,
    SessionSummary,
    CandidateCode,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::Eval,
        Tool::TaskCheck,
        Tool::SessionSummary,
        Tool::CandidateCode,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Eval => "eval",
            Tool::TaskCheck => "task_check",
            Tool::SessionSummary => "session_summary",
            Tool::CandidateCode => "candidate_code",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    fn description(self) -> &'static str {
        match self {
            Tool::Eval => {
                "Evaluate a Triton kernel (`class ModelNew`) against a KernelBench task (`class Model`, \
                 `get_inputs()`, `get_init_inputs()`) in kforge's sandboxed evaluator, as `kforge eval` \
                 does: correctness over seeded trials, then (on a GPU) timing. Returns the verdict, the \
                 speedup score with its interval when timed, flags, and the audit line; the full result \
                 as structured content. A failing kernel is a verdict, not a tool error."
            }
            Tool::TaskCheck => {
                "Check that a KernelBench task runs in kforge's evaluator: its Model built, run on its \
                 inputs, its memory planned and (on a GPU) the reference timed."
            }
            Tool::SessionSummary => {
                "Read a kforge session directory (read-only): its task, state, candidates with status, \
                 score and interval, the best, and the LLM usage spent."
            }
            Tool::CandidateCode => {
                "Read the kernel source of one candidate of a kforge session (read-only)."
            }
        }
    }

    fn input_schema(self) -> Value {
        let task = json!({
            "task": {"type": "string", "description": "Path of the task file (relative to the server's working directory)."},
            "task_source": {"type": "string", "description": "The task file's text, instead of `task`."},
        });
        let device = json!({
            "device": {
                "description": "\"cpu\" (Triton's interpreter, correctness only) or a CUDA device index; default the first GPU, else the CPU.",
                "oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}],
            },
            "precision": {"type": "string", "enum": ["strict", "tf32", "pytorch"], "description": "Precision policy (default: the config's)."},
        });
        let session =
            json!({"session": {"type": "string", "description": "Path of the session directory."}});
        let mut properties = serde_json::Map::new();
        let mut add = |v: Value| {
            if let Value::Object(m) = v {
                properties.extend(m);
            }
        };
        match self {
            Tool::Eval => {
                add(task);
                add(json!({
                    "kernel": {"type": "string", "description": "Path of the kernel file."},
                    "kernel_source": {"type": "string", "description": "The kernel file's text, instead of `kernel`."},
                    "trials": {"type": "integer", "minimum": 1, "description": "Correctness trials (default: the config's)."},
                    "timing": {"type": "boolean", "description": "Time a correct kernel (default true; never on the CPU)."},
                    "seed": {"type": "integer", "minimum": 0, "description": "Base seed of parameters and inputs (default: the config's)."},
                }));
                add(device);
            }
            Tool::TaskCheck => {
                add(task);
                add(device);
            }
            Tool::SessionSummary => add(session),
            Tool::CandidateCode => {
                add(session);
                add(json!({"candidate": {
                    "description": "The candidate's id (a number, or `#N`).",
                    "oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}],
                }}));
            }
        }
        let required: &[&str] = match self {
            Tool::Eval | Tool::TaskCheck => &[],
            Tool::SessionSummary => &["session"],
            Tool::CandidateCode => &["session", "candidate"],
        };
        json!({"type": "object", "properties": properties, "required": required})
    }

    /// The tool as `tools/list` describes it.
    pub fn describe(self) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(),
            "inputSchema": self.input_schema(),
        })
    }
}

/// What a tool call gave: a result for the client (`isError` for a tool that could not do
/// its work), or nothing because the client cancelled it.
#[derive(Debug)]
pub enum ToolOutcome {
    Done(ToolResult),
    Cancelled,
}

/// A `tools/call` result.
#[derive(Debug)]
pub struct ToolResult {
    pub text: String,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl ToolResult {
    fn ok(text: String, structured: Value) -> ToolResult {
        ToolResult {
            text,
            structured: Some(structured),
            is_error: false,
        }
    }

    pub fn error(error: &anyhow::Error) -> ToolResult {
        ToolResult {
            text: format!("error: {error:#}"),
            structured: None,
            is_error: true,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut result = json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        });
        if let Some(s) = &self.structured {
            result["structuredContent"] = s.clone();
        }
        result
    }
}

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

#[derive(Deserialize)]
#[serde(untagged)]
enum DeviceArg {
    Index(u32),
    Name(String),
}

impl DeviceArg {
    fn args(device: Option<DeviceArg>) -> Result<DeviceArgs> {
        Ok(match device {
            None => DeviceArgs::default(),
            Some(DeviceArg::Index(n)) => DeviceArgs {
                device: Some(n),
                cpu: false,
            },
            Some(DeviceArg::Name(name)) => {
                // "cpu", "cuda", "cuda:N" as everywhere else, or a bare index.
                let device = Device::parse(&name)
                    .or_else(|| name.trim().parse().ok().map(Device::Cuda))
                    .ok_or_else(|| {
                        anyhow!("unknown device `{name}` (\"cpu\" or a CUDA device index)")
                    })?;
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
        })
    }
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
    device: Option<DeviceArg>,
    precision: Option<String>,
    trials: Option<u32>,
    timing: Option<bool>,
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskCheckParams {
    task: Option<String>,
    task_source: Option<String>,
    device: Option<DeviceArg>,
    precision: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionParams {
    session: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CandidateArg {
    Number(u32),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CandidateParams {
    session: String,
    candidate: CandidateArg,
}

fn params<T: for<'de> Deserialize<'de>>(arguments: Value) -> Result<T> {
    let arguments = if arguments.is_null() {
        json!({})
    } else {
        arguments
    };
    serde_json::from_value(arguments).map_err(|e| anyhow!("invalid arguments: {e}"))
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
        progress: Option<UnboundedSender<EvalProgress>>,
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
        progress: Option<UnboundedSender<EvalProgress>>,
    ) -> Result<ToolOutcome> {
        let p: EvalParams = params(arguments)?;
        let task = source(p.task, p.task_source, "task", "task.py")?;
        let kernel = source(p.kernel, p.kernel_source, "kernel", "kernel.py")?;
        let args = EvalArgs {
            task: task.path.clone(),
            kernel: kernel.path.clone(),
            device: DeviceArg::args(p.device)?,
            check: CheckArgs {
                precision: precision(p.precision)?,
                trials: p.trials,
                ..CheckArgs::default()
            },
            no_timing: p.timing == Some(false),
            seed: p.seed,
            ..EvalArgs::default()
        };
        let evaluator = self.evaluator().await?;
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
        let device_args = DeviceArg::args(p.device)?;
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

/// A session read from its events, never written to.
fn read_session(path: &str) -> Result<(SessionDir, SessionState)> {
    let dir = SessionDir::open(Path::new(path))?;
    let state = SessionState::from_records(&dir.read_events()?.records);
    Ok((dir, state))
}

fn session_summary(arguments: Value) -> Result<ToolResult> {
    let p: SessionParams = params(arguments)?;
    let (_, state) = read_session(&p.session)?;
    let summary = crate::report::summary_json(&state);
    let mut text = format!(
        "session {}: task {}, {}/{}, state {}\n",
        p.session,
        summary["task"].as_str().unwrap_or("?"),
        summary["provider"].as_str().unwrap_or("?"),
        summary["model"].as_str().unwrap_or("?"),
        summary["state"].as_str().unwrap_or("?"),
    );
    match state.best.and_then(|id| state.candidates.get(&id)) {
        Some(best) => text.push_str(&format!(
            "best: #{} {}\n",
            best.id,
            crate::report::speedup_text(best)
        )),
        None => text.push_str("best: none yet\n"),
    }
    for c in state.candidates.values() {
        text.push_str(&format!(
            "#{} {} {}: {}\n",
            c.id,
            c.kind.word(),
            crate::report::status_label(c),
            crate::report::speedup_text(c),
        ));
    }
    let total = &summary["usage"]["total"];
    text.push_str(&format!(
        "usage: {} LLM calls, {} input / {} output tokens, cost {}\n",
        total["calls"],
        total["input"],
        total["output"],
        total["cost_usd"]
            .as_f64()
            .map_or("unknown".to_string(), |c| format!("${c:.4}")),
    ));
    Ok(ToolResult::ok(text, summary))
}

fn candidate_code(arguments: Value) -> Result<ToolResult> {
    let p: CandidateParams = params(arguments)?;
    let id = match p.candidate {
        CandidateArg::Number(n) => CandidateId(n),
        CandidateArg::Text(t) => t
            .parse()
            .map_err(|_| anyhow!("`candidate` must be a candidate id, e.g. 3 or \"#3\""))?,
    };
    let (dir, state) = read_session(&p.session)?;
    let candidate = state
        .candidates
        .get(&id)
        .ok_or_else(|| anyhow!("session {} has no candidate #{id}", p.session))?;
    let code = dir.read_file(&candidate.file)?;
    Ok(ToolResult::ok(
        code.clone(),
        json!({
            "candidate": id,
            "file": candidate.file,
            "status": crate::report::status_label(candidate),
            "code": code,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_round_trip_and_schemas_are_objects() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
            let d = tool.describe();
            assert_eq!(d["inputSchema"]["type"], "object", "{d}");
            assert!(d["inputSchema"]["properties"].is_object(), "{d}");
        }
        assert_eq!(Tool::from_name("nope"), None);
    }

    #[test]
    fn device_arguments() {
        let cpu = DeviceArg::args(Some(DeviceArg::Name("cpu".into()))).unwrap();
        assert!(cpu.cpu && cpu.device.is_none());
        let one = DeviceArg::args(Some(DeviceArg::Index(1))).unwrap();
        assert_eq!((one.cpu, one.device), (false, Some(1)));
        let two = DeviceArg::args(Some(DeviceArg::Name("cuda:2".into()))).unwrap();
        assert_eq!(two.device, Some(2));
        let three = DeviceArg::args(Some(DeviceArg::Name("3".into()))).unwrap();
        assert_eq!(three.device, Some(3));
        assert!(DeviceArg::args(Some(DeviceArg::Name("tpu".into()))).is_err());
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
        let err = params::<SessionParams>(json!({"session": "s", "extra": 1}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("invalid arguments"), "{err}");
        assert!(params::<SessionParams>(Value::Null).is_err());
    }
}
