//! What a tab of the detail pane is to the pane: a view of the selected candidate with its
//! own keys and hints, drawn in the pane's scroll state. Apart from the pane, so the tabs
//! and the pane that holds them do not import each other (the pane re-exports it).

use ratatui::Frame;
use ratatui::layout::Rect;

use super::scroll::ScrollView;
use crate::tui::component::{AppEvents, Ctx, Handled, Hint};
use crate::tui::keymap::Action;

/// One view of the selected candidate in the detail pane.
pub trait TabView {
    fn hints(&self, _cx: &Ctx, _out: &mut Vec<Hint>) {}

    /// An action the pane did not use (it gets scrolling and searching first).
    fn on_action(
        &mut self,
        _action: Action,
        _cx: &Ctx,
        _view: &mut ScrollView,
        _out: &mut AppEvents,
    ) -> Handled {
        Handled::Ignored
    }

    /// Draws the tab's body; scroll state lives in `view`.
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView);
}
