//! The detail pane: a tab bar over six views of the selected candidate. The pane owns
//! what every tab shares (the scroll position, the search, the tab bar); each tab owns
//! its own state, keys and hints (the Diff tab its layout and hunk, the LLM tab the call
//! it shows). Tab keys (`1`-`6`, `[` `]`, the diff and call keys) work from any pane;
//! scrolling and searching need the pane focused.

mod analysis;
mod code;
mod compare;
mod diff_tab;
mod eval;
mod llm;
mod scroll;
mod tab_view;

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::protocol::CallId;
use crate::session::state::Call;

use super::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint, inside};
use super::editor::TextBuf;
use super::keymap::{Action, Context};
use super::overlays::{InputView, Overlay};
use super::shared::{EditPurpose, Focus};
use super::theme::Role;
use super::widgets::pane_block;

pub use diff_tab::DiffLayout;
pub use scroll::ScrollView;
pub use tab_view::TabView;

/// Declares the tabs from one table: the `Tab` enum with its order, titles and keys, and
/// `Views`, which holds each tab's view in a field of its own (the pane reaches the Diff
/// and LLM views directly for what only they do).
macro_rules! tabs {
    ($($tab:ident, $field:ident: $view:ty, $title:literal, $short:literal, $action:ident;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Tab { $($tab),* }

        impl Tab {
            /// The tabs in the bar's order.
            pub const ALL: [Tab; [$(Tab::$tab),*].len()] = [$(Tab::$tab),*];

            pub fn title(&self) -> &'static str {
                match self { $(Tab::$tab => $title),* }
            }

            /// The label of a bar too narrow for the titles.
            fn short(&self) -> &'static str {
                match self { $(Tab::$tab => $short),* }
            }

            /// The action that shows the tab.
            fn action(&self) -> Action {
                match self { $(Tab::$tab => Action::$action),* }
            }
        }

        #[derive(Debug, Default)]
        struct Views { $($field: $view),* }

        impl Views {
            fn get(&mut self, tab: Tab) -> &mut dyn TabView {
                match tab { $(Tab::$tab => &mut self.$field),* }
            }

            fn get_ref(&self, tab: Tab) -> &dyn TabView {
                match tab { $(Tab::$tab => &self.$field),* }
            }
        }
    };
}

// Adding a tab: its view (a `TabView` in a file of its own, `mod` above), a line here, and
// the action that shows it in `keymap.rs`.
tabs! {
    Code, code: code::CodeTab, "Code", "Code", TabCode;
    Diff, diff: diff_tab::DiffTab, "Diff", "Diff", TabDiff;
    Compare, compare: compare::CompareTab, "Compare", "Cmp", TabCompare;
    Llm, llm: llm::LlmTab, "LLM", "LLM", TabLlm;
    Eval, eval: eval::EvalTab, "Eval", "Eval", TabEval;
    Analysis, analysis: analysis::AnalysisTab, "Analysis", "Anl", TabAnalysis;
}

impl Tab {
    pub fn index(&self) -> usize {
        Tab::ALL.iter().position(|t| t == self).unwrap_or(0)
    }

    /// The tab `action` shows, if it is a tab's key.
    fn for_action(action: Action) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.action() == action)
    }
}

#[derive(Debug)]
pub struct DetailPane {
    tab: Tab,
    pub view: ScrollView,
    views: Views,
    /// Where it and its tab labels were last drawn (the mouse).
    pub area: Rect,
    pub tab_areas: Vec<(Tab, Rect)>,
}

impl Default for DetailPane {
    fn default() -> Self {
        DetailPane {
            tab: Tab::Code,
            view: ScrollView::default(),
            views: Views::default(),
            area: Rect::default(),
            tab_areas: Vec::new(),
        }
    }
}

impl DetailPane {
    pub fn tab(&self) -> Tab {
        self.tab
    }

    pub fn set_tab(&mut self, tab: Tab) {
        if self.tab != tab {
            self.tab = tab;
            self.view.reset();
            self.views.diff.reset();
            self.views.llm.follow_tail();
        }
    }

