//! What every piece of the screen is: a component owns its state, the keys it answers and
//! the hints it shows (gitui's `Component`: `commands` + `event` -> consumed or not;
//! codex's bottom-pane views). Components never reach into each other or the engine: what
//! they want done goes on the one app-event queue (`AppEvents`), which `App` drains after
//! every input.
//!
//! Drawing reads the shared context (`Ctx`) and changes only the component's own view
//! state (scroll offsets clamped to what fits, the area it was drawn in for the mouse),
//! as a ratatui `StatefulWidget` changes only its `State`. Nothing draws from disk: files
//! come from `Docs`, which loads them off the UI thread.
//!
//! The session view's components read `Ctx`; the batch view's read its own context
//! (`batch::BatchCtx`). Both give the theme and the keymap (`Look`), all that a component
//! shared by the two views (the help dialog, the hints bar) reads.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use crossterm::event::{KeyEvent, MouseEvent};
use ratatui::Frame;
use ratatui::layout::Rect;

use crate::protocol::{CallId, CandidateId, Command, Decision, GateId, GateKind, Mode, TaskKey};
use crate::session::state::{Candidate, CandidateStatus, Gate, SessionState};
use crate::session::store::SessionDir;

use super::docs::Docs;
use super::highlight::Highlighter;
use super::keymap::{Action, Context, Keymap};
use super::overlays::Overlay;
use super::shared::{AppOptions, EditPurpose, Focus, TuiExit};
use super::theme::Theme;

/// Whether a component used an input; an unused one goes on to the next in line (the
/// focused pane, then the detail tabs' shared keys, then the app's global keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Handled {
    Consumed,
    Ignored,
}

/// A key hint for the bottom bar: the action's first key and what it does here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    pub action: Action,
    pub label: &'static str,
}

impl Hint {
    pub const fn new(action: Action, label: &'static str) -> Hint {
        Hint { action, label }
    }
}

/// What a component asks the app to do. The one channel between components, and from
/// components to the loop (commands, copies, edits, quitting go on as `Effect`s).
#[derive(Debug, Clone, PartialEq)]
pub enum AppEvent {
    /// A command for the engine; `done` is said on the message line once it is sent.
    Send {
        command: Command,
        done: String,
    },
    /// A line on the message bar until the next key.
    Flash(String),
    /// Select a candidate (`by_user` stops following new ones).
    Select {
        id: Option<CandidateId>,
        by_user: bool,
    },
    Focus(Focus),
    Open(Overlay),
    /// The open dialog is done.
    Close,
    /// Close the gate dialog (the gate keeps waiting).
    CloseGate,
    /// Answer a gate (the dialog closes; the next opens only when asked).
    Resolve {
        gate: GateId,
        decision: Decision,
    },
    Edit {
        text: String,
        suffix: &'static str,
        purpose: EditPurpose,
    },
    /// Text entered in an inline input.
    Submit {
        purpose: EditPurpose,
        text: String,
    },
    /// A pane's filter (the tree's or the console's) as typed so far (it filters live).
    Filter {
        pane: Focus,
        text: String,
    },
    Copy(String),
    Quit(TuiExit),
    /// Quit if nothing runs, else ask first (`interrupt`: asked by Ctrl-C).
    AskQuit {
        interrupt: bool,
    },
    Suspend,
    Follow(bool),
    ToggleMark,
    /// The batch view: open this task's session in the session view (the session view
    /// itself never asks it).
    OpenTask(TaskKey),
}

/// The app-event queue components write to.
#[derive(Debug, Default)]
pub struct AppEvents(VecDeque<AppEvent>);

impl AppEvents {
    pub fn push(&mut self, event: AppEvent) {
        self.0.push_back(event);
    }

    pub fn flash(&mut self, text: impl Into<String>) {
        self.push(AppEvent::Flash(text.into()));
    }

    pub fn pop(&mut self) -> Option<AppEvent> {
        self.0.pop_front()
    }
}

/// What every component may read: the session as folded so far, the selection, the
/// person's settings, and the file and highlight caches.
pub struct Ctx {
    pub state: SessionState,
    pub session: SessionDir,
    pub options: AppOptions,
    pub theme: Theme,
    pub keymap: Keymap,
    pub highlighter: Highlighter,
    pub docs: Docs,
    pub focus: Focus,
    pub selected: Option<CandidateId>,
    /// The candidate Diff and Compare use as the other side.
    pub marked: Option<CandidateId>,
    /// Select each new candidate as it appears.
    pub follow: bool,
    /// A dialog (help, confirmation, input) covers the panes: none shows focus.
    pub overlay_open: bool,
}

/// What every view's context gives its components: the theme and the keymap.
pub trait Look {
    fn theme(&self) -> &Theme;
    fn keymap(&self) -> &Keymap;
}

impl Look for Ctx {
    fn theme(&self) -> &Theme {
        &self.theme
    }
    fn keymap(&self) -> &Keymap {
        &self.keymap
    }
}

