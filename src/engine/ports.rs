//! The engine's two ports: what evaluates a kernel and what answers a prompt. Production
//! plugs in `eval::Evaluator` and `llm_backend`'s client or manual provider; the pipeline's
//! unit tests plug in `engine::fakes`.

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::eval::{Device, EvalError, EvalProgress, EvalRequest, Evaluator};

use crate::llm::ChatRequest;
use crate::protocol::EvalResult;
use crate::protocol::{CallId, CallKind, TokenUsage};

/// Evaluates candidates (docs/architecture.md, Evaluation).
pub trait EvalPort: Send + Sync {
    /// Starts what the device needs ahead of the first evaluation.
    fn prepare(&self, device: Device) -> BoxFuture<'_, ()>;

    /// One evaluation. A failing kernel is an `Ok` result; `Err` means no verdict could be
    /// made (the evaluator itself broke, or the evaluation was cancelled).
    fn evaluate(
        &self,
        request: EvalRequest,
        cancel: CancellationToken,
        progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> BoxFuture<'_, Result<EvalResult, EvalError>>;
}

impl EvalPort for Evaluator {
    fn prepare(&self, device: Device) -> BoxFuture<'_, ()> {
        Box::pin(Evaluator::prepare(self, device))
    }

    fn evaluate(
        &self,
        request: EvalRequest,
        cancel: CancellationToken,
        progress: Option<mpsc::UnboundedSender<EvalProgress>>,
    ) -> BoxFuture<'_, Result<EvalResult, EvalError>> {
        Box::pin(Evaluator::evaluate(self, request, cancel, progress))
    }
}

/// One LLM call as the engine makes it.
#[derive(Debug, Clone)]
pub struct LlmCall {
    pub call: CallId,
    /// The pipeline step's stable key (`seed1/repair2`).
    pub key: String,
    pub kind: CallKind,
    pub request: ChatRequest,
}

/// What a call reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum CallProgress {
    Text(String),
    Reasoning(String),
    /// The attempt failed before its first token and is tried again after `delay_s`.
    Retrying {
        attempt: u32,
        delay_s: f64,
        reason: String,
    },
}

/// A usable answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub text: String,
    pub usage: TokenUsage,
    pub cost_usd: Option<f64>,
    /// Something the log should say (a truncated answer used as far as it goes).
    pub warning: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    Cancelled,
    /// This call failed (after the client's own retries); asking again later may work.
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

impl CallFailure {
    /// (message, usage, cost) for the call's event.
    pub fn parts(&self) -> (String, TokenUsage, Option<f64>) {
        match self {
            CallFailure::Cancelled => ("cancelled".into(), TokenUsage::default(), None),
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
        }
    }
}

/// Answers prompts.
pub trait LlmPort: Send + Sync {
    /// (provider, model) for events and file names.
    fn label(&self) -> (String, String);

    /// One call; progress (text, reasoning, retries) goes to `progress` as it happens.
    fn complete<'a>(
        &'a self,
        call: &'a LlmCall,
        cancel: &'a CancellationToken,
        progress: &'a mut (dyn FnMut(CallProgress) + Send),
    ) -> BoxFuture<'a, Result<Answer, CallFailure>>;

    /// Where the person writes the answer to `call`, when the person is the LLM.
    fn manual_answer_file(&self, _call: CallId) -> Option<String> {
        None
    }

    /// The person's answer to a call (the manual provider); `Err` says why it is refused.
    fn manual_answer(&self, call: CallId, _text: String) -> Result<(), String> {
        Err(format!("call {call} is not waiting for a manual answer"))
    }
}
