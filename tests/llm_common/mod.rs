//! Helpers shared by the `llm_*` integration tests: fixtures, a provider pointing at a
//! local mock, a call that records every event, and a small axum server that streams
//! scripted chunks with delays (for timing, stalls, cancellation and split chunks).

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, header};
use bytes::Bytes;
use kforge::llm::{
    ChatRequest, Completion, LlmClient, LlmError, ProviderKind, ResolvedProvider, RetryPolicy,
    Secret, StreamEvent, Usage,
};
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "sk-test-secret-0123456789";

/// The variables that route HTTP through a proxy.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// A recorded SSE stream from `tests/fixtures/sse/`.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/sse/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A provider at `base_url` with fast test settings: read timeout 300 ms, 2 retries
/// 10 ms apart, a key from `TEST_KEY_VAR`.
pub fn provider(kind: ProviderKind, base_url: &str, model: &str) -> ResolvedProvider {
    let mut p = ResolvedProvider::new("testprov", kind, base_url, model);
    p.api_key = Some(Secret::new(KEY));
    p.api_key_env = Some("TEST_KEY_VAR".into());
    p.read_timeout = Duration::from_millis(300);
    p.connect_timeout = Duration::from_millis(500);
    p.retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(10),
    };
    p
}

/// Runs one call, recording every event.
pub async fn call(p: ResolvedProvider) -> (Vec<StreamEvent>, Result<Completion, LlmError>) {
    call_with(p, &CancellationToken::new()).await
}

pub async fn call_with(
    p: ResolvedProvider,
    cancel: &CancellationToken,
) -> (Vec<StreamEvent>, Result<Completion, LlmError>) {
    let client = LlmClient::new(p).expect("client builds");
    let mut events = Vec::new();
    let result = client
        .complete(
            &ChatRequest::prompt("hi").with_system("be brief"),
            cancel,
            |e| events.push(e.clone()),
        )
        .await;
    (events, result)
}

pub fn text(s: &str) -> StreamEvent {
    StreamEvent::Text(s.into())
}

pub fn reasoning(s: &str) -> StreamEvent {
    StreamEvent::Reasoning(s.into())
}

pub fn finish(s: &str) -> StreamEvent {
    StreamEvent::Finish(kforge::llm::FinishReason(s.into()))
}

pub fn usage(input: u64, cached: u64, write: u64, output: u64, reasoning: u64) -> StreamEvent {
    StreamEvent::Usage(Usage {
        input_tokens: input,
        cached_input_tokens: cached,
        cache_write_tokens: write,
        output_tokens: output,
        reasoning_tokens: reasoning,
        reported_cost_usd: None,
    })
}

pub fn retrying(attempt: u32, delay_ms: u64, reason: &str) -> StreamEvent {
    StreamEvent::Retrying {
        attempt,
        delay: Duration::from_millis(delay_ms),
        reason: reason.into(),
    }
}

/// One step of a scripted response body.
#[derive(Clone)]
pub enum Part {
    Send(Bytes),
    Sleep(Duration),
}

pub fn send(data: impl Into<Vec<u8>>) -> Part {
    Part::Send(Bytes::from(data.into()))
}

pub fn sleep_ms(ms: u64) -> Part {
    Part::Sleep(Duration::from_millis(ms))
}

/// A server streaming the same script to every request.
pub struct ScriptServer {
    pub base_url: String,
    /// Requests received.
    pub requests: Arc<AtomicUsize>,
    /// Set when a response body was dropped before its script ended (client went away).
    pub dropped_early: Arc<AtomicBool>,
}

/// Sets its flag when dropped; `forget` it when the script ran to the end.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Serves `script` as `text/event-stream` on 127.0.0.1 at any path.
pub async fn script_server(script: Vec<Part>) -> ScriptServer {
    script_server_after(Duration::ZERO, script).await
}

/// Like [`script_server`], but each response's headers wait `headers_delay`.
pub async fn script_server_after(headers_delay: Duration, script: Vec<Part>) -> ScriptServer {
    let requests = Arc::new(AtomicUsize::new(0));
    let dropped_early = Arc::new(AtomicBool::new(false));
    let (reqs, dropped) = (requests.clone(), dropped_early.clone());
    let app = axum::Router::new().fallback(move || {
        let script = script.clone();
        let dropped = dropped.clone();
        reqs.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(headers_delay).await;
            let state = (script.into_iter(), DropFlag(dropped));
            let body = futures::stream::unfold(state, |(mut parts, flag)| async move {
                loop {
                    match parts.next() {
                        Some(Part::Sleep(d)) => tokio::time::sleep(d).await,
                        Some(Part::Send(b)) => {
                            return Some((Ok::<_, std::io::Error>(b), (parts, flag)));
                        }
                        None => {
                            std::mem::forget(flag);
                            return None;
                        }
                    }
                }
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(body))
                .expect("response")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    ScriptServer {
        base_url: format!("http://{addr}/v1"),
        requests,
        dropped_early,
    }
}

/// An OpenAI chunk carrying `content`.
pub fn content_chunk(content: &str) -> String {
    let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// A 200 `text/event-stream` response with `body`.
pub fn sse(body: impl Into<String>) -> wiremock::ResponseTemplate {
    wiremock::ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream")
}

/// Mounts `response` for POST `path`: served at most `times` times (all requests when
/// `None`), and expected exactly `expect` times when the server is dropped.
pub async fn mount(
    server: &wiremock::MockServer,
    path: &str,
    response: wiremock::ResponseTemplate,
    times: Option<u64>,
    expect: u64,
) {
    use wiremock::matchers;
    let mock = wiremock::Mock::given(matchers::method("POST"))
        .and(matchers::path(path))
        .respond_with(response);
    let mock = match times {
        Some(n) => mock.up_to_n_times(n),
        None => mock,
    };
    mock.expect(expect).mount(server).await;
}
