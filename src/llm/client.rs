//! The entry point: one client per resolved provider, streaming calls with retries,
//! timeouts and cancellation.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::config::{ProviderKind, ResolvedProvider, redact_url};
use super::error::{ErrorContext, LlmError, size_text};
use super::sse::{self, SseError};
use super::types::{ChatRequest, Completion, StreamEvent, Truncation, Usage};
use super::{anthropic, command, openai, pricing, retry};

/// Largest error body read (the excerpt shown is shorter still). Not for answers: see
/// `read_answer_body`.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A client for one provider. Cheap to clone; share it between concurrent calls.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
}

struct Inner {
    provider: ResolvedProvider,
    http: reqwest::Client,
    ctx: ErrorContext,
    /// The endpoint requested.
    url: String,
    /// The endpoint as shown in messages and logs: without a password.
    shown_url: String,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("provider", &self.inner.provider)
            .finish()
    }
}

/// Whether `base_url` points at this machine (such URLs never go through a proxy).
pub fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

impl LlmClient {
    /// Builds the HTTP client: rustls, `connect_timeout`, no total timeout (the idle
    /// `read_timeout` is enforced per read), no proxy for loopback URLs, no redirects.
    pub fn new(provider: ResolvedProvider) -> Result<Self, LlmError> {
        // Installing twice fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(provider.connect_timeout)
            // reqwest strips only `Authorization` on a cross-origin redirect: Anthropic's
            // `x-api-key`, the extra headers and the whole prompt would go to the new
            // origin. A 3xx is reported instead (see `redirect_error`).
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("kforge/", env!("CARGO_PKG_VERSION")));
        if is_loopback(&provider.base_url) {
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        let url = match provider.kind {
            ProviderKind::OpenAi => openai::endpoint(&provider.base_url),
            ProviderKind::Anthropic => anthropic::endpoint(&provider.base_url),
            ProviderKind::Command => String::new(),
        };
        let mut secrets: Vec<String> = provider.secrets().into_iter().map(String::from).collect();
        // A command's stderr is shown in errors: the keys it was not given are scrubbed too,
        // should it find them elsewhere.
        if provider.kind == ProviderKind::Command {
            secrets.extend(
                provider
                    .scrub_env
                    .iter()
                    .filter_map(|v| super::config::process_env(v)),
            );
        }
        // Servers and libraries may echo the URL: its password is scrubbed like a key.
        if let Some(password) = reqwest::Url::parse(&url)
            .ok()
            .and_then(|u| u.password().map(String::from))
        {
            secrets.push(password);
        }
        let shown_url = redact_url(&url);
        let ctx = ErrorContext {
            provider: provider.name.clone(),
            model: provider.model.clone(),
            env_var: provider.api_key_env.clone(),
            secrets,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                provider,
                http,
                ctx,
                url,
                shown_url,
            }),
        })
    }

    pub fn provider(&self) -> &ResolvedProvider {
        &self.inner.provider
    }

    /// Runs one call to the end. `on_event` sees every event as it arrives (`Text`,
    /// `Reasoning`, `Usage`, `Finish`, `Retrying`; never `Done`). Returns the whole answer,
    /// or an error; an answer cut by the output limit or by the connection is
    /// `LlmError::Truncated` with the partial answer inside.
    pub async fn complete<F>(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        mut on_event: F,
    ) -> Result<Completion, LlmError>
    where
        F: FnMut(&StreamEvent) + Send,
    {
        let start = Instant::now();
        let work = self.run(req, start, &mut on_event);
        let capped = async {
            // A command enforces its own cap, so that it can say which program it killed.
            let wall = match self.inner.provider.kind {
                ProviderKind::Command => None,
                ProviderKind::OpenAi | ProviderKind::Anthropic => self.inner.provider.wall_timeout,
            };
            match wall {
                Some(wall) => tokio::time::timeout(wall, work)
                    .await
                    .unwrap_or(Err(LlmError::WallTimeout { after: wall })),
                None => work.await,
            }
        };
        // Dropping the losing future drops the response body: the connection closes.
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(LlmError::Cancelled),
            r = capped => r,
        };
        let p = &self.inner.provider;
        match &result {
            Ok(c) => tracing::info!(
                provider = %p.name, model = %p.model, input = c.usage.input_tokens, output = c.usage.output_tokens,
                latency_ms = c.latency.as_millis() as u64, attempts = c.attempts, "llm call done"
            ),
            Err(e) => {
                tracing::warn!(provider = %p.name, model = %p.model, error = %e, "llm call failed")
            }
        }
        result
    }

    /// The same call as a stream: the events of [`complete`](Self::complete), then
    /// `Done(completion)` or the error. Dropping the stream cancels the call.
    pub fn stream(&self, req: ChatRequest, cancel: CancellationToken) -> LlmStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let token = cancel.child_token();
        let guard = token.clone().drop_guard();
        let client = self.clone();
        tokio::spawn(async move {
            let events = tx.clone();
            let result = client
                .complete(&req, &token, move |ev| {
                    let _ = events.send(Ok(ev.clone()));
                })
                .await;
            let _ = tx.send(result.map(|c| StreamEvent::Done(Box::new(c))));
        });
        LlmStream { rx, _guard: guard }
    }

    async fn run<F>(
        &self,
        req: &ChatRequest,
        start: Instant,
        on_event: &mut F,
    ) -> Result<Completion, LlmError>
    where
        F: FnMut(&StreamEvent) + Send,
    {
        let p = &self.inner.provider;
        let mut attempt = 1;
        loop {
            let mut acc = Accumulator::new(start, attempt);
            match self.attempt(req, attempt, &mut acc, on_event).await {
                Ok(()) => {
                    let completion = acc.completion(p);
                    if completion
                        .finish_reason
                        .as_ref()
                        .is_some_and(|r| r.is_length())
                    {
                        return Err(LlmError::Truncated {
                            cause: Truncation::MaxTokens,
                            partial: Box::new(completion),
                        });
                    }
                    return Ok(completion);
                }
                Err((mut error, server_wait)) => {
                    // A stream cut before any token is as good as a connection error.
                    let mut retryable = error.is_retryable();
                    if let LlmError::Truncated { partial, .. } = &mut error {
                        **partial = acc.completion(p);
                        retryable = true;
                    }
                    if acc.first_token.is_some() || !retryable || attempt > p.retry.max_retries {
                        return Err(error);
                    }
                    let delay = retry::delay(&p.retry, attempt, server_wait);
                    attempt += 1;
                    tracing::warn!(provider = %p.name, attempt, delay_ms = delay.as_millis() as u64, error = %error, "llm retry");
                    on_event(&StreamEvent::Retrying {
                        attempt,
                        delay,
                        reason: error.to_string(),
                    });
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// One HTTP exchange. The error's second part is the server's requested wait.
    async fn attempt<F>(
        &self,
        req: &ChatRequest,
        attempt: u32,
        acc: &mut Accumulator,
        on_event: &mut F,
    ) -> Result<(), (LlmError, Option<Duration>)>
    where
        F: FnMut(&StreamEvent) + Send,
    {
        let Inner {
            provider: p,
            http,
            ctx,
            url,
            shown_url,
        } = &*self.inner;
        if p.kind == ProviderKind::Command {
            let mut emit = |ev: StreamEvent| acc.take_all([ev], on_event);
            return command::call(p, req, ctx, &mut emit)
                .await
                .map_err(|e| (e, None));
        }
        let mut builder = http
            .post(url.as_str())
            .header("accept", "text/event-stream");
        builder = match p.kind {
            ProviderKind::OpenAi => {
                let b = builder.json(&openai::request_body(p, req));
                match &p.api_key {
                    Some(key) => b.header(
                        "authorization",
                        secret_header(&format!("Bearer {}", key.expose()))?,
                    ),
                    None => b,
                }
            }
            ProviderKind::Anthropic => {
                let b = builder
                    .json(&anthropic::request_body(p, req))
                    .header("anthropic-version", anthropic::API_VERSION);
                match &p.api_key {
                    Some(key) => b.header("x-api-key", secret_header(key.expose())?),
                    None => b,
                }
            }
            ProviderKind::Command => return Err((not_http(), None)),
        };
        for (name, value) in &p.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                (
                    LlmError::Config(format!("extra header name `{name}` is not valid")),
                    None,
                )
            })?;
            builder = builder.header(name, secret_header(value.expose())?);
        }
        tracing::info!(provider = %p.name, model = %p.model, attempt, messages = req.messages.len(), "llm request");
        tracing::debug!(url = %shown_url, "llm request url");
        // The response headers are a read like any other: wait at most `read_timeout`.
        let response = match tokio::time::timeout(p.read_timeout, builder.send()).await {
            Err(_) => {
                return Err((
                    LlmError::ReadTimeout {
                        after: p.read_timeout,
                    },
                    None,
                ));
            }
            Ok(sent) => sent.map_err(|e| (connect_error(ctx, shown_url, &e), None))?,
        };
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            return Err((redirect_error(ctx, url, &response), None));
        }
        if !(200..300).contains(&status) {
            let wait = retry::retry_after(response.headers());
            let body = read_error_body(response, p.read_timeout).await;
            return Err((ctx.http_error(status, wait, &body), wait));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("text/html") {
            let body = read_error_body(response, p.read_timeout).await;
            let message = format!(
                "expected an event stream, got an HTML page from {shown_url}: check base_url"
            );
            return Err((ctx.malformed(message, &body), None));
        }
        let mut body = response.bytes_stream();
        let mut head = None;
        if content_type.starts_with("application/json") {
            // A server that ignored `stream: true` (or answered an error as JSON under 200).
            let text = read_answer_body(&mut body, p.read_timeout, ctx, shown_url)
                .await
                .map_err(|e| (e, None))?;
            match serde_json::from_str(&text) {
                Ok(value) => {
                    return whole_json(p, &value, &text, ctx, acc, on_event).map_err(|e| (e, None));
                }
                // An event stream labelled JSON (some proxies do): read below as one.
                Err(_) if sse::looks_like_sse(text.as_bytes()) => {
                    head = Some(Ok(Bytes::from(text)));
                }
                Err(e) => {
                    let message = format!("the answer is not JSON ({e})");
                    return Err((ctx.malformed(message, &text), None));
                }
            }
        } else if content_type.starts_with("text/plain") {
            // Some servers label their event stream text/plain; others answer a plain
            // message (a health page, a proxy's notice) that would read as an empty stream
            // and be retried as a truncation. The first line tells them apart.
            let first = sniff(&mut body, p.read_timeout, ctx, shown_url)
                .await
                .map_err(|e| (e, None))?;
            if !sse::looks_like_sse(&first) {
                let text = read_error_text(&mut body, first, p.read_timeout).await;
                return Err((plain_text_error(ctx, &text), None));
            }
            head = Some(Ok(Bytes::from(first)));
        }
        let body = futures::stream::iter(head).chain(body);
        let mut events = std::pin::pin!(sse::events(body, p.read_timeout));
        let mut decoder = match p.kind {
            ProviderKind::OpenAi => Decoder::OpenAi(openai::Decoder::default()),
            ProviderKind::Anthropic => Decoder::Anthropic(anthropic::Decoder::default()),
            ProviderKind::Command => return Err((not_http(), None)),
        };
        let mut out = Vec::new();
        while let Some(item) = events.next().await {
            let ev = item.map_err(|e| {
                let err = match e {
                    SseError::ReadTimeout(after) => LlmError::ReadTimeout { after },
                    SseError::Transport(m) => LlmError::Connect {
                        retryable: true,
                        url: shown_url.clone(),
                        message: format!("the connection broke while reading the answer: {m}"),
                    },
                    SseError::Invalid(m) => ctx.malformed(m, ""),
                    SseError::TooLarge { limit, start } => ctx.malformed(
                        format!(
                            "one line or event of the stream is longer than {}, the most kforge \
                             holds at once: not a real answer, so the stream was not read further",
                            size_text(limit)
                        ),
                        &start,
                    ),
                };
                (err, None)
            })?;
            let done = match &mut decoder {
                Decoder::OpenAi(d) => d.on_event(&ev, ctx, &mut out),
                Decoder::Anthropic(d) => d.on_event(&ev, ctx, &mut out),
            };
            acc.take_all(out.drain(..), on_event);
            if done.map_err(|e| (e, None))? {
                acc.response_model = match decoder {
                    Decoder::OpenAi(d) => d.response_model,
                    Decoder::Anthropic(d) => d.response_model,
                };
                return Ok(());
            }
        }
        let partial = Box::default();
        Err((
            LlmError::Truncated {
                cause: Truncation::StreamEnded,
                partial,
            },
            None,
        ))
    }
}

