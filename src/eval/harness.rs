//! The Python harness is part of the program: embedded here, written to the cache dir
//! under its content hash (so two kforge versions never overwrite each other's copy).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Source of the harness script.
pub const HARNESS_SOURCE: &str = include_str!("harness/kforge_harness.py");
/// Requirements of the managed environment.
pub const REQUIREMENTS: &str = include_str!("harness/requirements.txt");

/// First 12 hex digits of the SHA-256 of `data`.
pub fn short_hash(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    hex::encode(&digest[..6])
}

/// Writes the harness into `cache_dir/harness/` if it is not there yet and returns its path.
pub fn install(cache_dir: &Path) -> Result<PathBuf> {
    let dir = cache_dir.join("harness");
    let path = dir.join(format!(
        "kforge_harness-{}.py",
        short_hash(HARNESS_SOURCE.as_bytes())
    ));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(".harness-{}.tmp", std::process::id()));
    std::fs::write(&tmp, HARNESS_SOURCE)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
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
        assert_eq!(std::fs::read_to_string(&a).unwrap(), HARNESS_SOURCE);
        assert!(
            a.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .contains(&short_hash(HARNESS_SOURCE.as_bytes()))
        );
    }
}
