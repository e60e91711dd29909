//! The steps every part of the plan is made of: ask the LLM (with its gate, budget,
//! retries and re-asks), make a candidate, evaluate it, open a gate. Each returns a
//! `Step`, reuses what `Replay` says is done, and writes its files before the events that
//! name them.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::outcome::{Step, step};
use super::ports::{Answer, CallFailure, CallProgress, LlmCall};
use super::prompting;
use super::runner::Inner;
use crate::eval::{EvalProgress, EvalRequest};
use crate::llm::{ChatRequest, ExtractError, Message};
use crate::prompts::{PromptContext, TemplateName, UnusableAnswer};
use crate::protocol::EvalResult;
use crate::protocol::*;
use crate::session::state::{CandidateStatus, Speedup};
use crate::session::store::AppendFile;

/// The files an answer streams into as it arrives (`llm/<call>.response.md`, and
/// `.reasoning.md` when there is reasoning); the first write error is kept.
struct AnswerFiles<'a> {
    engine: &'a Inner,
    response: String,
    reasoning_file: String,
    live: Option<AppendFile>,
    thinking: Option<AppendFile>,
    error: Option<String>,
}

impl<'a> AnswerFiles<'a> {
    fn new(engine: &'a Inner, call: CallId) -> AnswerFiles<'a> {
        let mut files = AnswerFiles {
            engine,
            response: format!("llm/{call}.response.md"),
            reasoning_file: format!("llm/{call}.reasoning.md"),
            live: None,
            thinking: None,
            error: None,
        };
        files.live = files.open(&files.response.clone());
        files
    }

    fn open(&mut self, file: &str) -> Option<AppendFile> {
        match self.engine.stream_file(file) {
            Ok(f) => Some(f),
            Err(e) => {
                self.error.get_or_insert(format!("{e:#}"));
                None
            }
        }
    }

    fn append(error: &mut Option<String>, file: Option<&mut AppendFile>, name: &str, text: &str) {
        if let Some(f) = file
            && let Err(e) = f.write_all(text.as_bytes()).and_then(|()| f.flush())
        {
            error.get_or_insert(format!("cannot write {name}: {e}"));
        }
    }

    fn text(&mut self, text: &str) {
        Self::append(&mut self.error, self.live.as_mut(), &self.response, text);
    }

    fn reasoning(&mut self, text: &str) {
        if self.thinking.is_none() {
            self.thinking = self.open(&self.reasoning_file.clone());
        }
        Self::append(
            &mut self.error,
            self.thinking.as_mut(),
            &self.reasoning_file,
            text,
        );
    }
}

/// A candidate's evaluation as the pipeline needs it.
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub id: CandidateId,
    pub correct: bool,
    pub score: Option<f64>,
    pub result: EvalResult,
}

impl Evaluated {
    /// The score with its 95% interval, ranked as the session's best is.
    pub fn speedup(&self) -> Option<Speedup> {
        Speedup::new(self.score, self.result.score_interval())
    }
}

/// Who asks an LLM call and what for: what every phase of `Inner::call` names it by.
#[derive(Clone, Copy)]
struct CallSite<'a> {
    key: &'a StepKey,
    tag: &'a str,
    kind: CallKind,
    candidate: Option<CandidateId>,
    call: CallId,
}

/// What an answer must contain to be usable, and how to take it out.
pub struct Want<T> {
    /// `code` or `analysis`, for the follow-up prompt.
    word: &'static str,
    extract: fn(&str) -> Result<T, ExtractError>,
}

/// A kernel: one fenced python block (or a bare `class ModelNew`).
pub const CODE: Want<String> = Want {
    word: "code",
    extract: crate::llm::extract_code,
};

/// An algorithm analysis: one JSON object.
pub const ANALYSIS: Want<Analysis> = Want {
    word: "analysis",
    extract: crate::llm::extract_analysis,
};

