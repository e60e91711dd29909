//! What the app, its components and the loop all speak of: which pane has the focus, what
//! an edit in the person's editor is for, how the app was started, what connects the TUI
//! to a run, and how the TUI ended.
//! Kept apart from `app` so that the components, which `app` holds, do not import it back.

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::config::tui::TuiConfig;
use crate::protocol::{CallId, CandidateId, Command, EventRecord, GateId};
use crate::session::store::SessionDir;

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
    /// Opened from the batch view: quitting goes back to it.
    pub in_batch: bool,
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
    /// As `QuitWhileActive`, asked by Ctrl-C: `kforge run` exits 130 once the run stopped,
    /// as it does after Ctrl-C without the TUI.
    Interrupted,
    /// Attached to another process's run: the person left, the run goes on.
    Detached,
    /// Attached: the person stopped the run, then left.
    StoppedAndLeft,
}

impl TuiExit {
    /// Whether an in-process engine should stop now.
    pub fn stop_engine(&self) -> bool {
        matches!(self, TuiExit::QuitWhileActive | TuiExit::Interrupted)
    }
}

/// What the TUI needs from whoever runs it.
pub struct TuiLink {
    pub session_dir: SessionDir,
    /// Events so far.
    pub initial: Vec<EventRecord>,
    /// New events, transient ones (LLM deltas, evaluation phases) included.
    pub events: UnboundedReceiver<EventRecord>,
    /// Where commands go; `None` = read-only (a finished session).
    pub commands: Option<UnboundedSender<Command>>,
}
