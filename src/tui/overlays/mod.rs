//! Dialogs over the panes: help, confirmations, inline input, lists of choices (the mode,
//! the approval to take back), and the gate dialog. Each
//! has the keyboard while it is open (nothing reaches the panes behind it), its own keys,
//! hints and drawing; it closes itself with `AppEvent::Close`.

mod choice;
mod confirm;
mod evidence;
mod gate;
mod help;
mod input;
mod state;

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::Rect;

use super::component::{AppEvents, Component, Ctx, Hint};

pub use evidence::evidence_lines;
pub use gate::GateView;
pub use state::{ChoiceKind, ChoiceView, ConfirmKind, ConfirmView, HelpView, InputView, Overlay};

impl Overlay {
    fn inner(&mut self) -> &mut dyn Component {
        match self {
            Overlay::Help(v) => v,
            Overlay::Confirm(v) => v,
            Overlay::Input(v) => v,
            Overlay::Choice(v) => v,
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
            Overlay::Choice(v) => v.hints(cx, out),
        }
    }

    pub fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        self.inner().draw(cx, frame, area);
    }
}
