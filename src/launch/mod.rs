//! Starting and resuming a session, shared by `run`, `resume` and `batch` (whose tasks are
//! ordinary sessions): who answers the prompts, the task check before anything is spent,
//! the session directory and its description, the control file another window writes
//! commands into, and the headless console. Also what the front ends share: one
//! evaluation (`evaluate`) and the device and correctness options (`options`).

pub mod evaluate;
pub mod options;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::pipeline::PipelineConfig;
use crate::config::{Config, EvalConfig};
use crate::engine::llm_backend::{ClientLlm, ManualLlm};
use crate::engine::ports::{EvalPort, LlmPort};
use crate::engine::runner::{Engine, RunOutcome};
use crate::engine::warmup_plan::BaselineWarmup;
use crate::eval::devices::DeviceSet;
use crate::eval::{self, Device, EvalRequest};
use crate::protocol::{Command, EngineState, Event, EventRecord, LogLevel, manual};
use crate::session::state::SessionState;
use crate::session::store::{CONTROL_FILE, LineFollower, SessionDir, SessionLock};
use crate::task::TaskFile;

/// Who answers the prompts, before the session that names it exists.
pub enum Provider {
    Client(crate::llm::LlmClient),
    Manual,
    /// A port made elsewhere (`kforge bench batch-scaling`'s stand-in LLM).
    Port(Arc<dyn LlmPort>),
}

impl Provider {
    /// The provider named (or the configured default): `manual`, or a client.
    pub fn resolve(config: &Config, name: Option<&str>, model: Option<&str>) -> Result<Provider> {
        match name {
            Some(manual::PROVIDER) => Ok(Provider::Manual),
            provider => {
                let resolved = crate::llm::resolve(config, provider, model)?;
                Ok(Provider::Client(crate::llm::LlmClient::new(resolved)?))
            }
        }
    }

    /// (provider, model) as sessions record them.
    pub fn label(&self) -> (String, String) {
        match self {
            Provider::Client(c) => (c.provider().name.clone(), c.provider().model.clone()),
            Provider::Manual => (manual::PROVIDER.into(), manual::MODEL.into()),
            Provider::Port(p) => p.label(),
        }
    }

    pub fn port(&self, session: &SessionDir) -> Arc<dyn LlmPort> {
        match self {
            Provider::Client(c) => Arc::new(ClientLlm(c.clone())),
            Provider::Manual => Arc::new(ManualLlm::new(session.clone())),
            Provider::Port(p) => p.clone(),
        }
    }
}

/// The port answering a resumed session's prompts: the provider and model it was started
/// with.
pub fn resumed_llm(
    config: &Config,
    session: &SessionDir,
    provider: &str,
    model: &str,
) -> Result<Arc<dyn LlmPort>> {
    Ok(if provider == manual::PROVIDER {
        Arc::new(ManualLlm::new(session.clone()))
    } else {
        let resolved = crate::llm::resolve(config, Some(provider), Some(model))
            .with_context(|| format!("the session used provider `{provider}`"))?;
        Arc::new(ClientLlm(crate::llm::LlmClient::new(resolved)?))
    })
}

/// What the task check before a session found.
pub enum TaskCheck {
    /// The task runs; the text says how fast the reference is, where it was timed; the
    /// result (what the reference returns, its timing) goes into the session as
    /// `engine::prompting::TASK_CHECK_FILE` (`write_into`).
    Ready(String, Box<crate::protocol::EvalResult>),
    /// The task's own verdict (`task`, `oom`...): one line.
    Refused(String),
    /// No verdict: the evaluator itself could not run.
    EvaluatorFailed(eval::EvalError),
}

impl TaskCheck {
    pub fn is_ready(&self) -> bool {
        matches!(self, TaskCheck::Ready(..))
    }

