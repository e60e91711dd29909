//! `kforge run TASK`, `kforge resume SESSION` and `kforge report SESSION`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::session_args::{BudgetArgs, EvalFlags, PlanArgs, check_stages};
use crate::config::pipeline::PipelineConfig;
use crate::config::{Config, EvalConfig};
use crate::engine::device_pool::DevicePool;
use crate::engine::ports::EvalPort;
use crate::engine::runner::{Engine, EngineSetup, RunOutcome};
use crate::eval;
use crate::launch::{
    NewSession, Provider, SessionPlace, Stored, check_task_for_session, create_session,
    follow_control, resumed_llm, run_headless,
};
use crate::prompts::PromptSet;
use crate::protocol::{EngineState, Mode, RunEnd};
use crate::session::state::SessionState;
use crate::session::store::SessionDir;
use crate::task::TaskFile;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// KernelBench task file.
    pub task: PathBuf,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Print the console log instead of the TUI (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Where sessions are created (default ./sessions).
    #[arg(long, value_name = "DIR")]
    pub sessions_dir: Option<PathBuf>,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub eval: EvalFlags,
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
    /// Go on in this mode (auto, review, step), recorded in the session's log. Without it
    /// the run goes on in the session's latest mode (a switch made mid-run holds).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
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
    args.apply(&mut pipeline, &mut eval_settings);
    let task = TaskFile::load(&args.task)?;
    check_stages(&pipeline)?;
    let prompts = load_prompts(&config)?;
    let device_choice = args.eval.devices.choice()?;
    let backend = Provider::resolve(
        &config,
        args.plan.provider.as_deref(),
        args.plan.model.as_deref(),
    );
    // A provider named on the command line that cannot be used (a typo, a missing key) is
    // said at once, before the evaluator starts; with none named, the task is checked first
    // and then what to configure is said.
    if let (Err(e), Some(named)) = (&backend, args.plan.provider.as_deref()) {
        eprintln!("kforge: --provider {named}: {e}");
        eprintln!(
            "kforge: no session was started, no evaluator was started, and no LLM call was made"
        );
        return Ok(ExitCode::from(2));
    }
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    let devices = device_choice.resolve(&evaluator).await?;
    let pool: Arc<dyn EvalPort> = Arc::new(DevicePool::new(
        Arc::new(evaluator.clone()),
        devices.clone(),
    ));
    let device = devices.primary();

    // The task is checked before anything is spent on it: a task that does not run, does
    // not fit or draws its inputs too slowly is refused here, before any LLM call.
    eprintln!("kforge: checking the task with the evaluator on {device} ...");
    let (check, warmup) =
        check_task_for_session(pool.as_ref(), &args.task, device, &eval_settings).await;
    check.report(&task.name, device);
    let backend = match backend {
        Ok(b) if check.is_ready() => b,
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
    let versions = evaluator
        .hello()
        .await
        .ok()
        .map(|h| json!({"python": h.python, "torch": h.torch, "triton": h.triton}));
    let (session, lock) = create_session(
        SessionPlace::Under(&pipeline.sessions_dir()),
        &NewSession {
            task: &task,
            task_file: &args.task,
            provider: &provider,
            model: &model,
            devices: &devices,
            eval: &eval_settings,
            pipeline: &pipeline,
            versions,
        },
    )?;
    prompts.snapshot_into(&session.file("prompts"))?;
    check.write_into(&session)?;
    eprintln!("kforge: session {}", session.path.display());
    let setup = EngineSetup {
        llm: backend.port(&session),
        session,
        prior: SessionState::default(),
        task,
        evaluator: pool,
        devices,
        eval: eval_settings,
        pipeline,
        prompts,
        warmup,
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

impl RunArgs {
    /// Puts the options given over the configured pipeline and evaluation settings.
    fn apply(&self, pipeline: &mut PipelineConfig, eval_settings: &mut EvalConfig) {
        self.plan.apply(pipeline);
        if let Some(d) = &self.sessions_dir {
            pipeline.sessions_dir = Some(d.clone());
        }
        self.budgets.apply(pipeline);
        self.eval.apply(eval_settings, pipeline);
    }
}

pub async fn resume(args: ResumeArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    if crate::batch::manifest::Manifest::is_batch(&args.session) {
        if args.mode.is_some() {
            bail!(
                "--mode is for one session: a batch's tasks go on in their own latest modes (resume a task's session with --mode to change one)"
            );
        }
        return crate::commands::batch::resume_dir(&args.session, &args.budgets, config_file).await;
    }
    let config = Config::load(config_file)?;
    let mut stored = Stored::open(&args.session)?;
    tracing::info!(
        session = %stored.session.path.display(),
        events = stored.events,
        state = stored.prior.state.word(),
        "resuming a session"
    );
    if stored.is_finished() {
        eprintln!(
            "kforge: this session finished already; open it with `kforge open {}`",
            args.session.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // New budgets (a run stopped by its budget goes on): kept in session.json, so that a
    // later resume keeps them.
    let mut pipeline = stored.pipeline.clone();
    if args.budgets.apply(&mut pipeline) {
        stored.save_pipeline(pipeline)?;
        eprintln!("kforge: budgets now: {}", budgets_text(&stored.pipeline));
    }
    // An explicit mode wins over the log's latest (the engine records the switch).
    if let Some(mode) = args.mode {
        stored.pipeline.mode = mode;
    }
    let backend = resumed_llm(&config, &stored.session, &stored.provider, &stored.model)?;
    let prompts = load_prompts(&config)?;
    prompts.snapshot_into(&stored.session.file("prompts"))?;
    let cache = crate::paths::cache_dir();
    let evaluator =
        eval::evaluator_from_config(&config, &cache, &mut |line| eprintln!("kforge: {line}"))?;
    let pool: Arc<dyn EvalPort> = Arc::new(DevicePool::new(
        Arc::new(evaluator.clone()),
        stored.devices.clone(),
    ));
    let device = stored.devices.primary();
    // The task is checked again before any LLM call: the environment, the device or the
    // task file may have changed since the session started.
    eprintln!("kforge: checking the task with the evaluator on {device} ...");
    let (check, warmup) = check_task_for_session(
        pool.as_ref(),
        &stored.session.file("task.py"),
        device,
        &stored.eval,
    )
    .await;
    check.report(&stored.task.name, device);
    check.write_into(&stored.session)?;
    if !check.is_ready() {
        evaluator.shutdown().await;
        eprintln!(
            "\nkforge: the session was not resumed and no LLM call was made; fix the task (or the evaluator) and resume again"
        );
        return Ok(ExitCode::from(2));
    }
    eprintln!(
        "kforge: resuming {} ({} events so far)",
        stored.session.path.display(),
        stored.events
    );
    let devices = stored.devices.clone();
    let (setup, lock) = stored.into_setup(pool, devices, backend, prompts, warmup);
    drive_and_close(
        setup,
        &evaluator,
        lock,
        headless(args.headless),
        &config.tui,
    )
    .await
}

/// `tokens 1000, cost $2, wall none`.
pub fn budgets_text(pipeline: &PipelineConfig) -> String {
    format!(
        "tokens {}, cost {}, wall {}",
        pipeline.max_tokens.map_or("none".into(), |t| t.to_string()),
        pipeline
            .max_cost_usd
            .map_or("none".into(), |c| format!("${c}")),
        pipeline
            .max_wall_s
            .map_or("none".into(), |w| format!("{w} s"))
    )
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
    let control = follow_control(engine.clone(), &session);
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outcome = if headless {
        run_headless(&engine, &session, interrupted.clone()).await
    } else {
        let (outcome, exit) = run_with_tui(&engine, &session, tui).await?;
        // Ctrl-C in the TUI (confirmed) ends the run as Ctrl-C does without it: 130.
        if exit == crate::tui::TuiExit::Interrupted {
            interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        outcome
    };
    engine.stop_actions();
    control.abort();
    eprintln!(
        "kforge: {}; session {}",
        outcome_line(outcome.state().word(), &outcome.reason),
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

/// The engine runs in the background while the TUI is open; the TUI stays open on a
/// finished run (its actions still work) until the person quits. Returns how the run
/// ended and how the person left.
async fn run_with_tui(
    engine: &Arc<Engine>,
    session: &SessionDir,
    tui: &crate::tui::TuiConfig,
) -> Result<(RunOutcome, crate::tui::TuiExit)> {
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
    Ok((outcome, exit?))
}
/// How a run ended, in words: the state and its reason, once when they say the same
/// (`stopped`, not `stopped (stopped)`).
fn outcome_line(state: &str, reason: &str) -> String {
    if reason.is_empty() || reason == state {
        state.to_string()
    } else {
        format!("{state} ({reason})")
    }
}

#[cfg(test)]
mod tests {
    use super::outcome_line;

    #[test]
    fn a_reason_that_repeats_the_state_is_said_once() {
        assert_eq!(outcome_line("stopped", "stopped"), "stopped");
        assert_eq!(outcome_line("stopped", ""), "stopped");
        assert_eq!(
            outcome_line("budget_reached", "wall time 60s"),
            "budget_reached (wall time 60s)"
        );
    }
}
