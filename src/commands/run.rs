//! `kforge run TASK`, `kforge resume SESSION` and `kforge report SESSION`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::common::{CheckArgs, DeviceArgs};
use crate::config::{Config, EvalConfig};
use crate::engine::config::{Accept, AnalyzeWhen, PipelineConfig};
use crate::engine::llm_backend::{ClientLlm, ManualLlm};
use crate::engine::ports::LlmPort;
use crate::engine::runner::{Engine, EngineSetup, RunOutcome, write_session_files};
use crate::eval::{self, Device, EvalRequest};
use crate::prompts::PromptSet;
use crate::protocol::{Command, EngineState, Event, EventRecord, LogLevel, Mode, RunEnd};
use crate::session::state::SessionState;
use crate::session::store::{CONTROL_FILE, LineFollower, SessionDir};
use crate::task::TaskFile;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// KernelBench task file.
    pub task: PathBuf,
    /// LLM provider (a preset, a configured name, or `manual` to answer prompts yourself).
    #[arg(long)]
    pub provider: Option<String>,
    /// Model name (default: the provider's configured model).
    #[arg(long)]
    pub model: Option<String>,
    /// auto: never stops; review: stops before algorithm optimization, stages and the
    /// final best; step: stops before every LLM call and evaluation.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Number of independent seed kernels.
    #[arg(long)]
    pub seeds: Option<u32>,
    /// Print the console log instead of the TUI (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Where sessions are created (default ./sessions).
    #[arg(long, value_name = "DIR")]
    pub sessions_dir: Option<PathBuf>,
    /// Tuning stages, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',')]
    pub stages: Option<Vec<String>>,
    /// When a stage's kernel replaces its base.
    #[arg(long, value_enum)]
    pub accept: Option<Accept>,
    /// Which correct seeds get an algorithm analysis.
    #[arg(long, value_enum)]
    pub analyze: Option<AnalyzeWhen>,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub eval: EvalFlags,
}

/// The session's budgets, for `run` and for `resume` (where they replace those the session
/// was started with: a run stopped by its budget goes on with a larger one).
#[derive(clap::Args, Debug, Default)]
pub struct BudgetArgs {
    /// Session budget: stop cleanly after this many tokens, input + output, over all calls
    /// of the session (earlier runs included).
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Session budget: stop cleanly after this cost in USD (the whole session).
    #[arg(long)]
    pub max_cost: Option<f64>,
    /// Stop cleanly after this many seconds (counted from the start of this process).
    #[arg(long, value_name = "SECONDS")]
    pub max_wall: Option<f64>,
}

impl BudgetArgs {
    /// Puts the budgets given over `pipeline`'s; whether any was given.
    fn apply(&self, pipeline: &mut PipelineConfig) -> bool {
        pipeline.max_tokens = self.max_tokens.or(pipeline.max_tokens);
        pipeline.max_cost_usd = self.max_cost.or(pipeline.max_cost_usd);
        pipeline.max_wall_s = self.max_wall.or(pipeline.max_wall_s);
        self.max_tokens.is_some() || self.max_cost.is_some() || self.max_wall.is_some()
    }
}

/// The evaluator's options for a session.
#[derive(clap::Args, Debug, Default)]
pub struct EvalFlags {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub check: CheckArgs,
    /// Collect Nsight Compute metrics for correct kernels (GPU).
    #[arg(long)]
    pub profile: bool,
}

