//! The plan of the hybrid pipeline (docs/architecture.md, Pipeline), step by step: seeds -> evaluate
//! -> repair -> analysis -> optimize from analysis -> select -> persistent-kernel check ->
//! stages -> finish. Each step is built from `steps.rs` and returns a `Step`; what an
//! earlier run already did comes back through `replay.rs`.

use std::cmp::Ordering;
use std::sync::Arc;

use super::outcome::{EndFacts, Step, decide_end, step};
use super::persistent;
use super::runner::{Inner, RunOutcome};
use super::steps::{ANALYSIS, Evaluated};
use crate::config::pipeline::{Accept, AnalyzeWhen};
use crate::protocol::sol::FASTER_THAN_LIGHT;
use crate::protocol::*;
use crate::session::state::{CandidateStatus, Speedup};

/// Why the calls that only chase speed do not run on the CPU (a console line).
const CPU_SKIP: &str = "on the CPU nothing is timed, so the algorithm analysis, the optimization from it and the tuning stages (calls that only chase speed) cannot beat the first correct kernel: they are skipped; `--speed-calls-on-cpu` ([pipeline] speed_calls_on_cpu = true) runs them anyway";

impl Inner {
    pub(super) async fn pipeline(self: Arc<Self>) -> RunOutcome {
        self.announce_start();

        // 1-5. Seed lineages run concurrently; each goes on to its algorithm analysis and
        // optimization as soon as it has a correct kernel, without waiting for the others.
        self.evaluator.prepare(self.devices.primary()).await;
        self.evaluate_left_actions().await;
        let lineages = (1..=self.pipeline.seeds).map(|i| self.clone().seed_lineage(i));
        let lineages = futures::future::join_all(lineages).await;
        if !lineages
            .iter()
            .any(|l| matches!(l, Step::Done(e) if e.correct))
            && !self.stopping()
        {
            self.log(
                LogLevel::Warn,
                "engine",
                "no seed produced a correct kernel",
            );
        }
        self.sync();

        // 6-8. Select the best, check it for a persistent kernel, run the stages on it.
        // A resumed run tunes the base the earlier run chose, whatever the best is now.
        if let Some(best) = self.tuning_base()
            && !self.stopping()
            && !self.pipeline.stages.is_empty()
            && self.speed_calls_wanted()
        {
            self.clone().tune(best).await;
        }

        // 9. Finish.
        self.finish().await
    }

    fn announce_start(&self) {
        if self.replay.is_resume() {
            self.emit(Event::SessionResumed {
                previous_seq: self.replay.prior().last_seq,
            });
            self.log(
                LogLevel::Info,
                "engine",
                "resuming: saved answers and evaluations are reused",
            );
            // `kforge resume --mode`: the mode asked for wins over the log's, recorded.
            if self.pipeline.mode != self.control.mode() {
                self.switch_mode(self.pipeline.mode, "engine");
            }
            // Calls the earlier run left in flight end here, so no view waits for them.
            let prior = self.replay.prior();
            let dangling: Vec<CallId> = prior.calls_in_flight().map(|c| c.id).collect();
            let unanswered: Vec<GateId> = prior.waiting_gates().iter().map(|g| g.id).collect();
            for gate in unanswered {
                self.emit(Event::GateWithdrawn {
                    gate,
                    reason: "the run stopped before it was answered; asked again now".into(),
                });
            }
            for call in dangling {
                self.emit(Event::LlmCallFinished {
                    call,
                    ok: false,
                    error: Some(CALL_INTERRUPTED.into()),
                    usage: TokenUsage::default(),
                    cost_usd: None,
                    latency_s: 0.0,
                    response_file: None,
                });
            }
            // So do evaluations: a candidate goes back to its last result, or to pending
            // (the replay, or `evaluate_left_actions`, evaluates it again).
            let unfinished: Vec<(CandidateId, bool)> = prior
                .evaluations_in_flight()
                .map(|c| (c.id, c.eval.is_some()))
                .collect();
            for (candidate, had_result) in unfinished {
                self.emit(Event::EvalInterrupted { candidate });
                self.log(
                    LogLevel::Info,
                    "engine",
                    if had_result {
                        format!("candidate {candidate}: its evaluation was interrupted; its last result stands")
                    } else {
                        format!("candidate {candidate}: its evaluation was interrupted; it is evaluated again")
                    },
                );
            }
        } else {
            let (provider, model) = self.llm.label();
            self.emit(Event::SessionStarted {
                task: self.task.name.clone(),
                task_hash: self.task.hash.clone(),
                provider,
                model,
                mode: self.pipeline.mode,
                device: self.devices.to_string(),
                timing_meaningful: self.timing_meaningful(),
                precision: Some(self.eval.precision),
            });
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
            if !self.pipeline.speed_calls_on_cpu {
                self.log(LogLevel::Info, "engine", CPU_SKIP);
            }
        }
    }

