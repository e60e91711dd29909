//! Provider configuration: the `[llm]` section, built-in presets, key lookup and the
//! resolution of "which provider and model does this call use".
//!
//! Layers, lowest first: built-in defaults, `[llm]` (timeouts and retries for every
//! provider), the preset, `[llm.providers.NAME]`, the environment (`KFORGE_PROVIDER`,
//! `KFORGE_MODEL`, `KFORGE_BASE_URL`, the key variable), then the caller's explicit
//! provider and model (CLI flags).

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::error::LlmError;
use super::pricing::PriceTable;

pub use crate::config::llm::{
    DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RETRIES, DEFAULT_READ_TIMEOUT, LlmConfig, MaxTokensField, ProviderConfig,
    ProviderKind, Secret,
};

/// A built-in provider.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    pub kind: ProviderKind,
    pub base_url: &'static str,
    pub model: Option<&'static str>,
    pub key_env: Option<&'static str>,
    /// Without a key the provider cannot work (cloud services).
    pub key_required: bool,
    /// Local server: cost 0.
    pub free: bool,
}

/// Built-in presets. The cloud ones are tried in this order for the default provider.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "openai",
        kind: ProviderKind::OpenAi,
        base_url: "https://api.openai.com/v1",
        model: Some("gpt-5"),
        key_env: Some("OPENAI_API_KEY"),
        key_required: true,
        free: false,
    },
    Preset {
        name: "deepseek",
        kind: ProviderKind::OpenAi,
        base_url: "https://api.deepseek.com",
        model: Some("deepseek-chat"),
        key_env: Some("DEEPSEEK_API_KEY"),
        key_required: true,
        free: false,
    },
    Preset {
        name: "anthropic",
        kind: ProviderKind::Anthropic,
        base_url: "https://api.anthropic.com",
        model: Some("claude-sonnet-4-5"),
        key_env: Some("ANTHROPIC_API_KEY"),
        key_required: true,
        free: false,
    },
    Preset {
        name: "openrouter",
        kind: ProviderKind::OpenAi,
        base_url: "https://openrouter.ai/api/v1",
        model: Some("openai/gpt-5"),
        key_env: Some("OPENROUTER_API_KEY"),
        key_required: true,
        free: false,
    },
    Preset {
        name: "ollama",
        kind: ProviderKind::OpenAi,
        base_url: "http://127.0.0.1:11434/v1",
        model: None,
        key_env: None,
        key_required: false,
        free: true,
    },
    Preset {
        name: "vllm",
        kind: ProviderKind::OpenAi,
        base_url: "http://127.0.0.1:8000/v1",
        model: None,
        key_env: Some("VLLM_API_KEY"),
        key_required: false,
        free: true,
    },
    Preset {
        name: "llamacpp",
        kind: ProviderKind::OpenAi,
        base_url: "http://127.0.0.1:8080/v1",
        // llama-server answers with whatever model it loaded, whatever the name.
        model: Some("default"),
        key_env: Some("LLAMA_API_KEY"),
        key_required: false,
        free: true,
    },
];

pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Exponential backoff: `base_delay * 2^(n-1)` (plus up to 25 % jitter) capped at
/// `max_delay`; a server's `retry-after-ms` / `retry-after` replaces the computed delay
/// (still capped).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_MAX_RETRIES,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Everything a call needs, resolved. `Debug` and `Serialize` never show the key, header
/// values or a password in `base_url`, so this can go into logs and session snapshots.
#[derive(Clone, Serialize)]
pub struct ResolvedProvider {
    pub name: String,
    pub kind: ProviderKind,
    #[serde(serialize_with = "serialize_redacted_url")]
    pub base_url: String,
    /// `protocol = "command"`: the program and its arguments; empty otherwise.
    pub command: Vec<String>,
    /// `protocol = "command"`: the variables the program gets besides
    /// `llm::command::PASSED_ENV` (`pass_env`: names, or `PREFIX*`); it gets no other.
    pub pass_env: Vec<String>,
    /// Variables whose values are cut out of a command provider's error text: every
    /// variable that may hold an API key kforge knows of.
    #[serde(skip)]
    pub scrub_env: Vec<String>,
    pub model: String,
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// The variable the key comes from (named in auth errors).
    pub api_key_env: Option<String>,
    pub include_usage: bool,
    pub max_tokens: Option<u32>,
    pub max_tokens_field: MaxTokensField,
    pub temperature: Option<f32>,
    pub reasoning_effort: Option<String>,
    pub thinking_budget: Option<u32>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub wall_timeout: Option<Duration>,
    pub retry: RetryPolicy,
    #[serde(skip)]
    pub extra_headers: Vec<(String, Secret)>,
    pub free: bool,
    pub prices: PriceTable,
}