impl Inner {
    /// Asks for a kernel; the step `key` reuses its candidate's code on resume.
    pub async fn ask_for_code(
        &self,
        key: &StepKey,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        ctx: PromptContext,
    ) -> Step<(String, Option<CallId>)> {
        if let Some((c, code)) = self.replay.candidate(key) {
            self.log(
                LogLevel::Info,
                tag,
                format!("reusing candidate {}, saved before the interruption", c.id),
            );
            return Step::Done((code, c.call));
        }
        let (code, call) = step!(self.ask(key, tag, kind, candidate, ctx, CODE).await);
        Step::Done((code, Some(call)))
    }

    /// One prompt, asked until the answer is usable; returns what `want` took out of it. A
    /// call that fails is asked again (`[pipeline] call_reasks` times), and an answer
    /// without the wanted content gets one follow-up in the same conversation carrying the
    /// extraction error.
    pub async fn ask<T>(
        &self,
        key: &StepKey,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        ctx: PromptContext,
        want: Want<T>,
    ) -> Step<(T, CallId)> {
        let (system, user) = match prompting::render(&self.prompts, kind, &ctx) {
            Ok(p) => p,
            Err(e) => {
                self.fail(format!("cannot render the {} prompt: {e:#}", kind.word()));
                return Step::Stopped;
            }
        };
        let mut request = ChatRequest::prompt(user).with_system(system);
        request.max_tokens = self.pipeline.max_output_tokens;
        let (answer, call) = step!(
            self.call_with_reasks(key, tag, kind, candidate, request.clone(), None)
                .await
        );
        let problem = match (want.extract)(&answer) {
            Ok(value) => return Step::Done((value, call)),
            Err(e) => e.to_string(),
        };
        self.log(
            LogLevel::Warn,
            tag,
            format!("call {call}: {problem}; asking again once"),
        );
        let mut followup_ctx = PromptContext::for_task(&self.task.name, &self.task.source);
        followup_ctx.unusable_answer = Some(UnusableAnswer {
            error: problem,
            expected: want.word.into(),
        });
        let followup = match self.prompts.render(TemplateName::Followup, &followup_ctx) {
            Ok(p) => p.user,
            Err(e) => {
                self.fail(format!("cannot render the follow-up prompt: {e:#}"));
                return Step::Stopped;
            }
        };
        request.messages.push(Message::assistant(answer));
        request.messages.push(Message::user(followup));
        let (answer, call) = step!(
            self.call_with_reasks(&key.again(), tag, kind, candidate, request, Some(call))
                .await
        );
        match (want.extract)(&answer) {
            Ok(value) => Step::Done((value, call)),
            Err(e) => Step::Failed(format!("call {call}: {e} (also when asked again)")),
        }
    }