    /// Whether the calls that only chase speed (analysis, optimization, stages) run: always
    /// where kernels are timed; on the CPU only when the person asked for them.
    fn speed_calls_wanted(&self) -> bool {
        self.timing_meaningful() || self.pipeline.speed_calls_on_cpu
    }

    /// On resume: the person's candidates (a manual kernel, an instructed repair, a
    /// re-asked call) that the earlier run created but did not evaluate are evaluated
    /// now; the replay of the pipeline does not come back to them.
    async fn evaluate_left_actions(&self) {
        let left: Vec<CandidateId> = self
            .replay
            .prior()
            .candidates
            .values()
            .filter(|c| c.eval.is_none() && c.from_action())
            .filter(|c| {
                matches!(
                    c.status,
                    CandidateStatus::Pending | CandidateStatus::Evaluating
                )
            })
            .map(|c| c.id)
            .collect();
        for id in left {
            if self.stopping() {
                return;
            }
            if let Step::Failed(why) = self.evaluate(id, super::actions::TAG).await {
                self.log(LogLevel::Warn, super::actions::TAG, why);
            }
        }
    }

    /// Steps 1-5 for one seed: generate, evaluate, repair, then analysis and optimization
    /// of a correct kernel. Returns the lineage's last seed-line candidate.
    async fn seed_lineage(self: Arc<Self>, index: u32) -> Step<Evaluated> {
        let key = StepKey::Seed { index };
        let tag = format!("seed {index}");
        // Each seed takes its own direction (its prompt says which and names the others'),
        // recorded in its candidate's kind.
        let (ctx, direction) = self.seed_context(index);
        if self.replay.candidate(&key).is_none() {
            self.log(
                LogLevel::Info,
                &tag,
                format!("direction `{}`: {}", direction.name, direction.text),
            );
        }
        let (code, call) = step!(
            self.ask_for_code(&key, &tag, CallKind::Seed, None, ctx)
                .await
        );
        let kind = CandidateKind::Seed {
            index,
            direction: Some(direction.name),
        };
        let first = step!(self.new_candidate(&key, None, kind, &code, call));
        let evaluated = step!(self.evaluate(first, &tag).await);
        let seed = step!(
            self.repair_loop(evaluated, &key, &tag, self.pipeline.seed_repairs)
                .await
        );
        if seed.correct {
            match self.clone().algorithm_step(seed.clone()).await {
                Step::Stopped => return Step::Stopped,
                Step::Failed(e) => self.log(LogLevel::Warn, "analysis", e),
                Step::Done(()) | Step::Skipped(_) => {}
            }
        }
        Step::Done(seed)
    }

    /// Whether the person rejected the gate before the call of `step` (step mode).
    fn call_rejected(&self, step: &StepKey) -> bool {
        let gate = step.call_gate();
        self.with_state(|s| {
            s.gates.values().any(|g| {
                g.decision == Some(Decision::Reject) && g.gate_key().as_ref() == Some(&gate)
            })
        })
    }

