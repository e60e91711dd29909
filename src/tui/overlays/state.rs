//! What an open dialog holds: the `Overlay` a component asks for in `AppEvent::Open`, and
//! each dialog's state. Their keys and drawing (`Component`, which answers into
//! `AppEvents`) are in the dialogs' own files: kept apart so that the app-event vocabulary
//! names the dialogs without importing their behaviour, and the components, the events and
//! the dialogs form no loop.

use std::sync::Arc;

use ratatui::layout::Rect;
use ratatui::text::Line;

use crate::protocol::{CandidateId, GateId, Mode};
use crate::tui::editor::TextBuf;
use crate::tui::keymap::Action;
use crate::tui::shared::{EditPurpose, Focus};

/// The dialog open over the panes (the gate dialog is separate: a confirmation can open
/// over it and go back to it).
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help(HelpView),
    Confirm(ConfirmView),
    Input(InputView),
    Choice(ChoiceView),
}

/// The help dialog (its keys and drawing: `help.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelpView {
    pub(super) scroll: usize,
    /// The actions listed (`None`: every one, by context).
    pub(super) only: Option<&'static [Action]>,
}

impl HelpView {
    /// The help of a view that answers only these actions.
    pub fn for_actions(actions: &'static [Action]) -> HelpView {
        HelpView {
            scroll: 0,
            only: Some(actions),
        }
    }
}

/// What a confirmation asks (its keys and drawing: `confirm.rs`).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfirmKind {
    /// `interrupt`: asked by Ctrl-C (`kforge run` then exits 130 when it stops the run).
    Quit {
        interrupt: bool,
    },
    /// A switch to a mode that does not ask some of the gates waiting: it approves them.
    SwitchMode(Mode),
    MarkFinal(CandidateId),
    /// Rejecting a gate skips a step or drops a candidate: asked first.
    RejectGate(GateId),
    /// Cancelling every call in flight (this many when asked).
    CancelAllCalls(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmView {
    pub kind: ConfirmKind,
}

impl ConfirmView {
    pub fn new(kind: ConfirmKind) -> ConfirmView {
        ConfirmView { kind }
    }
}

/// What a list of choices offers (its keys and drawing: `choice.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceKind {
    /// The mode to switch to.
    Mode,
    /// The standing approval to take back (or all of them).
    Revoke,
}

/// A list of choices, one selected; what each offers is read from the session when drawn
/// and when chosen, so it is never stale.
#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceView {
    pub kind: ChoiceKind,
    pub(super) at: usize,
}

impl ChoiceView {
    /// The list, the selection on `at`.
    pub fn new(kind: ChoiceKind, at: usize) -> ChoiceView {
        ChoiceView { kind, at }
    }

    /// The selected choice's index.
    pub fn selected(&self) -> usize {
        self.at
    }
}

/// An inline input (its keys and drawing: `input.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct InputView {
    pub title: String,
    pub purpose: EditPurpose,
    pub text: TextBuf,
    pub multiline: bool,
    /// The text is Python (a kernel): highlight it.
    pub python: bool,
    /// The last highlighted version: lines still equal to theirs keep their colours while
    /// the new version is highlighted off the UI thread.
    pub(super) last_highlight: Option<Arc<Vec<Line<'static>>>>,
    /// Where the filtered pane is (a filter's input sits over its last lines).
    pub anchor: Option<Rect>,
}

impl InputView {
    pub fn new(title: String, purpose: EditPurpose, text: TextBuf, multiline: bool) -> InputView {
        InputView {
            title,
            purpose,
            text,
            multiline,
            python: false,
            last_highlight: None,
            anchor: None,
        }
    }

    /// The filter of a pane (the tree, the console), drawn over its last lines, holding
    /// the filter as it is.
    pub fn filter(pane: Focus, title: &str, current: &str) -> InputView {
        InputView::new(
            title.into(),
            EditPurpose::Filter(pane),
            TextBuf::new(current),
            false,
        )
    }

    /// A kernel: highlighted as Python.
    pub fn python(mut self) -> InputView {
        self.python = true;
        self
    }
}