    /// One line for the console.
    pub fn line(&self, task: &str, device: Device) -> String {
        match self {
            TaskCheck::Ready(line, _) => format!("task {task} OK on {device}{line}"),
            TaskCheck::Refused(summary) => format!("task {task} refused: {summary}"),
            TaskCheck::EvaluatorFailed(err) => format!("the evaluator failed: {err}"),
        }
    }

    pub fn report(&self, task: &str, device: Device) {
        eprintln!("kforge: {}", self.line(task, device));
    }

    /// Saves a passed check's result in the session, where the prompts read the shapes and
    /// dtypes the reference returns.
    pub fn write_into(&self, session: &crate::session::store::SessionDir) -> Result<()> {
        if let TaskCheck::Ready(_, result) = self {
            session
                .write_file(
                    crate::engine::prompting::TASK_CHECK_FILE,
                    &serde_json::to_vec_pretty(result.as_ref())?,
                )
                .context("cannot write the task check into the session")?;
        }
        Ok(())
    }
}

/// Builds the task's Model, runs it on its inputs, plans its memory and (GPU) times it.
pub async fn check_task(
    evaluator: &dyn EvalPort,
    task: &Path,
    device: Device,
    settings: &EvalConfig,
) -> TaskCheck {
    check(
        evaluator,
        EvalRequest::task_check(task, device, settings.clone()),
    )
    .await
}

/// A task check's request run, its verdict read.
async fn check(evaluator: &dyn EvalPort, request: EvalRequest) -> TaskCheck {
    match evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
    {
        Ok(r) if r.correct => {
            let line = r
                .timing
                .as_ref()
                .filter(|t| t.meaningful)
                .map(|t| {
                    let compiled = t
                        .compile
                        .as_ref()
                        .map(|c| format!("; {}", c.describe()))
                        .unwrap_or_default();
                    format!(
                        ": the reference runs in {:.4} ms (median){compiled}",
                        t.reference.median_ms
                    )
                })
                .unwrap_or_else(|| ": the reference runs (no timing on the CPU)".into());
            TaskCheck::Ready(line, Box::new(r))
        }
        Ok(r) => TaskCheck::Refused(r.summary),
        Err(err) => TaskCheck::EvaluatorFailed(err),
    }
}

/// A session's task check: `check_task` with torch.compile left to the run where it can be
/// (`engine::warmup_plan::plan`: the first LLM call does not wait for it), and what the run then
/// measures as it starts (nothing where the check did not pass).
pub async fn check_task_for_session(
    evaluator: &dyn EvalPort,
    task: &Path,
    device: Device,
    settings: &EvalConfig,
) -> (TaskCheck, BaselineWarmup) {
    let (check_settings, warmup) = crate::engine::warmup_plan::plan(settings, device);
    let mut request = EvalRequest::task_check(task, device, check_settings);
    // The first candidate's judge starts after this check, unless the warm-up's check (which
    // then starts it) comes between.
    request.session_candidate = warmup == BaselineWarmup::Nothing;
    match check(evaluator, request).await {
        TaskCheck::Ready(line, result) if warmup != BaselineWarmup::Nothing => (
            TaskCheck::Ready(
                format!("{line}; torch.compile is timed as the session starts"),
                result,
            ),
            warmup,
        ),
        check => (check, BaselineWarmup::Nothing),
    }
}

/// Where a new session's directory goes.
pub enum SessionPlace<'a> {
    /// A new dated directory under the sessions dir.
    Under(&'a Path),
    /// Exactly this directory (a batch's task).
    At(&'a Path),
}

/// What a new session records about itself in session.json.
pub struct NewSession<'a> {
    pub task: &'a TaskFile,
    pub task_file: &'a Path,
    pub provider: &'a str,
    pub model: &'a str,
    pub devices: &'a DeviceSet,
    pub eval: &'a EvalConfig,
    pub pipeline: &'a PipelineConfig,
    /// Python, torch and triton as the harness reports them.
    pub versions: Option<Value>,
}

