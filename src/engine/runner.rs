//! The engine and the core its parts share: the plan (`pipeline.rs`), its steps
//! (`steps.rs`) and the person's actions (`actions.rs`) all run on `Inner`, which records
//! events, holds the ports, the replay and the controls, and ends the run on a fatal error.
//!
//! Every step has a stable key (`seed1`, `seed1/repair2`, `analysis3`, `opt3`,
//! `stage/block_tiling`...); a resumed run replays the plan from the start and
//! `replay::Replay` answers, by key, what is already done.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use tokio::sync::{Semaphore, mpsc};

use super::control::{Control, Dispatched};
use super::outcome::Step;
use super::ports::{EvalPort, LlmPort};
use super::recorder::Recorder;
use super::replay::Replay;
use crate::config::EvalConfig;
use crate::config::pipeline::PipelineConfig;
use crate::eval::devices::DeviceSet;
use crate::prompts::PromptSet;
use crate::protocol::*;
use crate::session::state::SessionState;
use crate::session::store::{AppendFile, SessionDir};
use crate::task::TaskFile;

pub use super::warmup_plan::BaselineWarmup;

/// Everything an engine run needs.
pub struct EngineSetup {
    pub session: SessionDir,
    /// The fold of events already on disk (empty for a new session).
    pub prior: SessionState,
    pub task: TaskFile,
    pub evaluator: Arc<dyn EvalPort>,
    pub devices: DeviceSet,
    pub eval: EvalConfig,
    pub pipeline: PipelineConfig,
    pub llm: Arc<dyn LlmPort>,
    pub prompts: PromptSet,
    /// What of the task's baselines the run measures as it starts (`warmup_plan::plan`).
    pub warmup: BaselineWarmup,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub end: RunEnd,
    pub best: Option<CandidateId>,
    pub reason: String,
}

impl RunOutcome {
    /// The state the session is left in.
    pub fn state(&self) -> EngineState {
        self.end.state()
    }
}

pub struct Engine {
    inner: Arc<Inner>,
    warmup: BaselineWarmup,
    actions: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    action_worker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Ids handed out by this run, after those of earlier runs.
pub(super) struct Ids {
    pub candidate: IdCounter,
    pub call: IdCounter,
    pub gate: IdCounter,
    pub action: IdCounter,
}

pub(super) struct Inner {
    pub session: SessionDir,
    pub replay: Replay,
    pub task: TaskFile,
    pub evaluator: Arc<dyn EvalPort>,
    pub devices: DeviceSet,
    pub eval: EvalConfig,
    pub pipeline: PipelineConfig,
    pub llm: Arc<dyn LlmPort>,
    pub prompts: PromptSet,
    recorder: Mutex<Recorder>,
    pub control: Control,
    pub ids: Ids,
    pub call_slots: Semaphore,
    /// Set when something ends the run (the provider refuses it, the evaluator broke, a
    /// write failed).
    pub fatal: Mutex<Option<String>>,
}

impl Engine {
    pub fn new(setup: EngineSetup) -> Result<Engine> {
        let EngineSetup {
            session,
            prior,
            task,
            evaluator,
            devices,
            eval,
            pipeline,
            llm,
            prompts,
            warmup,
        } = setup;
        let recorder = Recorder::open(&session, prior.clone())?;
        // A resumed run goes on in the latest mode of its log, with its standing approvals;
        // a different mode in `pipeline` (`kforge resume --mode`) is switched to, and
        // recorded, when the run starts (`Inner::start`).
        let mode = if prior.info.is_some() {
            prior.mode
        } else {
            pipeline.mode
        };
        let (control, actions) = Control::new(mode);
        for kind in &prior.standing {
            control.approve_always(*kind);
        }
        let replay = Replay::new(prior, session.clone());
        let prior = replay.prior();
        let ids = Ids {
            candidate: IdCounter::after(prior.candidates.keys().last().map(|i| i.0)),
            call: IdCounter::after(prior.calls.keys().last().map(|i| i.0)),
            gate: IdCounter::after(prior.gates.keys().last().map(|i| i.0)),
            // The person's actions are keyed `user<n>-<pid>`: go on after earlier runs'.
            action: IdCounter::after(Some(replay.actions())),
        };
        let inner = Inner {
            call_slots: Semaphore::new(pipeline.max_concurrent_calls.max(1) as usize),
            session,
            replay,
            task,
            evaluator,
            devices,
            eval,
            pipeline,
            llm,
            prompts,
            recorder: Mutex::new(recorder),
            control,
            ids,
            fatal: Mutex::new(None),
        };
        Ok(Engine {
            inner: Arc::new(inner),
            warmup,
            actions: Mutex::new(Some(actions)),
            action_worker: Mutex::new(None),
        })
    }

