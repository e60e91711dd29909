//! Typed errors with messages that say what to do.

use std::time::Duration;

use super::types::{Completion, Truncation};

/// Everything an LLM call can fail with. Server text inside these messages is cut to a
/// short excerpt and scrubbed of the API key and secret header values.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("authentication failed for provider `{provider}` (HTTP {status}): {}; the server said: {message}", auth_hint(.env_var.as_deref()))]
    Auth {
        provider: String,
        status: u16,
        env_var: Option<String>,
        message: String,
    },

    #[error(
        "model `{model}` not found at provider `{provider}` (HTTP 404): check --model / `model` in the config against the provider's model list; the server said: {message}"
    )]
    ModelNotFound {
        provider: String,
        model: String,
        message: String,
    },

    #[error("rate limited by provider `{provider}`{}: {message}", retry_after_text(*.retry_after))]
    RateLimited {
        provider: String,
        message: String,
        retry_after: Option<Duration>,
    },

    #[error(
        "provider `{provider}` says the account is out of quota or credit (not retried): {message}; add credit or raise the spending limit"
    )]
    QuotaExceeded { provider: String, message: String },

    #[error("provider `{provider}` is overloaded{}: {message}", status_text(*.status))]
    Overloaded {
        provider: String,
        status: Option<u16>,
        message: String,
    },

    #[error("{}", truncation_text(*.cause, partial))]
    Truncated {
        cause: Truncation,
        partial: Box<Completion>,
    },

    #[error("no data from the server for {} (read_timeout_s): the connection stalled; raise read_timeout_s for slow models", secs(*.after))]
    ReadTimeout { after: Duration },

    #[error("the call took longer than the wall-clock cap of {} (wall_timeout_s)", secs(*.after))]
    WallTimeout { after: Duration },

    #[error("cancelled")]
    Cancelled,

    #[error("provider `{provider}` reported an error in the stream ({kind}): {message}")]
    InStream {
        provider: String,
        kind: String,
        message: String,
        /// A failure on the server's side (OpenAI's `server_error`, Anthropic's
        /// `api_error`): the same request may succeed, as after an HTTP 500.
        retryable: bool,
    },

    #[error("provider `{provider}` answered HTTP {status}{}: {body}", .hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    Http {
        provider: String,
        status: u16,
        body: String,
        hint: Option<&'static str>,
    },

    #[error(
        "provider `{provider}` answered HTTP {status}, a redirect to {}: redirects are not followed, since they would carry the API key and the prompt to another address; if that address is right, set base_url to it",
        .location.as_deref().unwrap_or("nowhere (no Location header)")
    )]
    Redirect {
        provider: String,
        status: u16,
        /// Where it points, without credentials or query.
        location: Option<String>,
    },

    #[error("cannot reach {url}: {message}")]
    Connect {
        url: String,
        message: String,
        /// False for a refused connection to a loopback address: a local server that is
        /// not running will not start within the backoff.
        retryable: bool,
    },

    #[error("malformed answer from provider `{provider}`: {message} (data: {excerpt})")]
    Malformed {
        provider: String,
        message: String,
        excerpt: String,
    },

    #[error("provider `{provider}` (a command): {failure}")]
    Command {
        provider: String,
        failure: CommandFailure,
    },

    #[error("{0}")]
    Config(String),
}

impl LlmError {
    /// Whether another attempt may succeed (only used before any text or reasoning).
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::RateLimited { .. }
            | LlmError::Overloaded { .. }
            | LlmError::Connect {
                retryable: true, ..
            }
            | LlmError::InStream {
                retryable: true, ..
            } => true,
            LlmError::Http { status, .. } => is_retryable_status(*status),
            _ => false,
        }
    }

    /// The server's requested wait, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The text received before the answer was cut (only for `Truncated`).
    pub fn partial(&self) -> Option<&Completion> {
        match self {
            LlmError::Truncated { partial, .. } => Some(partial),
            _ => None,
        }
    }
}