/// Creates the session directory, takes its lock and writes task.py and session.json.
pub fn create_session(
    place: SessionPlace<'_>,
    new: &NewSession<'_>,
) -> Result<(SessionDir, SessionLock)> {
    let session = match place {
        SessionPlace::Under(dir) => {
            SessionDir::create(dir, &new.task.name, new.provider, new.model)?
        }
        SessionPlace::At(path) => SessionDir::create_at(path)?,
    };
    let lock = session.lock()?;
    tracing::info!(
        session = %session.path.display(),
        task = %new.task.name,
        provider = %new.provider,
        model = %new.model,
        devices = %new.devices,
        mode = ?new.pipeline.mode,
        seeds = new.pipeline.seeds,
        "session created"
    );
    let description = json!({
        "task": new.task.name,
        "task_file": std::path::absolute(new.task_file).unwrap_or(new.task_file.to_path_buf()),
        "task_hash": new.task.hash,
        "provider": new.provider,
        "model": new.model,
        "device": new.devices.primary(),
        "devices": new.devices,
        "mode": new.pipeline.mode,
        "eval": new.eval,
        "pipeline": new.pipeline,
        "kforge": env!("CARGO_PKG_VERSION"),
        "versions": new.versions,
        "created": chrono::Utc::now(),
    });
    write_session_files(&session, new.task, description)?;
    Ok((session, lock))
}

/// Copies the task into the new session and writes `session.json`, before any engine
/// exists (the engine itself writes only through its recorder).
fn write_session_files(session: &SessionDir, task: &TaskFile, description: Value) -> Result<()> {
    session
        .write_file("task.py", task.source.as_bytes())
        .context("cannot copy the task into the session")?;
    session
        .write_file("session.json", &serde_json::to_vec_pretty(&description)?)
        .context("cannot write session.json")?;
    Ok(())
}

/// A session read back for `resume`.
pub struct Stored {
    pub session: SessionDir,
    pub lock: SessionLock,
    pub prior: SessionState,
    pub events: usize,
    pub task: TaskFile,
    pub description: Value,
    pub eval: EvalConfig,
    pub pipeline: PipelineConfig,
    pub devices: DeviceSet,
    pub provider: String,
    pub model: String,
}

impl Stored {
    /// Opens and locks the session and folds its events (a torn last line or invalid lines
    /// are said and dropped).
    pub fn open(path: &Path) -> Result<Stored> {
        let session = SessionDir::open(path)?;
        let lock = session.lock()?;
        let read = session.read_events()?;
        if let Some(torn) = &read.torn {
            eprintln!(
                "kforge: the last line of {}/events.jsonl was cut off by a crash ({} bytes); it is dropped",
                path.display(),
                torn.len()
            );
        }
        for (line, error) in &read.invalid {
            eprintln!(
                "kforge: {}/events.jsonl line {line} is not a valid event ({error}); skipped",
                path.display()
            );
        }
        let prior = SessionState::from_records(&read.records);
        let description: Value = serde_json::from_str(&session.read_file("session.json")?)
            .context("session.json is not valid JSON")?;
        let mut task = TaskFile::load(&session.file("task.py"))?;
        // The copy is `task.py`; the task keeps the name it was started with.
        if let Some(info) = &prior.info {
            task.name = info.task.clone();
        }
        let eval: EvalConfig = serde_json::from_value(description["eval"].clone())
            .context("session.json has no valid eval settings")?;
        let mut pipeline: PipelineConfig = serde_json::from_value(description["pipeline"].clone())
            .context("session.json has no valid pipeline settings")?;
        // The run goes on in the latest mode of the log (a switch made mid-run holds), not
        // the one it was started with; `kforge resume --mode` puts another over it.
        if prior.info.is_some() {
            pipeline.mode = prior.mode;
        }
        // Sessions from before device sets name one `device`.
        let devices: DeviceSet = match description.get("devices") {
            Some(list) if !list.is_null() => {
                serde_json::from_value(list.clone()).context("session.json has no valid devices")?
            }
            _ => DeviceSet::one(
                serde_json::from_value(description["device"].clone())
                    .context("session.json has no valid device")?,
            ),
        };
        let text = |key: &str| description[key].as_str().unwrap_or_default().to_string();
        Ok(Stored {
            provider: text("provider"),
            model: text("model"),
            events: read.records.len(),
            session,
            lock,
            prior,
            task,
            description,
            eval,
            pipeline,
            devices,
        })
    }