impl EvalFlags {
    fn apply(&self, eval: &mut EvalConfig, pipeline: &mut PipelineConfig) {
        self.check.apply(eval);
        if self.profile {
            pipeline.profile = true;
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    /// The session directory.
    pub session: PathBuf,
    /// Print the console log instead of the TUI (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// New budgets, kept in session.json.
    #[command(flatten)]
    pub budgets: BudgetArgs,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The session directory.
    pub session: PathBuf,
}

/// Headless when asked or when stdout is not a terminal.
fn headless(flag: bool) -> bool {
    flag || !std::io::stdout().is_terminal()
}

pub async fn run(args: RunArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    let mut pipeline = config.pipeline.clone();
    let mut eval_settings = config.eval.clone();
    if let Some(m) = args.mode {
        pipeline.mode = m;
    }
    if let Some(n) = args.seeds {
        pipeline.seeds = n;
    }
    if let Some(d) = &args.sessions_dir {
        pipeline.sessions_dir = Some(d.clone());
    }
    if let Some(s) = &args.stages {
        pipeline.stages = s
            .iter()
            .filter(|x| !x.trim().is_empty())
            .map(|x| x.trim().to_string())
            .collect();
    }
    if let Some(a) = args.accept {
        pipeline.accept = a;
    }
    if let Some(a) = args.analyze {
        pipeline.analyze = a;
    }
    args.budgets.apply(&mut pipeline);
    args.eval.apply(&mut eval_settings, &mut pipeline);

    let task = TaskFile::load(&args.task)?;
    check_stages(&pipeline)?;
    let prompts = load_prompts(&config)?;
    let backend = match args.provider.as_deref() {
        Some("manual") => Ok(Provider::Manual),
        provider => crate::llm::resolve(&config, provider, args.model.as_deref())
            .and_then(crate::llm::LlmClient::new)
            .map(Provider::Client),
    };
    // A provider named on the command line that cannot be used (a typo, a missing key) is
    // said at once, before the evaluator starts; with none named, the task is checked first
    // and then what to configure is said.
    if let (Err(e), Some(named)) = (&backend, args.provider.as_deref()) {
        eprintln!("kforge: --provider {named}: {e}");
        eprintln!(
            "kforge: no session was started, no evaluator was started, and no LLM call was made"
        );
        return Ok(ExitCode::from(2));
    }
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    let device = args.eval.device.pick(&evaluator).await?;

    // The task is checked before anything is spent on it: a task that does not run, does
    // not fit or draws its inputs too slowly is refused here, before any LLM call.
    eprintln!("kforge: checking the task with the evaluator on {device} ...");
    let check = check_task(&evaluator, &args.task, device, &eval_settings).await;
    check.report(&task.name, device);
    let backend = match backend {
        Ok(b) if matches!(check, TaskCheck::Ready(_)) => b,
        Ok(_) => {
            evaluator.shutdown().await;
            eprintln!(
                "\nkforge: no session was started and no LLM call was made; fix the task and run again"
            );
            return Ok(ExitCode::from(2));
        }
        Err(e) => {
            // No LLM: the check above showed whether the task and the evaluator work; say
            // exactly what to configure.
            evaluator.shutdown().await;
            eprintln!("\nkforge cannot start the optimization: {e}");
            eprintln!(
                "\nTo answer the prompts yourself instead, run:\n  kforge run {} --provider manual",
                args.task.display()
            );
            return Ok(ExitCode::from(2));
        }
    };

    let (provider, model) = backend.label();
    let session = SessionDir::create(&pipeline.sessions_dir(), &task.name, &provider, &model)?;
    tracing::info!(
        session = %session.path.display(),
        task = %task.name,
        %provider,
        %model,
        %device,
        mode = ?pipeline.mode,
        seeds = pipeline.seeds,
        "session created"
    );
    let backend = backend.port(&session);
    let lock = session.lock()?;
    let description = json!({
        "task": task.name,
        "task_file": std::path::absolute(&args.task).unwrap_or(args.task.clone()),
        "task_hash": task.hash,
        "provider": provider,
        "model": model,
        "device": device,
        "mode": pipeline.mode,
        "eval": eval_settings,
        "pipeline": pipeline,
        "kforge": env!("CARGO_PKG_VERSION"),
        "versions": evaluator.hello().await.ok().map(|h| json!({"python": h.python, "torch": h.torch, "triton": h.triton})),
        "created": chrono::Utc::now(),
    });
    write_session_files(&session, &task, description)?;
    prompts.snapshot_into(&session.file("prompts"))?;
    eprintln!("kforge: session {}", session.path.display());
    let setup = EngineSetup {
        session,
        prior: SessionState::default(),
        task,
        evaluator: Arc::new(evaluator.clone()),
        device,
        eval: eval_settings,
        pipeline,
        llm: backend,
        prompts,
    };
    drive_and_close(
        setup,
        &evaluator,
        lock,
        headless(args.headless),
        &config.tui,
    )
    .await
}

/// Who answers the prompts, before the session that names it exists.
enum Provider {
    Client(crate::llm::LlmClient),
    Manual,
}

impl Provider {
    fn label(&self) -> (String, String) {
        match self {
            Provider::Client(c) => (c.provider().name.clone(), c.provider().model.clone()),
            Provider::Manual => ("manual".into(), "you".into()),
        }
    }

    fn port(self, session: &SessionDir) -> Arc<dyn LlmPort> {
        match self {
            Provider::Client(c) => Arc::new(ClientLlm(c)),
            Provider::Manual => Arc::new(ManualLlm::new(session.clone())),
        }
    }
}

/// What the task check before a session found.
enum TaskCheck {
    /// The task runs; the text says how fast the reference is, where it was timed.
    Ready(String),
    /// The task's own verdict (`task`, `oom`...): one line.
    Refused(String),
    /// No verdict: the evaluator itself could not run.
    EvaluatorFailed(eval::EvalError),
}

impl TaskCheck {
    fn report(&self, task: &str, device: Device) {
        match self {
            TaskCheck::Ready(line) => eprintln!("kforge: task {task} OK on {device}{line}"),
            TaskCheck::Refused(summary) => eprintln!("kforge: task {task} refused: {summary}"),
            TaskCheck::EvaluatorFailed(err) => eprintln!("kforge: the evaluator failed: {err}"),
        }
    }
}

/// Builds the task's Model, runs it on its inputs, plans its memory and (GPU) times it.
async fn check_task(
    evaluator: &eval::Evaluator,
    task: &Path,
    device: Device,
    settings: &EvalConfig,
) -> TaskCheck {
    let request = EvalRequest::task_check(task, device, settings.clone());
    match evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
    {
        Ok(r) if r.correct => TaskCheck::Ready(
            r.timing
                .as_ref()
                .filter(|t| t.meaningful)
                .map(|t| {
                    format!(
                        ": the reference runs in {:.4} ms (median)",
                        t.reference.median_ms
                    )
                })
                .unwrap_or_else(|| ": the reference runs (no timing on the CPU)".into()),
        ),
        Ok(r) => TaskCheck::Refused(r.summary),
        Err(err) => TaskCheck::EvaluatorFailed(err),
    }
}

/// Every stage needs its prompt template.
fn check_stages(pipeline: &PipelineConfig) -> Result<()> {
    for stage in &pipeline.stages {
        if crate::prompts::TemplateName::stage(stage).is_none() {
            bail!(
                "unknown stage `{stage}`: the stages are {}",
                crate::engine::config::DEFAULT_STAGES.join(", ")
            );
        }
    }
    Ok(())
}

pub async fn resume(args: ResumeArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    let session = SessionDir::open(&args.session)?;
    let lock = session.lock()?;
    let read = session.read_events()?;
    if let Some(torn) = &read.torn {
        eprintln!(
            "kforge: the last line of events.jsonl was cut off by a crash ({} bytes); it is dropped",
            torn.len()
        );
    }
    for (line, error) in &read.invalid {
        eprintln!("kforge: events.jsonl line {line} is not a valid event ({error}); skipped");
    }
    let prior = SessionState::from_records(&read.records);
    tracing::info!(
        session = %session.path.display(),
        events = read.records.len(),
        state = prior.state.word(),
        "resuming a session"
    );
    if prior.state == EngineState::Finished {
        eprintln!(
            "kforge: this session finished already; open it with `kforge open {}`",
            args.session.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let description: serde_json::Value = serde_json::from_str(&session.read_file("session.json")?)
        .context("session.json is not valid JSON")?;
    let mut task = TaskFile::load(&session.file("task.py"))?;
    // The copy is `task.py`; the task keeps the name it was started with.
    if let Some(info) = &prior.info {
        task.name = info.task.clone();
    }
    let eval_settings: EvalConfig = serde_json::from_value(description["eval"].clone())
        .context("session.json has no valid eval settings")?;
    let mut pipeline: PipelineConfig = serde_json::from_value(description["pipeline"].clone())
        .context("session.json has no valid pipeline settings")?;
    // New budgets (a run stopped by its budget goes on): kept in session.json, so that a
    // later resume keeps them.
    if args.budgets.apply(&mut pipeline) {
        let mut updated = description.clone();
        updated["pipeline"] = serde_json::to_value(&pipeline)?;
        session.write_file(
            "session.json",
            serde_json::to_string_pretty(&updated)?.as_bytes(),
        )?;
        eprintln!(
            "kforge: budgets now: tokens {}, cost {}, wall {}",
            pipeline.max_tokens.map_or("none".into(), |t| t.to_string()),
            pipeline
                .max_cost_usd
                .map_or("none".into(), |c| format!("${c}")),
            pipeline
                .max_wall_s
                .map_or("none".into(), |w| format!("{w} s"))
        );
    }
    let device: Device = serde_json::from_value(description["device"].clone())
        .context("session.json has no valid device")?;
    let provider = description["provider"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let model = description["model"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let backend: Arc<dyn LlmPort> = if provider == "manual" {
        Arc::new(ManualLlm::new(session.clone()))
    } else {
        let resolved = crate::llm::resolve(&config, Some(&provider), Some(&model))
            .with_context(|| format!("the session used provider `{provider}`"))?;
        Arc::new(ClientLlm(crate::llm::LlmClient::new(resolved)?))
    };
    let prompts = load_prompts(&config)?;
    prompts.snapshot_into(&session.file("prompts"))?;
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    // The task is checked again before any LLM call: the environment, the device or the
    // task file may have changed since the session started.
    eprintln!("kforge: checking the task with the evaluator on {device} ...");
    let check = check_task(&evaluator, &session.file("task.py"), device, &eval_settings).await;
    check.report(&task.name, device);
    if !matches!(check, TaskCheck::Ready(_)) {
        evaluator.shutdown().await;
        eprintln!(
            "\nkforge: the session was not resumed and no LLM call was made; fix the task (or the evaluator) and resume again"
        );
        return Ok(ExitCode::from(2));
    }
    eprintln!(
        "kforge: resuming {} ({} events so far)",
        session.path.display(),
        read.records.len()
    );
    let setup = EngineSetup {
        session,
        prior,
        task,
        evaluator: Arc::new(evaluator.clone()),
        device,
        eval: eval_settings,
        pipeline,
        llm: backend,
        prompts,
    };
    drive_and_close(
        setup,
        &evaluator,
        lock,
        headless(args.headless),
        &config.tui,
    )
    .await
}

pub async fn report(args: ReportArgs, _config_file: Option<&Path>) -> Result<ExitCode> {
    let session = SessionDir::open(&args.session)?;
    let read = session.read_events()?;
    let state = SessionState::from_records(&read.records);
    crate::report::write_all(&session, &state)?;
    println!("{}", session.file("report.md").display());
    Ok(ExitCode::SUCCESS)
}

fn load_prompts(config: &Config) -> Result<PromptSet> {
    crate::prompts::PromptSet::from_config(config)
}

/// Drives the session, then stops the evaluator's servers and releases the session.
async fn drive_and_close(
    setup: EngineSetup,
    evaluator: &crate::eval::Evaluator,
    lock: crate::session::store::SessionLock,
    headless: bool,
    tui: &crate::tui::TuiConfig,
) -> Result<ExitCode> {
    let code = drive(setup, headless, tui).await;
    evaluator.shutdown().await;
    drop(lock);
    code
}

/// Runs the engine under the terminal UI, or headless with the console log and Ctrl-C
/// handling; either way commands also come from the control file (another process
/// attached with `kforge open`).
async fn drive(
    setup: EngineSetup,
    headless: bool,
    tui: &crate::tui::TuiConfig,
) -> Result<ExitCode> {
    let session = setup.session.clone();
    let engine = Arc::new(Engine::new(setup)?);
    let control = {
        let engine = engine.clone();
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
    };
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outcome = if headless {
        run_headless(&engine, &session, interrupted.clone()).await
    } else {
        run_with_tui(&engine, &session, tui).await?
    };
    engine.stop_actions();
    control.abort();
    eprintln!(
        "kforge: {} ({}); session {}",
        outcome.state().word(),
        outcome.reason,
        session.path.display()
    );
    if outcome.state() != EngineState::Finished {
        eprintln!(
            "kforge: continue it with `kforge resume {}`",
            session.path.display()
        );
    }
    Ok(
        if interrupted.load(std::sync::atomic::Ordering::SeqCst) && outcome.end == RunEnd::Stopped {
            ExitCode::from(130)
        } else {
            ExitCode::from(outcome.end.exit_code())
        },
    )
}

async fn run_headless(
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

/// The engine runs in the background while the TUI is open; the TUI stays open on a
/// finished run (its actions still work) until the person quits.
async fn run_with_tui(
    engine: &Arc<Engine>,
    session: &SessionDir,
    tui: &crate::tui::TuiConfig,
) -> Result<RunOutcome> {
    let initial = session.read_events()?.records;
    let events = engine.subscribe();
    let (commands, mut command_rx) = tokio::sync::mpsc::unbounded_channel();
    let forward = {
        let engine = engine.clone();
        tokio::spawn(async move {
            while let Some(command) = command_rx.recv().await {
                engine.command(command);
            }
        })
    };
    let run = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run().await })
    };
    let link = crate::tui::TuiLink {
        session_dir: session.clone(),
        initial,
        events,
        commands: Some(commands),
    };
    let exit = crate::tui::run_tui(link, tui).await;
    match &exit {
        Ok(e) if e.stop_engine() => engine.stop(),
        Ok(_) => {}
        Err(_) => engine.stop(),
    }
    forward.abort();
    let outcome = run.await.context("the engine task failed")?;
    exit?;
    Ok(outcome)
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
