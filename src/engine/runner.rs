//! The hybrid pipeline (DESIGN.md section 1): seeds -> evaluate -> repair -> analysis ->
//! optimize from analysis -> select -> persistent-kernel check -> stages -> finish.
//!
//! Every step has a stable key (`seed1`, `seed1/repair2`, `analysis3`, `opt3`,
//! `stage/block_tiling`...). A resumed run replays the pipeline from the start and, step
//! by step, reuses what the earlier run saved under the same key: an answered LLM call is
//! read back from `llm/`, an evaluated candidate from `eval/`, a resolved gate from its
//! decision. Only unfinished work is done again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::sync::{Semaphore, mpsc};

use super::config::{Accept, AnalyzeWhen, PipelineConfig};
use super::control::{Control, Dispatched};
use super::events::*;
use super::llm_backend::{CallFailure, LlmBackend};
use super::prompting::{self, Attempt, StepContext};
use super::recorder::Recorder;
use super::{hints, persistent};
use crate::config::EvalConfig;
use crate::eval::{Device, EvalError, EvalProgress, EvalRequest, EvalResult, Evaluator};
use crate::prompts::PromptSet;
use crate::session::state::{CandidateStatus, SessionState};
use crate::session::store::SessionDir;
use crate::task::TaskFile;

/// Everything an engine run needs.
pub struct EngineSetup {
    pub session: SessionDir,
    /// The fold of events already on disk (empty for a new session).
    pub prior: SessionState,
    pub task: TaskFile,
    pub evaluator: Evaluator,
    pub device: Device,
    pub eval: EvalConfig,
    pub pipeline: PipelineConfig,
    pub llm: LlmBackend,
    pub prompts: PromptSet,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub state: EngineState,
    pub best: Option<CandidateId>,
    pub reason: String,
}