    pub fn is_finished(&self) -> bool {
        self.prior.state == EngineState::Finished
    }

    /// The engine setup that goes on with this session on `devices` through `evaluator`
    /// and `llm`, and the session's lock, held until the run ends.
    pub fn into_setup(
        self,
        evaluator: Arc<dyn EvalPort>,
        devices: DeviceSet,
        llm: Arc<dyn LlmPort>,
        prompts: crate::prompts::PromptSet,
        warmup: BaselineWarmup,
    ) -> (crate::engine::runner::EngineSetup, SessionLock) {
        let setup = crate::engine::runner::EngineSetup {
            session: self.session,
            prior: self.prior,
            task: self.task,
            evaluator,
            devices,
            eval: self.eval,
            pipeline: self.pipeline,
            llm,
            prompts,
            warmup,
        };
        (setup, self.lock)
    }

    /// Keeps new pipeline settings (budgets) in session.json, so that a later resume
    /// keeps them too.
    pub fn save_pipeline(&mut self, pipeline: PipelineConfig) -> Result<()> {
        self.description["pipeline"] = serde_json::to_value(&pipeline)?;
        self.session.write_file(
            "session.json",
            serde_json::to_string_pretty(&self.description)?.as_bytes(),
        )?;
        self.pipeline = pipeline;
        Ok(())
    }
}

/// Commands another process writes into the session's control file (`kforge open`
/// attached to this run) go to the engine until the returned task is aborted.
pub fn follow_control(engine: Arc<Engine>, session: &SessionDir) -> tokio::task::JoinHandle<()> {
    let path = session.file(CONTROL_FILE);
    tokio::spawn(async move {
        let mut follower = LineFollower::from_end(path);
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            for line in follower.poll() {
                match serde_json::from_str::<Command>(&line) {
                    Ok(command) => engine.command(command),
                    Err(e) => tracing::warn!("ignoring a malformed control line: {e}"),
                }
            }
        }
    })
}

/// Runs the engine headless with its console printed, Ctrl-C stopping it cleanly (a second
/// Ctrl-C quits at once).
pub async fn run_headless(
    engine: &Arc<Engine>,
    session: &SessionDir,
    interrupted: Arc<std::sync::atomic::AtomicBool>,
) -> RunOutcome {
    let printer = tokio::spawn(print_console(engine.subscribe(), session.path.clone()));
    let ctrl_c = {
        let engine = engine.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
                eprintln!(
                    "\nkforge: stopping (Ctrl-C again to quit at once); the session stays resumable"
                );
                engine.stop();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        })
    };
    let outcome = engine.run().await;
    ctrl_c.abort();
    engine.stop_actions();
    // The printer stops at the run's final state change, the last event of a run.
    let _ = printer.await;
    outcome
}