enum Decoder {
    OpenAi(openai::Decoder),
    Anthropic(anthropic::Decoder),
}

/// A whole answer as one JSON document (`text` is its source, for the error excerpt): an
/// OpenAI `chat.completion`, an Anthropic message, or an error object.
fn whole_json<F>(
    p: &ResolvedProvider,
    value: &serde_json::Value,
    text: &str,
    ctx: &ErrorContext,
    acc: &mut Accumulator,
    on_event: &mut F,
) -> Result<(), LlmError>
where
    F: FnMut(&StreamEvent) + Send,
{
    let mut out = Vec::new();
    let result = match p.kind {
        ProviderKind::OpenAi => {
            let mut d = openai::Decoder::default();
            let result = d.on_chunk(value, ctx, &mut out).map(|_| ());
            acc.response_model = d.response_model;
            result
        }
        ProviderKind::Anthropic => {
            let mut d = anthropic::Decoder::default();
            let result = d.on_value("message", value, ctx, &mut out);
            acc.response_model = d.response_model;
            match result {
                Ok(true) => Ok(()),
                Ok(false) => Err(ctx.malformed(
                    "expected an event stream or a whole message, got another JSON document",
                    text,
                )),
                Err(e) => Err(e),
            }
        }
        ProviderKind::Command => Err(not_http()),
    };
    acc.take_all(out, on_event);
    result
}