    /// A live feed of every event from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<EventRecord> {
        self.inner.recorder.lock().expect("recorder").subscribe()
    }

    /// The state so far (prior events included).
    pub fn state(&self) -> SessionState {
        self.inner.state()
    }

    pub fn session(&self) -> &SessionDir {
        &self.inner.session
    }

    /// Sends a command (from the TUI, the control file or Ctrl-C).
    pub fn command(&self, command: Command) {
        let marked = match command {
            Command::MarkFinal { candidate } => Some(candidate),
            _ => None,
        };
        self.inner.command(command);
        if let Some(candidate) = marked {
            self.inner.check_marked_after_run(candidate);
        }
    }

    /// Stops the run cleanly (as the `Stop` command).
    pub fn stop(&self) {
        self.inner.command(Command::Stop);
    }

    /// Runs the pipeline to its end. The person's actions (repair with an instruction,
    /// manual candidates...) are served from the start until `stop_actions`: a front end
    /// that stays open on a finished run keeps them working.
    pub async fn run(&self) -> RunOutcome {
        let inner = self.inner.clone();
        self.start_actions();
        let wall = inner.pipeline.max_wall_s.map(|s| {
            let inner = inner.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs_f64(s)).await;
                inner.budget_exhausted(format!("wall time {s}s"));
            })
        });
        let warmup = inner.clone().start_warmup(self.warmup);
        if warmup.is_some() {
            // Lets its request reach the device's queue before anything of the pipeline
            // can (the first candidate comes after an LLM call anyway): that evaluation then
            // finds the figures cached. Out of order, it measures them itself: no harm.
            tokio::task::yield_now().await;
        }
        let outcome = inner.clone().pipeline().await;
        if let Some(w) = wall {
            w.abort();
        }
        if let Some(w) = warmup {
            w.end();
        }
        outcome
    }

    fn start_actions(&self) {
        if let Some(rx) = self.actions.lock().expect("actions").take() {
            let worker = tokio::spawn(self.inner.clone().serve_actions(rx));
            *self.action_worker.lock().expect("action worker") = Some(worker);
        }
    }

    /// Stops serving the person's actions (the front end has closed).
    pub fn stop_actions(&self) {
        if let Some(worker) = self.action_worker.lock().expect("action worker").take() {
            worker.abort();
        }
    }
}

// -- the core every step uses ------------------------------------------------------------

impl Inner {
    /// Records an event: appended to `events.jsonl`, folded, sent to subscribers. A write
    /// that fails ends the run (everything before it stays intact and resumable).
    pub fn emit(&self, event: Event) -> EventRecord {
        let (record, moved) = {
            let mut recorder = self.recorder.lock().expect("recorder");
            let before = recorder.state().best;
            let record = recorder.emit(event);
            let state = recorder.state();
            let moved = (state.best != before).then(|| (state.best, best_moved_why(state)));
            (record, moved)
        };
        // In the order of the events: a gate about the best is stale from this one on.
        if let Some((best, why)) = moved {
            self.control.best_moved(best, &why);
        }
        self.fail_on_write_error();
        record
    }

    /// The recorder's first write error (events, console) ends the run.
    fn fail_on_write_error(&self) {
        let error = self.recorder.lock().expect("recorder").write_error.take();
        if let Some(error) = error {
            self.fail(format!(
                "cannot write the session ({error}); stopped so that nothing more is lost: free space and `kforge resume` it"
            ));
        }
    }

    pub fn log(&self, level: LogLevel, tag: &str, message: impl Into<String>) {
        self.emit(Event::Log {
            level,
            tag: tag.to_string(),
            message: message.into(),
        });
    }

    /// Forces the events written so far to disk (step boundaries).
    pub fn sync(&self) {
        self.recorder.lock().expect("recorder").sync();
        self.fail_on_write_error();
    }

