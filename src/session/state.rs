//! The state of a session as a fold over its events. The engine (to resume), the TUI
//! (to show) and the report (to summarize) all read a session through this.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::protocol::{
    Analysis, CALL_INTERRUPTED, CallId, CallKind, CandidateId, CandidateKind, Decision,
    EngineState, EvalSummary, Event, EventRecord, GateId, GateKey, GateKind, LogLevel, Mode,
    RunEnd, StageVerdict, StepKey, TokenUsage,
};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionInfo {
    pub task: String,
    pub task_hash: String,
    pub provider: String,
    pub model: String,
    pub mode: Mode,
    pub device: String,
    pub timing_meaningful: bool,
    /// The precision policy of the evaluations (None: a session from before it).
    pub precision: Option<crate::protocol::PrecisionPolicy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateStatus {
    /// Created, not evaluated yet.
    Pending,
    Evaluating,
    Correct,
    Failed,
    Dropped,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: CandidateId,
    pub key: String,
    pub parent: Option<CandidateId>,
    pub kind: CandidateKind,
    pub file: String,
    pub call: Option<CallId>,
    pub status: CandidateStatus,
    pub eval: Option<EvalSummary>,
    pub eval_file: Option<String>,
    /// Live phase while evaluating.
    pub phase: Option<String>,
    pub analysis: Option<Analysis>,
    pub persistent: Option<(bool, Vec<String>)>,
    pub dropped_reason: Option<String>,
    pub created: DateTime<Utc>,
    /// When its (last) evaluation finished: its `eval_finished` event's time.
    pub evaluated: Option<DateTime<Utc>>,
    /// Its re-check on unseen shapes (`shapes_checked`), when one was made.
    pub shapes: Option<ShapesRecord>,
}

/// What a `shapes_checked` event recorded of a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapesRecord {
    pub verdict: crate::protocol::shapes::ShapeVerdict,
    pub line: String,
    /// `shapes/<id>.json`.
    pub file: String,
}

impl Candidate {
    /// The step that made it, when its key is one this version writes (a session from
    /// before keys were recorded has none).
    pub fn step_key(&self) -> Option<StepKey> {
        self.key.parse().ok()
    }

    /// Whether it was made by one of the person's actions.
    pub fn from_action(&self) -> bool {
        self.step_key().is_some_and(|k| k.is_action())
    }

    /// A candidate as its `candidate_created` event makes it: pending, nothing known yet.
    fn created(
        id: CandidateId,
        key: &str,
        parent: Option<CandidateId>,
        kind: &CandidateKind,
        file: &str,
        call: Option<CallId>,
        created: DateTime<Utc>,
    ) -> Candidate {
        Candidate {
            id,
            key: key.to_string(),
            parent,
            kind: kind.clone(),
            file: file.to_string(),
            call,
            status: CandidateStatus::Pending,
            eval: None,
            eval_file: None,
            phase: None,
            analysis: None,
            persistent: None,
            dropped_reason: None,
            created,
            evaluated: None,
            shapes: None,
        }
    }

    /// An evaluation finished at `at` with `summary`, saved in `result_file`.
    fn finish_evaluation(&mut self, summary: &EvalSummary, result_file: &str, at: DateTime<Utc>) {
        self.status = if summary.correct {
            CandidateStatus::Correct
        } else {
            CandidateStatus::Failed
        };
        self.eval = Some(summary.clone());
        self.eval_file = Some(result_file.to_string());
        self.evaluated = Some(at);
        self.phase = None;
    }

    /// An evaluation an earlier run left unfinished: back to the last result, or to
    /// pending when there was none.
    fn interrupt_evaluation(&mut self) {
        self.status = match &self.eval {
            Some(e) if e.correct => CandidateStatus::Correct,
            Some(_) => CandidateStatus::Failed,
            None => CandidateStatus::Pending,
        };
        self.phase = None;
    }
}

impl ShapesRecord {
    /// The tree's mark after the candidate's label: only a failing check shows.
    pub fn tree_mark(&self) -> &'static str {
        if self.fails() { " shapes✗" } else { "" }
    }

    /// Whether the candidate was shown wrong on an unseen shape.
    pub fn fails(&self) -> bool {
        self.verdict.fails()
    }
}

impl Call {
    /// Whether the person answers this call (the `manual` provider), not a model.
    pub fn answered_by_person(&self) -> bool {
        self.provider == crate::protocol::manual::PROVIDER
    }

    /// Whether this finished call's cost is unknown: it has no price, and it was answered
    /// or cut off by a crash (the provider may have billed it). A call refused before any
    /// answer (an HTTP error, no tokens) cost nothing.
    pub fn cost_unknown(&self) -> bool {
        self.ok.is_some()
            && self.cost_usd.is_none()
            && (self.ok == Some(true)
                || self.usage != TokenUsage::default()
                || self.error.as_deref() == Some(CALL_INTERRUPTED))
    }
}

/// A measured speedup: the score and, when the evaluation gave one, its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speedup {
    pub score: f64,
    pub interval: Option<(f64, f64)>,
}

