//! Loopback base URLs bypass HTTP(S)_PROXY. Its own test binary: it sets process-wide
//! proxy variables, which must not leak into other tests.

mod llm_common;

use kforge::llm::ProviderKind;
use llm_common::*;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn loopback_calls_ignore_proxy_variables() {
    // A proxy that does not exist: any request sent through it fails.
    for var in PROXY_VARS {
        // SAFETY: this binary has one test and sets the variables before any thread reads them.
        unsafe { std::env::set_var(var, "http://127.0.0.1:9") };
    }
    for var in ["NO_PROXY", "no_proxy"] {
        // SAFETY: as above.
        unsafe { std::env::remove_var(var) };
    }
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("{}data: [DONE]\n\n", content_chunk("direct")),
            "text/event-stream",
        ))
        .expect(2)
        .mount(&server)
        .await;
    let port = server.address().port();
    for base in [
        format!("http://127.0.0.1:{port}/v1"),
        format!("http://localhost:{port}/v1"),
    ] {
        let (events, result) = call(provider(ProviderKind::OpenAi, &base, "m")).await;
        assert_eq!(events, vec![text("direct")], "{base}");
        result.unwrap();
    }
}