/// 408, 409, 429, 5xx and Anthropic's 529 are worth another attempt.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 529) || (500..600).contains(&status)
}

fn auth_hint(env_var: Option<&str>) -> String {
    match env_var {
        Some(var) => format!("set {var} to a valid API key"),
        None => {
            "set `api_key_env` for this provider and export that variable with a valid key".into()
        }
    }
}

fn retry_after_text(retry_after: Option<Duration>) -> String {
    retry_after
        .map(|d| format!(" (retry after {})", secs(d)))
        .unwrap_or_default()
}

fn status_text(status: Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

/// How a command call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandFailure {
    #[error("cannot start `{program}`: {message} (is it installed and on PATH?)")]
    Spawn { program: String, message: String },
    #[error(
        "`{program}` ran longer than {} (wall_timeout_s; {} by default for commands) and was killed",
        secs(*.after),
        secs(crate::config::llm::DEFAULT_COMMAND_TIMEOUT)
    )]
    TimedOut { program: String, after: Duration },
    #[error("`{program}` exited with {status}{}", stderr_text(.stderr))]
    Exited {
        program: String,
        status: ExitText,
        /// The last lines of its stderr, without secrets.
        stderr: String,
    },
    #[error("`{program}` printed nothing on stdout (it exited with code 0){}", stderr_text(.stderr))]
    Silent { program: String, stderr: String },
    #[error("`{program}` printed more than {} on stdout, the most kforge holds as one answer: it was killed", size_text(*.limit))]
    TooLarge { program: String, limit: usize },
    #[error("reading the output of `{program}` failed: {message}")]
    Io { program: String, message: String },
}

/// How a program ended: an exit code or a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitText {
    Code(i32),
    Signal(i32),
}

impl std::fmt::Display for ExitText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitText::Code(c) => write!(f, "code {c}"),
            ExitText::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

fn stderr_text(stderr: &str) -> String {
    if stderr.is_empty() {
        "; its stderr was empty".into()
    } else {
        format!("; the end of its stderr: {stderr}")
    }
}

/// `20 ms`, `3 s`, `1.5 s`.
pub fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// `16 MiB`, `64 KiB`, `100 bytes`.
pub fn size_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

fn truncation_text(cause: Truncation, partial: &Completion) -> String {
    match cause {
        Truncation::StreamEnded => format!(
            "the answer was truncated: the stream from `{}` ended before its end marker after {} characters of text \
             (connection closed early: a proxy, a server restart or a server-side time limit); retry",
            partial.provider,
            partial.text.chars().count()
        ),
        Truncation::MaxTokens => format!(
            "the answer was truncated: `{}` stopped at the output limit (finish reason `{}`, {} output tokens); raise max_tokens",
            partial.model,
            partial
                .finish_reason
                .as_ref()
                .map(|r| r.as_str())
                .unwrap_or("length"),
            partial.usage.output_tokens
        ),
    }
}

/// In-stream error types that mean the server failed, not the request: retried before
/// the first token like an overload (OpenAI `server_error`, Anthropic `api_error`, and the
/// names gateways use for the same).
const SERVER_SIDE_KINDS: &[&str] = &[
    "server_error",
    "api_error",
    "internal_error",
    "internal_server_error",
    "service_unavailable",
];

/// What error classification needs to know about the call.
#[derive(Debug, Clone)]
pub(crate) struct ErrorContext {
    pub provider: String,
    pub model: String,
    pub env_var: Option<String>,
    pub secrets: Vec<String>,
}

#[cfg(test)]
impl ErrorContext {
    /// Provider `p`, model `m`, no key variable and no secret: the decoders' unit tests.
    pub fn plain() -> ErrorContext {
        ErrorContext {
            provider: "p".into(),
            model: "m".into(),
            env_var: None,
            secrets: vec![],
        }
    }
}

impl ErrorContext {
    /// `text` cut to an excerpt, without secrets.
    pub fn clean(&self, text: &str) -> String {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        excerpt(text, &secrets)
    }