/// A command provider reached the HTTP path: a bug, reported rather than a panic.
fn not_http() -> LlmError {
    LlmError::Config("internal error: a command provider has no HTTP request".into())
}

fn secret_header(value: &str) -> Result<HeaderValue, (LlmError, Option<Duration>)> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        (
            LlmError::Config(
                "an API key or header value contains characters not allowed in HTTP headers".into(),
            ),
            None,
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}

fn connect_error(ctx: &ErrorContext, url: &str, e: &reqwest::Error) -> LlmError {
    use std::error::Error as _;
    // The innermost cause says the most ("Connection refused").
    let mut source = e.source();
    let mut innermost = None;
    let mut refused = false;
    while let Some(s) = source {
        innermost = Some(s.to_string());
        refused |= s
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        source = s.source();
    }
    let mut message = if e.is_timeout() {
        "connect timeout (connect_timeout_s)".to_string()
    } else {
        ctx.clean(&innermost.unwrap_or_else(|| e.to_string()))
    };
    let local = is_loopback(url);
    if local {
        message.push_str(" (is the local server running?)");
    }
    LlmError::Connect {
        url: url.to_string(),
        message,
        retryable: !(local && refused),
    }
}

/// A 3xx answer, never followed: the error names where it points (scheme, host, port and
/// path; no credentials, query or fragment, which may carry tokens).
fn redirect_error(ctx: &ErrorContext, url: &str, response: &reqwest::Response) -> LlmError {
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(
            |l| match reqwest::Url::parse(url).and_then(|base| base.join(l)) {
                Ok(target) => match target.host_str() {
                    Some(_) => {
                        format!("{}{}", target.origin().ascii_serialization(), target.path())
                    }
                    None => "an address that is not HTTP".to_string(),
                },
                Err(_) => "an address that is not a URL".to_string(),
            },
        );
    LlmError::Redirect {
        provider: ctx.provider.clone(),
        status: response.status().as_u16(),
        location,
    }
}

