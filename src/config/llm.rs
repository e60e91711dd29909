//! `[llm]`: the providers, their keys, timeouts, retries and prices, as config.toml writes
//! them (docs/llm.md). Plain data: which provider and model a call uses is resolved by
//! `crate::llm` from this section.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// The connect timeout of a provider whose `connect_timeout_s` is not set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle gap, not a total: reasoning models can think for minutes before the first token.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);
pub const DEFAULT_MAX_RETRIES: u32 = 4;
/// The wall-clock cap of a command provider's call when `wall_timeout_s` is not set.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);
/// Anthropic requires `max_tokens`; this is used when none is configured.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 16384;

/// A secret string (API key, secret header value). Its `Debug` redacts it, it has no
/// `Display`, and it serializes as nothing (fields holding it are skipped).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret itself: only for building a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("[redacted]")
    }
}

/// The protocol a provider speaks. (`manual`, where the person answers, is not one: the
/// engine handles it apart.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions: OpenAI, DeepSeek, OpenRouter, vLLM, Ollama,
    /// llama.cpp, SGLang, LiteLLM, ...
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// A local program: the prompt on its stdin, the answer on its stdout (`command`).
    Command,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Command => "command",
        })
    }
}

/// Which JSON field carries the output limit on the OpenAI protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// `[llm.providers.NAME]`. Every field is optional: unset ones come from the preset
/// (`preset`, or the preset named like the provider) and the built-in defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Start from this preset (`openai`, `deepseek`, ...). Defaults to the provider's name
    /// when that is a preset.
    pub preset: Option<String>,
    pub protocol: Option<ProviderKind>,
    pub base_url: Option<String>,
    /// `protocol = "command"`: the program and its arguments (no shell).
    pub command: Option<Vec<String>>,
    /// `protocol = "command"`: environment variables the program gets besides the few
    /// every program gets (`llm::command::PASSED_ENV`): names, or `PREFIX*`.
    pub pass_env: Option<Vec<String>>,
    pub model: Option<String>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    /// A key written in the file: honoured only when the file is mode 0600.
    #[serde(skip_serializing)]
    pub api_key: Option<Secret>,
    /// Send `stream_options.include_usage` (OpenAI protocol; some proxies reject it).
    pub include_usage: Option<bool>,
    pub max_tokens: Option<u32>,
    /// `max_tokens` or `max_completion_tokens` (default: the latter for gpt-5 / o-series).
    pub max_tokens_field: Option<MaxTokensField>,
    pub temperature: Option<f32>,
    /// OpenAI protocol `reasoning_effort` (`low`, `medium`, `high`, ...).
    pub reasoning_effort: Option<String>,
    /// Anthropic extended thinking budget in tokens (enables thinking).
    pub thinking_budget: Option<u32>,
    pub connect_timeout_s: Option<f64>,
    pub read_timeout_s: Option<f64>,
    pub wall_timeout_s: Option<f64>,
    pub max_retries: Option<u32>,
    /// Extra request headers (values are treated as secrets).
    #[serde(skip_serializing)]
    pub extra_headers: BTreeMap<String, Secret>,
    /// Calls cost nothing (local servers).
    pub free: Option<bool>,
}

/// The `[llm]` section.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// The provider used when none is named (`KFORGE_PROVIDER` overrides it).
    pub default: Option<String>,
    /// Defaults for every provider.
    pub connect_timeout_s: Option<f64>,
    pub read_timeout_s: Option<f64>,
    pub wall_timeout_s: Option<f64>,
    pub max_retries: Option<u32>,
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Price overrides and additions, by model name.
    pub prices: BTreeMap<String, Price>,
}

/// USD per million tokens. `cached_input_per_mtok` and `cache_write_per_mtok` default to
/// the input price when absent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}
