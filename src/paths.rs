//! Where kforge keeps its files: a cache dir for the managed Python environment, the
//! extracted harness, baseline timings and logs; a config dir for `config.toml`.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Cache root: `$KFORGE_CACHE_DIR`, else the platform cache dir (`~/.cache/kforge` on
/// Linux), else `./.kforge-cache` when the platform has no home at all.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KFORGE_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .map(|d| d.join("kforge"))
        .unwrap_or_else(|| PathBuf::from(".kforge-cache"))
}

/// Config root: `$KFORGE_CONFIG_DIR`, else `~/.config/kforge`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("KFORGE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    dirs::config_dir().map(|d| d.join("kforge"))
}

/// The user config file, `config_dir()/config.toml`.
pub fn user_config_file() -> Option<PathBuf> {
    config_dir().map(|d| d.join("config.toml"))
}

pub fn logs_dir() -> PathBuf {
    cache_dir().join("logs")
}

/// Opens (creating it, never truncating it) a file that is only there to be locked with
/// `File::lock` / `try_lock`: the session lock, the environment lock, the batch lock.
pub fn open_lock_file(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}
