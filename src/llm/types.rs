//! The request, the events a stream yields, normalized usage and the finished answer.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of the conversation (text only: kforge uses no tools or images).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// What to send. Fields left `None` take the provider's configured value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The system prompt (OpenAI: a leading `system` message; Anthropic: `system`).
    pub system: Option<String>,
    pub messages: Vec<Message>,
    /// Output limit for this request (overrides the provider's `max_tokens`).
    pub max_tokens: Option<u32>,
    /// Sampling temperature for this request (overrides the provider's `temperature`).
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A single user prompt.
    pub fn prompt(text: impl Into<String>) -> Self {
        Self {
            messages: vec![Message::user(text)],
            ..Self::default()
        }
    }

    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }
}

/// A finish reason exactly as the server sent it (`stop`, `length`, `end_turn`,
/// `max_tokens`, `""`, `error`, ...). It is a free string on the wire, so it is one here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FinishReason(pub String);

impl FinishReason {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The model stopped because it hit the output limit (`length`, `max_tokens`).
    pub fn is_length(&self) -> bool {
        matches!(self.0.as_str(), "length" | "max_tokens" | "model_length")
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Token counts, normalized over both protocols.
///
/// `input_tokens` is the *total* input, cache reads and cache writes included (Anthropic
/// reports them apart; they are added here). `cached_input_tokens` and
/// `cache_write_tokens` are subsets of it. `reasoning_tokens` is a subset of
/// `output_tokens` (0 where the provider does not report it, e.g. Anthropic).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    /// The cost in USD as reported by the provider itself (OpenRouter's `usage.cost`).
    pub reported_cost_usd: Option<f64>,
}

impl Usage {
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// Where a cost figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The provider reported it (OpenRouter).
    Reported,
    /// Computed from the price table (built-in defaults or `[llm.prices]`).
    PriceTable,
    /// A local or otherwise free provider (`free = true`).
    Free,
}

/// A cost in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub usd: f64,
    pub source: CostSource,
}

/// What a stream yields, in order. Text and reasoning are deltas; `Usage` is the whole
/// normalized usage known so far (replace, do not add); `Finish` comes once, when the
/// server says why it stopped; `Retrying` says an attempt failed before any text or
/// reasoning and another follows after `delay` (forget any usage seen so far);
/// `Done` is the last item of [`crate::llm::LlmClient::stream`] only.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Text(String),
    Reasoning(String),
    Usage(Usage),
    Finish(FinishReason),
    Retrying {
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        delay: Duration,
        /// Why the previous attempt failed (the error's message).
        reason: String,
    },
    Done(Box<Completion>),
}

/// A finished answer (or, inside [`crate::llm::LlmError::Truncated`], a cut one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub provider: String,
    /// The model requested.
    pub model: String,
    /// The model the server says answered, when it says.
    pub response_model: Option<String>,
    pub text: String,
    pub reasoning: String,
    pub usage: Usage,
    /// `None` when the price is unknown (never silently 0).
    pub cost: Option<Cost>,
    pub finish_reason: Option<FinishReason>,
    /// From the start of the call (retries included) to the end of the answer.
    pub latency: Duration,
    /// From the start of the call to the first text or reasoning token.
    pub time_to_first_token: Option<Duration>,
    /// Attempts made, 1 when the first succeeded.
    pub attempts: u32,
}

/// Why an answer is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// The connection ended before `[DONE]` / `message_stop`.
    StreamEnded,
    /// The model hit its output limit (`finish_reason` `length` / `max_tokens`).
    MaxTokens,
}