    /// A non-2xx answer. `retry_after` is the wait the server asked for, if any.
    pub fn http_error(&self, status: u16, retry_after: Option<Duration>, body: &str) -> LlmError {
        let (kind, message) = error_fields(body);
        let message = self.clean(if message.is_empty() { body } else { &message });
        let message = if message.is_empty() {
            "(empty body)".to_string()
        } else {
            message
        };
        let provider = self.provider.clone();
        let lower_body = body.to_ascii_lowercase();
        match status {
            401 | 403 => LlmError::Auth {
                provider,
                status,
                env_var: self.env_var.clone(),
                message,
            },
            404 if lower_body.contains("model") => LlmError::ModelNotFound {
                provider,
                model: self.model.clone(),
                message,
            },
            404 => LlmError::Http {
                provider,
                status,
                body: message,
                hint: Some("check base_url: OpenAI-compatible servers usually end in /v1"),
            },
            402 => LlmError::QuotaExceeded { provider, message },
            _ if lower_body.contains("insufficient_quota") => {
                LlmError::QuotaExceeded { provider, message }
            }
            429 => LlmError::RateLimited {
                provider,
                message,
                retry_after,
            },
            529 => LlmError::Overloaded {
                provider,
                status: Some(status),
                message,
            },
            503 if kind.contains("overloaded")
                || message.to_ascii_lowercase().contains("overloaded") =>
            {
                LlmError::Overloaded {
                    provider,
                    status: Some(status),
                    message,
                }
            }
            _ => LlmError::Http {
                provider,
                status,
                body: message,
                hint: None,
            },
        }
    }

    /// An error object inside a 200 stream (`{"error": {...}}` or Anthropic's `error` event).
    pub fn in_stream_error(&self, error: &serde_json::Value) -> LlmError {
        let (kind, message) = error_object_fields(error);
        let message = self.clean(&message);
        let provider = self.provider.clone();
        let code = error.get("code").and_then(serde_json::Value::as_u64);
        let all = format!("{kind} {message}").to_ascii_lowercase();
        if all.contains("insufficient_quota") {
            LlmError::QuotaExceeded { provider, message }
        } else if all.contains("overloaded") || matches!(code, Some(502 | 503 | 529)) {
            LlmError::Overloaded {
                provider,
                status: None,
                message,
            }
        } else if all.contains("rate_limit") || code == Some(429) {
            LlmError::RateLimited {
                provider,
                message,
                retry_after: None,
            }
        } else {
            // What an HTTP 500 would have said, said inside a 200 stream instead.
            let retryable = kind.split('/').any(|k| SERVER_SIDE_KINDS.contains(&k))
                || matches!(code, Some(500 | 504));
            let kind = if kind.is_empty() {
                "error".to_string()
            } else {
                kind
            };
            LlmError::InStream {
                provider,
                kind,
                message,
                retryable,
            }
        }
    }

    pub fn malformed(&self, message: impl Into<String>, data: &str) -> LlmError {
        LlmError::Malformed {
            provider: self.provider.clone(),
            message: message.into(),
            excerpt: self.clean(data),
        }
    }
}

/// `(kind, message)` from an error body in any of the usual shapes.
fn error_fields(body: &str) -> (String, String) {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => match v.get("error") {
            Some(e) => error_object_fields(e),
            None => error_object_fields(&v),
        },
        Err(_) => (String::new(), String::new()),
    }
}

fn error_object_fields(e: &serde_json::Value) -> (String, String) {
    let text = |k: &str| match e.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let kind = [text("type"), text("code")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    let message = match e {
        serde_json::Value::String(s) => s.clone(),
        _ => [text("message"), text("detail"), text("error")]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| e.to_string()),
    };
    (kind, message)
}