impl Speedup {
    /// A finite score with its interval (an interval with a non-finite end is dropped).
    pub fn new(score: Option<f64>, interval: Option<(f64, f64)>) -> Option<Speedup> {
        let score = score.filter(|s| s.is_finite())?;
        let interval = interval.filter(|(low, high)| low.is_finite() && high.is_finite());
        Some(Speedup { score, interval })
    }

    /// How two speedups rank: by the lower end of the interval when both have one (the
    /// kernel whose interval clears the other's wins: 1.45x [1.43-1.47] beats 1.50x
    /// [1.20-1.80]), else by score; ties by score.
    pub fn rank_cmp(&self, other: &Speedup) -> Ordering {
        let by_low = match (self.interval, other.interval) {
            (Some(a), Some(b)) => a.0.total_cmp(&b.0),
            _ => Ordering::Equal,
        };
        by_low.then(self.score.total_cmp(&other.score))
    }

    /// Whether the measurements cannot tell the two apart: both have an interval and the
    /// intervals overlap. Without an interval nothing says so (false).
    pub fn indistinguishable(&self, other: &Speedup) -> bool {
        match (self.interval, other.interval) {
            (Some(a), Some(b)) => crate::protocol::figures::overlap(a, b),
            _ => false,
        }
    }

    /// `1.45x [1.43-1.47]`, or `1.45x` without an interval.
    pub fn text(&self) -> String {
        crate::protocol::figures::score_with_interval(self.score, self.interval)
    }
}

/// The best correct candidate of `candidates` by the one ranking every view uses: a
/// measured speedup beats none; two speedups rank by `Speedup::rank_cmp` (the lower end of
/// the 95% interval when both have one, else the score; ties by score); on a full tie the
/// later candidate wins (it comes from a more refined step). Among candidates with no score
/// (the CPU: nothing is timed) the earliest wins: nothing shows a later one is better.
/// (Candidates with and without intervals in one session, from a resumed session that
/// spans harness versions, are compared pairwise by that rule in candidate order.)
/// A candidate flagged `faster_than_light` is never chosen here: only the person's final
/// mark (`best_candidate`) makes it the best. A candidate shown wrong on unseen shapes
/// (`shapes_checked` failing) ranks below every candidate that was not: it stays the best
/// only when no other is correct.
pub fn best_of<'a>(candidates: impl IntoIterator<Item = &'a Candidate>) -> Option<&'a Candidate> {
    candidates
        .into_iter()
        .filter(|c| c.is_correct() && !c.faster_than_light())
        .max_by(|a, b| rank_cmp(a, b))
}

/// The order `best_of` ranks correct candidates by.
fn rank_cmp(a: &Candidate, b: &Candidate) -> Ordering {
    let not_shown_wrong = |c: &Candidate| !c.shapes.as_ref().is_some_and(|s| s.verdict.fails());
    not_shown_wrong(a)
        .cmp(&not_shown_wrong(b))
        .then_with(|| match (a.speedup(), b.speedup()) {
            (Some(x), Some(y)) => x.rank_cmp(&y).then(a.id.cmp(&b.id)),
            (Some(_), None) => Ordering::Greater,
            (None, Some(_)) => Ordering::Less,
            (None, None) => b.id.cmp(&a.id),
        })
}

/// Whether two candidates' measurements cannot tell which is faster: both are correct
/// with intervals, and the intervals overlap.
pub fn indistinguishable(a: &Candidate, b: &Candidate) -> bool {
    a.is_correct()
        && b.is_correct()
        && a.speedup()
            .zip(b.speedup())
            .is_some_and(|(x, y)| x.indistinguishable(&y))
}

impl Candidate {
    pub fn score(&self) -> Option<f64> {
        self.eval.as_ref().and_then(|e| e.score)
    }
    /// The score's 95% interval: None where `score` is None, and without one (older
    /// sessions).
    pub fn score_interval(&self) -> Option<(f64, f64)> {
        let e = self.eval.as_ref()?;
        e.score?;
        Some((e.score_low?, e.score_high?))
    }
    /// The score with its interval, as `best_of` ranks it.
    pub fn speedup(&self) -> Option<Speedup> {
        Speedup::new(self.score(), self.score_interval())
    }
    /// The timing of its evaluation stayed noisy (a median's interval wider than +-5%).
    pub fn noisy(&self) -> bool {
        self.eval.as_ref().is_some_and(|e| e.noisy)
    }
    pub fn is_correct(&self) -> bool {
        self.status == CandidateStatus::Correct
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: CallId,
    pub key: String,
    pub kind: CallKind,
    pub candidate: Option<CandidateId>,
    pub provider: String,
    pub model: String,
    pub prompt_file: String,
    pub response_file: Option<String>,
    /// `None` while in flight.
    pub ok: Option<bool>,
    pub error: Option<String>,
    pub usage: TokenUsage,
    pub cost_usd: Option<f64>,
    pub latency_s: f64,
    /// When the call started (its event's time).
    pub started: DateTime<Utc>,
    /// Retries the client made before the answer (or the failure), with their causes.
    pub retries: Vec<String>,
    /// Live text while streaming (from transient deltas).
    pub live_text: String,
    pub live_reasoning: String,
}

impl Call {
    /// The step that made the call, when its key is one this version writes.
    pub fn step_key(&self) -> Option<StepKey> {
        self.key.parse().ok()
    }