    /// Step 3: repairs `current` until it is correct or `attempts` are spent. Returns the
    /// lineage's last candidate.
    async fn repair_loop(
        &self,
        mut current: Evaluated,
        key: &StepKey,
        tag: &str,
        attempts: u32,
    ) -> Step<Evaluated> {
        let mut history = Vec::new();
        for attempt in 1..=attempts {
            if current.correct {
                break;
            }
            if self.stopping() {
                return Step::Stopped;
            }
            history.push(crate::prompts::AttemptFailure::from_eval(
                history.len() as u32 + 1,
                &current.result,
            ));
            let ctx = self
                .context_for(Some(current.id))
                .with_attempts(history[..history.len() - 1].to_vec());
            let step_key = key.repair(attempt);
            self.log(
                LogLevel::Info,
                tag,
                format!(
                    "repair {attempt}/{attempts}: {}",
                    current.result.summary.chars().take(160).collect::<String>()
                ),
            );
            let generated = self
                .ask_for_code(&step_key, tag, CallKind::Repair, Some(current.id), ctx)
                .await;
            let (code, call) = match generated {
                Step::Done(g) => g,
                Step::Stopped => return Step::Stopped,
                // The person rejected the call at its gate ("its step gives up"): the repair
                // ends here, not at the next attempt's gate.
                Step::Skipped(why) if self.call_rejected(&step_key) => {
                    self.log(
                        LogLevel::Warn,
                        tag,
                        format!("repair {attempt}/{attempts}: {why}; the repair stops here"),
                    );
                    break;
                }
                Step::Skipped(why) | Step::Failed(why) => {
                    self.log(LogLevel::Warn, tag, format!("repair {attempt}: {why}"));
                    continue;
                }
            };
            let kind = CandidateKind::Repair { attempt };
            let id = step!(self.new_candidate(&step_key, Some(current.id), kind, &code, call));
            match self.evaluate(id, tag).await {
                Step::Done(e) => current = e,
                Step::Skipped(_) => continue,
                other => return other,
            }
        }
        Step::Done(current)
    }

    /// Steps 4-5 for a correct seed, when the configuration (and, in review mode, the
    /// person) wants them.
    async fn algorithm_step(self: Arc<Self>, seed: Evaluated) -> Step<()> {
        if !self.speed_calls_wanted() {
            return Step::Skipped(CPU_SKIP.into());
        }
        let wanted = match self.pipeline.analyze {
            AnalyzeWhen::All => true,
            AnalyzeWhen::Slow => seed.score.is_none_or(|s| s < 1.0),
        };
        if !wanted {
            return Step::Skipped("the configuration analyzes only slow seeds".into());
        }
        if self.stopping() {
            return Step::Stopped;
        }
        let question = format!(
            "Run algorithm analysis and optimization on candidate {} ({})?",
            seed.id,
            self.score_text(seed.id)
        );
        let key = GateKey::Algorithm { candidate: seed.id };
        let approved = step!(
            self.review_gate(
                &key,
                GateKind::AlgorithmOptimization,
                Some(seed.id),
                question,
            )
            .await
        );
        if !approved {
            self.log(
                LogLevel::Info,
                "analysis",
                format!("candidate {}: skipped by your decision", seed.id),
            );
            return Step::Skipped("rejected".into());
        }
        let analysis = step!(self.analyze(&seed).await);
        self.optimize(&seed, analysis).await
    }

