//! Wall time of a 2-seed session against the sum of its steps run one after another,
//! with a mock LLM that answers after 2 s and the CPU evaluator (issue 4's target: at most
//! 0.6x). Prints figures; asserts nothing. Run: `cargo bench --bench engine_session`.

#[path = "../tests/engine_common/mod.rs"]
mod engine_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_common::*;
use kforge::protocol::{EvalResult, Event};
use kforge::session::store::SessionDir;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let script: Script = Arc::new(|step, _user, nth| match step {
        Step::Seed if nth == 1 => fenced(&relu_broken()),
        Step::Seed => fenced(&relu_ok("seed")),
        Step::Repair => fenced(&relu_ok("repaired")),
        Step::Analysis => analysis_json("yes"),
        Step::Optimize => fenced(&relu_ok("optimized")),
        Step::Stage(name) => fenced(&relu_ok(name)),
    });
    let mock = runtime.block_on(MockLlm::start(script, Duration::from_secs(2)));
    let dir = tempfile::tempdir().unwrap();
    let config = mock.config(dir.path());
    let sessions = dir.path().join("sessions");
    let task = fixtures().join("tasks/relu.py");
    // KFORGE_BENCH_DEVICE=N runs the session on that GPU; KFORGE_BIN names the binary
    // when the bench runs away from its build tree.
    let device: Vec<String> = match std::env::var("KFORGE_BENCH_DEVICE") {
        Ok(n) => vec!["--device".into(), n],
        Err(_) => vec!["--cpu".into()],
    };
    let bin =
        std::env::var("KFORGE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kforge").to_string());
    let started = Instant::now();
    let out = std::process::Command::new(bin)
        .args([
            "run",
            task.to_str().unwrap(),
            "--headless",
            "--seeds",
            "2",
            "--provider",
            "mock",
        ])
        .args(&device)
        .arg("--config")
        .arg(&config)
        .arg("--sessions-dir")
        .arg(&sessions)
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session_path = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let session = SessionDir::open(&session_path).unwrap();
    let records = session.read_events().unwrap().records;
    let mut llm = 0.0;
    let mut calls = 0;
    let mut evals = 0.0;
    let mut evaluations = 0;
    for r in &records {
        match &r.event {
            Event::LlmCallFinished { latency_s, .. } => {
                llm += latency_s;
                calls += 1;
            }
            Event::EvalFinished { result_file, .. } => {
                let result: EvalResult =
                    serde_json::from_str(&session.read_file(result_file).unwrap()).unwrap();
                evals += result.duration_s;
                evaluations += 1;
            }
            _ => {}
        }
    }
    let sum = llm + evals;
    println!(
        "engine_session: 2 seeds, mock LLM answering after 2 s, evaluator: {}",
        device.join(" ")
    );
    println!("  LLM calls        {calls:>3}   {llm:>7.2} s");
    println!("  evaluations      {evaluations:>3}   {evals:>7.2} s");
    println!("  sum of steps           {sum:>7.2} s");
    println!("  session wall time      {wall:>7.2} s   (includes start-up of the Python harness)");
    println!(
        "  ratio wall / sum       {:>7.2}   (target <= 0.60)",
        wall / sum
    );
    let state = kforge::session::state::SessionState::from_records(&records);
    println!("  candidates (id kind parent status score):");
    for c in state.candidates.values() {
        let score = c
            .score()
            .map(|s| format!("{s:.3}x"))
            .unwrap_or_else(|| "n/a".into());
        let parent = c.parent.map(|p| p.to_string()).unwrap_or_default();
        println!(
            "    {:>3} {:<10} {:>6} {:<8?} {score}",
            c.id,
            c.kind.word(),
            parent,
            c.status
        );
    }
    for s in &state.stages {
        println!(
            "  stage {:<20} accepted {:<5} {}",
            s.stage, s.accepted, s.reason
        );
    }
}