impl ResolvedProvider {
    /// A provider for `kind` at `base_url` with every other setting at its default (tests
    /// and programmatic use).
    pub fn new(name: &str, kind: ProviderKind, base_url: &str, model: &str) -> Self {
        Self {
            name: name.into(),
            kind,
            base_url: base_url.into(),
            command: Vec::new(),
            pass_env: Vec::new(),
            scrub_env: Vec::new(),
            model: model.into(),
            api_key: None,
            api_key_env: None,
            include_usage: true,
            max_tokens: None,
            max_tokens_field: default_max_tokens_field(model),
            temperature: None,
            reasoning_effort: None,
            thinking_budget: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            wall_timeout: None,
            retry: RetryPolicy::default(),
            extra_headers: Vec::new(),
            free: false,
            prices: PriceTable::builtin(),
        }
    }

    /// The secrets to scrub from any text that could be shown or logged.
    pub fn secrets(&self) -> Vec<&str> {
        self.api_key
            .iter()
            .map(Secret::expose)
            .chain(self.extra_headers.iter().map(|(_, v)| v.expose()))
            .collect()
    }
}

impl fmt::Debug for ResolvedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every field named, so that a new one cannot be forgotten here.
        let Self {
            name,
            kind,
            base_url,
            command,
            pass_env,
            scrub_env,
            model,
            api_key,
            api_key_env,
            include_usage,
            max_tokens,
            max_tokens_field,
            temperature,
            reasoning_effort,
            thinking_budget,
            connect_timeout,
            read_timeout,
            wall_timeout,
            retry,
            extra_headers,
            free,
            prices,
        } = self;
        f.debug_struct("ResolvedProvider")
            .field("name", name)
            .field("kind", kind)
            .field("base_url", &redact_url(base_url))
            .field("command", command)
            .field("pass_env", pass_env)
            .field("scrub_env", scrub_env)
            .field("model", model)
            .field("api_key", api_key)
            .field("api_key_env", api_key_env)
            .field("include_usage", include_usage)
            .field("max_tokens", max_tokens)
            .field("max_tokens_field", max_tokens_field)
            .field("temperature", temperature)
            .field("reasoning_effort", reasoning_effort)
            .field("thinking_budget", thinking_budget)
            .field("connect_timeout", connect_timeout)
            .field("read_timeout", read_timeout)
            .field("wall_timeout", wall_timeout)
            .field("retry", retry)
            .field("extra_headers", extra_headers)
            .field("free", free)
            .field("prices", prices)
            .finish()
    }
}

fn serialize_redacted_url<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// `url` with the password of its userinfo replaced by `***` (`https://user:***@host/v1`),
/// or the whole userinfo when it is a user name alone (often a token: `https://***@host`):
/// how a base URL is shown and logged everywhere (the providers listing, errors, logs).
/// Works on text that does not parse as a URL too, since a config error shows it.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let start = scheme_end + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
    if let Some(at) = authority.rfind('@') {
        return match authority[..at].find(':') {
            Some(colon) => format!("{}***{}", &url[..start + colon + 1], &rest[at..]),
            // A user name alone is often a token (`http://tok_abc@host`): hidden too.
            None => format!("{}***{}", &url[..start], &rest[at..]),
        };
    }
    // Not a URL, with an `@` further on: most likely a password holding a raw `/`, `?` or
    // `#`. Everything before that `@` is hidden.
    if reqwest::Url::parse(url).is_err()
        && let Some(at) = rest.rfind('@')
    {
        return format!("{}***{}", &url[..start], &rest[at..]);
    }
    url.to_string()
}

/// gpt-5 and the o-series take `max_completion_tokens`; everything else `max_tokens`.
pub fn default_max_tokens_field(model: &str) -> MaxTokensField {
    let bare = model.rsplit('/').next().unwrap_or(model);
    let reasoning = bare.starts_with("gpt-5")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|p| bare == *p || bare.starts_with(&format!("{p}-")));
    if reasoning {
        MaxTokensField::MaxCompletionTokens
    } else {
        MaxTokensField::MaxTokens
    }
}

/// Reads one environment variable (empty counts as unset).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, empty values treated as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// How the default provider was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultReason {
    /// `KFORGE_PROVIDER`.
    Env,
    /// `[llm] default`.
    Config,
    /// The only provider in the config.
    OnlyConfigured,
    /// The first cloud preset whose key variable is set.
    KeyPresent(String),
}

impl fmt::Display for DefaultReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefaultReason::Env => f.write_str("from KFORGE_PROVIDER"),
            DefaultReason::Config => f.write_str("from [llm] default"),
            DefaultReason::OnlyConfigured => f.write_str("the only configured provider"),
            DefaultReason::KeyPresent(var) => write!(f, "{var} is set"),
        }
    }
}

/// Where a provider's key stands (for `kforge providers`; never the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStatus {
    FromEnv(String),
    Missing(String),
    InConfigFile,
    /// Optional and absent (local servers).
    NotNeeded,
}

impl fmt::Display for KeyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyStatus::FromEnv(var) => write!(f, "{var} set"),
            KeyStatus::Missing(var) => write!(f, "{var} MISSING"),
            KeyStatus::InConfigFile => f.write_str("in config file"),
            KeyStatus::NotNeeded => f.write_str("not needed"),
        }
    }
}