    /// A call as its `llm_call_started` event makes it: in flight, nothing answered yet.
    #[allow(clippy::too_many_arguments)] // one per field of the event, and its time
    fn started(
        id: CallId,
        key: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        provider: &str,
        model: &str,
        prompt_file: &str,
        started: DateTime<Utc>,
    ) -> Call {
        Call {
            id,
            key: key.to_string(),
            kind,
            candidate,
            provider: provider.to_string(),
            model: model.to_string(),
            prompt_file: prompt_file.to_string(),
            response_file: None,
            ok: None,
            error: None,
            usage: TokenUsage::default(),
            cost_usd: None,
            latency_s: 0.0,
            started,
            retries: Vec::new(),
            live_text: String::new(),
            live_reasoning: String::new(),
        }
    }

    /// The call ended as its `llm_call_finished` event says.
    fn finish(
        &mut self,
        ok: bool,
        error: &Option<String>,
        usage: TokenUsage,
        cost_usd: Option<f64>,
        latency_s: f64,
        response_file: &Option<String>,
    ) {
        self.ok = Some(ok);
        self.error = error.clone();
        self.usage = usage;
        self.cost_usd = cost_usd;
        self.latency_s = latency_s;
        self.response_file = response_file.clone();
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub id: GateId,
    pub key: String,
    pub kind: GateKind,
    pub candidate: Option<CandidateId>,
    pub call: Option<CallId>,
    pub question: String,
    pub file: Option<String>,
    pub decision: Option<Decision>,
    /// Closed unanswered (the run stopped): no longer waiting, asked again on resume.
    pub withdrawn: bool,
}

impl Gate {
    /// The gate's key, when it is one this version writes.
    pub fn gate_key(&self) -> Option<GateKey> {
        self.key.parse().ok()
    }

    /// A gate as its `gate_opened` event makes it: waiting for the person.
    fn opened(
        id: GateId,
        key: &str,
        kind: GateKind,
        candidate: Option<CandidateId>,
        call: Option<CallId>,
        question: &str,
        file: &Option<String>,
    ) -> Gate {
        Gate {
            id,
            key: key.to_string(),
            kind,
            candidate,
            call,
            question: question.to_string(),
            file: file.clone(),
            decision: None,
            withdrawn: false,
        }
    }

    /// Neither answered nor withdrawn.
    pub fn is_waiting(&self) -> bool {
        self.decision.is_none() && !self.withdrawn
    }

