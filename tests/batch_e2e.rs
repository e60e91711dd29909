//! `kforge batch` end to end on the CPU evaluator against a scripted mock LLM: ten small
//! tasks (three of which never get a correct kernel), killed with SIGKILL part way, resumed
//! with `kforge resume BATCH` without any answered call sent again, and the summary's
//! figures recomputed here from the sessions' raw events.

mod batch_common;
mod engine_common;
mod eval_common;
use batch_common::{read_json, task_statuses};
use eval_common::{kforge, kforge_output, text};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_common::*;
use serde_json::Value;

const TASKS: usize = 10;
/// Tasks whose kernels never pass (marked in the task file, so the prompt shows it).
const HARD: [usize; 3] = [2, 5, 8];
/// Every call is priced: 1000 input and 200 output tokens at $1 and $4 per million.
const CALL_COST: f64 = 1000.0 * 1.0 / 1e6 + 200.0 * 4.0 / 1e6;

/// Ten ReLU tasks of different sizes; the hard ones carry `BATCH-HARD`.
fn make_tasks(dir: &Path) -> PathBuf {
    let tasks = dir.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let relu = std::fs::read_to_string(fixtures().join("tasks/relu.py")).unwrap();
    for i in 0..TASKS {
        let marker = if HARD.contains(&i) {
            "# BATCH-HARD\n"
        } else {
            ""
        };
        let source = format!(
            "{marker}{}",
            relu.replace("dim = 1024", &format!("dim = {}", 256 * (i + 1)))
        );
        std::fs::write(tasks.join(format!("relu_{i:02}.py")), source).unwrap();
    }
    tasks
}

/// Easy tasks: a correct seed, then an analysis saying it is not worth optimizing.
/// Hard tasks: a kernel that fails to compile, and a repair that fails again.
fn script() -> Script {
    Arc::new(|step, user, _nth| {
        let hard = user.contains("BATCH-HARD");
        match step {
            Step::Seed if hard => fenced(&relu_broken()),
            Step::Repair => fenced(&relu_broken()),
            Step::Seed => fenced(&relu_ok("batch seed")),
            Step::Analysis => analysis_json("no"),
            other => panic!("the batch pipeline never asks for {other:?}"),
        }
    })
}

/// Calls an uninterrupted batch makes: seed + analysis for an easy task, seed + one repair
/// for a hard one.
fn expected_calls() -> usize {
    2 * TASKS
}

fn config(dir: &Path, mock: &MockLlm) -> PathBuf {
    let path = dir.join("kforge-test.toml");
    std::fs::write(
        &path,
        format!(
            "[llm]\ndefault = \"mock\"\nread_timeout_s = 30\n\n\
             [llm.providers.mock]\npreset = \"vllm\"\nbase_url = \"{}\"\nmodel = \"mock-1\"\nfree = false\n\n\
             [llm.prices.\"mock-1\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 4.0\n\n\
             [pipeline]\nseeds = 1\nseed_repairs = 1\nstages = []\nspeed_calls_on_cpu = true\n",
            mock.base_url
        ),
    )
    .unwrap();
    path
}