/// One row of `kforge providers`.
#[derive(Debug, Clone)]
pub struct ProviderSummary {
    pub name: String,
    pub kind: ProviderKind,
    /// Without its password (see [`redact_url`]).
    pub base_url: Option<String>,
    /// `protocol = "command"`: the program and its arguments.
    pub command: Option<Vec<String>>,
    pub model: Option<String>,
    pub key: KeyStatus,
    pub is_default: bool,
    /// `preset`, `config`, or `preset+config`.
    pub origin: &'static str,
}

impl LlmConfig {
    /// All provider names: presets first (in order), then configured ones.
    pub fn provider_names(&self) -> Vec<String> {
        let mut names: Vec<String> = PRESETS.iter().map(|p| p.name.to_string()).collect();
        names.extend(
            self.providers
                .keys()
                .filter(|n| preset(n).is_none())
                .cloned(),
        );
        names
    }

    /// Every environment variable that may hold an API key for a known provider, for
    /// scrubbing child processes' environments.
    pub fn secret_env_vars(&self) -> BTreeSet<String> {
        let mut vars: BTreeSet<String> = PRESETS
            .iter()
            .filter_map(|p| p.key_env.map(String::from))
            .collect();
        vars.extend(
            self.providers
                .values()
                .filter_map(|p| p.api_key_env.clone()),
        );
        vars
    }

    /// The default provider name and why, or an error that says what to set.
    pub fn default_provider(&self, env: EnvLookup) -> Result<(String, DefaultReason), LlmError> {
        if let Some(name) = env("KFORGE_PROVIDER") {
            return Ok((name, DefaultReason::Env));
        }
        if let Some(name) = &self.default {
            return Ok((name.clone(), DefaultReason::Config));
        }
        if self.providers.len() == 1 {
            let name = self.providers.keys().next().cloned().unwrap_or_default();
            return Ok((name, DefaultReason::OnlyConfigured));
        }
        for p in PRESETS.iter().filter(|p| p.key_required) {
            if let Some(var) = p.key_env.filter(|v| env(v).is_some()) {
                return Ok((
                    p.name.to_string(),
                    DefaultReason::KeyPresent(var.to_string()),
                ));
            }
        }
        Err(LlmError::Config(nothing_configured_message()))
    }

    /// One summary per known provider (presets and configured ones).
    pub fn summaries(&self, env: EnvLookup) -> Vec<ProviderSummary> {
        let default = self.default_provider(env).ok().map(|(n, _)| n);
        self.provider_names()
            .into_iter()
            .map(|name| {
                let (cfg, pre) = self.merged(&name).unwrap_or_default();
                let key_env = cfg.api_key_env.clone();
                let required = cfg.protocol != Some(ProviderKind::Command)
                    && pre.map(|p| p.key_required).unwrap_or(key_env.is_some());
                let key = match (&key_env, cfg.api_key.is_some()) {
                    (Some(var), _) if env(var).is_some() => KeyStatus::FromEnv(var.clone()),
                    (_, true) => KeyStatus::InConfigFile,
                    (Some(var), false) if required => KeyStatus::Missing(var.clone()),
                    _ => KeyStatus::NotNeeded,
                };
                let origin = match (pre.is_some(), self.providers.contains_key(&name)) {
                    (true, true) => "preset+config",
                    (true, false) => "preset",
                    _ => "config",
                };
                ProviderSummary {
                    is_default: default.as_deref() == Some(name.as_str()),
                    kind: cfg.protocol.unwrap_or(ProviderKind::OpenAi),
                    // What a call would use: the environment's choice over the file's, as in
                    // resolve_with (a command provider has no address).
                    base_url: env("KFORGE_BASE_URL")
                        .filter(|_| cfg.protocol != Some(ProviderKind::Command))
                        .map(|u| format!("{} (KFORGE_BASE_URL)", redact_url(&u)))
                        .or_else(|| cfg.base_url.as_deref().map(redact_url)),
                    command: cfg.command.clone(),
                    model: env("KFORGE_MODEL")
                        .map(|m| format!("{m} (KFORGE_MODEL)"))
                        .or_else(|| cfg.model.clone())
                        .or_else(|| {
                            let program = cfg.command.as_deref()?.first()?;
                            (cfg.protocol == Some(ProviderKind::Command))
                                .then(|| program_name(program))
                        }),
                    key,
                    origin,
                    name,
                }
            })
            .collect()
    }

    /// The provider's config with its preset underneath, or `None` if unknown.
    fn merged(&self, name: &str) -> Option<(ProviderConfig, Option<&'static Preset>)> {
        let user = self.providers.get(name);
        let preset_name = user.and_then(|u| u.preset.as_deref()).unwrap_or(name);
        let pre = preset(preset_name);
        if user.is_none() && pre.is_none() {
            return None;
        }
        let base = pre.map(preset_config).unwrap_or_default();
        Some((overlay(base, user.cloned().unwrap_or_default()), pre))
    }

