//! Who answers the engine's prompts: a real provider through `llm::LlmClient`, or the
//! person (`--provider manual`): the prompt is written to `llm/<call>.prompt.md` and the
//! engine waits for `llm/<call>.answer.md` or a `ManualAnswer` command.

use std::io::Write;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::control::Control;
use super::events::{CallId, TokenUsage};
use crate::llm::{ChatRequest, LlmClient, LlmError, StreamEvent};
use crate::session::store::SessionDir;

pub enum LlmBackend {
    Client(LlmClient),
    Manual,
}

/// A usable answer.
pub struct Answer {
    pub text: String,
    pub usage: TokenUsage,
    pub cost_usd: Option<f64>,
    /// Something the log should say (a truncated answer used as far as it goes).
    pub warning: Option<String>,
}

pub enum CallFailure {
    Cancelled,
    /// This step failed; the run goes on.
    Failed {
        message: String,
        usage: TokenUsage,
        cost_usd: Option<f64>,
    },
    /// Every further call would fail the same way (bad key, unknown model, no quota).
    Fatal {
        message: String,
        usage: TokenUsage,
        cost_usd: Option<f64>,
    },
}

fn tokens(usage: &crate::llm::Usage) -> TokenUsage {
    TokenUsage {
        input: usage.input_tokens,
        cached: usage.cached_input_tokens,
        output: usage.output_tokens,
        reasoning: usage.reasoning_tokens,
    }
}

impl LlmBackend {
    /// (provider, model) for events and file names.
    pub fn label(&self) -> (String, String) {
        match self {
            LlmBackend::Client(c) => (c.provider().name.clone(), c.provider().model.clone()),
            LlmBackend::Manual => ("manual".into(), "you".into()),
        }
    }

    /// One call. Text streams into `response_file` (so a process attached to the session
    /// can follow it) and to `on_delta`.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete(
        &self,
        session: &SessionDir,
        call: CallId,
        system: &str,
        user: &str,
        max_tokens: Option<u32>,
        cancel: &CancellationToken,
        control: &Control,
        mut on_delta: impl FnMut(&str, &str) + Send,
        response_file: &str,
        reasoning_file: &str,
    ) -> Result<Answer, CallFailure> {
        match self {
            LlmBackend::Client(client) => {
                let mut request = ChatRequest::prompt(user).with_system(system);
                if max_tokens.is_some() {
                    request.max_tokens = max_tokens;
                }
                let mut response = open_append(session, response_file);
                let mut reasoning = None;
                let result = client
                    .complete(&request, cancel, |event| match event {
                        StreamEvent::Text(t) => {
                            if let Some(f) = response.as_mut() {
                                let _ = f.write_all(t.as_bytes()).and_then(|_| f.flush());
                            }
                            on_delta(t, "");
                        }
                        StreamEvent::Reasoning(r) => {
                            if reasoning.is_none() {
                                reasoning = open_append(session, reasoning_file);
                            }
                            if let Some(f) = reasoning.as_mut() {
                                let _ = f.write_all(r.as_bytes()).and_then(|_| f.flush());
                            }
                            on_delta("", r);
                        }
                        _ => {}
                    })
                    .await;
                match result {
                    Ok(c) => {
                        // The whole answer, in case a retry left pieces of an earlier attempt.
                        let _ = session.write_file(response_file, c.text.as_bytes());
                        Ok(Answer {
                            text: c.text,
                            usage: tokens(&c.usage),
                            cost_usd: c.cost.map(|x| x.usd),
                            warning: None,
                        })
                    }
                    Err(LlmError::Cancelled) => Err(CallFailure::Cancelled),
                    Err(e @ LlmError::Truncated { .. }) => {
                        let partial = e.partial().cloned().unwrap_or_default();
                        let _ = session.write_file(response_file, partial.text.as_bytes());
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
                                | LlmError::Config { .. }
                        );
                        let message = e.to_string();
                        let usage = TokenUsage::default();
                        if fatal {
                            Err(CallFailure::Fatal {
                                message,
                                usage,
                                cost_usd: None,
                            })
                        } else {
                            Err(CallFailure::Failed {
                                message,
                                usage,
                                cost_usd: None,
                            })
                        }
                    }
                }
            }
            LlmBackend::Manual => {
                let answer_file = format!("llm/{call}.answer.md");
                let answer = control.expect_manual_answer(call);
                tokio::pin!(answer);
                let text = loop {
                    tokio::select! {
                        a = &mut answer => match a {
                            Ok(text) => break text,
                            Err(_) => return Err(CallFailure::Cancelled),
                        },
                        _ = cancel.cancelled() => return Err(CallFailure::Cancelled),
                        _ = tokio::time::sleep(Duration::from_millis(300)) => {
                            if let Ok(text) = session.read_file(&answer_file)
                                && !text.trim().is_empty()
                            {
                                break text;
                            }
                        }
                    }
                };
                let _ = session.write_file(response_file, text.as_bytes());
                on_delta(&text, "");
                Ok(Answer {
                    text,
                    usage: TokenUsage::default(),
                    cost_usd: Some(0.0),
                    warning: None,
                })
            }
        }
    }
}

fn open_append(session: &SessionDir, relative: &str) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(session.file(relative))
        .ok()
}
