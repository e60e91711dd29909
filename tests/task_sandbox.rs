//! Issue 34, item 1: a task file is as hostile as a kernel. `tests/fixtures/tasks/
//! hostile_task.py` reads every `/proc/*/environ` it can (its parent's first) for the secrets
//! planted in kforge's environment, an API key and a `KFORGE_*` variable, prints what it finds
//! and writes a marker file into the host's `$HOME`, working directory, `/tmp` and the dir the
//! run writes its results into, from its module body, `Model()` and `get_init_inputs()`. Under
//! `kforge eval`, `kforge batch DIR --cpu` and the MCP `task_check` and `eval` tools (the task
//! given as `task_source`) the task must run (its probe's line is in the log where one is
//! kept) and achieve nothing: no secret in any output, result or file of the run, no marker
//! on the host, and the result says the task was sandboxed.

mod engine_common;
mod eval_common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use engine_common::{MockLlm, Script, Step, analysis_json, fenced, relu_ok};
use eval_common::{fixtures, kforge, text};
use serde_json::{Value, json};

/// The planted variables' names (the task looks for these and for *KEY*, *TOKEN*, KFORGE_*).
const KEY_NAME: &str = "OPENAI_API_KEY";
const KFORGE_NAME: &str = "KFORGE_PLANTED_SECRET";

/// One hostile run's host: where the markers may land, the secrets' values (unique to the
/// run, so that a leak from another test cannot be mistaken for this one's) and the task.
struct Host {
    dir: tempfile::TempDir,
    key: String,
    kforge_value: String,
    marker: String,
}

impl Host {
    fn new(what: &str) -> Host {
        let nonce = format!(
            "{}{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let dir = tempfile::tempdir().unwrap();
        for sub in ["home", "cwd", "out"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Host {
            dir,
            key: format!("sk-test-secret-{what}-{nonce}"),
            kforge_value: format!("kforge-planted-{what}-{nonce}"),
            marker: format!("kforge-hostile-task-{what}-{nonce}"),
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn cwd(&self) -> PathBuf {
        self.dir.path().join("cwd")
    }

    /// Where the run writes its results (the batch, the saved evaluation).
    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Every directory the task tries to write its marker into.
    fn targets(&self) -> Vec<PathBuf> {
        vec![self.home(), self.cwd(), self.out(), PathBuf::from("/tmp")]
    }

    /// The task's source, placeholders filled.
    fn task_source(&self) -> String {
        let targets: Vec<String> = self
            .targets()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        std::fs::read_to_string(fixtures().join("tasks/hostile_task.py"))
            .unwrap()
            .replace("@NAMES@", &format!("{KEY_NAME},{KFORGE_NAME}"))
            .replace("@TARGETS@", &targets.join(","))
            .replace("@MARKER@", &self.marker)
    }

    /// The task written into `dir` as `hostile_task.py`.
    fn task_in(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("hostile_task.py");
        std::fs::write(&path, self.task_source()).unwrap();
        path
    }

    /// A kforge command as a person with keys in their environment runs it, here.
    fn kforge(&self, args: &[&str]) -> Command {
        let mut c = kforge(args);
        c.current_dir(self.cwd())
            .env("HOME", self.home())
            .env(KEY_NAME, &self.key)
            .env(KFORGE_NAME, &self.kforge_value);
        c
    }

    /// No secret in `what`.
    fn no_secret_in(&self, what: &str, text: &str) {
        for secret in [&self.key, &self.kforge_value] {
            assert!(
                !text.contains(secret.as_str()),
                "the secret {secret} leaked into {what}:\n{}",
                excerpt(text, secret)
            );
        }
    }

    /// No marker where the task tried to write one, no secret in any file of `roots`.
    fn nothing_left(&self, roots: &[PathBuf]) {
        for target in self.targets() {
            let marker = target.join(&self.marker);
            assert!(
                !marker.exists(),
                "the task wrote {} on the host: {}",
                marker.display(),
                std::fs::read_to_string(&marker).unwrap_or_default()
            );
        }
        for root in roots {
            for file in files_under(root) {
                let Ok(bytes) = std::fs::read(&file) else {
                    continue;
                };
                self.no_secret_in(
                    &file.display().to_string(),
                    &String::from_utf8_lossy(&bytes),
                );
                assert_ne!(
                    file.file_name().map(|n| n.to_string_lossy().into_owned()),
                    Some(self.marker.clone()),
                    "the task wrote {}",
                    file.display()
                );
            }
        }
    }
}

fn excerpt(text: &str, needle: &str) -> String {
    let at = text.find(needle).unwrap_or(0);
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(200)
        .map_or(0, |(i, _)| i);
    text[start..].chars().take(400).collect()
}

fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => found.push(path),
                _ => {}
            }
        }
    }
    found
}