/// The next chunk of a body, waiting at most `read_timeout`; `None` at its end.
async fn next_chunk<S>(
    body: &mut S,
    read_timeout: Duration,
    ctx: &ErrorContext,
    url: &str,
) -> Result<Option<Bytes>, LlmError>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    match tokio::time::timeout(read_timeout, body.next()).await {
        Err(_) => Err(LlmError::ReadTimeout {
            after: read_timeout,
        }),
        Ok(None) => Ok(None),
        Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
        Ok(Some(Err(e))) => Err(LlmError::Connect {
            retryable: true,
            url: url.to_string(),
            message: format!(
                "the connection broke while reading the answer: {}",
                ctx.clean(&e.to_string())
            ),
        }),
    }
}

/// Reads a whole successful answer: up to [`sse::MAX_EVENT_BYTES`], the same cap as one
/// event of a stream (`MAX_ERROR_BODY` is for error bodies, whose excerpt is all that is
/// shown; an answer is used whole).
async fn read_answer_body<S>(
    stream: &mut S,
    read_timeout: Duration,
    ctx: &ErrorContext,
    url: &str,
) -> Result<String, LlmError>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut body = Vec::new();
    while let Some(chunk) = next_chunk(stream, read_timeout, ctx, url).await? {
        body.extend_from_slice(&chunk);
        if body.len() > sse::MAX_EVENT_BYTES {
            let start = String::from_utf8_lossy(&body[..200]).into_owned();
            return Err(ctx.malformed(
                format!(
                    "the answer is larger than {}, the most kforge holds at once: not a real answer",
                    size_text(sse::MAX_EVENT_BYTES)
                ),
                &start,
            ));
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The first bytes of a body: its first line, or 64 bytes of it, or all of a shorter body.
async fn sniff<S>(
    body: &mut S,
    read_timeout: Duration,
    ctx: &ErrorContext,
    url: &str,
) -> Result<Vec<u8>, LlmError>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut head = Vec::new();
    while head.len() < 64 && !head.iter().any(|&b| b == b'\n' || b == b'\r') {
        match next_chunk(body, read_timeout, ctx, url).await? {
            Some(chunk) => head.extend_from_slice(&chunk),
            None => break,
        }
    }
    Ok(head)
}

/// A 200 answer in plain text: what it is, and the start of what it says.
fn plain_text_error(ctx: &ErrorContext, text: &str) -> LlmError {
    let start: String = ctx.clean(text).chars().take(200).collect();
    ctx.malformed(
        "the server answered 200 with text/plain, not an event stream or JSON (check base_url)",
        if start.is_empty() {
            "(empty body)"
        } else {
            &start
        },
    )
}

/// Reads up to `MAX_ERROR_BODY` bytes of a body, giving up after an idle `read_timeout`.
async fn read_error_body(response: reqwest::Response, read_timeout: Duration) -> String {
    read_error_text(&mut response.bytes_stream(), Vec::new(), read_timeout).await
}

/// The rest of an error body after its first bytes `head`, up to `MAX_ERROR_BODY` in all.
async fn read_error_text<S>(body: &mut S, head: Vec<u8>, read_timeout: Duration) -> String
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    let mut text = head;
    while text.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(read_timeout, body.next()).await {
            Ok(Some(Ok(chunk))) => text.extend_from_slice(&chunk),
            _ => break,
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// What one attempt has gathered so far.
struct Accumulator {
    start: Instant,
    attempt: u32,
    text: String,
    reasoning: String,
    usage: Usage,
    finish: Option<super::types::FinishReason>,
    first_token: Option<Duration>,
    response_model: Option<String>,
}

impl Accumulator {
    fn new(start: Instant, attempt: u32) -> Self {
        Self {
            start,
            attempt,
            text: String::new(),
            reasoning: String::new(),
            usage: Usage::default(),
            finish: None,
            first_token: None,
            response_model: None,
        }
    }

    fn take_all<F: FnMut(&StreamEvent)>(
        &mut self,
        events: impl IntoIterator<Item = StreamEvent>,
        on_event: &mut F,
    ) {
        for ev in events {
            match &ev {
                StreamEvent::Text(t) => self.text.push_str(t),
                StreamEvent::Reasoning(r) => self.reasoning.push_str(r),
                StreamEvent::Usage(u) => self.usage = u.clone(),
                StreamEvent::Finish(f) => self.finish = Some(f.clone()),
                StreamEvent::Retrying { .. } | StreamEvent::Done(_) => {}
            }
            if matches!(ev, StreamEvent::Text(_) | StreamEvent::Reasoning(_))
                && self.first_token.is_none()
            {
                self.first_token = Some(self.start.elapsed());
            }
            on_event(&ev);
        }
    }

    fn completion(&self, p: &ResolvedProvider) -> Completion {
        // A command's "model" is a program name: only a cost it reports (or `free`) counts.
        let cost = match p.kind {
            ProviderKind::Command => pricing::cost_of(
                &self.usage,
                &p.model,
                p.free,
                &pricing::PriceTable::default(),
            ),
            ProviderKind::OpenAi | ProviderKind::Anthropic => {
                pricing::cost_of(&self.usage, &p.model, p.free, &p.prices)
            }
        };
        Completion {
            provider: p.name.clone(),
            model: p.model.clone(),
            response_model: self.response_model.clone(),
            text: self.text.clone(),
            reasoning: self.reasoning.clone(),
            usage: self.usage.clone(),
            cost,
            finish_reason: self.finish.clone(),
            latency: self.start.elapsed(),
            time_to_first_token: self.first_token,
            attempts: self.attempt,
        }
    }
}

/// The events of one call; see [`LlmClient::stream`].
pub struct LlmStream {
    rx: mpsc::UnboundedReceiver<Result<StreamEvent, LlmError>>,
    _guard: DropGuard,
}

impl Stream for LlmStream {
    type Item = Result<StreamEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        for u in [
            "http://127.0.0.1:8000/v1",
            "http://localhost:11434",
            "http://[::1]:8080/v1",
            "http://a.localhost/",
        ] {
            assert!(is_loopback(u), "{u}");
        }
        for u in [
            "https://api.openai.com/v1",
            "http://10.0.0.2:8000",
            "not a url",
        ] {
            assert!(!is_loopback(u), "{u}");
        }
    }
}