impl Ctx {
    pub fn now(&self) -> DateTime<Utc> {
        self.options.clock.unwrap_or_else(Utc::now)
    }

    pub fn selected_candidate(&self) -> Option<&Candidate> {
        self.selected.and_then(|id| self.state.candidates.get(&id))
    }

    /// An attached window whose run ended: it stays open to browse, read-only.
    pub fn attached_to_ended_run(&self) -> bool {
        self.options.attached && self.state.state.is_over()
    }

    /// Why this window cannot send commands, if it cannot.
    pub fn cannot_act(&self) -> Option<&'static str> {
        if self.options.read_only {
            Some("read-only: this session is not running")
        } else if self.attached_to_ended_run() {
            Some("the run has ended: this window is read-only now (kforge resume continues it)")
        } else {
            None
        }
    }

    pub fn can_act(&self) -> bool {
        self.cannot_act().is_none()
    }

    /// A candidate's code, if loaded (`Docs` fetches it off the UI thread otherwise).
    pub fn code(&self, id: CandidateId) -> Option<std::sync::Arc<str>> {
        self.docs.text(&self.state.candidates.get(&id)?.file)
    }

    /// LLM calls in flight and evaluations under way: on a finished run, the person's own
    /// actions (a repair, a re-evaluation) that quitting would cancel.
    pub fn actions_in_flight(&self) -> usize {
        self.state.calls_in_flight().count()
            + self
                .state
                .candidates
                .values()
                .filter(|c| c.status == CandidateStatus::Evaluating)
                .count()
    }

    /// Whether the engine is still running (not finished, failed or stopped), or still
    /// working on something the person asked for after it finished.
    pub fn run_active(&self) -> bool {
        !self.options.read_only && (!self.state.state.is_over() || self.actions_in_flight() > 0)
    }

    /// How quitting now ends this window (`interrupt`: asked by Ctrl-C).
    pub fn quit_exit(&self, interrupt: bool) -> TuiExit {
        if self.options.attached && !self.attached_to_ended_run() {
            TuiExit::Detached
        } else if self.run_active() && interrupt {
            TuiExit::Interrupted
        } else if self.run_active() {
            TuiExit::QuitWhileActive
        } else {
            TuiExit::Quit
        }
    }

    /// The candidates whose kernel the person rewrote at their evaluation gate (one pass
    /// over the gates, for a whole tree).
    pub fn rewritten_kernels(&self) -> std::collections::HashSet<CandidateId> {
        self.state
            .gates
            .values()
            .filter(|g| {
                g.kind == GateKind::Evaluation
                    && matches!(g.decision, Some(Decision::Rewrite { .. }))
            })
            .filter_map(|g| g.candidate)
            .collect()
    }

    /// The gate at which the person rewrote call `call`'s prompt before it was sent, if
    /// they did.
    pub fn rewritten_prompt(&self, call: CallId) -> Option<GateId> {
        self.state
            .gates
            .values()
            .find(|g| {
                g.kind == GateKind::LlmCall
                    && g.call == Some(call)
                    && matches!(g.decision, Some(Decision::Rewrite { .. }))
            })
            .map(|g| g.id)
    }

    /// The waiting gates that a switch to `mode` approves at once: those it does not ask.
    pub fn gates_a_switch_approves(&self, mode: Mode) -> Vec<&Gate> {
        self.state
            .waiting_gates()
            .into_iter()
            .filter(|g| !mode.asks(g.kind))
            .collect()
    }

    pub fn focused(&self, pane: Focus) -> bool {
        self.focus == pane
    }
}

/// A piece of the screen with its own state, keys and hints, reading the context `C` of
/// its view (the session view's `Ctx` unless said otherwise).
pub trait Component<C: Look = Ctx> {
    /// The keymap context whose bindings this component answers first.
    fn context(&self) -> Option<Context> {
        None
    }

    /// The hints it shows while it has the keyboard.
    fn hints(&self, _cx: &C, _out: &mut Vec<Hint>) {}

    /// An action, already looked up in the keymap.
    fn on_action(&mut self, action: Action, cx: &C, out: &mut AppEvents) -> Handled;

    /// A key: by default looked up in this component's context, then the global one.
    fn on_key(&mut self, key: &KeyEvent, cx: &C, out: &mut AppEvents) -> Handled {
        let contexts: Vec<Context> = self
            .context()
            .into_iter()
            .chain([Context::Global])
            .collect();
        match cx.keymap().lookup(key, &contexts) {
            Some(action) => self.on_action(action, cx, out),
            None => Handled::Ignored,
        }
    }

    fn on_mouse(&mut self, _m: &MouseEvent, _cx: &C, _out: &mut AppEvents) -> Handled {
        Handled::Ignored
    }

    fn draw(&mut self, cx: &C, frame: &mut Frame, area: Rect);
}

/// Whether a mouse event falls inside an area.
pub fn inside(m: &MouseEvent, r: Rect) -> bool {
    m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
}
