//! LLM providers: OpenAI-compatible chat completions and Anthropic Messages over SSE,
//! with retries before the first token, idle read timeouts, cancellation, normalized
//! usage and cost, and the extraction of kernel code and analysis JSON from answers.
//!
//! The engine's path: [`resolve`] a provider from the [`crate::config::Config`], build an
//! [`LlmClient`], then [`LlmClient::complete`] (callback per event) or
//! [`LlmClient::stream`] (a `Stream` of events ending in `Done`). See `docs/llm.md`.

pub(crate) mod anthropic;
pub mod client;
pub mod command;
pub mod config;
pub mod error;
pub mod extract;
pub(crate) mod openai;
pub mod pricing;
pub(crate) mod retry;
pub(crate) mod sse;
pub mod types;

pub use client::{LlmClient, LlmStream, is_loopback};
pub use config::{
    DefaultReason, KeyStatus, LlmConfig, MaxTokensField, PRESETS, Preset, ProviderConfig,
    ProviderKind, ProviderSummary, ResolvedProvider, RetryPolicy, Secret, process_env, redact_url,
    resolve,
};
pub use error::LlmError;
pub use extract::{Analysis, ExtractError, extract_analysis, extract_code};
pub use pricing::{Price, PriceTable};
pub use types::{
    ChatRequest, Completion, Cost, CostSource, FinishReason, Message, Role, StreamEvent,
    Truncation, Usage,
};
