//! Anthropic Messages streams against wiremock.

mod llm_common;

use kforge::llm::{CostSource, LlmError, ProviderKind, Secret};
use llm_common::*;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PATH: &str = "/v1/messages";

fn anthropic(server: &MockServer) -> kforge::llm::ResolvedProvider {
    provider(ProviderKind::Anthropic, &server.uri(), "claude-sonnet-4-5")
}

/// The events of `anthropic_thinking.sse`.
fn thinking_events() -> Vec<kforge::llm::StreamEvent> {
    vec![
        usage(160, 100, 10, 1, 0),
        reasoning("Let me think."),
        text("Hello"),
        text("!"),
        finish("end_turn"),
        // Cumulative: 20 replaces 1, it is not added to it.
        usage(160, 100, 10, 20, 0),
    ]
}

#[tokio::test]
async fn thinking_signature_ping_unknown_event_and_cumulative_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(header("x-api-key", KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .and(body_partial_json(serde_json::json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 16384,
            "stream": true,
            "system": "be brief",
            "messages": [{"role": "user", "content": "hi"}],
        })))
        .respond_with(sse(fixture("anthropic_thinking.sse")))
        .expect(1)
        .mount(&server)
        .await;
    let (events, result) = call(anthropic(&server)).await;
    assert_eq!(events, thinking_events());
    let c = result.unwrap();
    assert_eq!(
        (c.text.as_str(), c.reasoning.as_str()),
        ("Hello!", "Let me think.")
    );
    assert_eq!(
        c.response_model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    let cost = c.cost.unwrap();
    let expected = (50.0 * 3.0 + 100.0 * 0.30 + 10.0 * 3.75 + 20.0 * 15.0) / 1e6;
    assert!((cost.usd - expected).abs() < 1e-12, "{cost:?}");
    assert_eq!(cost.source, CostSource::PriceTable);
}

#[tokio::test]
async fn in_stream_overload_before_any_token_is_retried() {
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        sse(fixture("anthropic_overloaded.sse")),
        Some(1),
        1,
    )
    .await;
    mount(
        &server,
        PATH,
        sse(fixture("anthropic_thinking.sse")),
        None,
        1,
    )
    .await;
    let (events, result) = call(anthropic(&server)).await;
    let mut expected = vec![
        usage(50, 0, 0, 1, 0),
        retrying(2, 10, "provider `testprov` is overloaded: Overloaded"),
    ];
    expected.extend(thinking_events());
    assert_eq!(events, expected);
    assert_eq!(result.unwrap().attempts, 2);
}

#[tokio::test]
async fn http_529_is_retried_then_reported_as_overloaded() {
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(529).set_body_string(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        None,
        3,
    )
    .await;
    let (events, result) = call(anthropic(&server)).await;
    let reason = "provider `testprov` is overloaded (HTTP 529): Overloaded";
    assert_eq!(
        events,
        vec![retrying(2, 10, reason), retrying(3, 10, reason)]
    );
    assert!(
        matches!(
            result,
            Err(LlmError::Overloaded {
                status: Some(529),
                ..
            })
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn missing_message_stop_is_truncation() {
    let cut: String = fixture("anthropic_thinking.sse")
        .split("event: message_stop")
        .next()
        .unwrap()
        .to_string();
    let server = MockServer::start().await;
    mount(&server, PATH, sse(cut), None, 1).await;
    let (events, result) = call(anthropic(&server)).await;
    assert_eq!(events, thinking_events());
    assert!(
        matches!(result, Err(LlmError::Truncated { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn stop_reason_max_tokens_is_truncation() {
    let body = fixture("anthropic_thinking.sse").replace("\"end_turn\"", "\"max_tokens\"");
    let server = MockServer::start().await;
    mount(&server, PATH, sse(body), None, 1).await;
    let (_, result) = call(anthropic(&server)).await;
    let err = result.unwrap_err();
    assert!(
        err.to_string()
            .contains("stopped at the output limit (finish reason `max_tokens`"),
        "{err}"
    );
    assert_eq!(err.partial().unwrap().text, "Hello!");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_other_origin_gets_nothing() {
    // Whatever reaches this server has the key, the extra headers and the prompt.
    let elsewhere = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(sse(fixture("anthropic_thinking.sse")))
        .mount(&elsewhere)
        .await;
    let target = elsewhere
        .uri()
        .replace("http://", "http://someone:location-pass@");
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(307).insert_header("location", format!("{target}{PATH}?sig=q1")),
        None,
        1,
    )
    .await;
    let mut p = anthropic(&server);
    p.extra_headers = vec![("X-Gateway-Token".into(), Secret::new("hdr-secret-42"))];
    let (events, result) = call(p).await;
    let received = elsewhere.received_requests().await.unwrap();
    assert!(
        received.is_empty(),
        "the redirect was followed: {} request(s) reached the other origin",
        received.len()
    );
    assert_eq!(events, vec![], "a redirect is not retried");
    let err = result.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        shown.contains("HTTP 307") && shown.contains(&elsewhere.uri()),
        "the message names the status and the new origin: {shown}"
    );
    for secret in [KEY, "hdr-secret-42", "location-pass"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert!(!err.is_retryable(), "{err:?}");
}

/// What LiteLLM's `/v1/messages` sent to a streamed request: one `data:` line holding a
/// whole (non-streamed) message.
fn whole_message() -> serde_json::Value {
    serde_json::json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hello from the proxy"}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 5}
    })
}

#[tokio::test]
async fn a_whole_message_in_one_data_line_is_an_answer() {
    for tail in ["", "data: [DONE]\n\n"] {
        let server = MockServer::start().await;
        let body = format!("data: {}\n\n{tail}", whole_message());
        mount(&server, PATH, sse(body), None, 1).await;
        let (events, result) = call(anthropic(&server)).await;
        assert_eq!(
            events,
            vec![
                text("Hello from the proxy"),
                finish("end_turn"),
                usage(12, 0, 0, 5, 0)
            ],
            "tail {tail:?}"
        );
        let c = result.unwrap();
        assert_eq!(c.text, "Hello from the proxy");
        assert_eq!(
            c.response_model.as_deref(),
            Some("claude-sonnet-4-5-20250929")
        );
        assert_eq!(c.finish_reason.unwrap().as_str(), "end_turn");
        assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (12, 5));
        assert_eq!(c.attempts, 1);
    }
}

#[tokio::test]
async fn a_whole_message_as_a_json_document_is_an_answer() {
    let server = MockServer::start().await;
    mount(
        &server,
        PATH,
        ResponseTemplate::new(200).set_body_json(whole_message()),
        None,
        1,
    )
    .await;
    let (events, result) = call(anthropic(&server)).await;
    assert_eq!(
        events,
        vec![
            text("Hello from the proxy"),
            finish("end_turn"),
            usage(12, 0, 0, 5, 0)
        ]
    );
    assert_eq!(result.unwrap().text, "Hello from the proxy");
}

#[tokio::test]
async fn a_whole_message_in_a_data_line_labelled_json_is_an_answer() {
    let server = MockServer::start().await;
    let body = format!("data: {}\n\n", whole_message());
    let labelled_json = ResponseTemplate::new(200).set_body_raw(body, "application/json");
    mount(&server, PATH, labelled_json, None, 1).await;
    let (events, result) = call(anthropic(&server)).await;
    assert_eq!(
        events,
        vec![
            text("Hello from the proxy"),
            finish("end_turn"),
            usage(12, 0, 0, 5, 0)
        ]
    );
    assert_eq!(result.unwrap().text, "Hello from the proxy");
}
