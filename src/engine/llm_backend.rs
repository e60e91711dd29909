//! Who answers the engine's prompts: a real provider through `llm::LlmClient`, or the
//! person (`--provider manual`): the engine writes the prompt to `llm/<call>.prompt.md`
//! and waits for `llm/<call>.answer.md` or a `ManualAnswer` command.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::ports::{Answer, CallFailure, CallProgress, LlmCall, LlmPort};
use crate::llm::error::CommandFailure;
use crate::llm::{LlmClient, LlmError, StreamEvent};
use crate::protocol::manual;
use crate::protocol::{CallId, TokenUsage};
use crate::session::store::SessionDir;

fn tokens(usage: &crate::llm::Usage) -> TokenUsage {
    TokenUsage {
        input: usage.input_tokens,
        cached: usage.cached_input_tokens,
        output: usage.output_tokens,
        reasoning: usage.reasoning_tokens,
    }
}

/// A provider over HTTP.
pub struct ClientLlm(pub LlmClient);

impl LlmPort for ClientLlm {
    fn label(&self) -> (String, String) {
        let p = self.0.provider();
        (p.name.clone(), p.model.clone())
    }

    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        cancel: &'a CancellationToken,
        progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
        Box::pin(async move {
            let result = self
                .0
                .complete(&call.request, cancel, |event| match event {
                    StreamEvent::Text(t) => progress(CallProgress::Text(t.clone())),
                    StreamEvent::Reasoning(r) => progress(CallProgress::Reasoning(r.clone())),
                    StreamEvent::Retrying {
                        attempt,
                        delay,
                        reason,
                    } => progress(CallProgress::Retrying {
                        attempt: *attempt,
                        delay_s: delay.as_secs_f64(),
                        reason: reason.clone(),
                    }),
                    _ => {}
                })
                .await;
            match result {
                Ok(c) => Ok(Answer {
                    text: c.text,
                    usage: tokens(&c.usage),
                    cost_usd: c.cost.map(|x| x.usd),
                    warning: None,
                }),
                Err(LlmError::Cancelled) => Err(CallFailure::Cancelled),
                Err(e @ LlmError::Truncated { .. }) => {
                    let partial = e.partial().cloned().unwrap_or_default();
                    Ok(Answer {
                        warning: Some(format!("{e}; using the answer as far as it goes")),
                        text: partial.text,
                        usage: tokens(&partial.usage),
                        cost_usd: partial.cost.map(|x| x.usd),
                    })
                }
                Err(e) => {
                    let fatal = matches!(
                        e,
                        LlmError::Auth { .. }
                            | LlmError::ModelNotFound { .. }
                            | LlmError::QuotaExceeded { .. }
                            | LlmError::Redirect { .. }
                            | LlmError::Config { .. }
                            | LlmError::Command {
                                failure: CommandFailure::Spawn { .. },
                                ..
                            }
                    );
                    let message = e.to_string();
                    let usage = TokenUsage::default();
                    Err(if fatal {
                        CallFailure::Fatal {
                            message,
                            usage,
                            cost_usd: None,
                        }
                    } else {
                        CallFailure::Failed {
                            message,
                            usage,
                            cost_usd: None,
                        }
                    })
                }
            }
        })
    }
}

/// The person is the LLM: the answer comes as a `ManualAnswer` command or as the file
/// `llm/<call>.answer.md`.
pub struct ManualLlm {
    session: SessionDir,
    waiting: Mutex<HashMap<CallId, oneshot::Sender<String>>>,
}

impl ManualLlm {
    pub fn new(session: SessionDir) -> ManualLlm {
        ManualLlm {
            session,
            waiting: Mutex::new(HashMap::new()),
        }
    }
}

impl LlmPort for ManualLlm {
    fn label(&self) -> (String, String) {
        (manual::PROVIDER.into(), manual::MODEL.into())
    }

    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        cancel: &'a CancellationToken,
        progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>> {
        Box::pin(async move {
            let answer_file = self
                .manual_answer_file(call.call)
                .expect("manual calls have an answer file");
            let (tx, answer) = oneshot::channel();
            self.waiting
                .lock()
                .expect("manual answers")
                .insert(call.call, tx);
            tokio::pin!(answer);
            let text = loop {
                tokio::select! {
                    a = &mut answer => match a {
                        Ok(text) => break text,
                        Err(_) => return Err(CallFailure::Cancelled),
                    },
                    _ = cancel.cancelled() => {
                        self.waiting.lock().expect("manual answers").remove(&call.call);
                        return Err(CallFailure::Cancelled);
                    }
                    _ = tokio::time::sleep(Duration::from_millis(300)) => {
                        if let Ok(text) = self.session.read_file(&answer_file)
                            && !text.trim().is_empty()
                        {
                            break text;
                        }
                    }
                }
            };
            self.waiting
                .lock()
                .expect("manual answers")
                .remove(&call.call);
            progress(CallProgress::Text(text.clone()));
            Ok(Answer {
                text,
                usage: TokenUsage::default(),
                cost_usd: Some(0.0),
                warning: None,
            })
        })
    }

    fn manual_answer_file(&self, call: CallId) -> Option<String> {
        Some(manual::answer_file(call))
    }

    fn manual_answer(&self, call: CallId, text: String) -> Result<(), String> {
        match self.waiting.lock().expect("manual answers").remove(&call) {
            Some(tx) => {
                let _ = tx.send(text);
                Ok(())
            }
            None => Err(format!("call {call} is not waiting for a manual answer")),
        }
    }
}