fn batch_args(tasks: &Path, batch: &Path, config: &Path) -> Vec<String> {
    [
        "batch",
        &tasks.display().to_string(),
        "--out",
        &batch.display().to_string(),
        "--config",
        &config.display().to_string(),
        "--cpu",
        "--jobs",
        "3",
        "--llm-calls",
        "2",
        "--timeout",
        "60",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Each session's events as raw JSON lines (not through kforge's own fold).
fn raw_events(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// (sessions finished, sessions started and not finished).
fn progress(batch: &Path) -> (usize, usize) {
    let Ok(dirs) = std::fs::read_dir(batch.join("tasks")) else {
        return (0, 0);
    };
    let mut finished = 0;
    let mut open = 0;
    for d in dirs.flatten() {
        let events = raw_events(&d.path());
        if events.iter().any(|e| e["type"] == "session_finished") {
            finished += 1;
        } else if events.iter().any(|e| e["type"] == "llm_call_finished") {
            open += 1;
        }
    }
    (finished, open)
}

fn finished_tasks(batch: &Path) -> usize {
    progress(batch).0
}

/// Calls the resume closed as interrupted (in flight at the kill).
fn in_flight_closed(batch: &Path) -> usize {
    std::fs::read_dir(batch.join("tasks"))
        .unwrap()
        .flatten()
        .flat_map(|d| raw_events(&d.path()))
        .filter(|e| {
            e["type"] == "llm_call_finished"
                && e["error"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("interrupted"))
        })
        .count()
}

/// Calls recorded in every session: (started, answered).
fn recorded_calls(batch: &Path) -> (usize, usize) {
    let mut started = 0;
    let mut answered = 0;
    for d in std::fs::read_dir(batch.join("tasks")).unwrap().flatten() {
        for e in raw_events(&d.path()) {
            match e["type"].as_str() {
                Some("llm_call_started") => started += 1,
                Some("llm_call_finished") if e["ok"] == true => answered += 1,
                _ => {}
            }
        }
    }
    (started, answered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_survives_kill_9_and_its_summary_adds_up() {
    let mock = MockLlm::start(script(), Duration::from_millis(200)).await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = make_tasks(dir.path());
    let batch = dir.path().join("batch");
    let config = config(dir.path(), &mock);

    // Run until two tasks have finished and another is half way (a call answered, the
    // session not finished), then SIGKILL the whole process.
    let args = batch_args(&tasks, &batch, &config);
    let (killed_finished, killed_calls) = {
        let batch = batch.clone();
        tokio::task::spawn_blocking(move || {
            let mut child = kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let start = Instant::now();
            while !matches!(progress(&batch), (f, o) if f >= 2 && o >= 1) {
                assert!(
                    start.elapsed() < Duration::from_secs(600),
                    "no point to kill at in 10 minutes"
                );
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("the batch ended before the kill: {status}");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            child.kill().unwrap();
            child.wait().unwrap();
            (finished_tasks(&batch), recorded_calls(&batch))
        })
        .await
        .unwrap()
    };
    assert!(
        killed_finished < TASKS,
        "the kill came after the end ({killed_finished} finished)"
    );
    let manifest: Value = read_json(&batch.join("batch.json"));
    assert_eq!(manifest["tasks"].as_array().unwrap().len(), TASKS);

    // `kforge batch status` reads a killed batch.
    let status = kforge(&["batch", "status", &batch.display().to_string()])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(
        text(&status.stdout).contains(&format!("{TASKS} task(s): {killed_finished} finished")),
        "{}",
        text(&status.stdout)
    );
    // Issue 39, item 3: the batch's elapsed time and, apart, its task-time, written as
    // every duration is (the batch view's header says the same).
    let last = text(&status.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        last.starts_with("elapsed ") && last.contains(", task-time "),
        "{}",
        text(&status.stdout)
    );

    // Resume through the generic `kforge resume`.
    let out = kforge_output(vec![
        "resume".into(),
        batch.display().to_string(),
        "--config".into(),
        config.display().to_string(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "resume: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let log = text(&out.stderr);
    assert!(
        log.contains("resuming ("),
        "no interrupted session was resumed:\n{log}"
    );
    assert_eq!(finished_tasks(&batch), TASKS);

    // No answered call was sent again: the mock saw a full batch's calls plus at most
    // those in flight (started, unanswered) at the kill.
    let (started_at_kill, answered_at_kill) = killed_calls;
    let in_flight = started_at_kill - answered_at_kill;
    let total = mock.total();
    assert!(
        total >= expected_calls() && total <= expected_calls() + in_flight,
        "{total} requests; a full batch makes {}, {in_flight} were in flight at the kill",
        expected_calls()
    );
    let (started, answered) = recorded_calls(&batch);
    assert_eq!(answered, expected_calls(), "{started} started");

    // The summary, recomputed from the raw events.
    let summary: Value = read_json(&batch.join("summary.json"));
    let rows = summary["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), TASKS);
    let mut mine: BTreeMap<String, (bool, u64, f64)> = BTreeMap::new();
    for row in rows {
        let key = row["key"].as_str().unwrap().to_string();
        let events = raw_events(&batch.join("tasks").join(&key));
        let correct = events
            .iter()
            .any(|e| e["type"] == "eval_finished" && e["correct"] == true);
        let answered: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "llm_call_finished")
            .collect();
        let tokens: u64 = answered
            .iter()
            .map(|e| e["usage"]["input"].as_u64().unwrap() + e["usage"]["output"].as_u64().unwrap())
            .sum();
        // A call cut off by the kill has no known cost; every answered one is priced.
        let cost: f64 = answered.iter().filter_map(|e| e["cost_usd"].as_f64()).sum();
        let unpriced = answered.iter().filter(|e| e["cost_usd"].is_null()).count();
        assert!(
            answered
                .iter()
                .all(|e| e["ok"] == false || e["cost_usd"].is_f64()),
            "{key}"
        );
        assert_eq!(
            row["unpriced_calls"].as_u64().unwrap() as usize,
            unpriced,
            "{key}"
        );
        assert_eq!(row["correct"], correct, "{key}");
        assert_eq!(
            row["input_tokens"].as_u64().unwrap() + row["output_tokens"].as_u64().unwrap(),
            tokens,
            "{key}"
        );
        assert!(
            (row["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9,
            "{key}"
        );
        let hard = key.ends_with("02") || key.ends_with("05") || key.ends_with("08");
        assert_eq!(correct, !hard, "{key}");
        assert_eq!(
            row["status"],
            if hard {
                "no_correct_kernel"
            } else {
                "complete"
            },
            "{key}"
        );
        mine.insert(key, (correct, tokens, cost));
    }
    let group = &summary["groups"].as_array().unwrap()[0];
    assert_eq!(group["group"], "other");
    let correct = mine.values().filter(|m| m.0).count();
    assert_eq!(group["correct"].as_u64().unwrap() as usize, correct);
    assert_eq!(correct, TASKS - HARD.len());
    assert!(
        (group["correctness_rate"].as_f64().unwrap() - correct as f64 / TASKS as f64).abs() < 1e-12
    );
    assert_eq!(
        group["tokens"].as_u64().unwrap(),
        mine.values().map(|m| m.1).sum::<u64>()
    );
    let cost: f64 = mine.values().map(|m| m.2).sum();
    assert!((group["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9);
    assert!((cost - expected_calls() as f64 * CALL_COST).abs() < 1e-9);
    let unpriced: u64 = rows
        .iter()
        .map(|r| r["unpriced_calls"].as_u64().unwrap())
        .sum();
    assert_eq!(group["unpriced_calls"].as_u64().unwrap(), unpriced);
    assert_eq!(unpriced as usize, in_flight_closed(&batch));
    assert!((group["cost_per_task"].as_f64().unwrap() - cost / TASKS as f64).abs() < 1e-12);
    // The CPU times nothing: no fast_p, no mean speedup.
    assert!(group["fast_p"].is_null());
    assert!(group["geomean_speedup"].is_null());

    // The files people and scripts read.
    let md = std::fs::read_to_string(batch.join("summary.md")).unwrap();
    assert!(
        md.contains(&format!(
            "| other | {TASKS} | {TASKS} | {correct} (70.0%) | n/a |"
        )),
        "{md}"
    );
    let svg = std::fs::read_to_string(batch.join("speedups.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(md.contains("![speedup distribution](speedups.svg)"));
    let csv = std::fs::read_to_string(batch.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), TASKS + 1);
    // Each run of the batch is recorded; the killed one never ended.
    let manifest: Value = read_json(&batch.join("batch.json"));
    let runs = manifest["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[0]["end"].is_null());
    assert_eq!(runs[1]["end"], "done");
    assert_eq!(runs[1]["how"], "resume");
}

/// A KernelBench-shaped checkout: `--level` and `--tasks` select, the batch's token budget
/// stops it cleanly, a resume with a larger budget finishes it, and the best kernels are
/// exported in KernelBench's run layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernelbench_selection_stops_at_the_batch_budget_and_exports_its_kernels() {
    let mock = MockLlm::start(script(), Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let level1 = dir.path().join("kb/KernelBench/level1");
    std::fs::create_dir_all(&level1).unwrap();
    std::fs::create_dir_all(dir.path().join("kb/KernelBench/level2")).unwrap();
    let relu = std::fs::read_to_string(fixtures().join("tasks/relu.py")).unwrap();
    for (name, hard) in [
        ("1_ReLU.py", false),
        ("2_ReLU_wide.py", false),
        ("3_Hard.py", true),
        ("4_Unselected.py", false),
    ] {
        let marker = if hard { "# BATCH-HARD\n" } else { "" };
        std::fs::write(level1.join(name), format!("{marker}{relu}")).unwrap();
    }
    let batch = dir.path().join("kb-batch");
    let config = config(dir.path(), &mock);
    let kb = dir.path().join("kb").display().to_string();
    let common = [
        "--config",
        &config.display().to_string(),
        "--cpu",
        "--timeout",
        "60",
    ]
    .map(String::from);

    // Without --level a checkout is refused, and says which levels it has.
    let out = kforge(&["batch", &kb, "--out", &batch.display().to_string()])
        .args(&common)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("choose levels with --level (present: 1,2)"),
        "{}",
        text(&out.stderr)
    );

    // One task at a time, one call at a time: the first task's two calls spend the budget.
    let mut args: Vec<String> = [
        "batch",
        &kb,
        "--level",
        "1",
        "--tasks",
        "1-3",
        "--out",
        &batch.display().to_string(),
        "--jobs",
        "1",
        "--llm-calls",
        "1",
        "--batch-max-tokens",
        "2400",
    ]
    .map(String::from)
    .to_vec();
    args.extend(common.iter().cloned());
    let out = kforge_output(args).await;
    let log = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("the batch token budget (2400) is spent: 2400 tokens"),
        "{log}"
    );
    assert!(log.contains("budget reached"), "{log}");
    assert_eq!(mock.total(), 2, "no call after the budget: {log}");
    let summary: Value = read_json(&batch.join("summary.json"));
    let statuses = task_statuses(&batch);
    // The first task's session either reached its end or was stopped with the batch
    // (resumable) as its last answer spent the budget; the others never began.
    assert!(
        matches!(statuses[0].as_str(), "complete" | "stopped"),
        "{statuses:?}"
    );
    assert_eq!(statuses[1..], ["waiting", "waiting"]);
    let keys: Vec<&str> = summary["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["L1_001_ReLU", "L1_002_ReLU_wide", "L1_003_Hard"]);

    // A larger budget: the rest runs; the first task finishes from its saved answers.
    let mut args: Vec<String> = [
        "batch",
        "resume",
        &batch.display().to_string(),
        "--batch-max-tokens",
        "100000",
        "--config",
        &config.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    args.truncate(7);
    let out = kforge_output(args).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(mock.total(), 6);

    // KernelBench's run layout: one kernel file per task, eval_results.json keyed by problem.
    let export = batch.join("kernelbench/level_1");
    let results: Value = read_json(&export.join("eval_results.json"));
    let problems: Vec<&String> = results.as_object().unwrap().keys().collect();
    assert_eq!(problems, ["1", "2", "3"]);
    for (problem, correct) in [("1", true), ("2", true), ("3", false)] {
        let entry = &results[problem][0];
        assert_eq!(entry["sample_id"], 0);
        assert_eq!(entry["correctness"], correct, "{problem}: {entry}");
        // A kernel that failed to compile is not `compiled`; the CPU times nothing.
        assert_eq!(entry["compiled"], correct, "{problem}: {entry}");
        assert_eq!(entry["runtime"], -1.0);
        let kernel = std::fs::read_to_string(
            export.join(format!("level_1_problem_{problem}_sample_0_kernel.py")),
        )
        .unwrap();
        assert!(kernel.contains("class ModelNew"), "{problem}");
    }
    let best = std::fs::read_to_string(batch.join("tasks/L1_001_ReLU/best_kernel.py")).unwrap();
    assert_eq!(
        std::fs::read_to_string(export.join("level_1_problem_1_sample_0_kernel.py")).unwrap(),
        best
    );
}

/// Ctrl-C stops every running session cleanly (each stays resumable), starts no further
/// task, records the run as interrupted and exits 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_every_session_cleanly() {
    let mock = MockLlm::start(script(), Duration::from_millis(400)).await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = make_tasks(dir.path());
    let batch = dir.path().join("batch");
    let config = config(dir.path(), &mock);
    let args = batch_args(&tasks, &batch, &config);
    let code = {
        let batch = batch.clone();
        tokio::task::spawn_blocking(move || {
            let mut child = kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let start = Instant::now();
            while progress(&batch).1 < 1 {
                assert!(
                    start.elapsed() < Duration::from_secs(300),
                    "no session got going"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            let status = std::process::Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
            child.wait().unwrap().code()
        })
        .await
        .unwrap()
    };
    assert_eq!(code, Some(130));
    let manifest: Value = read_json(&batch.join("batch.json"));
    assert_eq!(manifest["runs"][0]["end"], "interrupted");
    let statuses = task_statuses(&batch);
    // Every started session ended cleanly (none left `interrupted`, none still running),
    // and some tasks never started.
    assert!(
        statuses.iter().all(|s| matches!(
            s.as_str(),
            "stopped" | "complete" | "no_correct_kernel" | "waiting"
        )),
        "{statuses:?}"
    );
    assert!(statuses.iter().any(|s| s == "stopped"), "{statuses:?}");
    assert!(statuses.iter().any(|s| s == "waiting"), "{statuses:?}");
}

/// A provider that cannot be used makes no batch and no call; a task the task check refuses
/// gets no session, its row says why, and the other tasks run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_provider_makes_nothing_and_a_refused_task_is_said_and_skipped() {
    let mock = MockLlm::start(script(), Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    for name in ["relu.py", "bad_no_model.py"] {
        std::fs::copy(fixtures().join("tasks").join(name), tasks.join(name)).unwrap();
    }
    let batch = dir.path().join("batch");
    let config = config(dir.path(), &mock);
    let t = tasks.display().to_string();
    let (b, c) = (batch.display().to_string(), config.display().to_string());

    let out = kforge(&[
        "batch",
        &t,
        "--out",
        &b,
        "--config",
        &c,
        "--cpu",
        "--provider",
        "nosuch",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no batch was made"),
        "{}",
        text(&out.stderr)
    );
    assert!(!batch.exists());

    let out = kforge_output(
        [
            "batch",
            &t,
            "--out",
            &b,
            "--config",
            &c,
            "--cpu",
            "--timeout",
            "60",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    let log = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("[bad_no_model] refused by the task check"),
        "{log}"
    );
    assert_eq!(task_statuses(&batch), ["refused", "complete"]);
    let refused = read_json(&batch.join("summary.json"))["tasks"][0]["refused"].clone();
    assert!(refused.as_str().is_some_and(|r| !r.is_empty()), "{refused}");
    assert!(batch.join("tasks/bad_no_model/refused.json").is_file());
    assert!(!batch.join("tasks/bad_no_model/events.jsonl").exists());
    // Only the good task's two calls.
    assert_eq!(mock.total(), 2);
}

/// A task in review mode waits at its gates: the batch console says so when it starts
/// waiting (how many gates, of which kind) and when it stops, here once each gate is
/// approved through the session's control.jsonl as `kforge open` would (issue 23, item 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_says_when_a_task_waits_for_you_and_when_it_stops() {
    use std::io::Write;
    let mock = MockLlm::start(script(), Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::copy(fixtures().join("tasks/relu.py"), tasks.join("relu.py")).unwrap();
    let batch = dir.path().join("batch");
    let config = config(dir.path(), &mock);
    let mut args = batch_args(&tasks, &batch, &config);
    args.extend(["--mode".to_string(), "review".to_string()]);
    let session = batch.join("tasks/relu");
    let out = tokio::task::spawn_blocking(move || {
        let child = kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Some(child);
        let mut answered = std::collections::HashSet::new();
        let start = Instant::now();
        loop {
            if let Some(status) = child.as_mut().unwrap().try_wait().unwrap() {
                assert!(status.success(), "{status}");
                break child.take().unwrap().wait_with_output().unwrap();
            }
            if start.elapsed() > Duration::from_secs(240) {
                let mut c = child.take().unwrap();
                c.kill().unwrap();
                let out = c.wait_with_output().unwrap();
                let types: Vec<String> = raw_events(&session)
                    .iter()
                    .map(|e| format!("{} {}", e["type"], e["gate"]))
                    .collect();
                panic!(
                    "no end in 4 minutes: {}\n{types:?}\ncontrol: {:?}",
                    text(&out.stderr),
                    std::fs::read_to_string(session.join("control.jsonl"))
                );
            }
            for e in raw_events(&session) {
                let gate = &e["gate"];
                if e["type"] == "gate_opened" && answered.insert(gate.to_string()) {
                    let approve = kforge::protocol::Command::Resolve {
                        gate: kforge::protocol::GateId(gate.as_u64().unwrap() as u32),
                        decision: kforge::protocol::Decision::Approve,
                    };
                    let line = format!("{}\n", serde_json::to_string(&approve).unwrap());
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(session.join("control.jsonl"))
                        .unwrap()
                        .write_all(line.as_bytes())
                        .unwrap();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
    let log = text(&out.stderr);
    assert!(
        log.contains("kforge: [relu] waiting for you: 1 gate (1 before "),
        "{log}"
    );
    assert!(
        log.contains("kforge: [relu] no longer waiting for you: its gates are answered"),
        "{log}"
    );
    // Said before the task's last line.
    let last_wait = log.rfind("no longer waiting for you").unwrap();
    assert!(log[last_wait..].contains("[relu] complete"), "{log}");
}