    /// Resolves the provider and model for a call. `provider`/`model` are the explicit
    /// choice (CLI flags); `sources` are the config files read (to check the mode of a file
    /// holding a key); `env` reads the environment.
    pub fn resolve_with(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
        sources: &[PathBuf],
        env: EnvLookup,
    ) -> Result<ResolvedProvider, LlmError> {
        let name = match provider {
            Some(p) => p.to_string(),
            None => self.default_provider(env)?.0,
        };
        if let Some(wanted) = self.providers.get(&name).and_then(|p| p.preset.as_deref())
            && preset(wanted).is_none()
        {
            let known: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            return Err(LlmError::Config(format!(
                "provider `{name}`: unknown preset `{wanted}` (presets: {})",
                known.join(", ")
            )));
        }
        let (cfg, pre) = self.merged(&name).ok_or_else(|| {
            let names = self.provider_names();
            let guess = crate::config::closest_name(
                &name,
                names.iter().map(String::as_str).chain(["manual"]),
            )
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
            LlmError::Config(format!(
                "unknown provider `{name}`{guess}: known providers are {}, and manual (you answer \
                 the prompts); define others under [llm.providers.NAME]",
                names.join(", ")
            ))
        })?;
        let kind = cfg.protocol.unwrap_or(ProviderKind::OpenAi);
        let (base_url, command) = match kind {
            ProviderKind::Command => (String::new(), command_of(&name, &cfg)?),
            ProviderKind::OpenAi | ProviderKind::Anthropic => {
                (base_url_of(&name, &cfg, env)?, Vec::new())
            }
        };
        let model = model
            .map(String::from)
            .or_else(|| env("KFORGE_MODEL"))
            .or(cfg.model.clone())
            .or_else(|| command.first().map(|program| program_name(program)))
            .ok_or_else(|| {
                LlmError::Config(format!(
                    "provider `{name}` needs a model: pass --model, set KFORGE_MODEL, or set [llm.providers.{name}] model"
                ))
            })?;
        let api_key_env = cfg.api_key_env.clone();
        let api_key = match api_key_env.as_deref().and_then(env) {
            Some(k) => Some(Secret::new(k.trim())),
            None if cfg.api_key.is_some() => {
                check_key_file_mode(&name, sources)?;
                cfg.api_key.clone()
            }
            None => None,
        };
        // A command is given no key: `api_key_env` only names one more variable whose value
        // is scrubbed from its error text (the program gets it only through `pass_env`).
        let key_required = kind != ProviderKind::Command
            && pre.map(|p| p.key_required).unwrap_or(api_key_env.is_some());
        if api_key.is_none() && key_required {
            let var = api_key_env.as_deref().unwrap_or("the key variable");
            return Err(LlmError::Config(format!(
                "provider `{name}` needs an API key: set {var} (or `api_key` in a config file of mode 0600)"
            )));
        }
        // Credentials in the URL go out as Basic auth in the Authorization header, where an
        // OpenAI-protocol key goes too: one would silently replace the other.
        if kind == ProviderKind::OpenAi
            && api_key.is_some()
            && reqwest::Url::parse(&base_url)
                .is_ok_and(|u| !u.username().is_empty() || u.password().is_some())
        {
            return Err(LlmError::Config(format!(
                "provider `{name}`: base_url `{}` carries credentials (sent as Basic auth) and the \
                 provider has an API key (sent as Bearer); both go in the Authorization header, so \
                 only one can be sent: remove the credentials from base_url, or put a gateway's \
                 own header in [llm.providers.{name}] extra_headers",
                redact_url(&base_url)
            )));
        }
        let secs = |v: Option<f64>, what: &str| -> Result<Option<Duration>, LlmError> {
            v.map(|s| {
                Duration::try_from_secs_f64(s)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| {
                        LlmError::Config(format!(
                            "provider `{name}`: {what} must be a positive number of seconds"
                        ))
                    })
            })
            .transpose()
        };
        let connect = secs(
            cfg.connect_timeout_s.or(self.connect_timeout_s),
            "connect_timeout_s",
        )?;
        let read = secs(cfg.read_timeout_s.or(self.read_timeout_s), "read_timeout_s")?;
        let wall = secs(cfg.wall_timeout_s.or(self.wall_timeout_s), "wall_timeout_s")?;
        // A program that hangs must not hold the call forever: commands always have a cap.
        let wall = match kind {
            ProviderKind::Command => Some(wall.unwrap_or(DEFAULT_COMMAND_TIMEOUT)),
            ProviderKind::OpenAi | ProviderKind::Anthropic => wall,
        };
        let pass_env = pass_env_of(&name, &cfg)?;
        let mut scrub_env = self.secret_env_vars();
        scrub_env.extend(api_key_env.clone());
        let max_tokens = match (cfg.max_tokens, kind) {
            (None, ProviderKind::Anthropic) => Some(DEFAULT_ANTHROPIC_MAX_TOKENS),
            (m, _) => m,
        };
        if let (Some(budget), Some(max)) = (cfg.thinking_budget, max_tokens)
            && budget >= max
        {
            return Err(LlmError::Config(format!(
                "provider `{name}`: thinking_budget ({budget}) must be below max_tokens ({max})"
            )));
        }
        Ok(ResolvedProvider {
            kind,
            max_tokens_field: cfg
                .max_tokens_field
                .unwrap_or_else(|| default_max_tokens_field(&model)),
            base_url,
            command,
            pass_env,
            scrub_env: scrub_env.into_iter().collect(),
            api_key,
            api_key_env,
            include_usage: cfg.include_usage.unwrap_or(true),
            max_tokens,
            temperature: cfg.temperature,
            reasoning_effort: cfg.reasoning_effort.clone(),
            thinking_budget: cfg.thinking_budget,
            connect_timeout: connect.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            read_timeout: read.unwrap_or(DEFAULT_READ_TIMEOUT),
            wall_timeout: wall,
            retry: RetryPolicy {
                max_retries: cfg
                    .max_retries
                    .or(self.max_retries)
                    .unwrap_or(DEFAULT_MAX_RETRIES),
                ..RetryPolicy::default()
            },
            extra_headers: cfg.extra_headers.into_iter().collect(),
            free: cfg.free.unwrap_or(false),
            prices: PriceTable::with_overrides(&self.prices),
            model,
            name,
        })
    }
}

