//! Dialogs over the panes: help, confirmations, inline input, and the gate dialog. Each
//! has the keyboard while it is open (nothing reaches the panes behind it), its own keys,
//! hints and drawing; it closes itself with `AppEvent::Close`.

mod confirm;
mod evidence;
mod gate;
mod help;
mod input;

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::Rect;

use super::component::{AppEvents, Component, Ctx, Hint};
use super::keymap::Action;

pub use confirm::{ConfirmKind, ConfirmView};
pub use evidence::evidence_lines;
pub use gate::GateView;
pub use help::HelpView;
pub use input::InputView;

/// The dialog open over the panes (the gate dialog is separate: a confirmation can open
/// over it and go back to it).
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help(HelpView),
    Confirm(ConfirmView),
    Input(InputView),
}

impl Overlay {
    fn inner(&mut self) -> &mut dyn Component {
        match self {
            Overlay::Help(v) => v,
            Overlay::Confirm(v) => v,
            Overlay::Input(v) => v,
        }
    }

    pub fn on_key(&mut self, key: &KeyEvent, cx: &Ctx, out: &mut AppEvents) {
        // Modal: a key it does not use goes nowhere.
        let _ = self.inner().on_key(key, cx, out);
    }

    pub fn hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        match self {
            Overlay::Help(v) => v.hints(cx, out),
            Overlay::Confirm(v) => v.hints(cx, out),
            Overlay::Input(v) => v.hints(cx, out),
        }
    }

    pub fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        self.inner().draw(cx, frame, area);
    }
}

/// The scroll keys every scrolling dialog shares: the new offset, or `None` for another
/// action.
pub fn scrolled(action: Action, at: usize, page: usize) -> Option<usize> {
    Some(match action {
        Action::Down => at + 1,
        Action::Up => at.saturating_sub(1),
        Action::PageDown => at + page,
        Action::PageUp => at.saturating_sub(page),
        Action::Top => 0,
        Action::Bottom => usize::MAX / 2,
        _ => return None,
    })
}
