//! The Python harness is part of the program: a small package (`kforge_harness`) embedded
//! here, written to the cache dir under the hash of all its files (so two kforge versions
//! never overwrite each other's copy), and run as `python -m kforge_harness`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

macro_rules! package {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("harness/kforge_harness/", $name)))),*]
    };
}

/// The package's files: (path inside the package, `/`-separated, source). A subpackage's
/// files (`judge/`) are listed one by one like the rest.
pub const PACKAGE: &[(&str, &str)] = package!(
    "__init__.py",
    "__main__.py",
    "ahead.py",
    "alignment.py",
    "audit.py",
    "audit_chunks.py",
    "audit_digests.py",
    "audit_gpu.py",
    "audit_labels.py",
    "audit_launch.py",
    "audit_match.py",
    "audit_ops.py",
    "audit_rules.py",
    "audit_shadow.py",
    "audit_state.py",
    "audit_vocab.py",
    "baselines.py",
    "cachekeeper.py",
    "compare.py",
    "compiled.py",
    "defaults.py",
    "device.py",
    "digest.py",
    "dispatch_modes.py",
    "envelope.py",
    "errors.py",
    "exchange.py",
    "forks.py",
    "guard.py",
    "judge/__init__.py",
    "judge/align.py",
    "judge/checks.py",
    "judge/compile_baseline.py",
    "judge/context.py",
    "judge/defaults_baseline.py",
    "judge/driver.py",
    "judge/inputs.py",
    "judge/kernel.py",
    "judge/kernelbench.py",
    "judge/links.py",
    "judge/oracles.py",
    "judge/outputs.py",
    "judge/precision_record.py",
    "judge/reference.py",
    "judge/rehearsal.py",
    "judge/speed.py",
    "judge/start.py",
    "judge/task.py",
    "judge/timing_phase.py",
    "judgeproc.py",
    "kbprotocol.py",
    "knobs.py",
    "launchers.py",
    "launchpath.py",
    "loading.py",
    "memory.py",
    "messages.py",
    "ncu.py",
    "oracle.py",
    "peaks.py",
    "precision.py",
    "protocol.py",
    "reach.py",
    "refprocess.py",
    "rehearsal.py",
    "sandbox.py",
    "seal.py",
    "server.py",
    "serverjob.py",
    "sol.py",
    "static.py",
    "tensors.py",
    "timed.py",
    "timing.py",
    "triton_warm.py",
    "window.py",
    "wire.py",
    "worker.py",
    "zygote.py",
);

/// Requirements of the managed environment.
pub const REQUIREMENTS: &str = include_str!("harness/requirements.txt");

/// First 12 hex digits of the SHA-256 of `data`.
pub fn short_hash(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    hex::encode(&digest[..6])
}

/// The hash of the whole package: every file's name and content.
pub fn package_hash() -> String {
    let mut hasher = Sha256::new();
    for (name, source) in PACKAGE {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(source.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..6])
}

/// Writes the package into `cache_dir/harness/<hash>/kforge_harness/` if it is not there
/// yet and returns the directory to put on `PYTHONPATH` (`cache_dir/harness/<hash>`).
pub fn install(cache_dir: &Path) -> Result<PathBuf> {
    let root = cache_dir.join("harness").join(package_hash());
    if root.join(".complete").is_file() {
        return Ok(root);
    }
    // One staging dir per call: two evaluators of one process (tests, a batch on several
    // GPUs) may install at the same moment.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staging = cache_dir.join("harness").join(format!(
        ".{}-{}-{call}.tmp",
        package_hash(),
        std::process::id()
    ));
    let package = staging.join("kforge_harness");
    std::fs::create_dir_all(&package)
        .with_context(|| format!("cannot create {}", package.display()))?;
    for (name, source) in PACKAGE {
        let path = package.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, source)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    std::fs::write(staging.join(".complete"), package_hash())
        .with_context(|| format!("cannot write {}", staging.display()))?;
    match std::fs::rename(&staging, &root) {
        Ok(()) => Ok(root),
        // Another kforge installed the same package meanwhile: theirs is identical.
        Err(_) if root.join(".complete").is_file() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(root)
        }
        Err(e) => Err(e).with_context(|| format!("cannot write {}", root.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_is_idempotent_and_keyed_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let a = install(dir.path()).unwrap();
        let b = install(dir.path()).unwrap();
        assert_eq!(a, b);
        for (name, source) in PACKAGE {
            assert_eq!(
                std::fs::read_to_string(a.join("kforge_harness").join(name)).unwrap(),
                *source
            );
        }
        assert!(a.ends_with(package_hash()));
    }

    #[test]
    fn every_python_file_of_the_package_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eval/harness/kforge_harness");
        let mut on_disk = Vec::new();
        python_files(&dir, "", &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = PACKAGE.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }

    /// The `.py` files under `dir`, subpackages included, as `prefix`-relative paths.
    fn python_files(dir: &Path, prefix: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                if name != "__pycache__" {
                    python_files(&entry.path(), &format!("{prefix}{name}/"), found);
                }
            } else if name.ends_with(".py") {
                found.push(format!("{prefix}{name}"));
            }
        }
    }
}
