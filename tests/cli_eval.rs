//! `kforge eval` and `kforge doctor` as a user runs them: exit codes, verdict text,
//! `--json`, clear errors for bad task files, and no secrets in the evaluation process.

mod eval_common;

use std::process::{Command, Output};

use eval_common::{eval_fixture, fixtures, isolate, text};

fn kforge(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kforge"));
    c.args(args);
    isolate(&mut c);
    c
}

fn eval(task: &str, kernel: &str, extra: &[&str]) -> Output {
    eval_fixture(task, kernel, extra)
}

#[test]
fn correct_kernel_prints_verdict_and_exits_zero() {
    let out = eval("relu.py", "relu_ok.py", &[]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    // On the CPU nothing is timed, so there is no re-check after timing.
    assert!(
        stdout.contains("CORRECT  5/5 trials, signed-input trial\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nsandbox "),
        "the verdict says which sandbox: {stdout}"
    );
    assert!(stdout.contains("audit (6 forwards): "), "{stdout}");
    assert!(stdout.contains("not meaningful on the CPU"), "{stdout}");
    assert!(stdout.contains("full result and log: "), "{stdout}");
}

#[test]
fn failing_kernel_exits_one_with_category() {
    let out = eval("relu.py", "relu_identity.py", &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAILED  mismatch: signed-input trial"),
        "{stdout}"
    );
}

#[test]
fn json_output_is_the_full_result() {
    let out = eval(
        "tuple_out.py",
        "tuple_out_ok.py",
        &["--json", "--trials", "2"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(v["correct"], true);
    assert_eq!(v["status"], "correct");
    assert_eq!(v["device"]["kind"], "cpu");
    let trials = v["trials"].as_array().unwrap();
    assert_eq!(trials.iter().filter(|t| t["kind"] == "random").count(), 2);
    assert_eq!(
        trials[0]["outputs"].as_array().unwrap().len(),
        2,
        "both tuple outputs are compared"
    );
    assert!(v["timing"].is_null());
    // The server's own time around the judge, for the overhead figures of
    // docs/benchmarks.md: each part present, and together within the evaluation's duration.
    let server = &v["server_phases_s"];
    let part = |name: &str| {
        server[name]
            .as_f64()
            .unwrap_or_else(|| panic!("server_phases_s.{name} missing: {server}"))
    };
    let (start, judge, teardown) = (part("worker_start"), part("judge"), part("teardown"));
    assert!(start >= 0.0 && judge > 0.0 && teardown >= 0.0, "{server}");
    assert!(
        start + judge + teardown <= v["duration_s"].as_f64().unwrap(),
        "{server} vs duration_s {}",
        v["duration_s"]
    );
}

#[test]
fn task_without_model_is_rejected_before_anything_runs() {
    let out = eval("bad_no_model.py", "relu_ok.py", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("is not a KernelBench task") && stderr.contains("class Model"),
        "{stderr}"
    );
}

#[test]
fn task_that_raises_at_import_is_a_task_error() {
    let out = eval("bad_import_error.py", "relu_ok.py", &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("TASK ERROR  task: importing the task file raised"),
        "{stdout}"
    );
}

#[test]
fn a_task_that_does_not_fit_is_a_task_error_not_the_kernels() {
    for (task, says) in [
        (
            "huge_inputs.py",
            "TASK ERROR  oom: the task does not fit: the evaluation needs about",
        ),
        (
            "huge_scratch.py",
            "TASK ERROR  oom: the task (during reference forward, before any kernel ran) ran out of memory",
        ),
    ] {
        let out = eval(task, "relu_ok.py", &[]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{task}: {stdout}");
        assert!(stdout.contains(says), "{task}: {stdout}");
    }
}

#[test]
fn missing_kernel_file_is_a_clear_error() {
    let f = fixtures();
    let out = kforge(&[
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        "/nonexistent/kernel.py",
        "--cpu",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // With the reason, as the task file's message has one.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "cannot read the kernel file /nonexistent/kernel.py: No such file or directory"
        ),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = kforge(&[
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        dir.path().to_str().unwrap(),
        "--cpu",
    ])
    .output()
    .unwrap();
    assert!(
        text(&out.stderr).contains("it is a directory"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_log_file_says_what_a_person_debugging_needs_and_no_secret() {
    let cache = tempfile::tempdir().unwrap();
    let f = fixtures();
    let out = kforge(&[
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        f.join("kernels/relu_ok.py").to_str().unwrap(),
        "--cpu",
    ])
    .env("KFORGE_CACHE_DIR", cache.path())
    .env("DEEPSEEK_API_KEY", "sk-kforge-test-secret-value")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = std::fs::read_to_string(cache.path().join("logs/kforge.log")).unwrap();
    for needle in [
        "kforge started",
        "command=eval",
        "configuration read",
        "evaluator server started",
        "evaluation requested",
        "evaluation finished",
        "correct=true",
        "kforge finished",
    ] {
        assert!(
            log.contains(needle),
            "{needle} missing from the log:\n{log}"
        );
    }
    assert!(!log.contains("sk-kforge-test-secret-value"), "{log}");
}

#[test]
fn a_failing_kernel_shows_its_own_frames_not_the_harness_traceback() {
    let out = eval("relu.py", "relu_compile.py", &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILED  compile: "), "{stdout}");
    assert!(
        stdout.contains("harness and interpreter frames left out):\n    File \"kernel.py\", line "),
        "{stdout}"
    );
    assert!(stdout.contains("tanhh"), "{stdout}");
    assert!(stdout.contains("full result and log: "), "{stdout}");
    // The frames of the harness, torch and triton stay in the saved result.
    assert!(!stdout.contains("site-packages"), "{stdout}");
    assert!(!stdout.contains("kforge_harness/"), "{stdout}");
    assert!(stdout.lines().count() <= 16, "{stdout}");
}

#[test]
fn json_of_a_cpu_evaluation_has_its_log_and_no_phase_that_did_not_run() {
    let out = eval("relu.py", "relu_ok.py", &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let log = v["log"].as_str().unwrap();
    assert!(log.contains("correctness trial 1/5"), "{log}");
    assert!(log.contains("(nothing printed)"), "{log}");
    assert_eq!(v["phase"], "finished");
    assert!(v["timing"].is_null());
    // The CPU times nothing: no torch.compile figure to measure after the verdict.
    assert!(v.get("compile_after_verdict").is_none(), "{v}");
    let phases = v["phases_s"].as_object().unwrap();
    assert!(phases.contains_key("correctness"), "{phases:?}");
    for absent in ["timing", "recheck"] {
        assert!(
            !phases.contains_key(absent),
            "{absent} did not run: {phases:?}"
        );
    }
}

#[test]
fn evaluation_process_gets_no_secrets() {
    let f = fixtures();
    let out = kforge(&[
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        f.join("kernels/relu_print_env.py").to_str().unwrap(),
        "--cpu",
        "--json",
        "--trials",
        "1",
    ])
    .env("KFORGE_TEST_API_KEY", "sk-test-do-not-leak")
    .env("ANTHROPIC_API_KEY", "sk-ant-do-not-leak")
    .env("KFORGE_TEST_VISIBLE", "kforge-variable-marker")
    .env("LLM_ACCESS", "neutral-name-do-not-leak")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let log = v["log"].as_str().unwrap();
    assert!(
        log.contains("TRITON_INTERPRET=1"),
        "the kernel's prints are in the log, with the allow-listed environment:\n{log}"
    );
    // The environment is built from an allow-list, not filtered by name: a kforge variable
    // and a secret under a neutral name stay out as surely as *_API_KEY.
    for secret in [
        "sk-test-do-not-leak",
        "sk-ant-do-not-leak",
        "KFORGE_TEST_API_KEY",
        "ANTHROPIC_API_KEY",
        "kforge-variable-marker",
        "neutral-name-do-not-leak",
    ] {
        assert!(
            !log.contains(secret),
            "{secret} reached the evaluation process"
        );
    }
}

#[test]
fn doctor_reports_python_versions_and_no_gpu() {
    // A config from before the judge timed both sides: it loads, and doctor names the
    // keys that no longer do anything.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("old.toml");
    std::fs::write(
        &config,
        "[eval]\nhost_time_ratio = 1.1\nhost_slack_ms = 0.05\n",
    )
    .unwrap();
    let mut doctor = kforge(&["--config", config.to_str().unwrap(), "doctor", "--no-ncu"]);
    // No provider chosen through this machine's environment: doctor must say none is set.
    for var in [
        "KFORGE_PROVIDER",
        "KFORGE_MODEL",
        "KFORGE_BASE_URL",
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
    ] {
        doctor.env_remove(var);
    }
    let out = doctor.output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("[eval] host_time_ratio, host_slack_ms are obsolete and ignored"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("configuration:"),
        "the config loads: {stdout}"
    );
    assert!(
        stdout.contains("python ") && stdout.contains("torch ") && stdout.contains("triton "),
        "{stdout}"
    );
    assert!(stdout.contains("cache"), "{stdout}");
    assert!(
        stdout.contains("LLM: no LLM provider configured") && stdout.contains("--provider manual"),
        "no LLM is a problem doctor names: {stdout}"
    );
    // This suite runs without a GPU (CI); on a GPU box the line lists devices instead.
    assert!(
        stdout.contains("no CUDA device") || stdout.contains("cuda:0"),
        "{stdout}"
    );
}

#[test]
fn no_python_at_all_is_a_clear_error() {
    let f = fixtures();
    let empty_path = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args([
            "eval",
            f.join("tasks/relu.py").to_str().unwrap(),
            f.join("kernels/relu_ok.py").to_str().unwrap(),
        ])
        .env("PATH", empty_path.path())
        .env("KFORGE_CACHE_DIR", cache.path())
        .env_remove("KFORGE_PYTHON")
        .env("KFORGE_CONFIG_DIR", cache.path())
        .current_dir(cache.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no Python 3 interpreter found on PATH"),
        "{stderr}"
    );
    assert!(
        stderr.contains("KFORGE_PYTHON"),
        "the error names the way out: {stderr}"
    );
}

#[test]
fn kforge_python_pointing_nowhere_is_a_clear_error() {
    let f = fixtures();
    let out = kforge(&[
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        f.join("kernels/relu_ok.py").to_str().unwrap(),
    ])
    .env("KFORGE_PYTHON", "/nonexistent/python3")
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("KFORGE_PYTHON=/nonexistent/python3 is not an executable file"),
        "{stderr}"
    );
}

/// The README's "check one kernel by hand" on a machine without a GPU (issue 38): the
/// 4096x5120 ReLU took 50-80 s a trial in Triton's interpreter; it now runs at the
/// interpreter's sizes, and both the verdict and the result say so.
#[test]
fn the_readmes_by_hand_example_runs_at_the_interpreters_sizes_and_says_so() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let task = root.join("examples/tasks/relu.py");
    let kernel = root.join("examples/kernels/relu_triton.py");
    let out = kforge(&[
        "eval",
        task.to_str().unwrap(),
        kernel.to_str().unwrap(),
        "--cpu",
    ])
    .output()
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("CORRECT  5/5 trials"), "{stdout}");
    assert!(
        stdout.contains(
            "note: sizes shrunk for Triton's interpreter on the CPU: batch_size 4096 -> 256, dim 5120 -> 512 (correctness at these sizes, not the task's; `kforge eval --task-sizes`"
        ),
        "{stdout}"
    );
    let saved = stdout
        .lines()
        .find_map(|l| l.strip_prefix("full result and log: "))
        .expect("the verdict names the saved result");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(saved.trim()).unwrap()).unwrap();
    let sizes = &result["interpreter_sizes"];
    assert_eq!(sizes["task"]["batch_size"], 4096, "{sizes}");
    assert_eq!(sizes["task"]["dim"], 5120, "{sizes}");
    let evaluated = (
        sizes["evaluated"]["batch_size"].as_u64().unwrap(),
        sizes["evaluated"]["dim"].as_u64().unwrap(),
    );
    assert!(evaluated.0 * evaluated.1 <= 1 << 18, "{sizes}");
    // The trials ran at those sizes: the outputs compared have their shape.
    let trial = result["trials"][0].to_string();
    assert!(
        trial.contains(&format!("[{},{}]", evaluated.0, evaluated.1))
            || trial.contains(&format!("[{}, {}]", evaluated.0, evaluated.1)),
        "{trial}"
    );
}

/// A timeout on the CPU names its cause (the interpreter's speed) and the fixes.
#[test]
fn a_cpu_timeout_names_the_interpreter_and_the_fixes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[eval]\ntimeout_s = 10\n").unwrap();
    let f = fixtures();
    let out = kforge(&[
        "--config",
        config.to_str().unwrap(),
        "eval",
        f.join("tasks/relu.py").to_str().unwrap(),
        f.join("kernels/relu_infinite_loop.py").to_str().unwrap(),
        "--cpu",
        "--json",
    ])
    .output()
    .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(result["category"], "timeout", "{result}");
    let summary = result["summary"].as_str().unwrap();
    assert!(summary.starts_with("timed out after 10s"), "{summary}");
    assert!(summary.contains("Triton's interpreter"), "{summary}");
    assert!(summary.contains("at the task's sizes"), "{summary}");
    assert!(summary.contains("on a GPU"), "{summary}");
    assert!(summary.contains("timeout_s"), "{summary}");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("Triton's interpreter")
    );
}
