//! Runs the tasks of a batch in this process: as many at once as the batch allows, each an
//! ordinary session (the same engine, pipeline, steering and files as `kforge run`), all
//! sharing one evaluator (one server per device, evaluations spread over the devices) and
//! one bound on LLM calls in flight. A task that has a session is resumed, never started
//! again; a finished one is left alone. Ctrl-C stops every session cleanly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::manifest::{self, BatchEnd, BatchRun, BatchTask, Manifest, REFUSED_FILE};
use super::results::{TaskResult, TaskStatus, collect, task_result};
use super::shared_llm::{Ledger, SharedLlm, Spent};
use super::summary::BatchSummary;
use crate::config::Config;
use crate::engine::device_pool::DevicePool;
use crate::engine::ports::{EvalPort, LlmPort};
use crate::engine::runner::{Engine, EngineSetup, RunOutcome};
use crate::engine::warmup_plan::BaselineWarmup;
use crate::eval::Evaluator;
use crate::eval::devices::DeviceSet;
use crate::launch::{
    NewSession, Provider, SessionPlace, Stored, TaskCheck, check_task_for_session, create_session,
    follow_control, resumed_llm,
};
use crate::prompts::PromptSet;
use crate::protocol::{Event, GateId, GateKind, RunEnd, TaskKey};
use crate::session::state::SessionState;

/// Everything the tasks of one run of a batch share.
pub struct BatchContext {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub config: Config,
    pub evaluator: Evaluator,
    pub devices: DeviceSet,
    pub prompts: PromptSet,
    /// Who answers new sessions' prompts (None: the provider cannot be used; resumed
    /// sessions resolve their own).
    pub provider: Provider,
    pub versions: Option<serde_json::Value>,
    /// How this run is recorded in batch.json (`batch`, `resume`, `slurm 12_3`).
    pub how: String,
}

/// How one task's turn in this run went.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskTurn {
    /// Finished before this run: nothing to do.
    AlreadyFinished,
    /// Another process runs its session now.
    RunningElsewhere,
    /// The task check refused it.
    Refused(String),
    /// The batch stopped (Ctrl-C, its budget) before the task's turn came.
    NotStarted,
    /// Its session ran; this is how the run ended.
    Ran(RunEnd),
    /// Its session could not be started or resumed.
    Failed(String),
}

/// What one run of the batch did.
pub struct BatchOutcome {
    pub end: BatchEnd,
    pub reason: String,
    pub turns: BTreeMap<TaskKey, TaskTurn>,
    pub results: Vec<TaskResult>,
}

struct Shared {
    ctx: BatchContext,
    pool: Arc<dyn EvalPort>,
    slots: Arc<Semaphore>,
    ledger: Arc<Ledger>,
    /// Stops the batch: no new task starts, running sessions are stopped.
    stop: CancellationToken,
    interrupted: AtomicBool,
    running: Mutex<BTreeMap<TaskKey, Arc<Engine>>>,
    /// Tasks of this run that have had their turn, of `total`: the `[3 of 10 done]` of the
    /// console line each task ends with.
    done: Mutex<usize>,
    total: usize,
}

impl Shared {
    fn say(&self, line: String) {
        eprintln!("kforge: {line}");
    }

    fn stop_all(&self) {
        self.stop.cancel();
        for engine in self.running.lock().expect("running").values() {
            engine.stop();
        }
    }
}