    /// Writes a session file. A failure ends the run (its reason is the run's), so the
    /// step reports `Stopped`.
    pub fn write(&self, file: &str, contents: &[u8]) -> Step<()> {
        let written = self
            .recorder
            .lock()
            .expect("recorder")
            .write_file(file, contents);
        match written {
            Ok(()) => Step::Done(()),
            Err(e) => {
                self.fail(format!(
                    "cannot write {file} ({e:#}); stopped so that nothing more is lost: free space and `kforge resume` it"
                ));
                Step::Stopped
            }
        }
    }

    /// Opens a session file that an answer streams into (see `Recorder::stream_file`).
    pub fn stream_file(&self, file: &str) -> Result<AppendFile> {
        self.recorder.lock().expect("recorder").stream_file(file)
    }

    /// Writes the report files from the events recorded so far (see
    /// `Recorder::write_report`).
    pub fn write_report(&self) -> Result<()> {
        self.recorder.lock().expect("recorder").write_report()
    }

    pub fn state(&self) -> SessionState {
        self.recorder.lock().expect("recorder").state().clone()
    }

    /// A look at the live state without copying it.
    pub fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(self.recorder.lock().expect("recorder").state())
    }

    fn command(&self, command: Command) {
        // The manual provider takes its answers itself.
        if let Command::ManualAnswer { call, text } = command {
            match self.llm.manual_answer(call, text) {
                Ok(()) => self.log(
                    LogLevel::Info,
                    "you",
                    format!("answer for call {call} received"),
                ),
                Err(why) => self.log(LogLevel::Warn, "you", format!("answer ignored: {why}")),
            }
            return;
        }
        // Mode switches and standing approvals are recorded before they take effect.
        if let Command::SetMode { mode } = command {
            self.switch_mode(mode, "you");
            return;
        }
        if let Command::ApproveAlways { kind } = command {
            self.approve_always(kind);
            return;
        }
        if let Command::RevokeApprovals { kind } = command {
            self.revoke_approvals(kind);
            return;
        }
        // Marking final needs no waiting: it takes effect at once, also while a gate is open.
        if let Command::MarkFinal { candidate } = command {
            if let Step::Failed(why) = self.mark_final(candidate) {
                self.log(LogLevel::Warn, "you", why);
            }
            return;
        }
        let text = command.describe();
        match self.control.dispatch(command.clone()) {
            Dispatched::Handled(message) => {
                match &command {
                    Command::Pause => {
                        self.emit(Event::StateChanged {
                            state: EngineState::Paused,
                        });
                    }
                    Command::Resume => {
                        self.emit(Event::StateChanged {
                            state: EngineState::Running,
                        });
                    }
                    _ => {}
                }
                self.log(LogLevel::Info, "you", message);
            }
            Dispatched::Ignored(why) => {
                self.log(LogLevel::Warn, "you", format!("{text}: not done ({why})"))
            }
            Dispatched::Lost(sentence) => self.log(LogLevel::Warn, "you", sentence),
        }
    }

    /// Switches the session's mode: recorded first, then in effect; a switch to step mode
    /// ends the standing approvals, and gates waiting that the new mode does not ask are
    /// approved at once. `who` tags the console line (`you`, `engine` on resume).
    pub fn switch_mode(&self, mode: Mode, who: &str) {
        let from = self.control.mode();
        self.emit(Event::ModeChanged { mode });
        let ended = self.control.set_mode(mode);
        let mut message = if from == mode {
            format!("{} mode again", mode.word())
        } else {
            format!("now in {} mode (was {})", mode.word(), from.word())
        };
        if !ended.is_empty() {
            let kinds: Vec<&str> = ended.iter().map(|k| k.plural()).collect();
            message.push_str(&format!(
                "; standing approvals ended ({}): every gate is asked",
                kinds.join(", ")
            ));
        }
        self.log(LogLevel::Info, who, message);
        self.release_gates(&format!("{} mode does not stop there", mode.word()));
    }

    /// Approves every gate of `kind` for the rest of the session: recorded first, then
    /// gates of that kind already waiting are approved, and later ones are not asked.
    pub fn approve_always(&self, kind: GateKind) {
        if self.control.approved_always(kind) {
            self.log(
                LogLevel::Info,
                "you",
                format!("all {} are approved already", kind.plural()),
            );
            return;
        }
        self.emit(Event::StandingApproval { kind });
        self.control.approve_always(kind);
        self.log(
            LogLevel::Info,
            "you",
            format!(
                "all {} are approved from now on, for this session (revoke_approvals, u in the TUI, takes it back)",
                kind.plural()
            ),
        );
        self.release_gates(&format!("you approved all {}", kind.plural()));
    }

    /// Takes back the standing approval of `kind`, or every one: recorded first, then in
    /// effect. It approves nothing; the console says which gates are asked again, and which
    /// the mode still does not ask.
    pub fn revoke_approvals(&self, kind: Option<GateKind>) {
        let standing = self.control.standing();
        let taken: Vec<GateKind> = standing
            .iter()
            .copied()
            .filter(|k| kind.is_none_or(|wanted| wanted == *k))
            .collect();
        if taken.is_empty() {
            let what = kind.map_or("no gate kind".to_string(), |k| k.plural().to_string());
            self.log(
                LogLevel::Info,
                "you",
                format!("nothing to take back: {what} approved for the session"),
            );
            return;
        }
        self.emit(Event::StandingApprovalRevoked { kind });
        self.control.revoke(kind);
        let mode = self.control.mode();
        let (asked, unasked): (Vec<GateKind>, Vec<GateKind>) =
            taken.iter().copied().partition(|k| mode.asks(*k));
        let names = |kinds: &[GateKind]| {
            kinds
                .iter()
                .map(|k| k.plural())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut message = format!("approval taken back ({})", names(&taken));
        if !asked.is_empty() {
            message.push_str(&format!("; {} are asked again", names(&asked)));
        }
        if !unasked.is_empty() {
            message.push_str(&format!(
                "; {} mode does not ask {} (step mode does)",
                mode.word(),
                names(&unasked)
            ));
        }
        self.log(LogLevel::Info, "you", message);
    }

    /// Approves the waiting gates that are no longer asked, saying why on the console.
    pub(super) fn release_gates(&self, why: &str) {
        for (gate, _) in self.control.gates_not_asked() {
            self.log(
                LogLevel::Info,
                "you",
                format!("gate {gate} approved: {why}"),
            );
            // Another window may have answered it meanwhile: then that answer stands.
            let _ = self.control.dispatch(Command::Resolve {
                gate,
                decision: Decision::Approve,
            });
        }
    }

    /// Ends the run: the first reason given is the one reported.
    pub fn fail(&self, message: String) {
        let mut fatal = self.fatal.lock().expect("fatal");
        if fatal.is_none() {
            *fatal = Some(message);
        }
        drop(fatal);
        self.control.stop.cancel();
    }

    pub fn budget_exhausted(&self, what: String) {
        if self.control.stop.is_cancelled() {
            return;
        }
        self.emit(Event::BudgetExhausted { what: what.clone() });
        self.log(
            LogLevel::Warn,
            "engine",
            format!("budget reached: {what}; finishing with what we have"),
        );
        self.control.stop.cancel();
    }

    pub fn stopping(&self) -> bool {
        self.control.stop.is_cancelled()
    }

    pub fn timing_meaningful(&self) -> bool {
        self.devices.is_gpu()
    }

    pub fn score_text(&self, id: CandidateId) -> String {
        match self.with_state(|s| s.candidates.get(&id).and_then(|c| c.score())) {
            Some(s) => format!("{s:.2}x"),
            None => "score n/a".into(),
        }
    }

    pub fn kernel_source(&self, id: CandidateId) -> Option<String> {
        let file = self.with_state(|s| s.candidates.get(&id).map(|c| c.file.clone()))?;
        self.session.read_file(&file).ok()
    }

    /// A candidate's saved evaluation result (`eval/<id>.json`), when it has one.
    pub fn load_result(&self, id: CandidateId) -> Option<crate::protocol::EvalResult> {
        let file = self.with_state(|s| s.candidates.get(&id).and_then(|c| c.eval_file.clone()))?;
        serde_json::from_str(&self.session.read_file(&file).ok()?).ok()
    }
}

/// Why a gate about the best is withdrawn when the best moved to `state.best`.
fn best_moved_why(state: &SessionState) -> String {
    match state.best {
        Some(now) if state.final_marked == Some(now) => {
            format!("candidate {now} was marked final: the stages are asked again on it")
        }
        Some(now) => format!("candidate {now} is the best now: the stages are asked again on it"),
        None => "no candidate is correct now".to_string(),
    }
}