    /// Step 4: the analysis of a correct kernel; `Skipped` when it is not worth optimizing.
    async fn analyze(&self, seed: &Evaluated) -> Step<Analysis> {
        let tag = "analysis";
        let key = StepKey::Analysis { candidate: seed.id };
        let ctx = self.context_for(Some(seed.id));
        let (analysis, call) = step!(
            self.ask(&key, tag, CallKind::Analysis, Some(seed.id), ctx, ANALYSIS)
                .await
        );
        if !self.replay.has_analysis(seed.id) {
            self.emit(Event::AnalysisReady {
                candidate: seed.id,
                call,
                analysis: analysis.clone(),
            });
        }
        if analysis.worth_optimizing == Some(false) {
            let reason = analysis.reason.as_deref().unwrap_or("no reason given");
            self.log(
                LogLevel::Info,
                tag,
                format!("candidate {}: not worth optimizing: {reason}", seed.id),
            );
            return Step::Skipped(format!("not worth optimizing: {reason}"));
        }
        self.log(
            LogLevel::Info,
            tag,
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
        Step::Done(analysis)
    }

    /// Step 5: a new kernel from the analysis plus the PyTorch reference, repaired when
    /// it fails.
    async fn optimize(&self, seed: &Evaluated, analysis: Analysis) -> Step<()> {
        let tag = format!("opt {}", seed.id);
        let key = StepKey::Optimize { candidate: seed.id };
        let ctx = self.optimize_context(seed.id, analysis);
        let (code, call) = step!(
            self.ask_for_code(&key, &tag, CallKind::Optimize, Some(seed.id), ctx)
                .await
        );
        let id =
            step!(self.new_candidate(&key, Some(seed.id), CandidateKind::Algorithm, &code, call));
        let first = step!(self.evaluate(id, &tag).await);
        let last = step!(
            self.repair_loop(first, &key, &tag, self.pipeline.algorithm_repairs)
                .await
        );
        let after = if last.correct {
            self.score_text(last.id)
        } else {
            "failed".into()
        };
        self.log(
            LogLevel::Info,
            &tag,
            format!(
                "algorithm optimization: {} -> {after}",
                self.score_text(seed.id)
            ),
        );
        Step::Done(())
    }

    /// Step 6: the best correct candidate so far, by the session's one notion of best.
    fn best_evaluated(&self) -> Option<Evaluated> {
        self.correct_evaluated(self.with_state(|s| s.best)?)
    }

    /// A correct candidate with its saved result.
    fn correct_evaluated(&self, id: CandidateId) -> Option<Evaluated> {
        Some(Evaluated {
            id,
            correct: true,
            score: self.with_state(|s| s.candidates.get(&id).and_then(|c| c.score())),
            result: self.load_result(id)?,
        })
    }

    /// The base of the stages: on resume, the one the earlier run's stages started from
    /// (or its approved stages gate named); else the best.
    fn tuning_base(&self) -> Option<Evaluated> {
        let first = self.pipeline.stages.first()?;
        self.replay
            .tuning_base(first)
            .and_then(|id| self.correct_evaluated(id))
            .or_else(|| self.best_evaluated())
    }

    /// Steps 7-8: the persistent-kernel check, then the stages (review mode asks first,
    /// about a base: when the best moves while it waits, the gate is withdrawn and asked
    /// again about the new best, so the stages run on what the person approved).
    async fn tune(self: Arc<Self>, mut base: Evaluated) -> Step<Evaluated> {
        loop {
            match self.clone().tune_once(base.clone()).await {
                Err(why) => {
                    self.log(LogLevel::Info, "stages", why);
                    match self.best_evaluated() {
                        Some(best) => base = best,
                        None => return Step::Skipped("no correct kernel to tune".into()),
                    }
                }
                Ok(step) => return step,
            }
        }
    }

    /// One pass of `tune`: its step, or `Err(why)` when its gate was withdrawn (the best
    /// moved) and the stages are to be asked again.
    async fn tune_once(self: Arc<Self>, base: Evaluated) -> Result<Step<Evaluated>, String> {
        let step = Ok;
        let source = self.kernel_source(base.id).unwrap_or_default();
        let check = persistent::check(&source);
        if !self.replay.has_persistent_check(base.id) {
            self.emit(Event::PersistentCheck {
                candidate: base.id,
                persistent: check.persistent,
                reasons: check.reasons.clone(),
            });
        }
        // Without timing the score condition cannot be checked: a correct persistent
        // kernel is taken to meet it, so the flow is the same on the CPU.
        if check.persistent && base.score.is_none_or(|s| s >= 1.0) {
            self.log(
                LogLevel::Info,
                "engine",
                format!(
                    "candidate {} is a persistent kernel ({}): skipping the stages, tuning would break it",
                    base.id,
                    check.reasons.join("; ")
                ),
            );
            return step(Step::Skipped("persistent kernel".into()));
        }
        let question = match self.pipeline.stages.len() {
            1 => format!("Run the tuning stage on candidate {}?", base.id),
            n => format!("Run the {n} tuning stages on candidate {}?", base.id),
        };
        if self.control.mode() != Mode::Auto {
            let decision = self
                .gate_on(
                    &GateKey::Stages {
                        base: Some(base.id),
                    },
                    GateKind::Stages,
                    Some(base.id),
                    None,
                    question,
                    None,
                    true,
                )
                .await;
            match decision {
                Step::Done(Decision::Reject) => {
                    self.log(LogLevel::Info, "stages", "skipped by your decision");
                    return step(Step::Skipped("rejected".into()));
                }
                Step::Done(_) => {}
                Step::Skipped(why) => return Err(why),
                other => return step(other.forward()),
            }
        }
        step(self.stages(base).await)
    }

    /// Step 8: each stage rewrites the current base; with regression protection only a
    /// correct, faster kernel becomes the new base.
    async fn stages(&self, start: Evaluated) -> Step<Evaluated> {
        let mut base = start;
        let total = self.pipeline.stages.len();
        for (i, stage) in self.pipeline.stages.iter().enumerate() {
            if self.stopping() {
                return Step::Stopped;
            }
            let tag = format!("stage {}/{total}", i + 1);
            let key = StepKey::Stage {
                name: stage.clone(),
            };
            let ctx = self.stage_context(base.id, stage);
            let last = match self
                .ask_for_code(&key, &tag, CallKind::Stage, Some(base.id), ctx)
                .await
            {
                Step::Done((code, call)) => {
                    let kind = CandidateKind::Stage {
                        name: stage.clone(),
                        index: i as u32 + 1,
                    };
                    let id = step!(self.new_candidate(&key, Some(base.id), kind, &code, call));
                    match self.evaluate(id, &tag).await {
                        Step::Done(e) => step!(
                            self.repair_loop(e, &key, &tag, self.pipeline.stage_repairs)
                                .await
                        )
                        .into(),
                        Step::Skipped(_) => None,
                        other => return other,
                    }
                }
                Step::Stopped => return Step::Stopped,
                Step::Skipped(why) | Step::Failed(why) => {
                    self.log(LogLevel::Warn, &tag, why);
                    None
                }
            };
            let (verdict, reason) = match &last {
                None => (
                    StageVerdict::NoKernel,
                    "no kernel: the base stays".to_string(),
                ),
                // A kernel faster than light is not the best so far either (`best_of`): only
                // the person's final mark takes it.
                Some(l) if l.result.flags.iter().any(|f| f == FASTER_THAN_LIGHT) => (
                    StageVerdict::Kept,
                    "flagged faster_than_light: the base stays (mark it final to take it)"
                        .to_string(),
                ),
                Some(l) => {
                    stage_verdict(self.pipeline.accept, l.correct, l.speedup(), base.speedup())
                }
            };
            let accepted = verdict.replaced();
            if !self.replay.stage_recorded(stage) {
                self.emit(Event::StageFinished {
                    stage: stage.clone(),
                    base: base.id,
                    result: last.as_ref().map(|l| l.id),
                    accepted,
                    verdict: Some(verdict),
                    reason: reason.clone(),
                });
            }
            self.log(
                LogLevel::Info,
                &tag,
                // Each reason says what happened to the base.
                format!("{stage}: {reason}"),
            );
            if accepted && let Some(l) = last {
                base = l;
            }
            self.sync();
        }
        Step::Done(base)
    }

    /// Step 9: declare the final kernel (review mode asks, unless the person marked one),
    /// write `best_kernel.py`, the end event and the report.
    async fn finish(&self) -> RunOutcome {
        let (marked, best) = self.with_state(|s| (s.final_marked, s.best));
        // The best is re-checked on unseen shapes before the person is asked about it, and
        // repaired when it fails there; the best may move to the repaired kernel.
        if let Some(id) = marked.or(best)
            && !self.stopping()
        {
            self.verify_on_unseen_shapes(id, marked.is_some()).await;
        }
        let best = self.with_state(|s| s.best);
        let mut declared = best;
        if let Some(id) = best
            && marked.is_none()
            && !self.stopping()
        {
            let question = format!(
                "Declare candidate {id} ({}) the final best?",
                self.score_text(id)
            );
            let gate = self
                .review_gate(&GateKey::Final, GateKind::FinalBest, Some(id), question)
                .await;
            if gate == Step::Done(false) {
                self.log(
                    LogLevel::Info,
                    "engine",
                    "no final kernel declared (you rejected it); mark one final with F in the TUI",
                );
                declared = None;
            }
        }
        // A candidate the person marked final wins, also when marked during the gate.
        if let Some(marked) = self.with_state(|s| s.final_marked) {
            declared = Some(marked);
        }
        if let Some(id) = declared
            && !self.stopping()
        {
            self.check_shapes(id).await;
        }
        if let Some(id) = declared {
            if let Some(source) = self.kernel_source(id) {
                let _ = self.write("best_kernel.py", source.as_bytes());
            }
            self.log(
                LogLevel::Info,
                "engine",
                format!("best: candidate {id} ({})", self.score_text(id)),
            );
        } else {
            self.log(LogLevel::Warn, "engine", "no correct kernel");
        }
        let (end, reason) = decide_end(&self.end_facts());
        if end == RunEnd::Failed || end == RunEnd::NoAnswer || end == RunEnd::NothingEvaluated {
            self.log(LogLevel::Error, "engine", reason.clone());
        }
        self.emit(Event::SessionFinished {
            best: declared,
            reason: reason.clone(),
            end: Some(end),
        });
        self.emit(Event::StateChanged { state: end.state() });
        self.sync();
        if let Err(e) = self.write_report() {
            self.log(
                LogLevel::Error,
                "engine",
                format!("cannot write the report files: {e:#} (`kforge report` writes them again)"),
            );
        }
        // A write that failed at the very end still makes the run a failure.
        let (end, reason) = match self.fatal.lock().expect("fatal").clone() {
            Some(f) if end != RunEnd::Failed => (RunEnd::Failed, f),
            _ => (end, reason),
        };
        RunOutcome {
            end,
            best: declared,
            reason,
        }
    }

    fn end_facts(&self) -> EndFacts {
        let fatal = self.fatal.lock().expect("fatal").clone();
        self.with_state(|s| {
            let finished: Vec<_> = s.calls.values().filter(|c| c.ok.is_some()).collect();
            EndFacts {
                fatal,
                stopped: self.stopping(),
                budget: s.budget_exhausted.clone(),
                calls_answered: finished.iter().filter(|c| c.ok == Some(true)).count(),
                calls_failed: finished.iter().filter(|c| c.ok == Some(false)).count(),
                last_call_error: finished.iter().rev().find_map(|c| c.error.clone()),
                evaluated: s.candidates.values().filter(|c| c.eval.is_some()).count(),
                has_best: s.best.is_some(),
            }
        })
    }
}

/// Whether a stage's final kernel replaces its base, and why. `Improve` is regression
/// protection: only a correct kernel that ranks above its base by the session's rule for
/// best (`Speedup::rank_cmp`: the lower end of the 95% interval when both have one, else
/// the score) wins; without timing (CPU) a correct kernel is not compared and the base stays.
pub fn stage_verdict(
    accept: Accept,
    correct: bool,
    new: Option<Speedup>,
    old: Option<Speedup>,
) -> (StageVerdict, String) {
    if !correct {
        return (
            StageVerdict::NotCorrect,
            "not correct: the base stays".to_string(),
        );
    }
    let text = |s: &Speedup| match s.interval {
        Some((low, high)) => format!("{:.3}x [{low:.3}-{high:.3}]", s.score),
        None => format!("{:.3}x", s.score),
    };
    match (accept, new, old) {
        (Accept::Any, _, _) => (StageVerdict::Replaced, "correct (accept = any)".to_string()),
        (Accept::Improve, Some(new), Some(old)) => {
            // Said when the intervals decided against the medians.
            let by_interval =
                if (new.rank_cmp(&old) == Ordering::Greater) != (new.score > old.score) {
                    " (by the lower ends of the intervals)"
                } else {
                    ""
                };
            if new.rank_cmp(&old) == Ordering::Greater {
                (
                    StageVerdict::Replaced,
                    format!("{} -> {}{by_interval}", text(&old), text(&new)),
                )
            } else {
                (
                    StageVerdict::Kept,
                    format!(
                        "{} -> {} is no improvement{by_interval}: keeping the base",
                        text(&old),
                        text(&new)
                    ),
                )
            }
        }
        // Nothing measured on one side (the CPU, a timing that failed): no comparison, so no
        // replacement; regression protection never waves a kernel through unmeasured.
        (Accept::Improve, _, _) => (
            StageVerdict::NotCompared,
            "correct, not compared: no timing to compare with (the base stays)".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_protection_keeps_the_faster_base() {
        let x = |score: f64| Speedup::new(Some(score), None);
        assert_eq!(
            stage_verdict(Accept::Improve, true, x(1.52), x(1.41)),
            (StageVerdict::Replaced, "1.410x -> 1.520x".to_string())
        );
        let (verdict, reason) = stage_verdict(Accept::Improve, true, x(1.30), x(1.41));
        assert_eq!(verdict, StageVerdict::Kept, "{reason}");
        assert!(reason.contains("no improvement"));
        assert_eq!(
            stage_verdict(Accept::Improve, true, x(1.41), x(1.41)).0,
            StageVerdict::Kept,
            "equal is no improvement"
        );
        assert_eq!(
            stage_verdict(Accept::Any, true, x(1.30), x(1.41)).0,
            StageVerdict::Replaced,
            "greedy chaining accepts a slower kernel"
        );
        assert_eq!(
            stage_verdict(Accept::Any, false, x(9.0), x(1.0)).0,
            StageVerdict::NotCorrect,
            "never an incorrect one"
        );
        assert_eq!(
            stage_verdict(Accept::Improve, true, None, None).0,
            StageVerdict::NotCompared,
            "no timing: not compared, the base stays"
        );
    }

    /// With intervals a stage kernel replaces its base as the session's best would: by the
    /// lower ends, so a tight interval beats a wide one with a higher median.
    #[test]
    fn regression_protection_compares_intervals_like_best_does() {
        let x = |score: f64, low: f64, high: f64| Speedup::new(Some(score), Some((low, high)));
        let (verdict, reason) = stage_verdict(
            Accept::Improve,
            true,
            x(1.45, 1.43, 1.47),
            x(1.50, 1.20, 1.80),
        );
        assert!(verdict.replaced(), "{reason}");
        assert_eq!(
            reason,
            "1.500x [1.200-1.800] -> 1.450x [1.430-1.470] (by the lower ends of the intervals)"
        );
        let (verdict, reason) = stage_verdict(
            Accept::Improve,
            true,
            x(1.50, 1.20, 1.80),
            x(1.45, 1.43, 1.47),
        );
        assert_eq!(verdict, StageVerdict::Kept, "{reason}");
        assert!(
            reason.contains("is no improvement (by the lower ends"),
            "{reason}"
        );
        let (verdict, reason) = stage_verdict(
            Accept::Improve,
            true,
            x(1.60, 1.55, 1.65),
            x(1.45, 1.43, 1.47),
        );
        assert!(verdict.replaced(), "{reason}");
        assert_eq!(reason, "1.450x [1.430-1.470] -> 1.600x [1.550-1.650]");
    }
}
