//! The `command` provider as a user runs it: `kforge ask`, `kforge providers` and a whole
//! `kforge run` on the CPU whose model is a stub shell script. Config, cache and sessions
//! live in temp dirs; nothing is reached over the network.

mod engine_common;
mod eval_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use engine_common::{analysis_json, fixture_kernel};
use eval_common::{fixtures, kforge, text};
use kforge::protocol::EngineState;
use kforge::session::state::SessionState;
use kforge::session::store::SessionDir;

/// A `#!/bin/sh` script in `dir`, executable.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A config file whose provider `stub` runs `program` (and `extra` more TOML lines).
fn config(dir: &Path, program: &Path, extra: &str) -> PathBuf {
    let path = dir.join("kforge-test.toml");
    std::fs::write(
        &path,
        format!(
            "[llm]\ndefault = \"stub\"\n\n[llm.providers.stub]\nprotocol = \"command\"\ncommand = [\"{}\", \"--flag\"]\n{extra}\n",
            program.display()
        ),
    )
    .unwrap();
    path
}

fn ask(config: &Path, prompt: &str, env: &[(&str, &str)]) -> Output {
    let mut c = kforge(&[
        "--config",
        config.to_str().unwrap(),
        "ask",
        "--provider",
        "stub",
        "--system",
        "SYSTEM TEXT",
        prompt,
    ]);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn ask_prints_the_programs_answer_with_the_cost_unknown_and_no_key_passed() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("stdin.txt");
    let stub = script(
        dir.path(),
        "model.sh",
        &format!(
            "cat > '{}'\necho \"args=$* key=${{OPENAI_API_KEY:-withheld}}\"\nprintf '```python\\nprint(1)\\n```\\n'",
            seen.display()
        ),
    );
    let cfg = config(dir.path(), &stub, "");
    let out = ask(
        &cfg,
        "USER TEXT",
        &[("OPENAI_API_KEY", "sk-test-not-for-children")],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("args=--flag key=withheld\n```python\nprint(1)\n```"),
        "{stdout}"
    );
    assert!(stderr.contains("provider stub"), "{stderr}");
    assert!(
        stderr.contains("unknown (the provider reported no usage)"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-test-not-for-children"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "SYSTEM TEXT\n\nUSER TEXT\n"
    );
}

#[test]
fn the_program_sees_no_secret_of_kforges_environment_unless_named() {
    // The model is `env` itself: its answer is the environment it was given.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("kforge-test.toml");
    std::fs::write(
        &cfg,
        "[llm.providers.stub]\nprotocol = \"command\"\ncommand = [\"env\"]\npass_env = [\"MY_TOOL_HOME\", \"MY_TOOL_OPT_*\"]\n",
    )
    .unwrap();
    let secrets = [
        ("OPENAI_API_KEY", "sk-openai-secret"),
        ("GEMINI_API_KEY", "gemini-secret"),
        ("HF_TOKEN", "hf-secret"),
        ("GITHUB_TOKEN", "ghp-secret"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("AZURE_OPENAI_API_KEY", "azure-secret"),
        ("MISTRAL_API_KEY", "mistral-secret"),
        ("GROQ_API_KEY", "groq-secret"),
        ("ANTHROPIC_AUTH_TOKEN", "anthropic-token-secret"),
        ("KFORGE_SOMETHING", "kforge-secret"),
        ("MY_TOOLBOX_TOKEN", "not-named-secret"),
    ];
    let named = [
        ("MY_TOOL_HOME", "/opt/my-tool"),
        ("MY_TOOL_OPT_LEVEL", "3"),
        ("LC_ALL", "C.UTF-8"),
    ];
    let env: Vec<(&str, &str)> = secrets.iter().chain(named.iter()).copied().collect();
    let out = ask(&cfg, "hi", &env);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let seen: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for (name, value) in secrets {
        assert!(
            !stdout.contains(value),
            "{name} reached the program:\n{stdout}"
        );
    }
    for (name, value) in named {
        assert!(
            stdout.contains(&format!("{name}={value}\n")),
            "{name} missing:\n{stdout}"
        );
    }
    assert!(seen.contains(&"PATH") && seen.contains(&"HOME"), "{stdout}");
    // Nothing of kforge's own (its cache, config, interpreter) either.
    assert!(!seen.iter().any(|k| k.starts_with("KFORGE_")), "{stdout}");
}

#[test]
fn ask_reports_a_non_zero_exit_with_its_code_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(
        dir.path(),
        "model.sh",
        "cat > /dev/null\necho 'error: not logged in' >&2\nexit 3",
    );
    let out = ask(&config(dir.path(), &stub, ""), "hi", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("`model.sh` exited with code 3; the end of its stderr: error: not logged in"),
        "{stderr}"
    );
}

#[test]
fn ask_reports_a_program_that_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(dir.path(), "model.sh", "cat > /dev/null");
    let out = ask(&config(dir.path(), &stub, ""), "hi", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`model.sh` printed nothing on stdout"),
        "{stderr}"
    );
}