/// Resolves a provider from the loaded configuration and the process environment: what
/// the engine and the commands call.
pub fn resolve(
    config: &crate::config::Config,
    provider: Option<&str>,
    model: Option<&str>,
) -> Result<ResolvedProvider, LlmError> {
    config
        .llm
        .resolve_with(provider, model, &config.sources, &process_env)
}

/// The message when no provider can be chosen.
pub fn nothing_configured_message() -> String {
    let vars: Vec<&str> = PRESETS
        .iter()
        .filter(|p| p.key_required)
        .filter_map(|p| p.key_env)
        .collect();
    let user_file = crate::paths::user_config_file()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.config/kforge/config.toml".into());
    format!(
        "no LLM provider configured: set one of {} (the first one set is used) or \
         KFORGE_PROVIDER, pick a local server with --provider ollama|vllm|llamacpp (and \
         --model), set [llm] default = \"NAME\" in {user_file} or ./kforge.toml, \
         or use --provider manual to answer the prompts yourself",
        vars.join(", ")
    )
}

/// The base URL of an HTTP provider, checked.
fn base_url_of(name: &str, cfg: &ProviderConfig, env: EnvLookup) -> Result<String, LlmError> {
    let base_url = env("KFORGE_BASE_URL")
        .or(cfg.base_url.clone())
        .ok_or_else(|| {
            LlmError::Config(format!(
                "provider `{name}` has no base_url: set [llm.providers.{name}] base_url"
            ))
        })?;
    reqwest::Url::parse(&base_url).map_err(|e| {
        LlmError::Config(format!(
            "provider `{name}`: base_url `{}` is not a URL: {e}",
            redact_url(&base_url)
        ))
    })?;
    Ok(base_url)
}

/// The argv of a command provider, checked.
fn command_of(name: &str, cfg: &ProviderConfig) -> Result<Vec<String>, LlmError> {
    match cfg.command.as_deref() {
        Some([program, ..]) if !program.trim().is_empty() => {
            Ok(cfg.command.clone().unwrap_or_default())
        }
        _ => Err(LlmError::Config(format!(
            "provider `{name}` has protocol = \"command\" but no program: set [llm.providers.{name}] command = [\"prog\", \"arg\", ...]"
        ))),
    }
}

/// The variables a command provider passes on, checked: names (`[A-Za-z_][A-Za-z0-9_]*`),
/// or such a prefix followed by `*`; only for `protocol = "command"`.
fn pass_env_of(name: &str, cfg: &ProviderConfig) -> Result<Vec<String>, LlmError> {
    let Some(vars) = &cfg.pass_env else {
        return Ok(Vec::new());
    };
    if cfg.protocol != Some(ProviderKind::Command) {
        return Err(LlmError::Config(format!(
            "provider `{name}`: pass_env is for protocol = \"command\" (the variables its program gets)"
        )));
    }
    for var in vars {
        let stem = var.strip_suffix('*').unwrap_or(var);
        let valid = stem
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(LlmError::Config(format!(
                "provider `{name}`: pass_env entry `{var}` is not a variable name (letters, digits, _) or a PREFIX*"
            )));
        }
    }
    Ok(vars.clone())
}

/// The file name of a program (`/usr/bin/claude` -> `claude`): a command provider's model
/// when none is set.
pub fn program_name(program: &str) -> String {
    Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_string())
}

fn preset_config(p: &Preset) -> ProviderConfig {
    ProviderConfig {
        protocol: Some(p.kind),
        base_url: Some(p.base_url.into()),
        model: p.model.map(String::from),
        api_key_env: p.key_env.map(String::from),
        free: Some(p.free),
        ..ProviderConfig::default()
    }
}