    /// Whether a rewrite means something here: only a prompt before it is sent and a kernel
    /// before it is evaluated can be rewritten (the engine refuses a rewrite at the other
    /// gates and keeps them waiting).
    pub fn rewritable(&self) -> bool {
        self.kind.takes_rewrite(self.file.is_some())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub ts: DateTime<Utc>,
    pub level: LogLevel,
    pub tag: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StageOutcome {
    pub stage: String,
    pub base: CandidateId,
    pub result: Option<CandidateId>,
    pub accepted: bool,
    pub verdict: StageVerdict,
    pub reason: String,
}

impl StageOutcome {
    /// A stage as its `stage_finished` event records it; a record from before the verdict
    /// was kept gets the verdict its other fields imply.
    fn recorded(
        stage: &str,
        base: CandidateId,
        result: Option<CandidateId>,
        accepted: bool,
        verdict: Option<StageVerdict>,
        reason: &str,
    ) -> StageOutcome {
        StageOutcome {
            stage: stage.to_string(),
            base,
            result,
            accepted,
            verdict: verdict
                .unwrap_or_else(|| StageVerdict::from_record(accepted, result.is_some())),
            reason: reason.to_string(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionState {
    pub info: Option<SessionInfo>,
    pub state: EngineState,
    pub mode: Mode,
    pub candidates: BTreeMap<CandidateId, Candidate>,
    pub calls: BTreeMap<CallId, Call>,
    pub gates: BTreeMap<GateId, Gate>,
    pub stages: Vec<StageOutcome>,
    /// The session's best candidate: see `SessionState::best_candidate`. Kept up to date
    /// by the fold; every view reads this one field.
    pub best: Option<CandidateId>,
    /// The candidate the person marked final, if any.
    pub final_marked: Option<CandidateId>,
    /// The gate kinds the person approved for the rest of the session (`StandingApproval`),
    /// in the order given, less those taken back (`StandingApprovalRevoked`); a switch to
    /// step mode ends them all.
    pub standing: Vec<GateKind>,
    pub log: Vec<LogLine>,
    pub started: Option<DateTime<Utc>>,
    pub last_ts: Option<DateTime<Utc>>,
    pub last_seq: u64,
    pub finished: Option<(Option<CandidateId>, String)>,
    /// How the last run ended, when it recorded it.
    pub end: Option<RunEnd>,
    pub budget_exhausted: Option<String>,
    pub resumes: u32,
    /// The candidate whose re-check on unseen shapes runs now, and since when
    /// (`ShapesCheckStarted` until its end, the end of the run, or a resume).
    pub shapes_checking: Option<(CandidateId, DateTime<Utc>)>,
}

impl SessionState {
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a EventRecord>) -> SessionState {
        let mut state = SessionState::default();
        for r in records {
            state.apply(r);
        }
        state
    }

    /// The gates waiting for a decision, oldest first.
    pub fn waiting_gates(&self) -> Vec<&Gate> {
        self.gates.values().filter(|g| g.is_waiting()).collect()
    }

    /// The oldest gate waiting for a decision, if any.
    pub fn open_gate(&self) -> Option<&Gate> {
        self.gates.values().find(|g| g.is_waiting())
    }

    /// The LLM calls started and not finished yet.
    /// Candidates whose evaluation started and has not finished.
    pub fn evaluations_in_flight(&self) -> impl Iterator<Item = &Candidate> {
        self.candidates
            .values()
            .filter(|c| c.status == CandidateStatus::Evaluating)
    }

    pub fn calls_in_flight(&self) -> impl Iterator<Item = &Call> {
        self.calls.values().filter(|c| c.ok.is_none())
    }

    pub fn total_usage(&self) -> TokenUsage {
        self.calls.values().fold(TokenUsage::default(), |mut u, c| {
            u.input += c.usage.input;
            u.cached += c.usage.cached;
            u.output += c.usage.output;
            u.reasoning += c.usage.reasoning;
            u
        })
    }

    /// Total cost; `None` if any finished call's cost is unknown.
    pub fn total_cost(&self) -> Option<f64> {
        self.calls
            .values()
            .filter(|c| c.ok.is_some())
            .try_fold(0.0, |sum, c| c.cost_usd.map(|x| sum + x))
    }

    /// The one notion of "best": the candidate the person marked final, else the correct
    /// candidate ranked first by `best_of` (on the CPU, where nothing is timed, the
    /// earliest correct kernel: a later one is not shown to be better).
    pub fn best_candidate(&self) -> Option<CandidateId> {
        if self.final_marked.is_some() {
            return self.final_marked;
        }
        best_of(self.candidates.values()).map(|c| c.id)
    }

    /// Whether the person marked this candidate final.
    pub fn is_final(&self, id: CandidateId) -> bool {
        self.final_marked == Some(id)
    }

    pub fn children(&self, id: CandidateId) -> impl Iterator<Item = &Candidate> {
        self.candidates
            .values()
            .filter(move |c| c.parent == Some(id))
    }

    pub fn apply(&mut self, record: &EventRecord) {
        self.last_seq = self.last_seq.max(record.seq);
        self.last_ts = Some(record.ts);
        match &record.event {
            Event::SessionStarted {
                task,
                task_hash,
                provider,
                model,
                mode,
                device,
                timing_meaningful,
                precision,
            } => {
                self.info = Some(SessionInfo {
                    task: task.clone(),
                    task_hash: task_hash.clone(),
                    provider: provider.clone(),
                    model: model.clone(),
                    mode: *mode,
                    device: device.clone(),
                    timing_meaningful: *timing_meaningful,
                    precision: *precision,
                });
                self.mode = *mode;
                self.started.get_or_insert(record.ts);
            }
            Event::SessionResumed { .. } => {
                self.resumes += 1;
                self.shapes_checking = None;
            }
            Event::StateChanged { state } => self.state = *state,
            Event::ModeChanged { mode } => {
                self.mode = *mode;
                if *mode == Mode::Step {
                    self.standing.clear();
                }
            }
            Event::StandingApproval { kind } => {
                if !self.standing.contains(kind) {
                    self.standing.push(*kind);
                }
            }
            Event::StandingApprovalRevoked { kind } => {
                self.standing
                    .retain(|k| kind.is_some_and(|taken| taken != *k));
            }
            Event::CandidateCreated {
                id,
                key,
                parent,
                kind,
                file,
                call,
            } => {
                let candidate = Candidate::created(*id, key, *parent, kind, file, *call, record.ts);
                self.candidates.insert(*id, candidate);
            }
            Event::CandidateDropped { id, reason } => {
                if let Some(c) = self.candidates.get_mut(id) {
                    c.status = CandidateStatus::Dropped;
                    c.dropped_reason = Some(reason.clone());
                }
            }
            Event::LlmCallStarted {
                call,
                key,
                kind,
                candidate,
                provider,
                model,
                prompt_file,
            } => {
                let started = Call::started(
                    *call,
                    key,
                    *kind,
                    *candidate,
                    provider,
                    model,
                    prompt_file,
                    record.ts,
                );
                self.calls.insert(*call, started);
            }
            Event::LlmDelta {
                call,
                text,
                reasoning,
            } => {
                if let Some(c) = self.calls.get_mut(call) {
                    c.live_text.push_str(text);
                    c.live_reasoning.push_str(reasoning);
                }
            }
            Event::LlmCallFinished {
                call,
                ok,
                error,
                usage,
                cost_usd,
                latency_s,
                response_file,
            } => {
                if let Some(c) = self.calls.get_mut(call) {
                    c.finish(*ok, error, *usage, *cost_usd, *latency_s, response_file);
                }
            }
            Event::EvalStarted { candidate } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.status = CandidateStatus::Evaluating;
                    c.phase = None;
                }
            }
            Event::EvalInterrupted { candidate } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.interrupt_evaluation();
                }
            }
            Event::EvalPhase { candidate, phase } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.phase = Some(phase.clone());
                }
            }
            Event::EvalFinished {
                candidate,
                result_file,
                summary,
            } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.finish_evaluation(summary, result_file, record.ts);
                }
            }
            Event::AnalysisReady {
                candidate,
                analysis,
                ..
            } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.analysis = Some(analysis.clone());
                }
            }
            Event::PersistentCheck {
                candidate,
                persistent,
                reasons,
            } => {
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.persistent = Some((*persistent, reasons.clone()));
                }
            }
            Event::StageFinished {
                stage,
                base,
                result,
                accepted,
                verdict,
                reason,
            } => {
                let outcome =
                    StageOutcome::recorded(stage, *base, *result, *accepted, *verdict, reason);
                self.stages.push(outcome);
            }
            // The best follows from the candidates (`best_candidate`); this event only
            // announces a change.
            Event::BestChanged { .. } => {}
            Event::FinalMarked { candidate } => self.final_marked = Some(*candidate),
            Event::LlmRetry {
                call,
                attempt,
                reason,
                ..
            } => {
                if let Some(c) = self.calls.get_mut(call) {
                    c.retries.push(format!("attempt {}: {reason}", attempt - 1));
                }
            }
            Event::GateOpened {
                gate,
                key,
                kind,
                candidate,
                call,
                question,
                file,
            } => {
                let opened = Gate::opened(*gate, key, *kind, *candidate, *call, question, file);
                self.gates.insert(*gate, opened);
            }
            Event::GateResolved { gate, decision } => {
                if let Some(g) = self.gates.get_mut(gate) {
                    g.decision = Some(decision.clone());
                }
            }
            Event::GateWithdrawn { gate, .. } => {
                if let Some(g) = self.gates.get_mut(gate) {
                    g.withdrawn = true;
                }
            }
            Event::Log {
                level,
                tag,
                message,
            } => self.log.push(LogLine {
                ts: record.ts,
                level: *level,
                tag: tag.clone(),
                message: message.clone(),
            }),
            Event::BudgetExhausted { what } => self.budget_exhausted = Some(what.clone()),
            Event::ShapesCheckStarted { candidate } => {
                self.shapes_checking = Some((*candidate, record.ts));
            }
            Event::ShapesCheckNotRun { candidate, .. } => {
                if self.shapes_checking.is_some_and(|(c, _)| c == *candidate) {
                    self.shapes_checking = None;
                }
            }
            Event::ShapesChecked {
                candidate,
                result_file,
                verdict,
                line,
            } => {
                if self.shapes_checking.is_some_and(|(c, _)| c == *candidate) {
                    self.shapes_checking = None;
                }
                if let Some(c) = self.candidates.get_mut(candidate) {
                    c.shapes = Some(ShapesRecord {
                        verdict: verdict.clone(),
                        line: line.clone(),
                        file: result_file.clone(),
                    });
                }
            }
            Event::SessionFinished { best, reason, end } => {
                // A check of the run's own finish is over by now (one after the end, of a
                // kernel marked final later, starts after this event).
                self.shapes_checking = None;
                self.finished = Some((*best, reason.clone()));
                self.end = *end;
            }
        }
        // Only a verdict, an unseen-shapes check or a final mark can change the best (a fold
        // of 100k log lines must not rank the candidates 100k times).
        if matches!(
            record.event,
            Event::EvalFinished { .. } | Event::ShapesChecked { .. } | Event::FinalMarked { .. }
        ) {
            self.best = self.best_candidate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, event: Event) -> EventRecord {
        EventRecord {
            seq,
            ts: Utc::now(),
            event,
        }
    }

    #[test]
    fn fold_builds_the_tree_and_totals() {
        let events = vec![
            rec(
                1,
                Event::CandidateCreated {
                    id: CandidateId(1),
                    key: "k1".into(),
                    parent: None,
                    kind: CandidateKind::Seed {
                        index: 1,
                        direction: None,
                    },
                    file: "kernels/1-seed.py".into(),
                    call: Some(CallId(1)),
                },
            ),
            rec(
                2,
                Event::EvalFinished {
                    candidate: CandidateId(1),
                    result_file: "eval/1.json".into(),
                    summary: EvalSummary {
                        correct: false,
                        category: Some(crate::protocol::Category::Compile),
                        ..Default::default()
                    },
                },
            ),
            rec(
                3,
                Event::CandidateCreated {
                    id: CandidateId(2),
                    key: "k2".into(),
                    parent: Some(CandidateId(1)),
                    kind: CandidateKind::Repair { attempt: 1 },
                    file: "kernels/2-repair.py".into(),
                    call: Some(CallId(2)),
                },
            ),
            rec(
                4,
                Event::EvalFinished {
                    candidate: CandidateId(2),
                    result_file: "eval/2.json".into(),
                    summary: EvalSummary {
                        correct: true,
                        score: Some(1.4),
                        ..Default::default()
                    },
                },
            ),
            rec(
                5,
                Event::BestChanged {
                    candidate: CandidateId(2),
                    score: Some(1.4),
                },
            ),
            rec(
                6,
                Event::LlmCallStarted {
                    call: CallId(1),
                    key: "c1".into(),
                    kind: CallKind::Seed,
                    candidate: None,
                    provider: "p".into(),
                    model: "m".into(),
                    prompt_file: "llm/1.prompt.md".into(),
                },
            ),
            rec(
                7,
                Event::LlmCallFinished {
                    call: CallId(1),
                    ok: true,
                    error: None,
                    usage: TokenUsage {
                        input: 10,
                        output: 5,
                        ..Default::default()
                    },
                    cost_usd: Some(0.5),
                    latency_s: 1.0,
                    response_file: None,
                },
            ),
        ];
        let s = SessionState::from_records(&events);
        assert_eq!(
            s.candidates[&CandidateId(1)].status,
            CandidateStatus::Failed
        );
        assert_eq!(s.candidates[&CandidateId(2)].score(), Some(1.4));
        assert_eq!(
            s.children(CandidateId(1)).map(|c| c.id).collect::<Vec<_>>(),
            vec![CandidateId(2)]
        );
        assert_eq!(s.best, Some(CandidateId(2)));
        assert_eq!(s.total_usage().input, 10);
        assert_eq!(s.total_cost(), Some(0.5));
        assert_eq!(s.last_seq, 7);
    }

    #[test]
    fn unknown_cost_makes_the_total_unknown_and_gates_track_decisions() {
        let events = vec![
            rec(
                1,
                Event::LlmCallStarted {
                    call: CallId(1),
                    key: "c1".into(),
                    kind: CallKind::Seed,
                    candidate: None,
                    provider: "p".into(),
                    model: "m".into(),
                    prompt_file: "a".into(),
                },
            ),
            rec(
                2,
                Event::LlmCallFinished {
                    call: CallId(1),
                    ok: true,
                    error: None,
                    usage: TokenUsage::default(),
                    cost_usd: None,
                    latency_s: 1.0,
                    response_file: None,
                },
            ),
            rec(
                3,
                Event::GateOpened {
                    gate: GateId(1),
                    key: "g1".into(),
                    kind: GateKind::Stages,
                    candidate: None,
                    call: None,
                    question: "run stages?".into(),
                    file: None,
                },
            ),
        ];
        let mut s = SessionState::from_records(&events);
        assert_eq!(s.total_cost(), None);
        assert_eq!(s.open_gate().map(|g| g.id), Some(GateId(1)));
        s.apply(&rec(
            4,
            Event::GateResolved {
                gate: GateId(1),
                decision: Decision::Approve,
            },
        ));
        assert!(s.open_gate().is_none());
    }

    #[test]
    fn a_call_refused_before_any_answer_costs_nothing_and_an_interrupted_one_is_unknown() {
        let call = |ok: bool, error: Option<&str>, input: u64| Call {
            id: CallId(1),
            key: "seed1".into(),
            kind: CallKind::Seed,
            candidate: None,
            provider: "p".into(),
            model: "m".into(),
            prompt_file: String::new(),
            response_file: None,
            ok: Some(ok),
            error: error.map(String::from),
            usage: TokenUsage {
                input,
                ..Default::default()
            },
            cost_usd: None,
            latency_s: 0.0,
            started: Utc::now(),
            retries: vec![],
            live_text: String::new(),
            live_reasoning: String::new(),
        };
        assert!(call(true, None, 10).cost_unknown(), "answered, no price");
        assert!(!call(false, Some("HTTP 401"), 0).cost_unknown());
        assert!(
            call(false, Some("cut off"), 5).cost_unknown(),
            "tokens were used"
        );
        assert!(call(false, Some(CALL_INTERRUPTED), 0).cost_unknown());
        let mut priced = call(true, None, 10);
        priced.cost_usd = Some(0.1);
        assert!(!priced.cost_unknown());
        let mut in_flight = call(true, None, 10);
        in_flight.ok = None;
        assert!(!in_flight.cost_unknown(), "not finished");
    }

    fn created(id: u32) -> Event {
        Event::CandidateCreated {
            id: CandidateId(id),
            key: format!("k{id}"),
            parent: None,
            kind: CandidateKind::Manual,
            file: format!("kernels/{id}-manual.py"),
            call: None,
        }
    }

    fn evaluated(id: u32, correct: bool, score: Option<f64>) -> Event {
        Event::EvalFinished {
            candidate: CandidateId(id),
            result_file: format!("eval/{id}.json"),
            summary: EvalSummary {
                correct,
                score,
                ..Default::default()
            },
        }
    }

    #[test]
    fn one_notion_of_best_with_one_tie_rule_and_a_final_mark_that_holds() {
        let mut s = SessionState::default();
        let mut seq = 0;
        let mut apply = |s: &mut SessionState, e: Event| {
            seq += 1;
            s.apply(&rec(seq, e));
        };
        for id in 1..=5 {
            apply(&mut s, created(id));
        }
        // Without timing nothing shows a later kernel is better: the earliest correct wins.
        apply(&mut s, evaluated(2, true, None));
        assert_eq!(s.best, Some(CandidateId(2)));
        apply(&mut s, evaluated(1, true, None));
        assert_eq!(s.best, Some(CandidateId(1)));
        // A measured score beats none; a failed kernel never counts.
        apply(&mut s, evaluated(3, true, Some(0.8)));
        apply(&mut s, evaluated(4, false, None));
        assert_eq!(s.best, Some(CandidateId(3)));
        // Equal scores: the later candidate.
        apply(&mut s, evaluated(5, true, Some(0.8)));
        assert_eq!(s.best, Some(CandidateId(5)));
        // A final mark wins over anything faster, and through a re-evaluation.
        apply(
            &mut s,
            Event::FinalMarked {
                candidate: CandidateId(1),
            },
        );
        apply(&mut s, evaluated(3, true, Some(9.0)));
        assert_eq!(s.best, Some(CandidateId(1)));
        assert!(s.is_final(CandidateId(1)));
        // The announcement event does not decide anything.
        apply(
            &mut s,
            Event::BestChanged {
                candidate: CandidateId(4),
                score: None,
            },
        );
        assert_eq!(s.best, Some(CandidateId(1)));
    }

    fn with_interval(id: u32, score: f64, low: f64, high: f64) -> Event {
        Event::EvalFinished {
            candidate: CandidateId(id),
            result_file: format!("eval/{id}.json"),
            summary: EvalSummary {
                correct: true,
                score: Some(score),
                score_low: Some(low),
                score_high: Some(high),
                ..Default::default()
            },
        }
    }

    fn session_of(events: Vec<Event>) -> SessionState {
        let mut s = SessionState::default();
        for (i, e) in events.into_iter().enumerate() {
            s.apply(&rec(i as u64 + 1, e));
        }
        s
    }

    #[test]
    fn standing_approvals_and_mode_switches_fold_and_a_switch_to_step_ends_the_approvals() {
        let started = Event::SessionStarted {
            task: "t".into(),
            task_hash: "h".into(),
            provider: "p".into(),
            model: "m".into(),
            mode: Mode::Step,
            device: "cpu".into(),
            timing_meaningful: false,
            precision: None,
        };
        let approve = |kind| Event::StandingApproval { kind };
        let s = session_of(vec![
            started.clone(),
            approve(GateKind::LlmCall),
            approve(GateKind::LlmCall),
            approve(GateKind::Evaluation),
        ]);
        assert_eq!(s.mode, Mode::Step);
        assert_eq!(s.standing, vec![GateKind::LlmCall, GateKind::Evaluation]);
        let s = session_of(vec![
            started.clone(),
            approve(GateKind::Stages),
            Event::ModeChanged { mode: Mode::Auto },
        ]);
        assert_eq!(s.mode, Mode::Auto, "the latest mode of the log");
        assert_eq!(s.standing, vec![GateKind::Stages]);
        assert_eq!(
            s.info.as_ref().unwrap().mode,
            Mode::Step,
            "the mode it started in"
        );
        let s = session_of(vec![
            started,
            approve(GateKind::Stages),
            Event::ModeChanged { mode: Mode::Review },
            Event::ModeChanged { mode: Mode::Step },
        ]);
        assert_eq!(s.mode, Mode::Step);
        assert!(
            s.standing.is_empty(),
            "back in step mode, every gate is asked"
        );
        // Taken back: one kind, then the rest; the mode stays.
        let revoke = |kind| Event::StandingApprovalRevoked { kind };
        let s = session_of(vec![
            Event::ModeChanged { mode: Mode::Review },
            approve(GateKind::LlmCall),
            approve(GateKind::Evaluation),
            approve(GateKind::Stages),
            revoke(Some(GateKind::Evaluation)),
        ]);
        assert_eq!(s.standing, vec![GateKind::LlmCall, GateKind::Stages]);
        assert_eq!(s.mode, Mode::Review);
        let s = session_of(vec![
            approve(GateKind::LlmCall),
            approve(GateKind::Stages),
            revoke(None),
        ]);
        assert!(s.standing.is_empty());
        assert_eq!(
            serde_json::to_string(&revoke(None)).unwrap(),
            r#"{"type":"standing_approval_revoked"}"#
        );
        // As events.jsonl writes them.
        let line = serde_json::to_string(&approve(GateKind::LlmCall)).unwrap();
        assert_eq!(line, r#"{"type":"standing_approval","kind":"llm_call"}"#);
    }

    /// The unseen-shapes check runs from its start to its record, its failure, the end of
    /// the run or a resume.
    #[test]
    fn the_shapes_check_runs_from_its_start_to_its_end() {
        let started = |c| Event::ShapesCheckStarted {
            candidate: CandidateId(c),
        };
        let s = session_of(vec![started(3)]);
        assert_eq!(s.shapes_checking.map(|(c, _)| c), Some(CandidateId(3)));
        let s = session_of(vec![
            started(3),
            Event::ShapesCheckNotRun {
                candidate: CandidateId(3),
                reason: "the evaluator broke".into(),
            },
        ]);
        assert_eq!(s.shapes_checking, None);
        let s = session_of(vec![
            started(3),
            Event::SessionFinished {
                best: None,
                reason: "done".into(),
                end: None,
            },
        ]);
        assert_eq!(s.shapes_checking, None);
        let s = session_of(vec![started(3), Event::SessionResumed { previous_seq: 1 }]);
        assert_eq!(s.shapes_checking, None);
    }

    /// Best prefers the kernel whose interval clears the other's: the lower ends compare
    /// when both have an interval, so a wide 1.50x loses to a tight 1.45x.
    #[test]
    fn best_ranks_by_the_lower_end_of_the_interval_when_both_have_one() {
        for order in [[1, 2], [2, 1]] {
            let mut events: Vec<Event> = order.iter().map(|id| created(*id)).collect();
            events.push(with_interval(order[0], 1.50, 1.20, 1.80));
            events.push(with_interval(order[1], 1.45, 1.43, 1.47));
            let s = session_of(events);
            assert_eq!(
                s.best,
                Some(CandidateId(order[1])),
                "1.45 [1.43-1.47] beats 1.50 [1.20-1.80]"
            );
        }
        // Equal lower ends: the higher score; then the later candidate.
        let s = session_of(vec![
            created(1),
            created(2),
            created(3),
            with_interval(1, 1.40, 1.30, 1.50),
            with_interval(2, 1.45, 1.30, 1.60),
            with_interval(3, 1.45, 1.30, 1.60),
        ]);
        assert_eq!(s.best, Some(CandidateId(3)));
        assert_eq!(
            best_of([
                &s.candidates[&CandidateId(1)],
                &s.candidates[&CandidateId(2)]
            ])
            .map(|c| c.id),
            Some(CandidateId(2))
        );
    }

    /// A kernel shown wrong on unseen shapes ranks below every kernel that was not, however
    /// fast; it stays the best only when nothing else is correct.
    #[test]
    fn a_kernel_wrong_on_unseen_shapes_ranks_below_the_rest() {
        use crate::protocol::shapes::ShapeVerdict;
        let shapes = |id: u32, verdict: ShapeVerdict| Event::ShapesChecked {
            candidate: CandidateId(id),
            result_file: format!("shapes/{id}.json"),
            verdict,
            line: String::new(),
        };
        let mut events = vec![
            created(1),
            created(2),
            evaluated(1, true, Some(2.0)),
            evaluated(2, true, Some(1.1)),
        ];
        assert_eq!(session_of(events.clone()).best, Some(CandidateId(1)));
        events.push(shapes(
            1,
            ShapeVerdict::FailsOn {
                failed: 1,
                checked: 5,
            },
        ));
        assert_eq!(session_of(events.clone()).best, Some(CandidateId(2)));
        // Checked and right, or not checked: both rank by speed as before.
        events.push(shapes(
            2,
            ShapeVerdict::Generalizes {
                passed: 5,
                checked: 5,
            },
        ));
        assert_eq!(session_of(events.clone()).best, Some(CandidateId(2)));
        // The only correct kernel stays the best.
        let alone = session_of(vec![
            created(1),
            evaluated(1, true, None),
            shapes(
                1,
                ShapeVerdict::FailsOn {
                    failed: 4,
                    checked: 5,
                },
            ),
        ]);
        assert_eq!(alone.best, Some(CandidateId(1)));
    }

    /// Without intervals (sessions recorded before them) the score decides, as before; and
    /// where only one side has an interval, the scores compare.
    #[test]
    fn best_falls_back_to_the_score_without_intervals() {
        let s = session_of(vec![
            created(1),
            created(2),
            evaluated(1, true, Some(1.50)),
            evaluated(2, true, Some(1.45)),
        ]);
        assert_eq!(s.best, Some(CandidateId(1)));
        let s = session_of(vec![
            created(1),
            created(2),
            evaluated(1, true, Some(1.50)),
            with_interval(2, 1.45, 1.43, 1.47),
        ]);
        assert_eq!(s.best, Some(CandidateId(1)), "one side without: by score");
        assert_eq!(s.candidates[&CandidateId(1)].score_interval(), None);
        assert_eq!(
            s.candidates[&CandidateId(2)].score_interval(),
            Some((1.43, 1.47))
        );
    }

    #[test]
    fn candidates_are_indistinguishable_when_their_intervals_overlap() {
        let s = session_of(vec![
            created(1),
            created(2),
            created(3),
            created(4),
            created(5),
            with_interval(1, 1.50, 1.20, 1.80),
            with_interval(2, 1.45, 1.43, 1.47),
            with_interval(3, 1.60, 1.55, 1.65),
            evaluated(4, true, Some(1.46)),
            evaluated(5, false, None),
        ]);
        let c = |id: u32| &s.candidates[&CandidateId(id)];
        assert!(indistinguishable(c(1), c(2)));
        assert!(indistinguishable(c(2), c(1)));
        assert!(!indistinguishable(c(2), c(3)), "1.47 < 1.55: told apart");
        assert!(
            !indistinguishable(c(2), c(4)),
            "no interval: nothing to say"
        );
        assert!(!indistinguishable(c(2), c(5)), "a failed kernel");
        assert_eq!(c(1).speedup().unwrap().text(), "1.50x [1.20-1.80]");
        assert_eq!(c(4).speedup().unwrap().text(), "1.46x");
    }
}
