//! A scripted OpenAI-compatible LLM on 127.0.0.1 for engine tests: it reads each
//! request's prompt, decides which pipeline step asked (repair, optimize, stage,
//! analysis, seed) from what the prompt contains, streams the scripted answer as real SSE
//! chunks (optionally after a delay) or fails with an HTTP status, and counts requests per
//! step.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Response, StatusCode};
use axum::routing::post;

/// `tests/fixtures`; `KFORGE_REPO_ROOT` points elsewhere when a built bench runs on
/// another machine (the GPU box).
pub fn fixtures() -> PathBuf {
    let root = std::env::var_os("KFORGE_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf());
    root.join("tests/fixtures")
}

pub fn fixture_kernel(name: &str) -> String {
    std::fs::read_to_string(fixtures().join("kernels").join(name)).unwrap()
}

/// A correct ReLU kernel tagged with `marker` (so prompts built from it are recognisable).
pub fn relu_ok(marker: &str) -> String {
    format!("# {marker}\n{}", fixture_kernel("relu_ok.py"))
}

/// A ReLU kernel that fails to compile (marked MOCK-BROKEN so the repair prompt is seen).
pub fn relu_broken() -> String {
    format!("# MOCK-BROKEN\n{}", fixture_kernel("relu_compile.py"))
}

pub fn fenced(code: &str) -> String {
    format!("Here is the kernel.\n\n```python\n{code}\n```\n")
}

pub fn analysis_json(worth: &str) -> String {
    format!(
        "```json\n{{\"worth_optimizing\": \"{worth}\", \"reason\": \"memory bound\", \"bottleneck\": \"DRAM bandwidth\", \
         \"optimisation method\": \"vectorize loads\", \"modification_plan\": \"MOCK-PLAN: wider blocks\", \
         \"expected_speedup\": \"1.3x\", \"output_requirement\": \"the full tensor\"}}\n```"
    )
}

/// Which step a prompt comes from, judged from the user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    Repair,
    Optimize,
    Stage(&'static str),
    Analysis,
    Seed,
}

pub fn classify(user: &str) -> Step {
    // A stage prompt names its stage in its heading; it also quotes the lineage's analysis
    // (whose plan may carry MOCK-PLAN) and the earlier stages, so it is told first.
    if let Some(rest) = user.split("## This tuning stage: `").nth(1) {
        let name = rest.split('`').next().unwrap_or_default();
        if let Some(stage) = ["grid_and_parallel", "block_tiling", "memory_and_tuning"]
            .into_iter()
            .find(|s| *s == name)
        {
            return Step::Stage(stage);
        }
    }
    if user.contains("MOCK-BROKEN") {
        return Step::Repair;
    }
    if user.contains("MOCK-PLAN") {
        return Step::Optimize;
    }
    // The stage prompt names its stage before quoting the current kernel (whose marker
    // may name an earlier stage): the first mention wins.
    let first = ["grid_and_parallel", "block_tiling", "memory_and_tuning"]
        .into_iter()
        .filter_map(|stage| user.find(stage).map(|at| (at, stage)))
        .min();
    if let Some((_, stage)) = first {
        return Step::Stage(stage);
    }
    if user.contains("worth_optimizing") {
        return Step::Analysis;
    }
    Step::Seed
}

pub type Script = Arc<dyn Fn(Step, &str, usize) -> String + Send + Sync>;

#[derive(Clone)]
struct ServerState {
    script: Script,
    delay: Duration,
    counts: Arc<Mutex<HashMap<Step, usize>>>,
    prompts: Arc<Mutex<Vec<String>>>,
}

pub struct MockLlm {
    pub base_url: String,
    counts: Arc<Mutex<HashMap<Step, usize>>>,
    prompts: Arc<Mutex<Vec<String>>>,
}

impl MockLlm {
    /// `script(step, user_message, nth request of that step)` returns the answer text.
    pub async fn start(script: Script, delay: Duration) -> MockLlm {
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let prompts = Arc::new(Mutex::new(Vec::new()));
        let state = ServerState {
            script,
            delay,
            counts: counts.clone(),
            prompts: prompts.clone(),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        MockLlm {
            base_url: format!("http://{addr}/v1"),
            counts,
            prompts,
        }
    }

    pub fn count(&self, step: Step) -> usize {
        self.counts.lock().unwrap().get(&step).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.counts.lock().unwrap().values().sum()
    }

    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }

    /// A config file naming this server as provider `mock`.
    pub fn config(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kforge-test.toml");
        std::fs::write(
            &path,
            format!(
                // The sessions' own steps: the unseen-shapes re-check (up to ten more CPU
                // evaluations a session) has its engine tests with fakes (src/engine/tests.rs)
                // and its CPU evaluator tests (tests/shapes.rs). The calls that only chase
                // speed are skipped on the CPU by default; these tests pin down the whole flow,
                // so they ask for them (the skip has its tests in src/engine/prompting.rs).
                "[llm]\ndefault = \"mock\"\nread_timeout_s = 30\n\n[llm.providers.mock]\npreset = \"vllm\"\nbase_url = \"{}\"\nmodel = \"mock-1\"\n\n[pipeline]\nspeed_calls_on_cpu = true\n\n[eval]\nshape_check = false\n",
                self.base_url
            ),
        )
        .unwrap();
        path
    }
}

async fn answer(State(state): State<ServerState>, body: String) -> Response<Body> {
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let user = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let step = classify(&user);
    let nth = {
        let mut counts = state.counts.lock().unwrap();
        let n = counts.entry(step).or_insert(0);
        *n += 1;
        *n
    };
    state.prompts.lock().unwrap().push(user.clone());
    let text = (state.script)(step, &user, nth);
    // "HTTP:<status>" answers with that status and an error body (a provider that is down).
    if let Some(status) = text.strip_prefix("HTTP:") {
        let status: u16 = status.trim().parse().unwrap();
        return Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"error":{"message":"the mock provider is overloaded","type":"server_error"}}"#,
            ))
            .unwrap();
    }
    let delay = state.delay;
    let stream = async_stream(text, delay);
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn async_stream(
    text: String,
    delay: Duration,
) -> impl futures::Stream<Item = Result<String, std::io::Error>> {
    // "TRUNCATE:" makes the stream end without its final chunk and [DONE].
    let (text, truncate) = match text.strip_prefix("TRUNCATE:") {
        Some(rest) => (rest.to_string(), true),
        None => (text, false),
    };
    let chars: Vec<char> = text.chars().collect();
    let chunks: Vec<String> = chars.chunks(200).map(|c| c.iter().collect()).collect();
    futures::stream::unfold(
        (0usize, chunks, delay, false),
        move |(i, chunks, delay, done)| async move {
            if done {
                return None;
            }
            if i == 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if i < chunks.len() {
                let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": chunks[i]}, "finish_reason": null}]});
                return Some((
                    Ok(format!("data: {chunk}\n\n")),
                    (i + 1, chunks, delay, false),
                ));
            }
            if truncate {
                return None;
            }
            let last = serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 200}});
            Some((
                Ok(format!("data: {last}\n\ndata: [DONE]\n\n")),
                (i, chunks, delay, true),
            ))
        },
    )
}