    /// A call, asked again after a pause when it fails (the provider is down, a stream
    /// broke), at most `call_reasks` times. Reuses a saved answer on resume.
    async fn call_with_reasks(
        &self,
        key: &StepKey,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        request: ChatRequest,
        follows: Option<CallId>,
    ) -> Step<(String, CallId)> {
        if let Some(saved) = self.replay.answer(key) {
            self.log(
                LogLevel::Info,
                tag,
                format!("reusing the saved answer of call {}", saved.call),
            );
            return Step::Done((saved.text, saved.call));
        }
        let mut last_error = String::new();
        for round in 0..=self.pipeline.call_reasks {
            if self.stopping() {
                return Step::Stopped;
            }
            if round > 0 {
                let wait = Duration::from_secs_f64(self.pipeline.reask_delay_s.max(0.0));
                self.log(
                    LogLevel::Warn,
                    tag,
                    format!(
                        "asking again in {:.0}s ({round} of {}) after: {last_error}",
                        wait.as_secs_f64(),
                        self.pipeline.call_reasks
                    ),
                );
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.control.stop.cancelled() => return Step::Stopped,
                }
            }
            match self
                .call(key, tag, kind, candidate, request.clone(), follows)
                .await
            {
                Step::Failed(e) => last_error = e,
                other => return other,
            }
        }
        Step::Failed(format!(
            "the {} call failed {} time{}; the last: {last_error}",
            kind.word(),
            self.pipeline.call_reasks + 1,
            if self.pipeline.call_reasks == 0 {
                ""
            } else {
                "s"
            }
        ))
    }

    /// One LLM call through the step gate, the budgets and the concurrency limit. The
    /// prompt is written before the call's event, the answer before its end event.
    pub async fn call(
        &self,
        key: &StepKey,
        tag: &str,
        kind: CallKind,
        candidate: Option<CandidateId>,
        mut request: ChatRequest,
        follows: Option<CallId>,
    ) -> Step<(String, CallId)> {
        let _slot = step!(self.call_slot().await);
        let site = CallSite {
            key,
            tag,
            kind,
            candidate,
            call: CallId(self.ids.call.take()),
        };
        let prompt_file = step!(self.write_prompt_files(site.call, &request, follows));
        if self.control.mode() == Mode::Step {
            step!(self.call_gate(&site, &prompt_file, &mut request).await);
        }
        self.announce_call(&site, prompt_file);
        let (result, latency_s, files) = self.stream_answer(&site, request).await;
        self.record_answer(&site, result, latency_s, files)
    }

    /// Waits for one of the `max_concurrent_calls` slots, for a pause to end, and checks
    /// the budgets: `Stopped` when the run stops meanwhile or a budget is spent.
    async fn call_slot(&self) -> Step<tokio::sync::SemaphorePermit<'_>> {
        if self.stopping() {
            return Step::Stopped;
        }
        let slot = tokio::select! {
            permit = self.call_slots.acquire() => match permit {
                Ok(p) => p,
                Err(_) => return Step::Stopped,
            },
            _ = self.control.stop.cancelled() => return Step::Stopped,
        };
        self.control.wait_unpaused().await;
        if self.stopping() || !self.within_budget() {
            return Step::Stopped;
        }
        Step::Done(slot)
    }

    /// Writes the call's system prompt and the prompt the person sees (a follow-up names
    /// the call it follows); returns the prompt's file, `llm/<call>.prompt.md`.
    fn write_prompt_files(
        &self,
        call: CallId,
        request: &ChatRequest,
        follows: Option<CallId>,
    ) -> Step<String> {
        let prompt_file = format!("llm/{call}.prompt.md");
        let last_user = request.messages.last().map(|m| m.content.clone());
        let mut shown = last_user.unwrap_or_default();
        if let Some(first) = follows {
            shown = format!(
                "<!-- follow-up to call {first}: its prompt and answer are llm/{first}.prompt.md and llm/{first}.response.md -->\n\n{shown}"
            );
        }
        step!(self.write(
            &format!("llm/{call}.system.md"),
            request.system.as_deref().unwrap_or_default().as_bytes()
        ));
        step!(self.write(&prompt_file, shown.as_bytes()));
        Step::Done(prompt_file)
    }

    /// The gate before the call (step mode): a rewritten prompt replaces the one written
    /// and the one sent; `Skipped` when the person rejects the call.
    async fn call_gate(
        &self,
        site: &CallSite<'_>,
        prompt_file: &str,
        request: &mut ChatRequest,
    ) -> Step<()> {
        let CallSite { tag, kind, .. } = *site;
        let question = format!("Send the {} prompt ({tag})?", kind.word());
        match self
            .gate(
                &site.key.call_gate(),
                GateKind::LlmCall,
                site.candidate,
                Some(site.call),
                question,
                Some(prompt_file.to_string()),
            )
            .await
        {
            Step::Done(Decision::Approve) => {}
            Step::Done(Decision::Reject) => {
                self.log(
                    LogLevel::Info,
                    tag,
                    format!("{} call skipped by your decision", kind.word()),
                );
                return Step::Skipped("rejected".into());
            }
            Step::Done(Decision::Rewrite { text }) => {
                step!(self.write(prompt_file, text.as_bytes()));
                if let Some(last) = request.messages.last_mut() {
                    last.content = text;
                }
            }
            other => return other.forward(),
        }
        // Approved while paused: the call waits for the resume.
        self.control.wait_unpaused().await;
        if self.stopping() {
            return Step::Stopped;
        }
        Step::Done(())
    }

    /// Records the call's start (its prompt file is on disk by now) and, when the person
    /// is the LLM, says where to read the prompt and write the answer.
    fn announce_call(&self, site: &CallSite<'_>, prompt_file: String) {
        let CallSite {
            key,
            tag,
            kind,
            candidate,
            call,
        } = *site;
        let (provider, model) = self.llm.label();
        tracing::info!(call = call.0, %key, kind = kind.word(), %provider, %model, "llm call started");
        self.emit(Event::LlmCallStarted {
            call,
            key: key.to_string(),
            kind,
            candidate,
            provider,
            model,
            prompt_file: prompt_file.clone(),
        });
        if let Some(answer_file) = self.llm.manual_answer_file(call) {
            self.log(
                LogLevel::Info,
                tag,
                format!(
                    "call {call} is yours: read {} and write your answer to {}",
                    self.session.file(&prompt_file).display(),
                    self.session.file(&answer_file).display()
                ),
            );
        }
    }

    /// Sends the request and streams the answer, as it arrives, into its files and out
    /// as live events; returns the provider's answer, the latency in seconds and the
    /// answer's files.
    async fn stream_answer(
        &self,
        site: &CallSite<'_>,
        request: ChatRequest,
    ) -> (Result<Answer, CallFailure>, f64, AnswerFiles<'_>) {
        let CallSite { tag, call, .. } = *site;
        let token = self.control.call_token(call);
        // The answer streams into its file so a process attached to the session can
        // follow it; a failed write there ends the run like any other.
        let mut files = AnswerFiles::new(self, call);
        let started = Instant::now();
        let llm_call = LlmCall {
            call,
            key: site.key.to_string(),
            kind: site.kind,
            request,
        };
        let mut on_progress = |progress: CallProgress| match progress {
            CallProgress::Text(text) => {
                files.text(&text);
                self.emit(Event::LlmDelta {
                    call,
                    text,
                    reasoning: String::new(),
                });
            }
            CallProgress::Reasoning(text) => {
                files.reasoning(&text);
                self.emit(Event::LlmDelta {
                    call,
                    text: String::new(),
                    reasoning: text,
                });
            }
            CallProgress::Retrying {
                attempt,
                delay_s,
                reason,
            } => {
                self.emit(Event::LlmRetry {
                    call,
                    attempt,
                    delay_s,
                    reason: reason.clone(),
                });
                self.log(
                    LogLevel::Warn,
                    tag,
                    format!(
                        "call {call}: attempt {} failed ({reason}); retrying in {delay_s:.1}s",
                        attempt - 1
                    ),
                );
            }
        };
        let result = self.llm.complete(&llm_call, &token, &mut on_progress).await;
        self.control.call_done(call);
        (result, started.elapsed().as_secs_f64(), files)
    }

    /// Records how the call ended: the whole answer is written before the end event; a
    /// failed call is logged and becomes the step's outcome (a fatal one ends the run).
    fn record_answer(
        &self,
        site: &CallSite<'_>,
        result: Result<Answer, CallFailure>,
        latency_s: f64,
        files: AnswerFiles<'_>,
    ) -> Step<(String, CallId)> {
        let CallSite { key, tag, call, .. } = *site;
        let response_file = files.response.clone();
        if let Some(e) = files.error {
            self.fail(format!(
                "{e}; stopped so that nothing more is lost: free space and `kforge resume` it"
            ));
            return Step::Stopped;
        }
        match result {
            Ok(answer) => {
                tracing::info!(
                    call = call.0,
                    %key,
                    latency_s = format!("{latency_s:.2}"),
                    input_tokens = answer.usage.input,
                    output_tokens = answer.usage.output,
                    cost_usd = answer.cost_usd,
                    "llm call answered"
                );
                // The whole answer, in case a retry left pieces of an earlier attempt.
                step!(self.write(&response_file, answer.text.as_bytes()));
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
                self.sync();
                Step::Done((answer.text, call))
            }
            Err(failure) => {
                let (message, usage, cost_usd) = failure.parts();
                tracing::warn!(
                    call = call.0,
                    %key,
                    latency_s = format!("{latency_s:.2}"),
                    error = %message,
                    "llm call failed"
                );
                self.emit(Event::LlmCallFinished {
                    call,
                    ok: false,
                    error: Some(message.clone()),
                    usage,
                    cost_usd,
                    latency_s,
                    response_file: None,
                });
                self.log(
                    LogLevel::Error,
                    tag,
                    format!("call {call} failed: {message}"),
                );
                match failure {
                    CallFailure::Cancelled if self.stopping() => Step::Stopped,
                    CallFailure::Cancelled => Step::Skipped(format!("call {call} cancelled")),
                    CallFailure::Fatal { .. } => {
                        self.fail(format!("the LLM provider refuses the run: {message}"));
                        Step::Stopped
                    }
                    CallFailure::Failed { .. } => Step::Failed(message),
                }
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

    /// A new candidate: its kernel file is written first, then the event that names it.
    /// The step `key` reuses the candidate an earlier run made.
    pub fn new_candidate(
        &self,
        key: &StepKey,
        parent: Option<CandidateId>,
        kind: CandidateKind,
        code: &str,
        call: Option<CallId>,
    ) -> Step<CandidateId> {
        if let Some((c, _)) = self.replay.candidate(key) {
            return Step::Done(c.id);
        }
        let id = CandidateId(self.ids.candidate.take());
        let file = format!("kernels/{id}-{}.py", kind.word());
        step!(self.write(&file, code.as_bytes()));
        self.emit(Event::CandidateCreated {
            id,
            key: key.to_string(),
            parent,
            kind,
            file,
            call,
        });
        Step::Done(id)
    }

    /// Evaluates a candidate (an earlier run's evaluation is reused). `Skipped` when it
    /// was dropped at the gate.
    pub async fn evaluate(&self, id: CandidateId, tag: &str) -> Step<Evaluated> {
        if let Some(result) = self.replay.evaluation(id) {
            return Step::Done(Evaluated {
                id,
                correct: result.correct,
                score: result.score(),
                result,
            });
        }
        let Some(candidate) = self.with_state(|s| s.candidates.get(&id).cloned()) else {
            return Step::Failed(format!("no candidate {id}"));
        };
        if candidate.status == CandidateStatus::Dropped {
            return Step::Skipped(format!("candidate {id} was dropped"));
        }
        if self.stopping() {
            return Step::Stopped;
        }
        if self.control.mode() == Mode::Step {
            let question = format!("Evaluate candidate {id} ({})?", candidate.kind.label());
            match self
                .gate(
                    &GateKey::Evaluation { candidate: id },
                    GateKind::Evaluation,
                    Some(id),
                    None,
                    question,
                    Some(candidate.file.clone()),
                )
                .await
            {
                Step::Done(Decision::Approve) => {}
                Step::Done(Decision::Reject) => {
                    self.emit(Event::CandidateDropped {
                        id,
                        reason: "rejected before evaluation".into(),
                    });
                    return Step::Skipped("rejected before evaluation".into());
                }
                Step::Done(Decision::Rewrite { text }) => {
                    step!(self.write(&candidate.file, text.as_bytes()));
                    self.log(
                        LogLevel::Info,
                        tag,
                        format!("candidate {id} edited by you before evaluation"),
                    );
                }
                other => return other.forward(),
            }
        }
        self.control.wait_unpaused().await;
        if self.stopping() {
            return Step::Stopped;
        }
        let result = step!(
            self.run_evaluation(id, &candidate.file, self.pipeline.profile)
                .await
        );
        let summary = step!(self.record_result(id, tag, &result));
        Step::Done(Evaluated {
            id,
            correct: summary.correct,
            score: summary.score,
            result,
        })
    }

    /// Runs one evaluation of a candidate's kernel file, its live phases going out as
    /// events.
    pub async fn run_evaluation(
        &self,
        id: CandidateId,
        file: &str,
        profile: bool,
    ) -> Step<EvalResult> {
        self.emit(Event::EvalStarted { candidate: id });
        let mut request = EvalRequest::new(
            self.session.file("task.py"),
            self.session.file(file),
            self.devices.primary(),
            self.eval.clone(),
        );
        request.profile = profile && self.devices.is_gpu();
        request.session_candidate = true;
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
            Ok(result) => Step::Done(result),
            Err(crate::eval::EvalError::Cancelled) => Step::Stopped,
            Err(e) => {
                self.fail(format!("the evaluator failed: {e}"));
                Step::Stopped
            }
        }
    }

    /// Saves a result as `eval/<id>.json`, then announces it (event and console line).
    pub fn record_result(
        &self,
        id: CandidateId,
        tag: &str,
        result: &EvalResult,
    ) -> Step<EvalSummary> {
        let result_file = format!("eval/{id}.json");
        let json = match serde_json::to_vec_pretty(result) {
            Ok(j) => j,
            Err(e) => return Step::Failed(format!("cannot encode the result of {id}: {e}")),
        };
        step!(self.write(&result_file, &json));
        let summary = summarize(result);
        let line = if summary.correct {
            match (summary.score, summary.kernel_ms, summary.reference_ms) {
                (Some(s), Some(k), Some(r)) => format!(
                    "candidate {id}: correct, {} ({k:.4} ms vs {r:.4} ms)",
                    crate::protocol::figures::score_with_interval(s, result.score_interval())
                ),
                _ => format!("candidate {id}: correct (score n/a)"),
            }
        } else {
            format!(
                "candidate {id}: {}: {}",
                summary.category.map(|c| c.as_str()).unwrap_or("failed"),
                summary.summary.chars().take(200).collect::<String>()
            )
        };
        for flag in &summary.flags {
            self.log(
                LogLevel::Warn,
                tag,
                format!("candidate {id}: flagged {flag}"),
            );
        }
        let best_before = self.with_state(|s| s.best);
        self.emit(Event::EvalFinished {
            candidate: id,
            result_file,
            summary: summary.clone(),
        });
        let level = if summary.correct {
            LogLevel::Info
        } else {
            LogLevel::Warn
        };
        self.log(level, tag, line);
        self.announce_best(best_before);
        self.sync();
        Step::Done(summary)
    }

    /// Says so when the session's best changed since `before`.
    pub fn announce_best(&self, before: Option<CandidateId>) {
        let now = self.with_state(|s| {
            s.best
                .map(|b| (b, s.candidates.get(&b).and_then(|c| c.score())))
        });
        if let Some((candidate, score)) = now
            && Some(candidate) != before
        {
            self.emit(Event::BestChanged { candidate, score });
        }
    }

    /// A gate that review and step modes stop at: `Done(false)` when the person rejects.
    pub async fn review_gate(
        &self,
        key: &GateKey,
        kind: GateKind,
        candidate: Option<CandidateId>,
        question: String,
    ) -> Step<bool> {
        if self.control.mode() == Mode::Auto {
            return Step::Done(true);
        }
        let decision = step!(self.gate(key, kind, candidate, None, question, None).await);
        Step::Done(decision != Decision::Reject)
    }

    /// Waits for the person's decision at the gate `key` (an earlier run's decision is
    /// reused). A gate the run stops at is withdrawn, not answered: resume asks it again.
    pub async fn gate(
        &self,
        key: &GateKey,
        kind: GateKind,
        candidate: Option<CandidateId>,
        call: Option<CallId>,
        question: String,
        file: Option<String>,
    ) -> Step<Decision> {
        self.gate_on(key, kind, candidate, call, question, file, false)
            .await
    }

    /// `gate`; `about_best`: the gate asks about `candidate` as the session's best, and
    /// is withdrawn the moment the best moves from it (a final mark, a better kernel): the
    /// withdrawal is recorded with its reason and the step gets `Skipped(reason)`, to ask
    /// again about the new best.
    #[allow(clippy::too_many_arguments)]
    pub async fn gate_on(
        &self,
        key: &GateKey,
        kind: GateKind,
        candidate: Option<CandidateId>,
        call: Option<CallId>,
        question: String,
        file: Option<String>,
        about_best: bool,
    ) -> Step<Decision> {
        if let Some(decision) = self.replay.decision(key) {
            return Step::Done(decision);
        }
        if self.stopping() {
            return Step::Stopped;
        }
        // A standing approval answers it (the mode may also have changed since the step
        // looked: a gate the mode does not stop at is approved as if never asked).
        if self.control.approved_always(kind) {
            self.log(
                LogLevel::Info,
                "you",
                format!(
                    "approved without asking: {question} (you approved all {} for this session)",
                    kind.plural()
                ),
            );
            return Step::Done(Decision::Approve);
        }
        if !self.control.mode().asks(kind) {
            return Step::Done(Decision::Approve);
        }
        let gate = GateId(self.ids.gate.take());
        let answer = self
            .control
            .open_gate(gate, kind, kind.takes_rewrite(file.is_some()));
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
        // A mode switch or a standing approval recorded between the check above and the
        // gate's registration: it answers this gate too.
        if !self.control.asks(kind) {
            self.release_gates("a mode switch or a standing approval came as it opened");
        }
        if about_best && let Some(base) = candidate {
            self.control.gate_about_best(gate, base);
            // The best may have moved since the step chose it.
            let best = self.with_state(|s| s.best);
            if best != Some(base) {
                self.control
                    .best_moved(best, &format!("the best moved from candidate {base}"));
            }
        }
        let decision = tokio::select! {
            biased;
            _ = self.control.stop.cancelled() => None,
            d = answer => d.ok(),
        };
        if decision.is_none()
            && !self.stopping()
            && let Some(why) = self.control.withdrawn(gate)
        {
            self.emit(Event::GateWithdrawn {
                gate,
                reason: why.clone(),
            });
            self.log(
                LogLevel::Info,
                "you",
                format!("gate {gate} withdrawn: {why}"),
            );
            self.emit(Event::StateChanged {
                state: if self.control.is_paused() {
                    EngineState::Paused
                } else {
                    EngineState::Running
                },
            });
            return Step::Skipped(why);
        }
        let Some(decision) = decision else {
            self.emit(Event::GateWithdrawn {
                gate,
                reason: "the run stopped before it was answered; resume asks it again".into(),
            });
            return Step::Stopped;
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
        Step::Done(decision)
    }
}

/// The part of a result the events carry.
pub fn summarize(result: &EvalResult) -> EvalSummary {
    let timing = result.timing.as_ref().filter(|t| t.meaningful);
    let interval = result.score_interval();
    EvalSummary {
        correct: result.correct,
        category: result.category,
        summary: result.summary.clone(),
        score: result.score(),
        score_low: interval.map(|i| i.0),
        score_high: interval.map(|i| i.1),
        noisy: result.correct && timing.is_some_and(|t| t.noisy),
        kernel_ms: timing.map(|t| t.kernel.median_ms),
        reference_ms: timing.map(|t| t.reference.median_ms),
        flags: result.flags.clone(),
        warnings: result
            .static_report
            .warnings
            .iter()
            .map(|w| w.message.clone())
            .collect(),
        device: result.device.torch_name.clone(),
        baselines: baseline_scores(result),
        sol_pct: result.speed_of_light.as_ref().and_then(|s| s.kernel_pct),
        vs_defaults: result
            .timing
            .as_ref()
            .filter(|t| t.meaningful && result.correct)
            .and_then(|t| t.defaults_score())
            .map(Box::new),
    }
}

/// Both baselines' scores, where the compiled reference was timed (None otherwise: the
/// eager score alone is `score`).
fn baseline_scores(result: &EvalResult) -> Option<Box<crate::protocol::BaselineScores>> {
    use crate::protocol::{Baseline, BaselineScores, ScoreFigure};
    let timing = result.timing.as_ref().filter(|t| t.meaningful)?;
    let compile = timing.compile.as_ref()?;
    let figure = |baseline| {
        let (score, interval) = result.score_vs(baseline);
        ScoreFigure::new(score, interval)
    };
    Some(Box::new(BaselineScores {
        headline: result.baseline(),
        vs_eager: figure(Baseline::Eager),
        vs_compile: figure(Baseline::Compile),
        compile_speedup: compile.speedup_over_eager,
    }))
}
