//! What the evaluator's integration tests share: the fixtures directory, the evaluator a
//! user's kforge would build, and the interpreter it would run (the managed environment
//! when nothing else is configured; tests share only that environment).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kforge::config::Config;
use kforge::eval::Evaluator;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn evaluator() -> Evaluator {
    let cache = kforge::paths::cache_dir();
    kforge::eval::evaluator_from_config(&Config::default(), &cache, &mut |line| eprintln!("{line}"))
        .expect("an interpreter with torch and triton (or the managed environment)")
}

pub fn interpreter() -> PathBuf {
    let cache = kforge::paths::cache_dir();
    kforge::eval::python_env::resolve(&Config::default().python, &cache, &mut |line| {
        eprintln!("{line}")
    })
    .expect("an interpreter with torch and triton (or the managed environment)")
    .executable
}