#[test]
fn ask_kills_a_hanging_program_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(dir.path(), "model.sh", "sleep 1000");
    let out = ask(&config(dir.path(), &stub, "wall_timeout_s = 1"), "hi", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`model.sh` ran longer than 1 s (wall_timeout_s"),
        "{stderr}"
    );
}

#[test]
fn providers_shows_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(dir.path(), "model.sh", "true");
    let cfg = config(dir.path(), &stub, "");
    let out = kforge(&["--config", cfg.to_str().unwrap(), "providers"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let line = stdout.lines().find(|l| l.contains(" stub ")).unwrap();
    assert!(line.starts_with('*'), "the default: {stdout}");
    assert!(
        line.contains(" command ") && line.contains(&format!("$ {} --flag", stub.display())),
        "{stdout}"
    );
}

/// The evidence of issue 23's item 13: a whole `kforge run` whose model is a script. It
/// answers the analysis prompt with "not worth optimizing" and every other prompt with a
/// correct ReLU kernel.
#[test]
fn a_run_on_the_cpu_with_a_command_as_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("kernel.py");
    std::fs::write(
        &kernel,
        format!(
            "# written by the command stub\n{}",
            fixture_kernel("relu_ok.py")
        ),
    )
    .unwrap();
    let analysis = dir.path().join("analysis.md");
    std::fs::write(&analysis, analysis_json("no")).unwrap();
    let calls = dir.path().join("calls.log");
    let stub = script(
        dir.path(),
        "model.sh",
        &format!(
            "prompt=$(cat)\necho call >> '{calls}'\ncase \"$prompt\" in\n  *worth_optimizing*) cat '{analysis}' ;;\n  *) printf 'Here is the kernel.\\n\\n```python\\n'; cat '{kernel}'; printf '```\\n' ;;\nesac",
            calls = calls.display(),
            analysis = analysis.display(),
            kernel = kernel.display()
        ),
    );
    let cfg = config(dir.path(), &stub, "");
    let root = dir.path().join("sessions");
    let task = fixtures().join("tasks/relu.py");
    let out = kforge(&[
        "run",
        task.to_str().unwrap(),
        "--cpu",
        "--headless",
        "--config",
        cfg.to_str().unwrap(),
        "--provider",
        "stub",
        "--seeds",
        "1",
        "--stages",
        "",
        "--timeout",
        "60",
        "--sessions-dir",
        root.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let session_dir = std::fs::read_dir(&root)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let session = SessionDir::open(&session_dir).unwrap();
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    assert_eq!(state.state, EngineState::Finished);
    let info = state.info.clone().unwrap();
    assert_eq!(
        (info.provider.as_str(), info.model.as_str()),
        ("stub", "model.sh")
    );
    assert!(state.calls.values().all(|c| c.ok == Some(true)));
    let n_calls = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert_eq!(n_calls, state.calls.len(), "one program run per call");
    assert!(
        session
            .read_file("best_kernel.py")
            .unwrap()
            .contains("written by the command stub")
    );
    assert_eq!(state.total_cost(), None, "a command's cost is unknown");
}

/// Ctrl-C on a run whose model is a program that hangs: the run stops (130) and the
/// program, with what it started, is gone.
#[test]
fn ctrl_c_on_a_run_kills_the_program_answering() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let stub = script(
        dir.path(),
        "model.sh",
        &format!(
            "cat > /dev/null\nsleep 1000 &\necho $! > '{}'\nwait",
            pidfile.display()
        ),
    );
    let cfg = config(dir.path(), &stub, "");
    let root = dir.path().join("sessions");
    let task = fixtures().join("tasks/relu.py");
    let mut child = kforge(&[
        "run",
        task.to_str().unwrap(),
        "--cpu",
        "--headless",
        "--config",
        cfg.to_str().unwrap(),
        "--provider",
        "stub",
        "--seeds",
        "1",
        "--sessions-dir",
        root.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    let sleeper: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "the program was never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let gone = (0..100).any(|_| {
        let alive = std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
            .ok()
            .is_some_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            });
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        !alive
    });
    assert!(gone, "the program's child {sleeper} still runs");
}