/// `over`'s set fields replace `base`'s.
fn overlay(base: ProviderConfig, over: ProviderConfig) -> ProviderConfig {
    let mut headers = base.extra_headers;
    headers.extend(over.extra_headers);
    ProviderConfig {
        preset: over.preset.or(base.preset),
        protocol: over.protocol.or(base.protocol),
        base_url: over.base_url.or(base.base_url),
        command: over.command.or(base.command),
        pass_env: over.pass_env.or(base.pass_env),
        model: over.model.or(base.model),
        api_key_env: over.api_key_env.or(base.api_key_env),
        api_key: over.api_key.or(base.api_key),
        include_usage: over.include_usage.or(base.include_usage),
        max_tokens: over.max_tokens.or(base.max_tokens),
        max_tokens_field: over.max_tokens_field.or(base.max_tokens_field),
        temperature: over.temperature.or(base.temperature),
        reasoning_effort: over.reasoning_effort.or(base.reasoning_effort),
        thinking_budget: over.thinking_budget.or(base.thinking_budget),
        connect_timeout_s: over.connect_timeout_s.or(base.connect_timeout_s),
        read_timeout_s: over.read_timeout_s.or(base.read_timeout_s),
        wall_timeout_s: over.wall_timeout_s.or(base.wall_timeout_s),
        max_retries: over.max_retries.or(base.max_retries),
        extra_headers: headers,
        free: over.free.or(base.free),
    }
}

/// The key for `name` came from a config file: the last file defining it must be 0600.
fn check_key_file_mode(name: &str, sources: &[PathBuf]) -> Result<(), LlmError> {
    let defines_key = |path: &Path| -> bool {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .and_then(|t| {
                t.get("llm")?
                    .get("providers")?
                    .get(name)?
                    .get("api_key")
                    .cloned()
            })
            .is_some()
    };
    let Some(file) = sources.iter().rev().find(|p| defines_key(p)) else {
        return Ok(());
    };
    file_is_private(name, file)
}