/// What every task's calls spent so far (earlier runs included).
fn spent_so_far(results: &[TaskResult]) -> Spent {
    results.iter().fold(Spent::default(), |s, r| Spent {
        tokens: s.tokens + r.tokens(),
        cost_usd: s.cost_usd + r.cost_usd,
    })
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the tasks `only` (all when None) of the batch; Ctrl-C stops cleanly.
pub async fn run_batch(ctx: BatchContext, only: Option<Vec<usize>>) -> Result<BatchOutcome> {
    let dir = ctx.dir.clone();
    let evaluator = ctx.evaluator.clone();
    let limits = ctx.manifest.limits.clone();
    // Every session is read once here: for the batch budget spent so far, and to leave
    // finished tasks alone (they are not counted in this run).
    let before = collect(&dir, &ctx.manifest);
    let indices: Vec<usize> = only
        .unwrap_or_else(|| (0..ctx.manifest.tasks.len()).collect())
        .into_iter()
        .filter(|i| !before[*i].status.is_final())
        .collect();
    let started = chrono::Utc::now();
    let run_index = manifest::update(&dir, |m| {
        m.runs.push(BatchRun {
            started,
            ended: None,
            end: None,
            reason: None,
            how: ctx.how.clone(),
            host: host(),
            pid: std::process::id(),
        })
    })?
    .runs
    .len()
        - 1;
    let ledger = Arc::new(Ledger::new(
        spent_so_far(&before),
        limits.max_tokens,
        limits.max_cost_usd,
    ));
    let pool: Arc<dyn EvalPort> = Arc::new(DevicePool::new(
        Arc::new(ctx.evaluator.clone()),
        ctx.devices.clone(),
    ));
    let shared = Arc::new(Shared {
        pool,
        slots: Arc::new(Semaphore::new(limits.llm_calls_at_once.max(1))),
        ledger: ledger.clone(),
        stop: CancellationToken::new(),
        interrupted: AtomicBool::new(false),
        running: Mutex::new(BTreeMap::new()),
        done: Mutex::new(0),
        total: indices.len(),
        ctx,
    });
    shared.say(format!(
        "batch {}: {} task(s) in this run, {} at once, {} LLM call(s) at once, devices {}",
        dir.display(),
        indices.len(),
        limits.tasks_at_once.max(1),
        limits.llm_calls_at_once.max(1),
        shared.ctx.devices
    ));

    // The batch's budget (spending or wall clock) and Ctrl-C stop every session.
    let watchers = {
        let shared = shared.clone();
        let wall = limits.max_wall_s;
        tokio::spawn(async move {
            let wall_clock = async {
                match wall {
                    Some(s) => tokio::time::sleep(Duration::from_secs_f64(s)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shared.ledger.tripped.cancelled() => {}
                _ = wall_clock => shared.ledger.trip(format!("the batch wall-time budget ({}s) is spent", wall.unwrap_or(0.0))),
                _ = tokio::signal::ctrl_c() => {
                    shared.interrupted.store(true, Ordering::SeqCst);
                    eprintln!("\nkforge: stopping the batch (Ctrl-C again to quit at once); every session stays resumable");
                    shared.stop_all();
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                    return;
                }
            }
            if let Some(reason) = shared.ledger.reason() {
                shared.say(format!("stopping the batch: {reason}"));
            }
            shared.stop_all();
        })
    };

    // Tasks start in the manifest's order (KernelBench's): a slot is taken here, in order,
    // before the task's own work is spawned.
    let task_slots = Arc::new(Semaphore::new(limits.tasks_at_once.max(1)));
    let mut handles = Vec::new();
    let mut not_started = Vec::new();
    for index in indices {
        let task = shared.ctx.manifest.tasks[index].clone();
        let permit = tokio::select! {
            biased;
            _ = shared.stop.cancelled() => None,
            permit = task_slots.clone().acquire_owned() => permit.ok(),
        };
        let Some(permit) = permit.filter(|_| !shared.stop.is_cancelled()) else {
            not_started.push(task.key);
            continue;
        };
        let shared = shared.clone();
        handles.push(tokio::spawn(async move {
            let turn = run_task(&shared, &task).await;
            drop(permit);
            (task.key, turn)
        }));
    }
    let mut turns: BTreeMap<TaskKey, TaskTurn> = not_started
        .into_iter()
        .map(|k| (k, TaskTurn::NotStarted))
        .collect();
    for h in handles {
        let (key, turn) = h.await?;
        turns.insert(key, turn);
    }
    watchers.abort();

    let (end, reason) = if shared.interrupted.load(Ordering::SeqCst) {
        (BatchEnd::Interrupted, "interrupted (Ctrl-C)".to_string())
    } else if let Some(reason) = ledger.reason() {
        (BatchEnd::BudgetReached, reason)
    } else if turns.values().any(|t| matches!(t, TaskTurn::Failed(_))) {
        (
            BatchEnd::Failed,
            "some task sessions could not run".to_string(),
        )
    } else {
        (
            BatchEnd::Done,
            "every task of this run reached its end".to_string(),
        )
    };
    let summary = record_run_end(&dir, run_index, end, &reason)?;
    evaluator.shutdown().await;
    Ok(BatchOutcome {
        end,
        reason,
        turns,
        results: summary.tasks,
    })
}

/// Writes the batch's outputs (summary, export), then records how run `run_index` ended:
/// in that order, so that whoever sees the end (`batch status`, a script waiting on
/// batch.json) finds the outputs current, and a run whose outputs cannot be written is
/// not recorded as ended.
fn record_run_end(
    dir: &Path,
    run_index: usize,
    end: BatchEnd,
    reason: &str,
) -> Result<BatchSummary> {
    manifest::with_lock(dir, || {
        let mut manifest = Manifest::load(dir)?;
        if let Some(run) = manifest.runs.get_mut(run_index) {
            run.ended = Some(chrono::Utc::now());
            run.end = Some(end);
            run.reason = Some(reason.to_string());
        }
        let summary = super::export::write_all(dir, &manifest)?;
        manifest.save(dir)?;
        Ok(summary)
    })
}

/// One task: resume its session if it has one, else check the task and start one.
async fn run_task(shared: &Arc<Shared>, task: &BatchTask) -> TaskTurn {
    let dir = &shared.ctx.dir;
    let before = task_result(dir, task);
    let turn = match before.status {
        status if status.is_final() => return TaskTurn::AlreadyFinished,
        TaskStatus::Running | TaskStatus::AwaitingYou { .. } => {
            shared.say(format!(
                "[{}] another process runs it; left alone",
                task.key
            ));
            return TaskTurn::RunningElsewhere;
        }
        TaskStatus::Waiting | TaskStatus::Refused => start_task(shared, task).await,
        TaskStatus::Interrupted | TaskStatus::Ended(_) => resume_task(shared, task).await,
    };
    let mut done = shared.done.lock().expect("done");
    *done += 1;
    let after = task_result(dir, task);
    let what = match &turn {
        TaskTurn::Ran(_) => {
            let score = match (after.correct, after.score) {
                (true, Some(s)) => format!("best #{} {s:.2}x", after.best.map_or(0, |b| b.0)),
                (true, None) => {
                    format!("best #{} correct (untimed)", after.best.map_or(0, |b| b.0))
                }
                _ => "no correct kernel".into(),
            };
            format!(
                "{}: {score} ({} candidates, {} tokens, {}, {:.0}s)",
                after.status.word(),
                after.candidates,
                after.tokens(),
                super::results::cost_text(after.cost_usd, after.unpriced_calls),
                after.wall_s
            )
        }
        TaskTurn::Refused(why) => format!("refused by the task check: {why}"),
        TaskTurn::Failed(why) => format!("failed: {why}"),
        TaskTurn::NotStarted => "not started: the batch is stopping".into(),
        TaskTurn::AlreadyFinished => "finished already".into(),
        TaskTurn::RunningElsewhere => "another process runs it".into(),
    };
    shared.say(format!(
        "[{}] {what}  [{} of {} done]",
        task.key, *done, shared.total
    ));
    turn
}

async fn start_task(shared: &Arc<Shared>, task: &BatchTask) -> TaskTurn {
    let ctx = &shared.ctx;
    let session_dir = ctx.dir.join(task.session());
    let source = ctx.dir.join(task.source());
    let task_file = match crate::task::TaskFile::load(&source) {
        Ok(mut t) => {
            t.name = task.key.to_string();
            t
        }
        Err(e) => return refuse(shared, task, &format!("{e:#}")),
    };
    let device = ctx.devices.primary();
    shared.say(format!("[{}] checking the task on {device} ...", task.key));
    let (check, warmup) =
        check_task_for_session(shared.pool.as_ref(), &source, device, &ctx.manifest.eval).await;
    match &check {
        TaskCheck::Ready(..) => {}
        TaskCheck::Refused(why) => return refuse(shared, task, why),
        TaskCheck::EvaluatorFailed(err) => {
            return TaskTurn::Failed(format!("the evaluator failed: {err}"));
        }
    }
    if shared.stop.is_cancelled() {
        return TaskTurn::NotStarted;
    }
    let _ = std::fs::remove_file(session_dir.join(REFUSED_FILE));
    let (provider, model) = ctx.provider.label();
    let created = create_session(
        SessionPlace::At(&session_dir),
        &NewSession {
            task: &task_file,
            task_file: &task.origin,
            provider: &provider,
            model: &model,
            devices: &ctx.devices,
            eval: &ctx.manifest.eval,
            pipeline: &ctx.manifest.pipeline,
            versions: ctx.versions.clone(),
        },
    );
    let (session, lock) = match created {
        Ok(c) => c,
        Err(e) => return TaskTurn::Failed(format!("{e:#}")),
    };
    if let Err(e) = ctx.prompts.snapshot_into(&session.file("prompts")) {
        return TaskTurn::Failed(format!("{e:#}"));
    }
    if let Err(e) = check.write_into(&session) {
        return TaskTurn::Failed(format!("{e:#}"));
    }
    shared.say(format!("[{}] started", task.key));
    let setup = EngineSetup {
        llm: shared_port(shared, ctx.provider.port(&session)),
        session,
        prior: SessionState::default(),
        task: task_file,
        evaluator: shared.pool.clone(),
        devices: ctx.devices.clone(),
        eval: ctx.manifest.eval.clone(),
        pipeline: ctx.manifest.pipeline.clone(),
        prompts: ctx.prompts.clone(),
        warmup,
    };
    let turn = drive(shared, task, setup).await;
    drop(lock);
    turn
}

async fn resume_task(shared: &Arc<Shared>, task: &BatchTask) -> TaskTurn {
    let ctx = &shared.ctx;
    let mut stored = match Stored::open(&ctx.dir.join(task.session())) {
        Ok(s) => s,
        Err(e) => return TaskTurn::Failed(format!("{e:#}")),
    };
    // Budgets given to `resume` reach the batch's pipeline; each session takes them.
    let budgets = (
        ctx.manifest.pipeline.max_tokens,
        ctx.manifest.pipeline.max_cost_usd,
        ctx.manifest.pipeline.max_wall_s,
    );
    if budgets
        != (
            stored.pipeline.max_tokens,
            stored.pipeline.max_cost_usd,
            stored.pipeline.max_wall_s,
        )
    {
        let mut pipeline = stored.pipeline.clone();
        (
            pipeline.max_tokens,
            pipeline.max_cost_usd,
            pipeline.max_wall_s,
        ) = budgets;
        if let Err(e) = stored.save_pipeline(pipeline) {
            return TaskTurn::Failed(format!("{e:#}"));
        }
    }
    let llm = match resumed_llm(
        &ctx.config,
        &stored.session,
        &stored.provider,
        &stored.model,
    ) {
        Ok(l) => l,
        Err(e) => return TaskTurn::Failed(format!("{e:#}")),
    };
    if let Err(e) = ctx.prompts.snapshot_into(&stored.session.file("prompts")) {
        return TaskTurn::Failed(format!("{e:#}"));
    }
    shared.say(format!(
        "[{}] resuming ({} events so far)",
        task.key, stored.events
    ));
    // The devices of this run (a Slurm element lands on another node's GPUs).
    let (setup, lock) = stored.into_setup(
        shared.pool.clone(),
        ctx.devices.clone(),
        shared_port(shared, llm),
        ctx.prompts.clone(),
        // The task is not checked again on a resume: each evaluation finds the compile
        // baseline cached or measures it, as before the split.
        BaselineWarmup::Nothing,
    );
    let turn = drive(shared, task, setup).await;
    drop(lock);
    turn
}

fn shared_port(shared: &Arc<Shared>, port: Arc<dyn LlmPort>) -> Arc<dyn LlmPort> {
    Arc::new(SharedLlm::new(
        port,
        shared.slots.clone(),
        shared.ledger.clone(),
    ))
}

fn refuse(shared: &Arc<Shared>, task: &BatchTask, why: &str) -> TaskTurn {
    let dir = shared.ctx.dir.join(task.session());
    let record = json!({"summary": why, "checked": chrono::Utc::now()});
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            dir.join(REFUSED_FILE),
            serde_json::to_vec_pretty(&record).unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => TaskTurn::Refused(why.to_string()),
        Err(e) => TaskTurn::Failed(format!(
            "refused ({why}), and {} cannot be written: {e}",
            dir.join(REFUSED_FILE).display()
        )),
    }
}

/// What the batch console says of a task's gates: a line when it starts waiting for the
/// person (and when more gates open), and one when it stops waiting.
#[derive(Debug, Default)]
struct WaitingForYou {
    gates: BTreeMap<GateId, GateKind>,
}

impl WaitingForYou {
    /// The console line an event calls for, if any (without the task's `[key]`).
    fn on(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::GateOpened { gate, kind, .. } => {
                self.gates.insert(*gate, *kind);
                let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
                for k in self.gates.values() {
                    *kinds.entry(k.describe()).or_default() += 1;
                }
                let kinds: Vec<String> = kinds
                    .into_iter()
                    .map(|(what, n)| format!("{n} {what}"))
                    .collect();
                let n = self.gates.len();
                Some(format!(
                    "waiting for you: {n} gate{} ({})",
                    if n == 1 { "" } else { "s" },
                    kinds.join(", ")
                ))
            }
            Event::GateResolved { gate, .. } | Event::GateWithdrawn { gate, .. } => {
                self.gates.remove(gate)?;
                if !self.gates.is_empty() {
                    return None;
                }
                Some(match event {
                    Event::GateWithdrawn { reason, .. } => {
                        format!("no longer waiting for you: its gates were withdrawn ({reason})")
                    }
                    _ => "no longer waiting for you: its gates are answered".into(),
                })
            }
            _ => None,
        }
    }
}

/// Runs one session's engine to its end; the batch's stop reaches it, and so do commands
/// from a window attached with `kforge open`.
async fn drive(shared: &Arc<Shared>, task: &BatchTask, setup: EngineSetup) -> TaskTurn {
    let session = setup.session.clone();
    let engine = match Engine::new(setup) {
        Ok(e) => Arc::new(e),
        Err(e) => return TaskTurn::Failed(format!("{e:#}")),
    };
    shared
        .running
        .lock()
        .expect("running")
        .insert(task.key.clone(), engine.clone());
    // A stop that came while the session was being set up.
    if shared.stop.is_cancelled() {
        engine.stop();
    }
    let control = follow_control(engine.clone(), &session);
    // The console says when the task waits for the person at a gate, and when it stops.
    let mut events = engine.subscribe();
    let mut watch = WaitingForYou::default();
    let mut say = |event: &Event| {
        if let Some(line) = watch.on(event) {
            shared.say(format!("[{}] {line}", task.key));
        }
    };
    let run = engine.run();
    tokio::pin!(run);
    let outcome: RunOutcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            Some(record) = events.recv() => say(&record.event),
        }
    };
    // What the run's end withdrew, before the task's last line.
    while let Ok(record) = events.try_recv() {
        say(&record.event);
    }
    engine.stop_actions();
    control.abort();
    shared.running.lock().expect("running").remove(&task.key);
    TaskTurn::Ran(outcome.end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Decision, GateId};

    fn opened(gate: u32, kind: GateKind) -> Event {
        Event::GateOpened {
            gate: GateId(gate),
            key: String::new(),
            kind,
            candidate: None,
            call: None,
            question: "?".into(),
            file: None,
        }
    }

    #[test]
    fn a_runs_end_is_recorded_only_once_the_batch_outputs_are_written() {
        use crate::batch::manifest::BatchLimits;
        use crate::batch::summary::{SUMMARY_JSON, SUMMARY_MD};
        use crate::config::EvalConfig;
        use crate::config::pipeline::PipelineConfig;
        use crate::eval::devices::DeviceChoice;
        use crate::protocol::TaskKey;

        let dir = tempfile::tempdir().unwrap();
        let mut m = Manifest::new(
            "mock".into(),
            "mock-1".into(),
            None,
            DeviceChoice::AllVisible,
            BatchLimits {
                tasks_at_once: 1,
                llm_calls_at_once: 1,
                max_tokens: None,
                max_cost_usd: None,
                max_wall_s: None,
            },
            PipelineConfig::default(),
            EvalConfig::default(),
            vec![BatchTask {
                key: TaskKey("relu".into()),
                name: "relu".into(),
                level: None,
                problem: None,
                origin: "/tasks/relu.py".into(),
            }],
        );
        m.runs.push(BatchRun {
            started: chrono::Utc::now(),
            ended: None,
            end: None,
            reason: None,
            how: "batch".into(),
            host: "h".into(),
            pid: 1,
        });
        m.save(dir.path()).unwrap();
        let ended = |d: &Path| Manifest::load(d).unwrap().runs[0].ended.is_some();

        // An output that cannot be written: the run is not recorded as ended.
        std::fs::create_dir(dir.path().join(SUMMARY_MD)).unwrap();
        assert!(record_run_end(dir.path(), 0, BatchEnd::Done, "done").is_err());
        assert!(!ended(dir.path()));

        std::fs::remove_dir(dir.path().join(SUMMARY_MD)).unwrap();
        let summary = record_run_end(dir.path(), 0, BatchEnd::Done, "done").unwrap();
        assert_eq!(summary.tasks.len(), 1);
        assert!(dir.path().join(SUMMARY_JSON).is_file());
        let run = &Manifest::load(dir.path()).unwrap().runs[0];
        assert!(run.ended.is_some());
        assert_eq!(run.end, Some(BatchEnd::Done));
        assert_eq!(run.reason.as_deref(), Some("done"));
    }

    #[test]
    fn the_console_says_when_a_task_starts_and_stops_waiting_for_you() {
        let mut w = WaitingForYou::default();
        assert_eq!(
            w.on(&opened(1, GateKind::LlmCall)).as_deref(),
            Some("waiting for you: 1 gate (1 before an LLM call)")
        );
        assert_eq!(
            w.on(&opened(2, GateKind::Evaluation)).as_deref(),
            Some("waiting for you: 2 gates (1 before an LLM call, 1 before an evaluation)")
        );
        let resolved = |g| Event::GateResolved {
            gate: GateId(g),
            decision: Decision::Approve,
        };
        assert_eq!(w.on(&resolved(1)), None, "one still waits");
        assert_eq!(w.on(&resolved(7)), None, "not one of its gates");
        assert_eq!(
            w.on(&resolved(2)).as_deref(),
            Some("no longer waiting for you: its gates are answered")
        );
        w.on(&opened(3, GateKind::Stages));
        assert_eq!(
            w.on(&Event::GateWithdrawn {
                gate: GateId(3),
                reason: "the run stopped".into()
            })
            .as_deref(),
            Some("no longer waiting for you: its gates were withdrawn (the run stopped)")
        );
    }
}
