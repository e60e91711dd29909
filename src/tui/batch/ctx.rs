//! What the batch view's components read (`BatchCtx`) and the keys they answer.

use std::path::{Path, PathBuf};

use super::feed::{BatchFeed, Snapshot};
use crate::batch::manifest::Manifest;
use crate::batch::results::{StatusCounts, TaskResult};
use crate::batch::summary::{GroupSummary, summarize_group};
use crate::tui::component::Look;
use crate::tui::keymap::{Action, Keymap};
use crate::tui::theme::Theme;

/// The actions the batch view answers (its help lists these).
pub const KEYS: &[Action] = &[
    Action::OpenTask,
    Action::Up,
    Action::Down,
    Action::PageUp,
    Action::PageDown,
    Action::Top,
    Action::Bottom,
    Action::Help,
    Action::Quit,
    Action::Interrupt,
];

/// What the batch view's components read: the batch as last read, the theme and keys.
pub struct BatchCtx {
    pub dir: PathBuf,
    /// The batch directory's name.
    pub name: String,
    pub manifest: Manifest,
    /// Every task's figures in the manifest's order; `None` until the first read.
    pub results: Option<Vec<TaskResult>>,
    /// The figures over all tasks and the status counts, from `results`.
    pub all: Option<(GroupSummary, StatusCounts)>,
    /// Why the last read failed (batch.json unreadable), while it does.
    pub error: Option<String>,
    pub theme: Theme,
    pub keymap: Keymap,
    pub feed: BatchFeed,
    /// The help dialog covers the table.
    pub overlay_open: bool,
    /// The time the rows' wall times are shown at: a live run's goes on between its events
    /// (set at each read and each tick while a task runs).
    pub now: chrono::DateTime<chrono::Utc>,
}

impl Look for BatchCtx {
    fn theme(&self) -> &Theme {
        &self.theme
    }
    fn keymap(&self) -> &Keymap {
        &self.keymap
    }
}

impl BatchCtx {
    pub fn new(
        dir: &Path,
        manifest: Manifest,
        theme: Theme,
        keymap: Keymap,
        feed: BatchFeed,
    ) -> BatchCtx {
        let name = dir
            .canonicalize()
            .ok()
            .as_deref()
            .unwrap_or(dir)
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
        BatchCtx {
            dir: dir.to_path_buf(),
            name,
            manifest,
            results: None,
            all: None,
            error: None,
            theme,
            keymap,
            feed,
            overlay_open: false,
            now: chrono::Utc::now(),
        }
    }

    /// Takes in what the feed read.
    pub fn apply(&mut self, read: Result<Snapshot, String>) {
        match read {
            Ok(s) => {
                self.now = chrono::Utc::now();
                let all: Vec<&TaskResult> = s.results.iter().collect();
                self.all = Some((summarize_group("all", &all), StatusCounts::of(&s.results)));
                self.manifest = s.manifest;
                self.results = Some(s.results);
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Asks the feed for a fresh read: in sync mode it is read and taken in now.
    pub fn refresh(&mut self) {
        if let Some(read) = self.feed.refresh() {
            self.apply(read);
        }
    }

    /// Whether a task runs now: its wall time goes on between reads.
    pub fn any_live(&self) -> bool {
        self.results.iter().flatten().any(|r| r.status.is_live())
    }

    pub fn tasks(&self) -> usize {
        self.manifest.tasks.len()
    }

    /// Task `i`'s figures, once read.
    pub fn result(&self, i: usize) -> Option<&TaskResult> {
        self.results.as_ref()?.get(i)
    }
}