/// Cuts server text to a short excerpt and removes every secret from it.
pub(crate) fn excerpt(text: &str, secrets: &[&str]) -> String {
    const MAX: usize = 400;
    let mut clean = text.trim().to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        clean = clean.replace(secret, "[redacted]");
    }
    let clean = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if clean.chars().count() <= MAX {
        return clean;
    }
    let cut: String = clean.chars().take(MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_redacts_and_cuts() {
        let body = format!("bad key sk-secret-123 {}", "x".repeat(1000));
        let e = excerpt(&body, &["sk-secret-123"]);
        assert!(!e.contains("sk-secret-123"));
        assert!(e.starts_with("bad key [redacted]"));
        assert!(e.chars().count() <= 401);
    }

    fn ctx() -> ErrorContext {
        ErrorContext {
            provider: "p".into(),
            model: "m".into(),
            env_var: Some("P_KEY".into()),
            secrets: vec!["sk-live-abcdef".into()],
        }
    }

    #[test]
    fn http_errors_are_classified() {
        let c = ctx();
        let e = c.http_error(
            401,
            None,
            r#"{"error":{"message":"Incorrect API key provided: sk-live-abcdef"}}"#,
        );
        let text = e.to_string();
        assert!(
            matches!(e, LlmError::Auth { .. })
                && text.contains("set P_KEY")
                && !text.contains("sk-live-abcdef"),
            "{text}"
        );
        let e = c.http_error(
            404,
            None,
            r#"{"error":{"message":"The model `m` does not exist","code":"model_not_found"}}"#,
        );
        assert!(
            matches!(e, LlmError::ModelNotFound { .. }) && e.to_string().contains("model `m`"),
            "{e}"
        );
        let e = c.http_error(404, None, "404 page not found");
        assert!(e.to_string().contains("/v1"), "{e}");
        let e = c.http_error(429, None, r#"{"error":{"type":"insufficient_quota","message":"You exceeded your current quota"}}"#);
        assert!(matches!(e, LlmError::QuotaExceeded { .. }) && !e.is_retryable());
        let e = c.http_error(
            429,
            Some(Duration::from_secs(2)),
            r#"{"error":{"message":"slow down"}}"#,
        );
        assert!(
            e.is_retryable() && e.retry_after() == Some(Duration::from_secs(2)),
            "{e}"
        );
        let e = c.http_error(
            529,
            None,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(matches!(e, LlmError::Overloaded { .. }) && e.is_retryable());
        let e = c.http_error(400, None, r#"{"detail":"bad"}"#);
        assert!(
            matches!(&e, LlmError::Http { status: 400, body, .. } if body == "bad")
                && !e.is_retryable(),
            "{e}"
        );
    }

    #[test]
    fn in_stream_errors_are_classified() {
        let c = ctx();
        let v: serde_json::Value =
            serde_json::json!({"type": "overloaded_error", "message": "Overloaded"});
        assert!(matches!(c.in_stream_error(&v), LlmError::Overloaded { .. }));
        let v = serde_json::json!({"code": 502, "message": "upstream died"});
        assert!(c.in_stream_error(&v).is_retryable());
        let v = serde_json::json!({"type": "invalid_request_error", "message": "context too long"});
        let e = c.in_stream_error(&v);
        assert!(
            !e.is_retryable() && e.to_string().contains("context too long"),
            "{e}"
        );
        for v in [
            serde_json::json!({"type": "server_error", "message": "The server had an error"}),
            serde_json::json!({"type": "error", "code": "server_error", "message": "boom"}),
            serde_json::json!({"type": "api_error", "message": "Internal server error"}),
            serde_json::json!({"code": 500, "message": "boom"}),
        ] {
            let e = c.in_stream_error(&v);
            assert!(
                matches!(e, LlmError::InStream { .. }) && e.is_retryable(),
                "{v}: {e:?}"
            );
        }
        let v =
            serde_json::json!({"type": "invalid_request_error", "code": "bad_server_error_name"});
        assert!(!c.in_stream_error(&v).is_retryable());
        let v = serde_json::json!("plain string error");
        assert!(
            c.in_stream_error(&v)
                .to_string()
                .contains("plain string error")
        );
    }

    #[test]
    fn error_is_send_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<LlmError>();
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