#[cfg(unix)]
fn file_is_private(name: &str, file: &Path) -> Result<(), LlmError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file)
        .map_err(|e| LlmError::Config(format!("cannot read {}: {e}", file.display())))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(LlmError::Config(format!(
            "{} holds the API key of provider `{name}` but other users can read it (mode {mode:o}): \
             run `chmod 600 {}`, or put the key in an environment variable named by `api_key_env`",
            file.display(),
            file.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn file_is_private(_name: &str, _file: &Path) -> Result<(), LlmError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn parse(text: &str) -> LlmConfig {
        let table: toml::Table = text.parse().unwrap();
        table
            .get("llm")
            .cloned()
            .map(|v| v.try_into().unwrap())
            .unwrap_or_default()
    }

    #[test]
    fn a_command_provider_needs_a_program_and_no_url_model_or_key() {
        let c = parse(
            r#"
            [llm.providers.claude-cli]
            protocol = "command"
            command = ["/usr/local/bin/claude", "-p"]
            [llm.providers.mine]
            protocol = "command"
            command = ["./answer.sh"]
            model = "my-script"
            wall_timeout_s = 5
            api_key_env = "MY_SECRET"
            [llm.providers.empty]
            protocol = "command"
            command = []
            "#,
        );
        let env = env_of(&[("KFORGE_BASE_URL", "http://ignored")]);
        let r = c.resolve_with(Some("claude-cli"), None, &[], &env).unwrap();
        assert_eq!(r.kind, ProviderKind::Command);
        assert_eq!(r.command, ["/usr/local/bin/claude", "-p"]);
        assert_eq!(r.model, "claude", "the program's name stands for the model");
        assert_eq!(r.base_url, "");
        assert_eq!(r.wall_timeout, Some(DEFAULT_COMMAND_TIMEOUT));
        assert!(r.scrub_env.contains(&"OPENAI_API_KEY".to_string()));
        let r = c.resolve_with(Some("mine"), None, &[], &env).unwrap();
        assert_eq!(r.model, "my-script");
        assert_eq!(r.wall_timeout, Some(Duration::from_secs(5)));
        assert!(r.scrub_env.contains(&"MY_SECRET".to_string()));
        let e = c
            .resolve_with(Some("empty"), None, &[], &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no program"), "{e}");
        let row = c
            .summaries(&env)
            .into_iter()
            .find(|s| s.name == "claude-cli")
            .unwrap();
        assert_eq!(row.kind, ProviderKind::Command);
        assert_eq!(row.key, KeyStatus::NotNeeded);
    }

    #[test]
    fn a_command_provider_names_the_variables_its_program_gets() {
        let c = parse(
            r#"
            [llm.providers.cli]
            protocol = "command"
            command = ["claude", "-p"]
            pass_env = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_*"]
            [llm.providers.typo]
            protocol = "command"
            command = ["claude"]
            pass_env = ["MY-VAR"]
            [llm.providers.http]
            preset = "openai"
            pass_env = ["PATH"]
            "#,
        );
        let env = env_of(&[("OPENAI_API_KEY", "sk")]);
        let r = c.resolve_with(Some("cli"), None, &[], &env).unwrap();
        assert_eq!(r.pass_env, ["ANTHROPIC_API_KEY", "CLAUDE_CODE_*"]);
        let e = c
            .resolve_with(Some("typo"), None, &[], &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`MY-VAR` is not a variable name"), "{e}");
        let e = c
            .resolve_with(Some("http"), None, &[], &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pass_env is for protocol = \"command\""), "{e}");
    }

    #[test]
    fn first_preset_with_a_key_is_the_default() {
        let c = LlmConfig::default();
        let env = env_of(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("DEEPSEEK_API_KEY", "sk-ds"),
        ]);
        let r = c.resolve_with(None, None, &[], &env).unwrap();
        assert_eq!(r.name, "deepseek");
        assert_eq!(r.model, "deepseek-chat");
        assert_eq!(r.api_key.as_ref().unwrap().expose(), "sk-ds");
        assert_eq!(r.api_key_env.as_deref(), Some("DEEPSEEK_API_KEY"));
        assert_eq!(
            c.default_provider(&env).unwrap().1,
            DefaultReason::KeyPresent("DEEPSEEK_API_KEY".into())
        );
    }

    #[test]
    fn nothing_configured_says_what_to_set() {
        let err = LlmConfig::default()
            .resolve_with(None, None, &[], &env_of(&[]))
            .unwrap_err()
            .to_string();
        for needle in [
            "OPENAI_API_KEY",
            "DEEPSEEK_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY",
            "--provider manual",
        ] {
            assert!(err.contains(needle), "{needle} missing from: {err}");
        }
    }

    #[test]
    fn config_default_env_and_flags_layer() {
        let c = parse(
            "[llm]\ndefault = \"local\"\nread_timeout_s = 42\n\
             [llm.providers.local]\npreset = \"vllm\"\nmodel = \"qwen\"\nmax_retries = 1\n",
        );
        let r = c.resolve_with(None, None, &[], &env_of(&[])).unwrap();
        assert_eq!((r.name.as_str(), r.model.as_str()), ("local", "qwen"));
        assert_eq!(r.base_url, "http://127.0.0.1:8000/v1");
        assert!(r.free && r.api_key.is_none());
        assert_eq!(r.read_timeout, Duration::from_secs(42));
        assert_eq!(r.retry.max_retries, 1);
        let env = env_of(&[
            ("KFORGE_MODEL", "m2"),
            ("KFORGE_BASE_URL", "http://127.0.0.1:9/v1"),
        ]);
        let r = c.resolve_with(None, None, &[], &env).unwrap();
        assert_eq!(
            (r.model.as_str(), r.base_url.as_str()),
            ("m2", "http://127.0.0.1:9/v1")
        );
        let r = c.resolve_with(None, Some("m3"), &[], &env).unwrap();
        assert_eq!(r.model, "m3");
        let env = env_of(&[("KFORGE_PROVIDER", "ollama")]);
        let err = c
            .resolve_with(None, None, &[], &env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("needs a model") && err.contains("--model"),
            "{err}"
        );
    }

    #[test]
    fn missing_key_names_the_variable() {
        let err = LlmConfig::default()
            .resolve_with(Some("anthropic"), None, &[], &env_of(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    }

    #[test]
    fn unknown_preset_is_an_error() {
        let c = parse("[llm.providers.x]\npreset = \"openia\"\nmodel = \"m\"\n");
        let err = c
            .resolve_with(Some("x"), None, &[], &env_of(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("unknown preset `openia`"), "{err}");
    }

    #[test]
    fn unknown_provider_lists_known_ones() {
        let err = LlmConfig::default()
            .resolve_with(Some("nope"), None, &[], &env_of(&[]))
            .unwrap_err();
        assert!(
            err.to_string().contains("openai, deepseek, anthropic"),
            "{err}"
        );
    }

    #[test]
    fn a_mistyped_provider_gets_the_closest_name() {
        let err = LlmConfig::default()
            .resolve_with(Some("deepsek"), None, &[], &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown provider `deepsek` (did you mean `deepseek`?)"),
            "{err}"
        );
        let err = LlmConfig::default()
            .resolve_with(Some("nope"), None, &[], &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains("did you mean"),
            "nothing is close to nope: {err}"
        );
    }

    #[test]
    fn anthropic_gets_a_default_max_tokens_and_reasoning_models_the_right_field() {
        let env = env_of(&[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")]);
        let r = LlmConfig::default()
            .resolve_with(Some("anthropic"), None, &[], &env)
            .unwrap();
        assert_eq!(r.max_tokens, Some(DEFAULT_ANTHROPIC_MAX_TOKENS));
        let r = LlmConfig::default()
            .resolve_with(Some("openai"), None, &[], &env)
            .unwrap();
        assert_eq!(r.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        let r = LlmConfig::default()
            .resolve_with(Some("openai"), Some("gpt-4o"), &[], &env)
            .unwrap();
        assert_eq!(r.max_tokens_field, MaxTokensField::MaxTokens);
        assert_eq!(
            default_max_tokens_field("o4-mini"),
            MaxTokensField::MaxCompletionTokens
        );
        assert_eq!(
            default_max_tokens_field("openai/o3"),
            MaxTokensField::MaxCompletionTokens
        );
    }

    #[test]
    fn keys_never_show_in_debug_or_serialization() {
        let c = parse(
            "[llm.providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\napi_key = \"sk-topsecret\"\nextra_headers = { X-Token = \"hdr-secret\" }\n",
        );
        let r = c.resolve_with(Some("x"), None, &[], &env_of(&[])).unwrap();
        for text in [
            format!("{c:?}"),
            format!("{r:?}"),
            serde_json::to_string(&r).unwrap(),
            toml::to_string(&c).unwrap(),
        ] {
            assert!(
                !text.contains("sk-topsecret") && !text.contains("hdr-secret"),
                "{text}"
            );
        }
        assert_eq!(r.secrets(), vec!["sk-topsecret", "hdr-secret"]);
    }

    #[test]
    fn passwords_and_user_names_in_urls_are_masked() {
        for (url, shown) in [
            ("https://user:secret@host/v1", "https://user:***@host/v1"),
            (
                "http://u:p%40ss@127.0.0.1:8000",
                "http://u:***@127.0.0.1:8000",
            ),
            ("https://:tok@host", "https://:***@host"),
            ("https://user@host/v1", "https://***@host/v1"),
            ("http://tok_abc@host:8000/v1", "http://***@host:8000/v1"),
            ("https://host/v1/@org", "https://host/v1/@org"),
            ("https://host:8443/v1?x=@", "https://host:8443/v1?x=@"),
            ("https://user:pa/ss@host/v1", "https://***@host/v1"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn credentials_in_the_url_beside_an_openai_key_are_an_error_not_a_dropped_key() {
        let c = parse(
            "[llm.providers.x]\nbase_url = \"https://me:pw-in-url@gw.example/v1\"\nmodel = \"m\"\n\
             api_key_env = \"X_KEY\"\n\
             [llm.providers.y]\nbase_url = \"https://me:pw-in-url@gw.example/v1\"\nmodel = \"m\"\n",
        );
        let err = c
            .resolve_with(Some("x"), None, &[], &env_of(&[("X_KEY", "sk-x")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("carries credentials") && err.contains("only one can be sent"),
            "{err}"
        );
        assert!(!err.contains("pw-in-url") && !err.contains("sk-x"), "{err}");
        // Without a key the URL's credentials are what is sent.
        assert!(c.resolve_with(Some("y"), None, &[], &env_of(&[])).is_ok());
    }

    #[test]
    fn a_password_in_base_url_is_masked_in_debug_serialization_summaries_and_errors() {
        let c = parse(
            "[llm.providers.x]\nbase_url = \"https://me:pw-in-url@gw.example/v1\"\nmodel = \"m\"\n\
             [llm.providers.y]\nbase_url = \"https://me:pw-in-url@gw.example:port/v1\"\nmodel = \"m\"\n",
        );
        let r = c.resolve_with(Some("x"), None, &[], &env_of(&[])).unwrap();
        assert_eq!(
            r.base_url, "https://me:pw-in-url@gw.example/v1",
            "kept for the request"
        );
        let row = c
            .summaries(&env_of(&[]))
            .into_iter()
            .find(|s| s.name == "x")
            .unwrap();
        let err = c
            .resolve_with(Some("y"), None, &[], &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("https://me:***@gw.example:port/v1"), "{err}");
        for text in [
            format!("{r:?}"),
            serde_json::to_string(&r).unwrap(),
            row.base_url.clone().unwrap(),
            err,
        ] {
            assert!(!text.contains("pw-in-url"), "{text}");
            assert!(text.contains("me:***@gw.example"), "{text}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn key_in_a_readable_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let text = "[llm.providers.x]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\napi_key = \"sk-file\"\n";
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let c = parse(text);
        let err = c
            .resolve_with(Some("x"), None, std::slice::from_ref(&file), &env_of(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("chmod 600") && err.contains("644") && !err.contains("sk-file"),
            "{err}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = c
            .resolve_with(Some("x"), None, &[file], &env_of(&[]))
            .unwrap();
        assert_eq!(r.api_key.unwrap().expose(), "sk-file");
    }

    #[test]
    fn typos_in_a_provider_are_errors() {
        let table: toml::Table = "[llm.providers.x]\napi_key_evn = \"X\"\n".parse().unwrap();
        let err = toml::Value::Table(table["llm"].as_table().unwrap().clone())
            .try_into::<LlmConfig>()
            .unwrap_err();
        assert!(err.to_string().contains("api_key_evn"), "{err}");
        // Top-level [providers] / [prices]: `config::check_sections`, for every file read.
    }

    #[test]
    fn summaries_mark_default_and_key_state() {
        let env = env_of(&[("OPENROUTER_API_KEY", "sk-or")]);
        let rows = LlmConfig::default().summaries(&env);
        let row = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
        assert!(row("openrouter").is_default);
        assert_eq!(
            row("openrouter").key,
            KeyStatus::FromEnv("OPENROUTER_API_KEY".into())
        );
        assert_eq!(
            row("openai").key,
            KeyStatus::Missing("OPENAI_API_KEY".into())
        );
        assert_eq!(row("ollama").key, KeyStatus::NotNeeded);
        assert_eq!(rows.iter().filter(|r| r.is_default).count(), 1);
    }
}