pub struct Engine {
    inner: Arc<Inner>,
    actions: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    action_worker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Inner {
    session: SessionDir,
    prior: SessionState,
    prior_calls: HashMap<String, CallId>,
    prior_candidates: HashMap<String, CandidateId>,
    prior_gates: HashMap<String, GateId>,
    task: TaskFile,
    evaluator: Evaluator,
    device: Device,
    eval: EvalConfig,
    pipeline: PipelineConfig,
    llm: LlmBackend,
    prompts: PromptSet,
    recorder: Mutex<Recorder>,
    control: Control,
    next_candidate: AtomicU32,
    next_call: AtomicU32,
    next_gate: AtomicU32,
    next_action: AtomicU32,
    call_slots: Semaphore,
    /// Set when a step failed in a way that ends the run (bad key, unknown model...).
    fatal: Mutex<Option<String>>,
    final_choice: Mutex<Option<CandidateId>>,
}

/// The outcome of one candidate's evaluation as the pipeline needs it.
#[derive(Clone)]
struct Evaluated {
    id: CandidateId,
    correct: bool,
    score: Option<f64>,
    result: Option<EvalResult>,
}

impl Engine {
    pub fn new(setup: EngineSetup) -> Result<Engine> {
        let EngineSetup {
            session,
            prior,
            task,
            evaluator,
            device,
            eval,
            pipeline,
            llm,
            prompts,
        } = setup;
        let recorder = Recorder::open(&session, prior.clone())?;
        let (control, actions) = Control::new(pipeline.mode);
        let latest = |pairs: Vec<(String, u32)>| {
            let mut map = HashMap::new();
            for (k, v) in pairs {
                if !k.is_empty() {
                    map.insert(k, v);
                }
            }
            map
        };
        let prior_calls = latest(
            prior
                .calls
                .values()
                .filter(|c| c.ok == Some(true) && c.response_file.is_some())
                .map(|c| (c.key.clone(), c.id))
                .collect(),
        );
        let prior_candidates = latest(
            prior
                .candidates
                .values()
                .map(|c| (c.key.clone(), c.id))
                .collect(),
        );
        let prior_gates = latest(
            prior
                .gates
                .values()
                .filter(|g| g.decision.is_some())
                .map(|g| (g.key.clone(), g.id))
                .collect(),
        );
        let next = |max: Option<u32>| AtomicU32::new(max.unwrap_or(0) + 1);
        let inner = Inner {
            next_candidate: next(prior.candidates.keys().max().copied()),
            next_call: next(prior.calls.keys().max().copied()),
            next_gate: next(prior.gates.keys().max().copied()),
            next_action: AtomicU32::new(
                prior
                    .candidates
                    .values()
                    .filter(|c| c.key.starts_with("user"))
                    .count() as u32
                    + 1,
            ),
            call_slots: Semaphore::new(pipeline.max_concurrent_calls.max(1) as usize),
            session,
            prior,
            prior_calls,
            prior_candidates,
            prior_gates,
            task,
            evaluator,
            device,
            eval,
            pipeline,
            llm,
            prompts,
            recorder: Mutex::new(recorder),
            control,
            fatal: Mutex::new(None),
            final_choice: Mutex::new(None),
        };
        Ok(Engine {
            inner: Arc::new(inner),
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
        self.inner
            .recorder
            .lock()
            .expect("recorder")
            .state()
            .clone()
    }

    pub fn session(&self) -> &SessionDir {
        &self.inner.session
    }

    /// Sends a command (from the TUI, the control file or Ctrl-C).
    pub fn command(&self, command: Command) {
        self.inner.command(command);
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
        let outcome = inner.clone().pipeline().await;
        if let Some(w) = wall {
            w.abort();
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

impl Inner {
    fn emit(&self, event: Event) -> EventRecord {
        let mut recorder = self.recorder.lock().expect("recorder");
        let record = recorder.emit(event);
        if let Some(error) = recorder.write_error.take() {
            drop(recorder);
            self.fail(format!(
                "cannot write the session ({error}); stopping so nothing more is lost"
            ));
        }
        record
    }

    fn log(&self, level: LogLevel, tag: &str, message: impl Into<String>) {
        self.emit(Event::Log {
            level,
            tag: tag.to_string(),
            message: message.into(),
        });
    }

    fn sync(&self) {
        self.recorder.lock().expect("recorder").sync();
    }

    fn state(&self) -> SessionState {
        self.recorder.lock().expect("recorder").state().clone()
    }

    /// A look at the live state without copying it.
    fn with_state<R>(&self, f: impl FnOnce(&SessionState) -> R) -> R {
        f(self.recorder.lock().expect("recorder").state())
    }

    fn command(&self, command: Command) {
        let text = format!("{command:?}");
        match self.control.dispatch(command.clone()) {
            Dispatched::Handled(message) => {
                match &command {
                    Command::SetMode { mode } => {
                        self.emit(Event::ModeChanged { mode: *mode });
                    }
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
            Dispatched::Ignored(why) => self.log(
                LogLevel::Warn,
                "you",
                format!(
                    "{}: ignored ({why})",
                    text.chars().take(60).collect::<String>()
                ),
            ),
        }
    }

    fn fail(&self, message: String) {
        let mut fatal = self.fatal.lock().expect("fatal");
        if fatal.is_none() {
            *fatal = Some(message);
        }
        drop(fatal);
        self.control.stop.cancel();
    }

    fn budget_exhausted(&self, what: String) {
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

    fn stopping(&self) -> bool {
        self.control.stop.is_cancelled()
    }

    fn timing_meaningful(&self) -> bool {
        self.device.is_gpu()
    }

    // -- the pipeline --------------------------------------------------------------

    async fn pipeline(self: Arc<Self>) -> RunOutcome {
        if self.prior.info.is_none() {
            let (provider, model) = self.llm.label();
            self.emit(Event::SessionStarted {
                task: self.task.name.clone(),
                task_hash: self.task.hash.clone(),
                provider,
                model,
                mode: self.pipeline.mode,
                device: self.device.to_string(),
                timing_meaningful: self.timing_meaningful(),
            });
        } else {
            self.emit(Event::SessionResumed {
                previous_seq: self.prior.last_seq,
            });
            self.log(
                LogLevel::Info,
                "engine",
                "resuming: saved answers and evaluations are reused",
            );
        }
        self.emit(Event::StateChanged {
            state: EngineState::Running,
        });
        if !self.timing_meaningful() {
            self.log(
                LogLevel::Info,
                "engine",
                "no GPU timing: kernels run through Triton's interpreter, candidates are ranked by correctness and scores show as n/a",
            );
        }

        // 1-5. Seed lineages run concurrently; each goes on to its algorithm analysis
        // and optimization as soon as it has a correct kernel, without waiting for the
        // other seeds' repairs.
        self.evaluator.prepare(self.device).await;
        let lineages = (1..=self.pipeline.seeds).map(|i| {
            let inner = self.clone();
            async move {
                match inner.clone().seed_lineage(i).await {
                    Some(seed) if seed.correct => {
                        inner.algorithm_step(seed).await;
                        true
                    }
                    _ => false,
                }
            }
        });
        let correct = futures::future::join_all(lineages).await;
        if !correct.contains(&true) && !self.stopping() {
            self.log(
                LogLevel::Warn,
                "engine",
                "no seed produced a correct kernel",
            );
        }
        self.sync();

        // 6. Select.
        let mut best = self.select_best();

        // 7-8. Persistent-kernel check, then the stages on the best kernel.
        if let Some(base) = best.clone()
            && !self.stopping()
            && !self.pipeline.stages.is_empty()
        {
            let source = self.kernel_source(base.id).unwrap_or_default();
            let check = persistent::check(&source);
            self.emit(Event::PersistentCheck {
                candidate: base.id,
                persistent: check.persistent,
                reasons: check.reasons.clone(),
            });
            // Without timing the score condition cannot be checked: a correct persistent
            // kernel is taken to meet it, so the flow is the same on the CPU.
            let fast_enough = base.score.is_none_or(|s| s >= 1.0);
            if check.persistent && fast_enough {
                self.log(
                    LogLevel::Info,
                    "engine",
                    format!(
                        "candidate {} is a persistent kernel ({}): skipping the stages, tuning would break it",
                        base.id,
                        check.reasons.join("; ")
                    ),
                );
            } else {
                let question = format!(
                    "Run the {} tuning stages on candidate {}?",
                    self.pipeline.stages.len(),
                    base.id
                );
                if self
                    .review_gate("stages", GateKind::Stages, Some(base.id), question)
                    .await
                {
                    best = Some(self.clone().stages(base).await);
                } else {
                    self.log(LogLevel::Info, "stages", "skipped by your decision");
                }
            }
        }

        // 9. Finish.
        let marked = *self.final_choice.lock().expect("final");
        let mut chosen = marked.or(best.as_ref().map(|b| b.id));
        if let Some(id) = chosen
            && marked.is_none()
            && !self.stopping()
        {
            let score = self.score_text(id);
            let question = format!("Declare candidate {id} ({score}) the final best?");
            if !self
                .review_gate("final", GateKind::FinalBest, Some(id), question)
                .await
            {
                self.log(
                    LogLevel::Info,
                    "engine",
                    "no final kernel declared (rejected); mark one with MarkFinal",
                );
                chosen = None;
            }
        }
        // A candidate the person marked final wins, also when marked during the gate.
        if let Some(marked) = *self.final_choice.lock().expect("final") {
            chosen = Some(marked);
        }
        self.finish(chosen).await
    }

    async fn finish(&self, best: Option<CandidateId>) -> RunOutcome {
        let fatal = self.fatal.lock().expect("fatal").clone();
        let budget = self.with_state(|s| s.budget_exhausted.clone());
        let (end_state, reason) = match (&fatal, self.stopping(), &budget) {
            (Some(f), _, _) => (EngineState::Failed, f.clone()),
            (None, true, Some(b)) => (EngineState::Stopped, format!("budget reached: {b}")),
            (None, true, None) => (EngineState::Stopped, "stopped".to_string()),
            (None, false, _) => (EngineState::Finished, "pipeline complete".to_string()),
        };
        if let Some(id) = best {
            if let Some(source) = self.kernel_source(id) {
                let _ = self.session.write_file("best_kernel.py", source.as_bytes());
            }
            self.log(
                LogLevel::Info,
                "engine",
                format!("best: candidate {id} ({})", self.score_text(id)),
            );
        } else {
            self.log(LogLevel::Warn, "engine", "no correct kernel");
        }
        if let Some(f) = &fatal {
            self.log(LogLevel::Error, "engine", f.clone());
        }
        self.emit(Event::SessionFinished {
            best,
            reason: reason.clone(),
        });
        self.emit(Event::StateChanged { state: end_state });
        self.sync();
        let state = self.state();
        if let Err(e) = crate::report::write_all(&self.session, &state) {
            self.log(
                LogLevel::Error,
                "engine",
                format!("cannot write the report files: {e:#}"),
            );
        }
        RunOutcome {
            state: end_state,
            best,
            reason,
        }
    }

    fn select_best(&self) -> Option<Evaluated> {
        let state = self.state();
        // Rank by score; without timing every correct kernel ties and the latest wins
        // (later kernels come from more refined steps).
        let best = state
            .candidates
            .values()
            .filter(|c| c.status == CandidateStatus::Correct)
            .max_by(|a, b| {
                a.score()
                    .unwrap_or(0.0)
                    .total_cmp(&b.score().unwrap_or(0.0))
                    .then(a.id.cmp(&b.id))
            })?;
        Some(Evaluated {
            id: best.id,
            correct: true,
            score: best.score(),
            result: None,
        })
    }

    fn score_text(&self, id: CandidateId) -> String {
        match self.with_state(|s| s.candidates.get(&id).and_then(|c| c.score())) {
            Some(s) => format!("{s:.2}x"),
            None => "score n/a".into(),
        }
    }

    fn kernel_source(&self, id: CandidateId) -> Option<String> {
        let file = self.with_state(|s| s.candidates.get(&id).map(|c| c.file.clone()))?;
        self.session.read_file(&file).ok()
    }

    // -- lineages --------------------------------------------------------------------

    async fn seed_lineage(self: Arc<Self>, index: u32) -> Option<Evaluated> {
        let key = format!("seed{index}");
        let tag = format!("seed {index}");
        let ctx = self.base_context(CallKind::Seed);
        let code = self
            .generate_code(&key, &tag, CallKind::Seed, None, ctx)
            .await?;
        let first = self.new_candidate(&key, None, CandidateKind::Seed { index }, &code.0, code.1);
        let evaluated = self.evaluate(first, &tag).await?;
        self.repair_loop(evaluated, &key, &tag, self.pipeline.seed_repairs)
            .await
    }

    /// Repairs `current` until it is correct or `attempts` are spent. Returns the last
    /// candidate of the lineage.
    async fn repair_loop(
        &self,
        mut current: Evaluated,
        key: &str,
        tag: &str,
        attempts: u32,
    ) -> Option<Evaluated> {
        let mut history: Vec<Attempt> = Vec::new();
        for attempt in 1..=attempts {
            if current.correct || self.stopping() {
                break;
            }
            let result = current
                .result
                .clone()
                .unwrap_or_else(|| self.load_result(current.id));
            history.push(Attempt::from_result(history.len() as u32 + 1, &result));
            let mut ctx = self.base_context(CallKind::Repair);
            ctx.kernel = self.kernel_source(current.id);
            ctx.error = Some(prompting::ErrorInfo::from_result(&result));
            ctx.hints = hints::hints_for(
                result
                    .category
                    .map(|c| c.to_string())
                    .as_deref()
                    .unwrap_or("runtime"),
                &format!("{}\n{}", result.summary, result.message),
            );
            ctx.history = history[..history.len() - 1].to_vec();
            let step_key = format!("{key}/repair{attempt}");
            let step_tag = tag;
            self.log(
                LogLevel::Info,
                step_tag,
                format!(
                    "repair {attempt}/{attempts}: {}",
                    result.summary.chars().take(160).collect::<String>()
                ),
            );
            let Some((code, call)) = self
                .generate_code(&step_key, step_tag, CallKind::Repair, Some(current.id), ctx)
                .await
            else {
                continue;
            };
            let id = self.new_candidate(
                &step_key,
                Some(current.id),
                CandidateKind::Repair { attempt },
                &code,
                call,
            );
            match self.evaluate(id, step_tag).await {
                Some(e) => current = e,
                None => continue,
            }
        }
        Some(current)
    }

    /// Analysis and optimization of a correct seed, when the configuration (and, in
    /// review mode, the person) wants it.
    async fn algorithm_step(self: Arc<Self>, seed: Evaluated) {
        let wanted = match self.pipeline.analyze {
            AnalyzeWhen::All => true,
            AnalyzeWhen::Slow => seed.score.is_none_or(|s| s < 1.0),
        };
        if !wanted || self.stopping() {
            return;
        }
        let question = format!(
            "Run algorithm analysis and optimization on candidate {} ({})?",
            seed.id,
            self.score_text(seed.id)
        );
        let key = format!("algorithm{}", seed.id);
        if self
            .review_gate(
                &key,
                GateKind::AlgorithmOptimization,
                Some(seed.id),
                question,
            )
            .await
        {
            self.analyze_and_optimize(seed).await;
        } else {
            self.log(
                LogLevel::Info,
                "analysis",
                format!("candidate {}: skipped by your decision", seed.id),
            );
        }
    }

    async fn analyze_and_optimize(self: Arc<Self>, seed: Evaluated) {
        let tag = "analysis".to_string();
        let mut ctx = self.base_context(CallKind::Analysis);
        ctx.kernel = self.kernel_source(seed.id);
        self.fill_timing(&mut ctx, seed.id);
        let key = format!("analysis{}", seed.id);
        let Some((answer, call)) = self
            .call_llm(&key, &tag, CallKind::Analysis, Some(seed.id), ctx)
            .await
        else {
            return;
        };
        let analysis = match crate::llm::extract_analysis(&answer) {
            Ok(a) => a,
            Err(e) => {
                self.log(
                    LogLevel::Error,
                    &tag,
                    format!("candidate {}: the analysis answer is unusable ({e}); no algorithm optimization for it", seed.id),
                );
                return;
            }
        };
        let json = serde_json::to_value(&analysis).unwrap_or_default();
        let already = self
            .prior
            .candidates
            .get(&seed.id)
            .and_then(|c| c.analysis.as_ref())
            .is_some();
        if !already {
            self.emit(Event::AnalysisReady {
                candidate: seed.id,
                call,
                analysis: json.clone(),
            });
        }
        if analysis.worth_optimizing == Some(false) {
            self.log(
                LogLevel::Info,
                &tag,
                format!(
                    "candidate {}: not worth optimizing: {}",
                    seed.id,
                    analysis.reason.as_deref().unwrap_or("no reason given")
                ),
            );
            return;
        }
        self.log(
            LogLevel::Info,
            &tag,
            format!(
                "candidate {}: {} (expected {})",
                seed.id,
                analysis
                    .optimization_method
                    .as_deref()
                    .or(analysis.bottleneck.as_deref())
                    .unwrap_or("optimize"),
                analysis.expected_speedup.as_deref().unwrap_or("?")
            ),
        );
        let opt_tag = format!("opt {}", seed.id);
        let mut ctx = self.base_context(CallKind::Optimize);
        ctx.kernel = self.kernel_source(seed.id);
        ctx.analysis = Some(json);
        self.fill_timing(&mut ctx, seed.id);
        let key = format!("opt{}", seed.id);
        let Some((code, call)) = self
            .generate_code(&key, &opt_tag, CallKind::Optimize, Some(seed.id), ctx)
            .await
        else {
            return;
        };
        let id = self.new_candidate(&key, Some(seed.id), CandidateKind::Algorithm, &code, call);
        if let Some(e) = self.evaluate(id, &opt_tag).await {
            let last = self
                .repair_loop(e, &key, &opt_tag, self.pipeline.algorithm_repairs)
                .await;
            if let Some(last) = last {
                let before = self.score_text(seed.id);
                let after = if last.correct {
                    self.score_text(last.id)
                } else {
                    "failed".into()
                };
                self.log(
                    LogLevel::Info,
                    &opt_tag,
                    format!("algorithm optimization: {before} -> {after}"),
                );
            }
        }
    }

    async fn stages(self: Arc<Self>, start: Evaluated) -> Evaluated {
        let mut base = start;
        let total = self.pipeline.stages.len();
        for (i, stage) in self.pipeline.stages.clone().iter().enumerate() {
            if self.stopping() {
                break;
            }
            let tag = format!("stage {}/{total}", i + 1);
            let key = format!("stage/{stage}");
            let mut ctx = self.base_context(CallKind::Stage);
            ctx.stage = Some(stage.clone());
            ctx.kernel = self.kernel_source(base.id);
            self.fill_timing(&mut ctx, base.id);
            let generated = self
                .generate_code(&key, &tag, CallKind::Stage, Some(base.id), ctx)
                .await;
            let mut last = None;
            if let Some((code, call)) = generated {
                let kind = CandidateKind::Stage {
                    name: stage.clone(),
                    index: i as u32 + 1,
                };
                let id = self.new_candidate(&key, Some(base.id), kind, &code, call);
                if let Some(e) = self.evaluate(id, &tag).await {
                    last = self
                        .repair_loop(e, &key, &tag, self.pipeline.stage_repairs)
                        .await;
                }
            }
            let (accepted, reason) = match &last {
                None => (false, "no kernel".to_string()),
                Some(l) => stage_verdict(self.pipeline.accept, l.correct, l.score, base.score),
            };
            let already = self.prior.stages.iter().any(|s| &s.stage == stage);
            if !already {
                self.emit(Event::StageFinished {
                    stage: stage.clone(),
                    base: base.id,
                    result: last.as_ref().map(|l| l.id),
                    accepted,
                    reason: reason.clone(),
                });
            }
            self.log(
                LogLevel::Info,
                &tag,
                format!(
                    "{stage}: {reason}{}",
                    if accepted { "" } else { " (rejected)" }
                ),
            );
            if accepted && let Some(l) = last {
                base = l;
            }
            self.sync();
        }
        base
    }

    // -- steps ------------------------------------------------------------------------

    fn base_context(&self, kind: CallKind) -> StepContext {
        StepContext::new(kind, &self.task, self.timing_meaningful())
    }

    fn fill_timing(&self, ctx: &mut StepContext, id: CandidateId) {
        if let Some(eval) = self.with_state(|s| s.candidates.get(&id).and_then(|c| c.eval.clone()))
        {
            ctx.kernel_ms = eval.kernel_ms;
            ctx.reference_ms = eval.reference_ms;
            ctx.score = eval.score;
        }
        let result = self.load_result(id);
        ctx.metrics = result
            .profile
            .filter(|p| p.get("available").and_then(|a| a.as_bool()) == Some(true));
    }

    fn load_result(&self, id: CandidateId) -> EvalResult {
        let file = format!("eval/{id}.json");
        self.session
            .read_file(&file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| {
                EvalResult::harness_failure("?", "the evaluation result is missing", "")
            })
    }

    fn new_candidate(
        &self,
        key: &str,
        parent: Option<CandidateId>,
        kind: CandidateKind,
        code: &str,
        call: Option<CallId>,
    ) -> CandidateId {
        if let Some(id) = self.prior_candidates.get(key) {
            return *id;
        }
        let id = self.next_candidate.fetch_add(1, Ordering::Relaxed);
        let file = format!("kernels/{id}-{}.py", kind.word());
        if let Err(e) = self.session.write_file(&file, code.as_bytes()) {
            self.fail(format!("cannot write {file}: {e:#}"));
        }
        self.emit(Event::CandidateCreated {
            id,
            key: key.to_string(),
            parent,
            kind,
            file,
            call,
        });
        id
    }

    /// Evaluates a candidate (reusing a saved evaluation on resume). `None` when the
    /// candidate was dropped at a gate or the run is stopping.
    async fn evaluate(&self, id: CandidateId, tag: &str) -> Option<Evaluated> {
        let candidate = self.with_state(|s| s.candidates.get(&id).cloned())?;
        if let (Some(summary), true) = (
            &candidate.eval,
            self.prior
                .candidates
                .get(&id)
                .is_some_and(|c| c.eval.is_some()),
        ) {
            return Some(Evaluated {
                id,
                correct: summary.correct,
                score: summary.score,
                result: None,
            });
        }
        if candidate.status == CandidateStatus::Dropped || self.stopping() {
            return None;
        }
        if self.control.mode() == Mode::Step {
            let question = format!("Evaluate candidate {id} ({})?", candidate.kind.word());
            match self
                .gate(
                    &format!("eval{id}"),
                    GateKind::Evaluation,
                    Some(id),
                    None,
                    question,
                    Some(candidate.file.clone()),
                )
                .await
            {
                Decision::Approve => {}
                Decision::Reject => {
                    self.emit(Event::CandidateDropped {
                        id,
                        reason: "rejected before evaluation".into(),
                    });
                    return None;
                }
                Decision::Rewrite { text } => {
                    if let Err(e) = self.session.write_file(&candidate.file, text.as_bytes()) {
                        self.fail(format!("cannot write {}: {e:#}", candidate.file));
                        return None;
                    }
                    self.log(
                        LogLevel::Info,
                        tag,
                        format!("candidate {id} edited by you before evaluation"),
                    );
                }
            }
        }
        self.control.wait_unpaused().await;
        if self.stopping() {
            return None;
        }
        let profile = self.pipeline.profile;
        let result = self.run_evaluation(id, &candidate.file, profile).await?;
        let summary = self.record_result(id, tag, &result);
        Some(Evaluated {
            id,
            correct: summary.correct,
            score: summary.score,
            result: Some(result),
        })
    }

    /// Runs one evaluation of a candidate's kernel file, its live phases going out as
    /// events. `None` when cancelled or when the evaluator itself failed (the run stops).
    async fn run_evaluation(
        &self,
        id: CandidateId,
        file: &str,
        profile: bool,
    ) -> Option<EvalResult> {
        self.emit(Event::EvalStarted { candidate: id });
        let mut request = EvalRequest::new(
            self.session.file("task.py"),
            self.session.file(file),
            self.device,
            self.eval.clone(),
        );
        request.profile = profile && self.device.is_gpu();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let evaluation =
            self.evaluator
                .evaluate(request, self.control.stop.child_token(), Some(tx));
        tokio::pin!(evaluation);
        let outcome = loop {
            tokio::select! {
                outcome = &mut evaluation => break outcome,
                Some(progress) = rx.recv() => {
                    if let EvalProgress::Phase(phase) = progress {
                        self.emit(Event::EvalPhase { candidate: id, phase });
                    }
                }
            }
        };
        match outcome {
            Ok(result) => Some(result),
            Err(EvalError::Cancelled) => None,
            Err(e) => {
                self.fail(format!("the evaluator failed: {e}"));
                None
            }
        }
    }

    /// Saves a result as `eval/<id>.json`, announces it (event and console line) and
    /// updates the best candidate.
    fn record_result(&self, id: CandidateId, tag: &str, result: &EvalResult) -> EvalSummary {
        let result_file = format!("eval/{id}.json");
        if let Ok(json) = serde_json::to_vec_pretty(result) {
            let _ = self.session.write_file(&result_file, &json);
        }
        let summary = summarize(result);
        let line = if summary.correct {
            match (summary.score, summary.kernel_ms, summary.reference_ms) {
                (Some(s), Some(k), Some(r)) => {
                    format!("candidate {id}: correct, {s:.2}x ({k:.4} ms vs {r:.4} ms)")
                }
                _ => format!("candidate {id}: correct (score n/a)"),
            }
        } else {
            format!(
                "candidate {id}: {}: {}",
                summary.category.as_deref().unwrap_or("failed"),
                summary.summary.chars().take(200).collect::<String>()
            )
        };
        let level = if summary.correct {
            LogLevel::Info
        } else {
            LogLevel::Warn
        };
        for flag in &summary.flags {
            self.log(
                LogLevel::Warn,
                tag,
                format!("candidate {id}: flagged {flag}"),
            );
        }
        self.emit(Event::EvalFinished {
            candidate: id,
            result_file,
            summary: summary.clone(),
        });
        self.log(level, tag, line);
        if summary.correct {
            self.update_best(id, summary.score);
        }
        self.sync();
        summary
    }

    fn update_best(&self, id: CandidateId, score: Option<f64>) {
        let (best, current_score) = self.with_state(|s| {
            (
                s.best,
                s.best.and_then(|b| s.candidates.get(&b)).map(|c| c.score()),
            )
        });
        let better = match current_score {
            None => true,
            Some(current) => {
                score.unwrap_or(0.0) > current.unwrap_or(0.0)
                    || (score.is_none() && current.is_none())
            }
        };
        if better && best != Some(id) {
            self.emit(Event::BestChanged {
                candidate: id,
                score,
            });
        }
    }

    /// Asks for code; a malformed answer (no code) is logged and the step gives up.
    async fn generate_code(
        &self,
        key: &str,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        ctx: StepContext,
    ) -> Option<(String, Option<CallId>)> {
        if let Some(id) = self.prior_candidates.get(key) {
            // Resumed: the candidate exists; its code is on disk.
            let c = self.prior.candidates.get(id)?;
            self.log(
                LogLevel::Info,
                tag,
                format!("reusing candidate {id}, saved before the interruption"),
            );
            return Some((self.session.read_file(&c.file).ok()?, c.call));
        }
        let (answer, call) = self.call_llm(key, tag, kind, candidate, ctx).await?;
        match crate::llm::extract_code(&answer) {
            Ok(code) => Some((code, Some(call))),
            Err(e) => {
                self.log(LogLevel::Error, tag, format!("call {call}: {e}"));
                None
            }
        }
    }

    /// One LLM call through the gates, budgets and concurrency limit. Returns the answer
    /// text (a truncated answer's partial text, with a warning) and the call id.
    async fn call_llm(
        &self,
        key: &str,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        ctx: StepContext,
    ) -> Option<(String, CallId)> {
        if let Some(call) = self.prior_calls.get(key) {
            let state = &self.prior;
            let file = state.calls.get(call)?.response_file.clone()?;
            if let Ok(text) = self.session.read_file(&file) {
                self.log(
                    LogLevel::Info,
                    tag,
                    format!("reusing the saved answer of call {call}"),
                );
                return Some((text, *call));
            }
        }
        if self.stopping() {
            return None;
        }
        let _slot = tokio::select! {
            permit = self.call_slots.acquire() => permit.ok()?,
            _ = self.control.stop.cancelled() => return None,
        };
        self.control.wait_unpaused().await;
        if self.stopping() || !self.within_budget() {
            return None;
        }
        let call = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (system, mut user) = match prompting::render(&self.prompts, &ctx) {
            Ok(p) => p,
            Err(e) => {
                self.fail(format!("cannot render the {} prompt: {e:#}", kind.word()));
                return None;
            }
        };
        let prompt_file = format!("llm/{call}.prompt.md");
        let _ = self
            .session
            .write_file(&format!("llm/{call}.system.md"), system.as_bytes());
        let _ = self.session.write_file(&prompt_file, user.as_bytes());
        if self.control.mode() == Mode::Step {
            let question = format!("Send the {} prompt ({tag})?", kind.word());
            match self
                .gate(
                    &format!("call/{key}"),
                    GateKind::LlmCall,
                    candidate,
                    Some(call),
                    question,
                    Some(prompt_file.clone()),
                )
                .await
            {
                Decision::Approve => {}
                Decision::Reject => {
                    self.log(
                        LogLevel::Info,
                        tag,
                        format!("{} call skipped by your decision", kind.word()),
                    );
                    return None;
                }
                Decision::Rewrite { text } => {
                    user = text;
                    let _ = self.session.write_file(&prompt_file, user.as_bytes());
                }
            }
        }
        let (provider, model) = self.llm.label();
        self.emit(Event::LlmCallStarted {
            call,
            key: key.to_string(),
            kind,
            candidate,
            provider,
            model,
            prompt_file: prompt_file.clone(),
        });
        if matches!(self.llm, LlmBackend::Manual) {
            self.log(
                LogLevel::Info,
                tag,
                format!(
                    "call {call} is yours: read {} and write your answer to {}",
                    self.session.file(&prompt_file).display(),
                    self.session
                        .file(&format!("llm/{call}.answer.md"))
                        .display()
                ),
            );
        }
        let token = self.control.call_token(call);
        let response_file = format!("llm/{call}.response.md");
        let reasoning_file = format!("llm/{call}.reasoning.md");
        let started = Instant::now();
        let result = self
            .llm
            .complete(
                &self.session,
                call,
                &system,
                &user,
                self.pipeline.max_output_tokens,
                &token,
                &self.control,
                |text, reasoning| {
                    self.emit(Event::LlmDelta {
                        call,
                        text: text.to_string(),
                        reasoning: reasoning.to_string(),
                    });
                },
                &response_file,
                &reasoning_file,
            )
            .await;
        self.control.call_done(call);
        let latency_s = started.elapsed().as_secs_f64();
        match result {
            Ok(answer) => {
                self.emit(Event::LlmCallFinished {
                    call,
                    ok: true,
                    error: None,
                    usage: answer.usage,
                    cost_usd: answer.cost_usd,
                    latency_s,
                    response_file: Some(response_file),
                });
                if let Some(warning) = &answer.warning {
                    self.log(LogLevel::Warn, tag, format!("call {call}: {warning}"));
                }
                self.check_budget_after_call();
                Some((answer.text, call))
            }
            Err(failure) => {
                let (message, usage, cost) = match &failure {
                    CallFailure::Cancelled => {
                        ("cancelled".to_string(), TokenUsage::default(), None)
                    }
                    CallFailure::Failed {
                        message,
                        usage,
                        cost_usd,
                    }
                    | CallFailure::Fatal {
                        message,
                        usage,
                        cost_usd,
                    } => (message.clone(), *usage, *cost_usd),
                };
                self.emit(Event::LlmCallFinished {
                    call,
                    ok: false,
                    error: Some(message.clone()),
                    usage,
                    cost_usd: cost,
                    latency_s,
                    response_file: None,
                });
                self.log(
                    LogLevel::Error,
                    tag,
                    format!("call {call} failed: {message}"),
                );
                if let CallFailure::Fatal { message, .. } = failure {
                    self.fail(format!("the LLM provider refuses the run: {message}"));
                }
                None
            }
        }
    }

    fn within_budget(&self) -> bool {
        let (usage, cost) = self.with_state(|s| (s.total_usage(), s.total_cost()));
        if let Some(max) = self.pipeline.max_tokens
            && usage.input + usage.output >= max
        {
            self.budget_exhausted(format!("{} tokens of {max}", usage.input + usage.output));
            return false;
        }
        if let Some(max) = self.pipeline.max_cost_usd
            && let Some(cost) = cost
            && cost >= max
        {
            self.budget_exhausted(format!("${cost:.4} of ${max}"));
            return false;
        }
        true
    }

    fn check_budget_after_call(&self) {
        if self.pipeline.max_cost_usd.is_some() && self.with_state(|s| s.total_cost().is_none()) {
            self.log(
                LogLevel::Warn,
                "engine",
                "the cost of a call is unknown: the cost budget cannot be enforced exactly",
            );
        }
        self.within_budget();
    }

    /// A gate that review and step modes stop at.
    async fn review_gate(
        &self,
        key: &str,
        kind: GateKind,
        candidate: Option<CandidateId>,
        question: String,
    ) -> bool {
        if self.control.mode() == Mode::Auto {
            return true;
        }
        !matches!(
            self.gate(key, kind, candidate, None, question, None).await,
            Decision::Reject
        )
    }

    async fn gate(
        &self,
        key: &str,
        kind: GateKind,
        candidate: Option<CandidateId>,
        call: Option<CallId>,
        question: String,
        file: Option<String>,
    ) -> Decision {
        if let Some(gate) = self.prior_gates.get(key)
            && let Some(decision) = self.prior.gates.get(gate).and_then(|g| g.decision.clone())
        {
            return decision;
        }
        if self.stopping() {
            return Decision::Reject;
        }
        let gate = self.next_gate.fetch_add(1, Ordering::Relaxed);
        let answer = self.control.open_gate(gate);
        self.emit(Event::GateOpened {
            gate,
            key: key.to_string(),
            kind,
            candidate,
            call,
            question: question.clone(),
            file,
        });
        self.emit(Event::StateChanged {
            state: EngineState::Waiting,
        });
        self.log(
            LogLevel::Info,
            "you",
            format!("waiting for you: {question}"),
        );
        self.sync();
        let decision = tokio::select! {
            d = answer => d.unwrap_or(Decision::Reject),
            _ = self.control.stop.cancelled() => Decision::Reject,
        };
        self.emit(Event::GateResolved {
            gate,
            decision: decision.clone(),
        });
        if !self.stopping() {
            self.emit(Event::StateChanged {
                state: if self.control.is_paused() {
                    EngineState::Paused
                } else {
                    EngineState::Running
                },
            });
        }
        decision
    }

    // -- the person's actions -----------------------------------------------------------

    async fn serve_actions(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Command>) {
        while let Some(action) = rx.recv().await {
            let inner = self.clone();
            // Each action runs on its own: a long repair must not block a re-evaluation.
            tokio::spawn(async move { inner.act(action).await });
        }
    }

    async fn act(self: Arc<Self>, action: Command) {
        let n = self.next_action.fetch_add(1, Ordering::Relaxed);
        let key = format!("user{n}-{}", std::process::id());
        let tag = "you";
        match action {
            Command::Repair {
                candidate,
                instruction,
            } => self.instructed(&key, candidate, instruction, true).await,
            Command::Optimize {
                candidate,
                instruction,
            } => self.instructed(&key, candidate, instruction, false).await,
            Command::Manual { parent, code } => {
                let id = self.new_candidate(&key, parent, CandidateKind::Manual, &code, None);
                self.evaluate(id, tag).await;
            }
            Command::Reevaluate { candidate } => self.reevaluate(candidate, false).await,
            Command::Profile { candidate } => self.reevaluate(candidate, true).await,
            Command::MarkFinal { candidate } => {
                if self
                    .state()
                    .candidates
                    .get(&candidate)
                    .is_some_and(|c| c.is_correct())
                {
                    *self.final_choice.lock().expect("final") = Some(candidate);
                    let score = self
                        .state()
                        .candidates
                        .get(&candidate)
                        .and_then(|c| c.score());
                    self.emit(Event::BestChanged { candidate, score });
                    self.log(
                        LogLevel::Info,
                        tag,
                        format!("candidate {candidate} marked final"),
                    );
                } else {
                    self.log(
                        LogLevel::Warn,
                        tag,
                        format!("candidate {candidate} is not correct: not marked final"),
                    );
                }
            }
            _ => {}
        }
        // On a finished run the result files follow what the person did.
        let state = self.state();
        if state.state.is_over() {
            if let Some(best) = state.best
                && let Some(source) = self.kernel_source(best)
            {
                let _ = self.session.write_file("best_kernel.py", source.as_bytes());
            }
            if let Err(e) = crate::report::write_all(&self.session, &state) {
                self.log(
                    LogLevel::Error,
                    "engine",
                    format!("cannot write the report files: {e:#}"),
                );
            }
        }
    }

    /// Repair (`repair`) or optimize a candidate following the person's instruction.
    async fn instructed(
        &self,
        key: &str,
        candidate: CandidateId,
        instruction: String,
        repair: bool,
    ) {
        let tag = "you";
        let mut ctx = self.base_context(CallKind::Instructed);
        ctx.kernel = self.kernel_source(candidate);
        ctx.instruction = Some(instruction.clone());
        ctx.instruction_mode = Some(if repair { "repair" } else { "optimize" }.to_string());
        if repair
            && self
                .state()
                .candidates
                .get(&candidate)
                .is_some_and(|c| c.eval.is_some())
        {
            let result = self.load_result(candidate);
            if !result.correct {
                ctx.error = Some(prompting::ErrorInfo::from_result(&result));
            }
        }
        self.fill_timing(&mut ctx, candidate);
        if let Some((code, call)) = self
            .generate_code(key, tag, CallKind::Instructed, Some(candidate), ctx)
            .await
        {
            let kind = CandidateKind::Instructed { instruction };
            let id = self.new_candidate(key, Some(candidate), kind, &code, call);
            self.evaluate(id, tag).await;
        }
    }

    async fn reevaluate(&self, id: CandidateId, profile: bool) {
        let Some(file) = self.with_state(|s| s.candidates.get(&id).map(|c| c.file.clone())) else {
            return;
        };
        if profile && !self.device.is_gpu() {
            self.log(
                LogLevel::Warn,
                "you",
                "profiling needs a GPU: re-evaluating without it",
            );
        }
        if let Some(result) = self.run_evaluation(id, &file, profile).await {
            self.record_result(id, "you", &result);
            self.log(
                LogLevel::Info,
                "you",
                format!("candidate {id} re-evaluated"),
            );
        }
    }
}

/// Whether a stage's final kernel replaces its base, and why. `Improve` is regression
/// protection: only a correct kernel that is faster wins; without timing (CPU) a correct
/// kernel is accepted because there is nothing to compare.
pub fn stage_verdict(
    accept: Accept,
    correct: bool,
    new: Option<f64>,
    old: Option<f64>,
) -> (bool, String) {
    if !correct {
        return (false, "not correct".to_string());
    }
    match (accept, new, old) {
        (Accept::Any, _, _) => (true, "correct (accept = any)".to_string()),
        (Accept::Improve, Some(new), Some(old)) if new > old => {
            (true, format!("{old:.3}x -> {new:.3}x"))
        }
        (Accept::Improve, Some(new), Some(old)) => (
            false,
            format!("{old:.3}x -> {new:.3}x is no improvement: keeping the base"),
        ),
        (Accept::Improve, _, _) => (true, "correct (no timing to compare)".to_string()),
    }
}

/// The part of a result the events carry.
pub fn summarize(result: &EvalResult) -> EvalSummary {
    EvalSummary {
        correct: result.correct,
        category: result.category.map(|c| c.to_string()),
        summary: result.summary.clone(),
        score: result.score(),
        kernel_ms: result
            .timing
            .as_ref()
            .filter(|t| t.meaningful)
            .map(|t| t.kernel.median_ms),
        reference_ms: result
            .timing
            .as_ref()
            .filter(|t| t.meaningful)
            .map(|t| t.reference.median_ms),
        flags: result.flags.clone(),
        warnings: result
            .static_report
            .warnings
            .iter()
            .map(|w| w.message.clone())
            .collect(),
    }
}

/// Copies the task into the session and writes `session.json`.
pub fn write_session_files(
    session: &SessionDir,
    task: &TaskFile,
    description: serde_json::Value,
) -> Result<()> {
    session
        .write_file("task.py", task.source.as_bytes())
        .context("cannot copy the task into the session")?;
    session
        .write_file("session.json", &serde_json::to_vec_pretty(&description)?)
        .context("cannot write session.json")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_protection_keeps_the_faster_base() {
        assert_eq!(
            stage_verdict(Accept::Improve, true, Some(1.52), Some(1.41)),
            (true, "1.410x -> 1.520x".to_string())
        );
        let (accepted, reason) = stage_verdict(Accept::Improve, true, Some(1.30), Some(1.41));
        assert!(!accepted, "{reason}");
        assert!(reason.contains("no improvement"));
        assert!(
            stage_verdict(Accept::Any, true, Some(1.30), Some(1.41)).0,
            "greedy chaining accepts a slower kernel"
        );
        assert!(
            !stage_verdict(Accept::Any, false, Some(9.0), Some(1.0)).0,
            "never an incorrect one"
        );
        assert!(
            stage_verdict(Accept::Improve, true, None, None).0,
            "no timing: correct is enough"
        );
    }
}
