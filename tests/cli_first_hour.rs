//! What a newcomer meets on the command line in the first hour, with a temporary HOME, config
//! and cache: the manual provider everywhere, a mistyped provider said at once, help for
//! every option, and config sections that do not exist.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEY_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "KFORGE_PROVIDER",
    "KFORGE_MODEL",
    "KFORGE_BASE_URL",
    "VISUAL",
    "EDITOR",
];

/// `program` with HOME, config and cache in `home`, no keys, no editor.
fn isolated(program: &str, home: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(home)
        .env("HOME", home)
        .env("KFORGE_CONFIG_DIR", home.join("config"))
        .env("KFORGE_CACHE_DIR", home.join("cache"))
        .stdin(Stdio::null());
    for v in KEY_VARS {
        c.env_remove(v);
    }
    c
}

/// `kforge ARGS`, isolated.
fn kforge(home: &Path, args: &[&str]) -> Command {
    let mut c = isolated(env!("CARGO_BIN_EXE_kforge"), home);
    c.args(args);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn task() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tasks/relu.py")
        .display()
        .to_string()
}

/// `kforge ask ARGS` inside a terminal (`script` gives it a pty: the manual provider opens
/// the editor only where there is one), with `EDITOR`; its exit code and what the terminal
/// showed. None where `script` is missing.
fn ask_in_a_terminal(home: &Path, prompt: &str, editor: &str) -> Option<(i32, String)> {
    let line = format!(
        "{} ask --provider manual '{prompt}'",
        env!("CARGO_BIN_EXE_kforge")
    );
    let out = isolated("script", home)
        .args(["-qec", &line, "/dev/null"])
        .env("EDITOR", editor)
        .output()
        .ok()?;
    Some((out.status.code()?, text(&out.stdout).replace('\r', "")))
}

#[test]
fn ask_with_the_manual_provider_takes_the_answer_from_the_editor() {
    let home = tempfile::tempdir().unwrap();
    let editor = home.path().join("answer.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\ngrep -q 'write a relu' \"$1\" || exit 3\necho 'def relu(x): return x' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let Some((code, shown)) =
        ask_in_a_terminal(home.path(), "write a relu", editor.to_str().unwrap())
    else {
        eprintln!("no `script` on this machine: the editor path needs a terminal, skipped");
        return;
    };
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("def relu(x): return x\n"), "{shown}");
    assert!(shown.contains("provider manual (you)"), "{shown}");
    // An editor that writes nothing below the marker: no answer, said so.
    let (code, shown) = ask_in_a_terminal(home.path(), "write a relu", "true").unwrap();
    assert_eq!(code, 1, "{shown}");
    assert!(
        shown.contains("nothing was written below the marker line"),
        "{shown}"
    );
    // Without a terminal no editor starts (it would wait for keys forever): the answer is
    // read from stdin, here empty.
    let out = kforge(
        home.path(),
        &["ask", "--provider", "manual", "write a relu"],
    )
    .env("EDITOR", &editor)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("reads the answer from stdin"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn providers_and_the_unknown_provider_error_name_manual() {
    let home = tempfile::tempdir().unwrap();
    let out = kforge(home.path(), &["providers"]).output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().next() == Some("manual")),
        "{stdout}"
    );
    let out = kforge(home.path(), &["ask", "--provider", "deepseak", "hi"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr.contains("unknown provider `deepseak` (did you mean `deepseek`?)")
            && stderr.contains("manual"),
        "{stderr}"
    );
}

#[test]
fn a_mistyped_provider_is_said_before_the_evaluator_starts() {
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = kforge(
        home.path(),
        &["run", &task(), "--cpu", "--provider", "deepseak"],
    )
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--provider deepseak: unknown provider"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("checking the task"),
        "the evaluator was not started: {stderr}"
    );
    // Nothing was made: no Python environment, no harness copy, no session (the log file
    // of this run is all the cache holds).
    let made: Vec<String> = std::fs::read_dir(home.path().join("cache"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        made.iter().all(|n| n == "logs"),
        "the cache holds {made:?}: {stderr}"
    );
    assert!(!home.path().join("sessions").exists(), "{stderr}");
    // Not a timing assertion on speed: only that it did not wait for a Python environment.
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn every_option_has_help_and_the_token_limits_have_distinct_names() {
    let home = tempfile::tempdir().unwrap();
    let help = |cmd: &[&str]| {
        let mut args = cmd.to_vec();
        args.push("--help");
        text(&kforge(home.path(), &args).output().unwrap().stdout)
    };
    for (cmd, flags) in [
        (
            &["eval"][..],
            &["--atol", "--rtol", "--seed", "--trials"][..],
        ),
        (
            &["run"][..],
            &["--atol", "--rtol", "--max-tokens", "--headless"][..],
        ),
        (&["resume"][..], &["--headless"][..]),
        (&["ask"][..], &["--max-output-tokens"][..]),
    ] {
        let text = help(cmd);
        for flag in flags {
            // clap prints a flag's help on its own line, or on the next one (long help).
            let lines: Vec<&str> = text.lines().collect();
            let at = lines
                .iter()
                .position(|l| l.trim_start().starts_with(flag))
                .unwrap_or_else(|| panic!("{cmd:?} has no {flag}:\n{text}"));
            let same_line = lines[at].trim_start()[flag.len()..]
                .split_whitespace()
                .filter(|w| !w.starts_with('<'))
                .count();
            let next_line = lines.get(at + 1).is_some_and(|l| {
                let t = l.trim_start();
                !t.is_empty() && !t.starts_with('-')
            });
            assert!(
                same_line > 0 || next_line,
                "{cmd:?} {flag} has no help:\n{text}"
            );
        }
    }
    assert!(help(&["run"]).contains("Session budget"));
    assert!(!help(&["ask"]).contains("--max-tokens "));
}

#[test]
fn an_unknown_config_section_is_an_error_naming_the_file_and_the_closest_section() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    let file = home.path().join("config/config.toml");
    std::fs::write(&file, "[pipline]\nseeds = 2\n").unwrap();
    let out = kforge(home.path(), &["providers"]).output().unwrap();
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("[pipline]") && stderr.contains("[pipeline]"),
        "{stderr}"
    );
    std::fs::write(&file, "[evall]\natol = 0.1\n").unwrap();
    let stderr = text(&kforge(home.path(), &["providers"]).output().unwrap().stderr);
    assert!(
        stderr.contains("[evall]") && stderr.contains("[eval]"),
        "{stderr}"
    );
}
