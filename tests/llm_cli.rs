//! `kforge ask` and `kforge providers` as a user runs them, against wiremock, with a
//! clean environment and a config in a temp dir.

mod llm_common;

use std::path::Path;
use std::process::Output;

use llm_common::*;
use wiremock::MockServer;
use wiremock::matchers::{body_partial_json, method};

const VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "VLLM_API_KEY",
    "LLAMA_API_KEY",
    "KFORGE_PROVIDER",
    "KFORGE_MODEL",
    "KFORGE_BASE_URL",
    "KFORGE_CONFIG_DIR",
    "KFORGE_CACHE_DIR",
    "NO_COLOR",
];

/// Runs the binary in `dir` with a config dir `dir/config` and cache `dir/cache`.
async fn kforge(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kforge"));
    cmd.args(args).current_dir(dir);
    for var in VARS.iter().chain(PROXY_VARS) {
        cmd.env_remove(var);
    }
    cmd.env("KFORGE_CONFIG_DIR", dir.join("config"))
        .env("KFORGE_CACHE_DIR", dir.join("cache"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kforge runs");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .await
        .unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

fn config_dir(server: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let config = format!(
        "[llm]\ndefault = \"mock\"\n\n[llm.providers.mock]\nbase_url = \"{}/v1\"\nmodel = \"gpt-4o\"\napi_key_env = \"MOCK_KEY\"\n",
        server.uri()
    );
    std::fs::write(dir.path().join("config/config.toml"), config).unwrap();
    dir
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn ask_streams_the_answer_and_prints_usage_cost_and_latency() {
    let server = MockServer::start().await;
    mount(
        &server,
        "/v1/chat/completions",
        sse(fixture("openai_text_usage.sse")),
        None,
        1,
    )
    .await;
    let dir = config_dir(&server);
    let out = kforge(dir.path(), &["ask", "hello?"], &[("MOCK_KEY", KEY)], None).await;
    let (stdout, stderr) = (text_of(&out.stdout), text_of(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "Hello world\n");
    assert!(
        stderr.contains("provider mock, model gpt-4o (answered by gpt-4o-2024-08-06)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("input 1200 (cached 1000, cache write 0), output 300 (reasoning 0)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cost: $0.004750 (from the price table)"),
        "{stderr}"
    );
    assert!(stderr.contains("time to first token"), "{stderr}");
}

#[tokio::test]
async fn ask_reads_stdin_shows_reasoning_on_stderr_unless_told_not_to() {
    let server = MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(body_partial_json(serde_json::json!({
            "model": "deepseek-reasoner",
            "max_tokens": 50,
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "from stdin\n"}],
        })))
        .respond_with(sse(fixture("deepseek_reasoning.sse")))
        .expect(2)
        .mount(&server)
        .await;
    let dir = config_dir(&server);
    let args = [
        "ask",
        "--model",
        "deepseek-reasoner",
        "--system",
        "sys",
        "--max-output-tokens",
        "50",
        "-",
    ];
    let out = kforge(
        dir.path(),
        &args,
        &[("MOCK_KEY", KEY)],
        Some("from stdin\n"),
    )
    .await;
    let stderr = text_of(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(text_of(&out.stdout), "Answer!\n");
    assert!(
        stderr.starts_with("Thinking.\n"),
        "reasoning first, not dimmed off a terminal: {stderr}"
    );
    let mut quiet = args.to_vec();
    quiet.insert(1, "--no-reasoning");
    let out = kforge(
        dir.path(),
        &quiet,
        &[("MOCK_KEY", KEY)],
        Some("from stdin\n"),
    )
    .await;
    assert!(
        !text_of(&out.stderr).contains("Thinking."),
        "{}",
        text_of(&out.stderr)
    );
}

#[tokio::test]
async fn ask_error_exits_non_zero_and_the_key_reaches_neither_output_nor_log() {
    let server = MockServer::start().await;
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","code":"invalid_api_key"}}}}"#
    );
    mount(
        &server,
        "/v1/chat/completions",
        wiremock::ResponseTemplate::new(401).set_body_string(body),
        None,
        1,
    )
    .await;
    let dir = config_dir(&server);
    let out = kforge(
        dir.path(),
        &["ask", "hi"],
        &[("MOCK_KEY", KEY), ("KFORGE_LOG", "debug")],
        None,
    )
    .await;
    let stderr = text_of(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("error: authentication failed for provider `mock` (HTTP 401): set MOCK_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains(KEY) && !text_of(&out.stdout).contains(KEY));
    let log = std::fs::read_to_string(dir.path().join("cache/logs/kforge.log")).unwrap();
    assert!(log.contains("llm request"), "the log is written: {log}");
    assert!(!log.contains(KEY), "the key is in the log: {log}");
}

#[tokio::test]
async fn ask_without_any_provider_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = kforge(dir.path(), &["ask", "hi"], &[], None).await;
    let stderr = text_of(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("OPENAI_API_KEY") && stderr.contains("--provider manual"),
        "{stderr}"
    );
}

#[tokio::test]
async fn providers_lists_presets_default_and_key_state_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = kforge(
        dir.path(),
        &["providers"],
        &[("ANTHROPIC_API_KEY", KEY)],
        None,
    )
    .await;
    let stdout = text_of(&out.stdout);
    assert!(out.status.success(), "{}", text_of(&out.stderr));
    assert!(!stdout.contains(KEY), "{stdout}");
    for name in [
        "openai",
        "deepseek",
        "anthropic",
        "openrouter",
        "ollama",
        "vllm",
        "llamacpp",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().any(|w| w == name)),
            "{name} missing: {stdout}"
        );
    }
    let line = stdout.lines().find(|l| l.contains("anthropic")).unwrap();
    assert!(
        line.starts_with('*') && line.contains("ANTHROPIC_API_KEY set"),
        "{stdout}"
    );
    assert!(
        stdout.contains("default: anthropic (ANTHROPIC_API_KEY is set)"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_password_in_base_url_is_masked_in_the_listing_the_errors_and_the_log() {
    let server = MockServer::start().await;
    mount(
        &server,
        "/v1/chat/completions",
        wiremock::ResponseTemplate::new(500).set_body_string("upstream failed"),
        None,
        1,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let base = server
        .uri()
        .replace("http://", "http://gateway-user:pw-secret-77@");
    let config = format!(
        "[llm]\ndefault = \"mock\"\nmax_retries = 0\n\n[llm.providers.mock]\nbase_url = \"{base}/v1\"\nmodel = \"gpt-4o\"\n"
    );
    std::fs::write(dir.path().join("config/config.toml"), config).unwrap();
    let out = kforge(dir.path(), &["providers"], &[], None).await;
    let stdout = text_of(&out.stdout);
    assert!(out.status.success(), "{}", text_of(&out.stderr));
    let line = stdout.lines().find(|l| l.contains("mock")).unwrap();
    assert!(
        line.contains(&base.replace("pw-secret-77", "***")),
        "the user and host stay visible: {stdout}"
    );
    let out = kforge(dir.path(), &["ask", "hi"], &[("KFORGE_LOG", "trace")], None).await;
    let stderr = text_of(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("cache/logs/kforge.log")).unwrap();
    assert!(log.contains("llm request url"), "the log is written: {log}");
    for (what, text) in [("listing", &stdout), ("stderr", &stderr), ("log", &log)] {
        assert!(
            !text.contains("pw-secret-77"),
            "the password is in the {what}: {text}"
        );
    }
}

#[tokio::test]
async fn the_manual_provider_without_a_terminal_reads_the_answer_from_stdin_and_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    // The editor would hang without a terminal: one that fails loudly proves it never runs.
    let editor = [("VISUAL", "false"), ("EDITOR", "false")];
    let out = kforge(
        dir.path(),
        &["ask", "--provider", "manual", "write a kernel"],
        &editor,
        Some("```python\nprint(1)\n```\n"),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out.stderr));
    assert_eq!(text_of(&out.stdout), "```python\nprint(1)\n```\n");
    let out = kforge(
        dir.path(),
        &["ask", "--provider", "manual", "write a kernel"],
        &editor,
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text_of(&out.stderr).contains("reads the answer from stdin, which was empty"),
        "{}",
        text_of(&out.stderr)
    );
    let out = kforge(
        dir.path(),
        &["ask", "--provider", "manual", "-"],
        &editor,
        Some("the prompt"),
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text_of(&out.stderr).contains("needs a terminal"),
        "{}",
        text_of(&out.stderr)
    );
}
