//! What the app and its components both speak of: which pane has the focus, what an
//! edit in the person's editor is for, how the app was started, and how the TUI ended.
//! Kept apart from `app` so that the components, which `app` holds, do not import it back.

use chrono::{DateTime, Utc};

use crate::config::tui::TuiConfig;
use crate::protocol::{CallId, CandidateId, GateId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Tree,
    Chart,
    Detail,
    Console,
}

impl Focus {
    pub const ORDER: [Focus; 4] = [Focus::Tree, Focus::Chart, Focus::Detail, Focus::Console];
}

#[derive(Debug, Clone, PartialEq)]
pub enum EditPurpose {
    Repair(CandidateId),
    Optimize(CandidateId),
    Manual {
        parent: Option<CandidateId>,
    },
    GateRewrite(GateId),
    /// The answer of a call of the `manual` provider.
    ManualAnswer(CallId),
    /// The filter of a pane (the tree or the console).
    Filter(Focus),
    /// A search in the detail pane (Code, Diff, LLM, ...).
    Search,
}

/// How the app was started.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// No commands can be sent (a finished session opened with `kforge open`).
    pub read_only: bool,
    /// Attached to a run in another process: quitting detaches.
    pub attached: bool,
    pub config: TuiConfig,
    /// A fixed "now" (tests); `None` = the clock.
    pub clock: Option<DateTime<Utc>>,
}

/// How the TUI ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuiExit {
    /// The person quit; no run was active (finished, stopped, or read-only).
    Quit,
    /// The person quit (and confirmed) while the run was active: the engine should stop
    /// cleanly, leaving the session resumable.
    QuitWhileActive,
    /// Attached to another process's run: the person left, the run goes on.
    Detached,
    /// Attached: the person stopped the run, then left.
    StoppedAndLeft,
}

impl TuiExit {
    /// Whether an in-process engine should stop now.
    pub fn stop_engine(&self) -> bool {
        matches!(self, TuiExit::QuitWhileActive)
    }
}