/// The headless console: every log line, tagged.
async fn print_console(
    mut events: tokio::sync::mpsc::UnboundedReceiver<EventRecord>,
    session: PathBuf,
) {
    let color = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    while let Some(record) = events.recv().await {
        match record.event {
            Event::Log {
                level,
                tag,
                message,
            } => {
                let (start, end) = match (color, level) {
                    (true, LogLevel::Warn) => ("\x1b[33m", "\x1b[0m"),
                    (true, LogLevel::Error) => ("\x1b[31m", "\x1b[0m"),
                    _ => ("", ""),
                };
                println!("{start}[{tag}] {message}{end}");
            }
            Event::GateOpened { gate, .. } => {
                println!(
                    "[you] gate {gate} is open: answer it from another terminal with `kforge open {}`",
                    session.display()
                );
            }
            Event::StateChanged { state } if state.is_over() => break,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{GateKind, Mode};
    use crate::session::store::EventWriter;

    /// Issue 38: on a GPU a session's task check leaves torch.compile to the run (it says
    /// so); on the CPU, or where the check fails, nothing is left over.
    #[tokio::test]
    async fn a_sessions_task_check_leaves_torch_compile_to_the_run_on_a_gpu() {
        use crate::engine::fakes::FakeEvaluator;
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("task.py");
        std::fs::write(&task, "# a task\n").unwrap();
        let settings = EvalConfig::default();
        let eval = FakeEvaluator::default();
        let (check, warmup) =
            check_task_for_session(&eval, &task, Device::Cuda(0), &settings).await;
        assert_eq!(
            warmup,
            BaselineWarmup::Compile {
                device: Device::Cuda(0)
            }
        );
        assert!(
            check
                .line("t", Device::Cuda(0))
                .ends_with("; torch.compile is timed as the session starts"),
            "{}",
            check.line("t", Device::Cuda(0))
        );
        let sent = eval.requests();
        assert!(sent[0].reference_only && !sent[0].settings.compile_baseline);
        let (check, warmup) = check_task_for_session(&eval, &task, Device::Cpu, &settings).await;
        assert_eq!(warmup, BaselineWarmup::Nothing);
        assert!(!check.line("t", Device::Cpu).contains("torch.compile"));
        std::fs::write(&task, "# FAKE-FAIL:task\n").unwrap();
        let (check, warmup) =
            check_task_for_session(&eval, &task, Device::Cuda(0), &settings).await;
        assert!(!check.is_ready());
        assert_eq!(
            warmup,
            BaselineWarmup::Nothing,
            "nothing to warm up for a refused task"
        );
    }

    /// A stopped session started in step mode and switched to auto mid-run.
    fn switched_session(dir: &Path) -> PathBuf {
        let task = crate::engine::fakes::task();
        let pipeline = PipelineConfig {
            mode: Mode::Step,
            ..PipelineConfig::default()
        };
        let (session, lock) = create_session(
            SessionPlace::Under(dir),
            &NewSession {
                task: &task,
                task_file: Path::new("relu.py"),
                provider: "fake",
                model: "fake-1",
                devices: &DeviceSet::one(Device::Cpu),
                eval: &EvalConfig::default(),
                pipeline: &pipeline,
                versions: None,
            },
        )
        .unwrap();
        let mut w = EventWriter::open(&session, 0).unwrap();
        for event in [
            Event::SessionStarted {
                task: "relu".into(),
                task_hash: "fake".into(),
                provider: "fake".into(),
                model: "fake-1".into(),
                mode: Mode::Step,
                device: "cpu".into(),
                timing_meaningful: false,
                precision: None,
            },
            Event::StandingApproval {
                kind: GateKind::Evaluation,
            },
            Event::ModeChanged { mode: Mode::Auto },
            Event::StateChanged {
                state: EngineState::Stopped,
            },
        ] {
            w.append(event).unwrap();
        }
        drop(w);
        drop(lock);
        session.path.clone()
    }

    /// Issue 23, item 4: `kforge resume` goes on in the latest mode of the log, not the
    /// `--mode` of the original `kforge run` (session.json), with its standing approvals.
    #[test]
    fn a_resumed_session_goes_on_in_the_latest_mode_of_its_log() {
        let tmp = tempfile::tempdir().unwrap();
        let path = switched_session(tmp.path());
        let stored = Stored::open(&path).unwrap();
        assert_eq!(stored.description["mode"], "step", "as it was started");
        assert_eq!(stored.pipeline.mode, Mode::Auto, "as the log says now");
        assert_eq!(stored.prior.standing, vec![GateKind::Evaluation]);
    }
}