    /// Another candidate was selected: every view starts at its top.
    pub fn selection_changed(&mut self) {
        self.view.reset();
        self.views.diff.reset();
        self.views.llm.reset();
    }

    /// The mark changed: the diff is against something else now.
    pub fn mark_changed(&mut self) {
        self.views.diff.reset();
    }

    /// The call the LLM tab shows (or would show).
    pub fn shown_call<'a>(&self, cx: &'a Ctx) -> Option<&'a Call> {
        self.views.llm.shown_call(cx)
    }

    /// Whether a streaming call's text is on screen (its deltas need a redraw).
    pub fn shows_call(&self, cx: &Ctx, call: CallId) -> bool {
        self.tab == Tab::Llm && self.views.llm.shown_call(cx).map(|c| c.id) == Some(call)
    }

    /// A call started: while following, the LLM tab moves to it.
    pub fn call_started(&mut self, cx: &Ctx, call: CallId) {
        if cx.follow && self.tab == Tab::Llm && self.views.llm.show(cx, call) {
            self.view.reset();
        }
    }

    /// The search entered in the pane's input: the view goes where it finds, so a
    /// streaming answer stops pulling it to its end.
    pub fn search(&mut self, text: &str) {
        self.view.set_search(text);
        self.views.llm.stop_tail();
    }

    /// A message the last frame left for the message line (where a search landed).
    pub fn take_message(&mut self) -> Option<String> {
        self.view.message.take()
    }

    fn search_input(&self, cx: &Ctx) -> Overlay {
        Overlay::Input(InputView::new(
            format!(
                "search the {} tab (enter finds, esc cancels; {}/{} next/previous)",
                self.tab.title(),
                cx.keymap.hint(Action::NextHunk),
                cx.keymap.hint(Action::PrevHunk)
            ),
            EditPurpose::Search,
            TextBuf::new(self.view.search().unwrap_or("")),
            false,
        ))
    }

    /// Scrolling and searching, with the pane focused.
    fn focused_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        let v = &mut self.view;
        match action {
            Action::Up => v.scroll_by(-1),
            Action::Down => v.scroll_by(1),
            Action::PageUp => v.scroll_by(-10),
            Action::PageDown => v.scroll_by(10),
            Action::Top => v.scroll = 0,
            Action::Bottom => v.scroll = usize::MAX / 2,
            Action::ScrollLeft => v.hscroll = v.hscroll.saturating_sub(4),
            Action::ScrollRight => v.hscroll += 4,
            Action::Filter => out.push(AppEvent::Open(self.search_input(cx))),
            Action::ClearSearch => v.set_search(""),
            Action::NextHunk | Action::PrevHunk if v.search().is_some() => {
                if let Some(msg) = v.find(action == Action::NextHunk, false, self.tab.title()) {
                    out.flash(msg);
                }
            }
            _ => return Handled::Ignored,
        }
        match action {
            Action::Up | Action::PageUp | Action::Top | Action::NextHunk | Action::PrevHunk => {
                self.views.llm.stop_tail()
            }
            Action::Bottom => self.views.llm.follow_tail(),
            _ => {}
        }
        Handled::Consumed
    }
}

impl Component for DetailPane {
    fn context(&self) -> Option<Context> {
        Some(Context::Detail)
    }

