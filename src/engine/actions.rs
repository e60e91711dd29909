//! The person's actions on any candidate, at any time (docs/architecture.md, Modes and gates): repair or
//! optimize with an instruction, a manual candidate, re-evaluate, profile, mark final, and
//! ask a failed LLM call again. Each runs on its own task so a long repair does not block
//! a re-evaluation.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::outcome::{Step, step};
use super::runner::Inner;
use crate::llm::{ChatRequest, Message};
use crate::protocol::*;

pub(super) const TAG: &str = "you";

impl Inner {
    pub(super) async fn serve_actions(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Command>) {
        while let Some(action) = rx.recv().await {
            let inner = self.clone();
            tokio::spawn(async move { inner.act(action).await });
        }
    }

    async fn act(self: Arc<Self>, action: Command) {
        let n = self.ids.action.take();
        let key = StepKey::Action {
            number: n,
            process: std::process::id(),
        };
        let outcome = match action {
            Command::Repair {
                candidate,
                instruction,
            } => self.instructed(&key, candidate, instruction, true).await,
            Command::Optimize {
                candidate,
                instruction,
            } => self.instructed(&key, candidate, instruction, false).await,
            Command::Manual { parent, code } => {
                match self.new_candidate(&key, parent, CandidateKind::Manual, &code, None) {
                    Step::Done(id) => self.evaluate(id, TAG).await.forward_unit(),
                    other => other.forward(),
                }
            }
            Command::Reevaluate { candidate } => self.reevaluate(candidate, false).await,
            Command::Profile { candidate } => self.reevaluate(candidate, true).await,
            Command::Reask { call } => self.reask(&key, call).await,
            _ => Step::Done(()),
        };
        if let Step::Failed(why) = outcome {
            self.log(LogLevel::Warn, TAG, why);
        }
        self.refresh_result_files();
    }

    /// On a finished run the result files (`best_kernel.py`, the report) follow what the
    /// person did; during a run the finish writes them.
    pub(super) fn refresh_result_files(&self) {
        let state = self.state();
        if !state.state.is_over() {
            return;
        }
        if let Some(best) = state.best
            && let Some(source) = self.kernel_source(best)
        {
            let _ = self.write("best_kernel.py", source.as_bytes());
        }
        if let Err(e) = self.write_report() {
            self.log(
                LogLevel::Error,
                "engine",
                format!("cannot write the report files: {e:#}"),
            );
        }
    }

    /// Makes a correct candidate the final answer (an event, so it survives resume).
    pub(super) fn mark_final(&self, candidate: CandidateId) -> Step<()> {
        if !self.with_state(|s| s.candidates.get(&candidate).is_some_and(|c| c.is_correct())) {
            return Step::Failed(format!(
                "candidate {candidate} is not correct: not marked final"
            ));
        }
        let before = self.with_state(|s| s.best);
        self.emit(Event::FinalMarked { candidate });
        self.announce_best(before);
        self.log(
            LogLevel::Info,
            TAG,
            format!("candidate {candidate} marked final"),
        );
        self.refresh_result_files();
        Step::Done(())
    }

    /// Repair (`repair`) or optimize a candidate following the person's instruction.
    async fn instructed(
        &self,
        key: &StepKey,
        candidate: CandidateId,
        instruction: String,
        repair: bool,
    ) -> Step<()> {
        let mut ctx = self.context_for(Some(candidate));
        if !repair {
            // Optimizing: the failure (if any) is not what the instruction is about.
            ctx.failure = None;
            ctx.hints.clear();
        }
        ctx.instruction = Some(instruction.clone());
        let (code, call) = step!(
            self.ask_for_code(key, TAG, CallKind::Instructed, Some(candidate), ctx)
                .await
        );
        let kind = CandidateKind::Instructed { instruction };
        let id = step!(self.new_candidate(key, Some(candidate), kind, &code, call));
        self.evaluate(id, TAG).await.forward_unit()
    }

    async fn reevaluate(&self, id: CandidateId, profile: bool) -> Step<()> {
        let Some(file) = self.with_state(|s| s.candidates.get(&id).map(|c| c.file.clone())) else {
            return Step::Failed(format!("no candidate {id}"));
        };
        if profile && !self.devices.is_gpu() {
            self.log(
                LogLevel::Warn,
                TAG,
                "profiling needs a GPU: re-evaluating without it",
            );
        }
        let result = step!(self.run_evaluation(id, &file, profile).await);
        step!(self.record_result(id, TAG, &result));
        if self.with_state(|s| s.is_final(id)) && !result.correct {
            self.log(
                LogLevel::Warn,
                TAG,
                format!("candidate {id} is marked final but failed its re-evaluation"),
            );
        }
        self.log(LogLevel::Info, TAG, format!("candidate {id} re-evaluated"));
        Step::Done(())
    }

    /// Sends a failed call's prompt again. A kernel in the answer becomes a new candidate
    /// under the call's candidate; an analysis is recorded for it.
    async fn reask(&self, key: &StepKey, call: CallId) -> Step<()> {
        let Some(old) = self.with_state(|s| s.calls.get(&call).cloned()) else {
            return Step::Failed(format!("there is no call {call}"));
        };
        if old.ok != Some(false) {
            return Step::Failed(format!(
                "call {call} did not fail: only a failed call is asked again"
            ));
        }
        let system = self
            .session
            .read_file(&format!("llm/{call}.system.md"))
            .unwrap_or_default();
        let user = match self.session.read_file(&old.prompt_file) {
            Ok(u) => u,
            Err(e) => return Step::Failed(format!("cannot read the prompt of call {call}: {e:#}")),
        };
        let mut request = ChatRequest {
            messages: vec![Message::user(user)],
            ..ChatRequest::default()
        }
        .with_system(system);
        request.max_tokens = self.pipeline.max_output_tokens;
        self.log(LogLevel::Info, TAG, format!("asking call {call} again"));
        let (answer, new_call) = step!(
            self.call(key, TAG, old.kind, old.candidate, request, None)
                .await
        );
        if old.kind.descriptor().answer == CallAnswer::Analysis {
            let Some(candidate) = old.candidate else {
                return Step::Failed(format!("call {call} analysed no candidate"));
            };
            match crate::llm::extract_analysis(&answer) {
                Ok(analysis) => {
                    self.emit(Event::AnalysisReady {
                        candidate,
                        call: new_call,
                        analysis,
                    });
                    Step::Done(())
                }
                Err(e) => Step::Failed(format!("call {new_call}: {e}")),
            }
        } else {
            let code = match crate::llm::extract_code(&answer) {
                Ok(c) => c,
                Err(e) => return Step::Failed(format!("call {new_call}: {e}")),
            };
            let kind = CandidateKind::Reasked { call };
            let id = step!(self.new_candidate(key, old.candidate, kind, &code, Some(new_call)));
            self.evaluate(id, TAG).await.forward_unit()
        }
    }
}