/// The task ran: its probe's line is in `log`.
fn probe_ran(log: &str) {
    assert!(
        log.contains("TASK-PROBE ran during the module body"),
        "the hostile task's probe did not run:\n{log}"
    );
}

/// The result says the task's code ran in a sandbox.
fn task_sandboxed(result: &Value) {
    assert_eq!(
        result["sandbox"]["task"]["enforced"], true,
        "the result does not say the task was sandboxed: {}",
        result["sandbox"]
    );
}

#[test]
fn a_hostile_task_under_kforge_eval_reads_no_secret_and_writes_nothing() {
    let host = Host::new("eval");
    let task = host.task_in(&host.dir.path().join("task"));
    let kernel = fixtures().join("kernels/relu_ok.py");
    let out = host
        .kforge(&[
            "eval",
            task.to_str().unwrap(),
            kernel.to_str().unwrap(),
            "--cpu",
            "--json",
        ])
        .env("KFORGE_CACHE_DIR", host.out())
        .env("KFORGE_PYTHON", eval_common::interpreter())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    host.no_secret_in("kforge eval's output", &format!("{stdout}\n{stderr}"));
    let result: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not a JSON result ({e}): {stdout}\n{stderr}"));
    probe_ran(result["log"].as_str().unwrap_or_default());
    assert_eq!(result["correct"], true, "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    task_sandboxed(&result);
    host.nothing_left(&[host.out(), host.home(), host.cwd()]);
}

/// A batch of the hostile task: its task check, its seed's evaluation (a correct kernel from
/// the mock LLM) and its analysis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_task_under_kforge_batch_reads_no_secret_and_writes_nothing() {
    let script: Script = std::sync::Arc::new(|step, _user, _nth| match step {
        Step::Seed => fenced(&relu_ok("hostile batch seed")),
        Step::Analysis => analysis_json("no"),
        other => panic!("the batch never asks for {other:?}"),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let host = Host::new("batch");
    let tasks = host.dir.path().join("tasks");
    host.task_in(&tasks);
    let config = mock.config(host.dir.path());
    // The mock's config has a [pipeline] section already: the batch's settings go into it.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config).unwrap().replace(
            "[pipeline]\n",
            "[pipeline]\nseeds = 1\nseed_repairs = 0\nstages = []\n",
        ),
    )
    .unwrap();
    let batch = host.out().join("batch");
    let args = [
        "batch",
        tasks.to_str().unwrap(),
        "--out",
        batch.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--cpu",
        "--llm-calls",
        "2",
        "--timeout",
        "120",
    ];
    let mut command = host.kforge(&args);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    host.no_secret_in("kforge batch's output", &format!("{stdout}\n{stderr}"));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let session = batch.join("tasks/hostile_task");
    let evals: Vec<Value> = files_under(&session.join("eval"))
        .iter()
        .filter_map(|f| serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok())
        .collect();
    assert!(
        !evals.is_empty(),
        "no evaluation in {}: {:?}\n{stderr}",
        session.display(),
        files_under(&batch)
    );
    host.nothing_left(&[host.out(), host.home(), host.cwd()]);
    for result in &evals {
        probe_ran(result["log"].as_str().unwrap_or_default());
        task_sandboxed(result);
    }
    assert!(
        evals.iter().any(|r| r["correct"] == true),
        "the seed is correct"
    );
}

/// `kforge mcp` as an agent drives it: the task's text as `task_source`, to `task_check` and
/// to `eval`.
#[test]
fn a_hostile_task_through_mcp_reads_no_secret_and_writes_nothing() {
    let host = Host::new("mcp");
    let mut command = host.kforge(&["mcp"]);
    command
        .env("KFORGE_CACHE_DIR", host.out())
        .env("KFORGE_PYTHON", eval_common::interpreter())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut call = |id: u64, message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "kforge mcp ended");
            seen.push_str(&line);
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    };
    call(
        1,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "task-sandbox-test", "version": "1"}}}),
    );
    let source = host.task_source();
    let check = call(
        2,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "task_check",
            "arguments": {"task_source": source, "device": "cpu"}}}),
    );
    assert_eq!(
        check["result"]["structuredContent"]["status"], "ready",
        "{check}"
    );
    let eval = call(
        3,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "eval",
            "arguments": {"task_source": source, "kernel": fixtures().join("kernels/relu_ok.py"),
                          "device": "cpu"}}}),
    );
    drop(stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let _ = child.wait();
    host.no_secret_in("kforge mcp's replies", &seen);
    host.no_secret_in("kforge mcp's stderr", &stderr);
    host.nothing_left(&[host.out(), host.home(), host.cwd()]);
    let result = &eval["result"]["structuredContent"];
    probe_ran(result["log"].as_str().unwrap_or_default());
    assert_eq!(result["correct"], true, "{eval}");
    task_sandboxed(result);
}
