//! What the evaluator's integration tests share: the fixtures directory, a cache of their
//! own (under the build's target dir, never the user's `~/.cache/kforge`), and the one thing
//! they do share with the user, the Python environment.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kforge::config::{Config, PythonConfig};
use kforge::eval::Evaluator;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A copy of a fixture kernel in `dir` with its `@NAME@` placeholders filled in.
pub fn kernel_from(fixture: &str, dir: &Path, fills: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(fixtures().join("kernels").join(fixture)).unwrap();
    for (name, value) in fills {
        text = text.replace(name, value);
    }
    let path = dir.join(fixture);
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue 20's item 3 as two kernels in `dir`: one plants files (its Triton cache included)
/// under a marker of this process's, the other looks for them.
pub fn plant_and_find(dir: &Path) -> (PathBuf, PathBuf) {
    let marker = format!("plant{}", std::process::id());
    let fills = [("@MARKER@", marker.as_str())];
    (
        kernel_from("hack_plant_cache.py", dir, &fills),
        kernel_from("hack_find_plant.py", dir, &fills),
    )
}

/// The planting kernel ran and planted.
pub fn assert_planted(planted: &kforge::protocol::EvalResult) {
    assert!(
        planted.correct && planted.log.contains("planted "),
        "{} {}",
        planted.summary,
        planted.log
    );
}

/// The looking kernel ran and found nothing planted.
pub fn assert_found_nothing(found: &kforge::protocol::EvalResult) {
    assert!(found.correct, "{} {}", found.summary, found.log);
    assert!(
        found.log.contains("CLEAN") && !found.log.contains("FOUND"),
        "a planted file reached a later evaluation: {}",
        found.log
    );
}

/// The tests' cache: harness copies, logs, baselines and exchange files land here.
pub fn test_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("kforge-cache")
}

/// An evaluator as a user's kforge builds it, on the tests' own cache.
pub fn evaluator() -> Evaluator {
    let config = Config {
        python: PythonConfig {
            interpreter: Some(interpreter()),
        },
        ..Config::default()
    };
    kforge::eval::evaluator_from_config(&config, &test_cache(), &mut |line| eprintln!("{line}"))
        .expect("an interpreter with torch and triton (or the managed environment)")
}

/// The interpreter a user's kforge would use: `KFORGE_PYTHON`, a configured or system one
/// with torch and triton, else the managed environment in the user's cache (created when
/// missing: the only thing the tests share with the user).
pub fn interpreter() -> PathBuf {
    let cache = kforge::paths::cache_dir();
    kforge::eval::python_env::resolve(&Config::default().python, &cache, &mut |line| {
        eprintln!("{line}")
    })
    .expect("an interpreter with torch and triton (or the managed environment)")
    .executable
}

/// A `kforge` process on the tests' cache and the shared interpreter.
pub fn isolate(command: &mut std::process::Command) -> &mut std::process::Command {
    command
        .env("KFORGE_CACHE_DIR", test_cache())
        .env("KFORGE_CONFIG_DIR", test_config())
        .env("KFORGE_PYTHON", interpreter())
}

/// An empty config dir of the tests' own: a person's `~/.config/kforge` never changes what a
/// test sees.
pub fn test_config() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kforge-config");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The `kforge` binary as the engine tests run it: on the tests' cache and config, with no
/// provider or model chosen through the environment.
pub fn kforge(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kforge"));
    c.args(args);
    isolate(&mut c);
    c.env_remove("KFORGE_PROVIDER")
        .env_remove("KFORGE_MODEL")
        .env_remove("KFORGE_BASE_URL");
    c
}

/// `kforge eval TASK KERNEL --cpu EXTRA...` on fixtures (`tests/fixtures/tasks`, `kernels`),
/// to its end.
pub fn eval_fixture(task: &str, kernel: &str, extra: &[&str]) -> std::process::Output {
    let f = fixtures();
    let task = f.join("tasks").join(task);
    let kernel = f.join("kernels").join(kernel);
    let mut args = vec![
        "eval",
        task.to_str().unwrap(),
        kernel.to_str().unwrap(),
        "--cpu",
    ];
    args.extend_from_slice(extra);
    kforge(&args).output().unwrap()
}

/// `kforge ARGS...` to its end, off the async runtime (the mock LLM serves on it meanwhile).
pub async fn kforge_output(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// A command's stdout or stderr as text, for assertions and their messages.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
