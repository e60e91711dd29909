//! Tracing goes to a log file, never to the terminal: the TUI owns the screen and
//! headless output is the console log, not debug noise.

use std::path::PathBuf;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Installs a file subscriber writing to `logs_dir()/kforge.log`. The filter comes from
/// `KFORGE_LOG` (default `info`). Returns the guard that flushes on drop, and the file
/// path, or `None` when the log directory cannot be created (logging is then off rather
/// than a reason to refuse to run).
pub fn init() -> Option<(WorkerGuard, PathBuf)> {
    let dir = crate::paths::logs_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "kforge.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_env("KFORGE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .ok()?;
    Some((guard, dir.join("kforge.log")))
}