    fn hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::Down, "scroll"),
            Hint::new(Action::TabNext, "tab"),
            Hint::new(Action::Filter, "search"),
        ]);
        self.shared_hints(cx, out);
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        if cx.focused(Focus::Detail) && self.focused_action(action, cx, out) == Handled::Consumed {
            return Handled::Consumed;
        }
        if let Some(tab) = Tab::for_action(action) {
            self.set_tab(tab);
            return Handled::Consumed;
        }
        match action {
            Action::TabNext | Action::TabPrev => {
                let n = Tab::ALL.len();
                let step = if action == Action::TabNext { 1 } else { n - 1 };
                self.set_tab(Tab::ALL[(self.tab.index() + step) % n]);
            }
            // The diff and call keys show their tab first.
            Action::DiffLayout | Action::NextHunk | Action::PrevHunk => {
                self.set_tab(Tab::Diff);
                return self.views.diff.on_action(action, cx, &mut self.view, out);
            }
            Action::NextCall | Action::PrevCall => {
                self.set_tab(Tab::Llm);
                return self.views.llm.on_action(action, cx, &mut self.view, out);
            }
            _ => {
                return self
                    .views
                    .get(self.tab)
                    .on_action(action, cx, &mut self.view, out);
            }
        }
        Handled::Consumed
    }

    fn on_mouse(&mut self, m: &MouseEvent, _cx: &Ctx, out: &mut AppEvents) -> Handled {
        if let MouseEventKind::Down(MouseButton::Left) = m.kind
            && let Some((tab, _)) = self.tab_areas.iter().find(|(_, r)| inside(m, *r))
        {
            let tab = *tab;
            self.set_tab(tab);
            return Handled::Consumed;
        }
        if !inside(m, self.area) {
            return Handled::Ignored;
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.view.scroll_by(3),
            MouseEventKind::ScrollUp => {
                self.view.scroll_by(-3);
                self.views.llm.stop_tail();
            }
            MouseEventKind::Down(MouseButton::Left) => out.push(AppEvent::Focus(Focus::Detail)),
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        self.area = area;
        let title = cx
            .selected_candidate()
            .map(|c| format!(" #{} {} ", c.id, c.kind.label()))
            .unwrap_or_else(|| " no candidate ".into());
        let block = pane_block(cx, title, Focus::Detail);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        if inner.height < 2 {
            return;
        }
        // The tab bar, remembered for mouse clicks.
        let mut spans = Vec::new();
        let mut x = inner.x;
        self.tab_areas.clear();
        let full: usize = Tab::ALL.iter().map(|t| t.title().len() + 5).sum();
        let compact = full > inner.width as usize;
        for (i, tab) in Tab::ALL.iter().enumerate() {
            let label = if compact {
                format!("{}{}", i + 1, tab.short())
            } else {
                format!(" {} {} ", i + 1, tab.title())
            };
            let w = label.chars().count() as u16;
            self.tab_areas.push((*tab, Rect::new(x, inner.y, w, 1)));
            x += w + 1;
            spans.push(Span::styled(
                label,
                cx.theme.get(if *tab == self.tab {
                    Role::TabActive
                } else {
                    Role::Tab
                }),
            ));
            spans.push(Span::styled("│", cx.theme.get(Role::Border)));
        }
        frame.render_widget(
            Paragraph::new(Line::from(spans)),
            Rect::new(inner.x, inner.y, inner.width, 1),
        );
        let body = Rect::new(inner.x, inner.y + 1, inner.width, inner.height - 1);
        let title = self.tab.title();
        let mut view = std::mem::take(&mut self.view);
        self.views.get(self.tab).draw(cx, frame, body, &mut view);
        // A search just entered lands on its first match once the text is known.
        view.find_pending(title);
        self.view = view;
    }
}

impl DetailPane {
    /// The hints of the shown tab, whatever pane has the keyboard (its keys work
    /// everywhere).
    pub fn shared_hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        self.views.get_ref(self.tab).hints(cx, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tab_has_an_action_of_its_own_and_the_bar_cycles_through_all() {
        for tab in Tab::ALL {
            assert_eq!(Tab::for_action(tab.action()), Some(tab), "{}", tab.title());
        }
        let mut pane = DetailPane::default();
        let mut seen = Vec::new();
        for _ in Tab::ALL {
            seen.push(pane.tab());
            let next = (pane.tab().index() + 1) % Tab::ALL.len();
            pane.set_tab(Tab::ALL[next]);
        }
        assert_eq!(seen, Tab::ALL);
        assert_eq!(pane.tab(), Tab::Code);
    }
}
