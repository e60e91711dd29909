//! Where kforge keeps its files: a cache dir for the managed Python environment, the
//! extracted harness, baseline timings and logs; a config dir for `config.toml`.

use std::path::PathBuf;

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
