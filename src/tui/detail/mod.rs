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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Code,
    Diff,
    Compare,
    Llm,
    Eval,
    Analysis,
}

impl Tab {
    pub const ALL: [Tab; 6] = [
        Tab::Code,
        Tab::Diff,
        Tab::Compare,
        Tab::Llm,
        Tab::Eval,
        Tab::Analysis,
    ];
    pub fn title(&self) -> &'static str {
        match self {
            Tab::Code => "Code",
            Tab::Diff => "Diff",
            Tab::Compare => "Compare",
            Tab::Llm => "LLM",
            Tab::Eval => "Eval",
            Tab::Analysis => "Analysis",
        }
    }
    fn short(&self) -> &'static str {
        match self {
            Tab::Compare => "Cmp",
            Tab::Analysis => "Anl",
            other => other.title(),
        }
    }
    pub fn index(&self) -> usize {
        Tab::ALL.iter().position(|t| t == self).unwrap_or(0)
    }
}

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

#[derive(Debug)]
pub struct DetailPane {
    tab: Tab,
    pub view: ScrollView,
    code: code::CodeTab,
    diff: diff_tab::DiffTab,
    compare: compare::CompareTab,
    llm: llm::LlmTab,
    eval: eval::EvalTab,
    analysis: analysis::AnalysisTab,
    /// Where it and its tab labels were last drawn (the mouse).
    pub area: Rect,
    pub tab_areas: Vec<(Tab, Rect)>,
}

impl Default for DetailPane {
    fn default() -> Self {
        DetailPane {
            tab: Tab::Code,
            view: ScrollView::default(),
            code: code::CodeTab,
            diff: diff_tab::DiffTab::default(),
            compare: compare::CompareTab,
            llm: llm::LlmTab::default(),
            eval: eval::EvalTab,
            analysis: analysis::AnalysisTab,
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
            self.diff.reset();
            self.llm.follow_tail();
        }
    }

    /// Another candidate was selected: every view starts at its top.
    pub fn selection_changed(&mut self) {
        self.view.reset();
        self.diff.reset();
        self.llm.reset();
    }

    /// The mark changed: the diff is against something else now.
    pub fn mark_changed(&mut self) {
        self.diff.reset();
    }

    /// The call the LLM tab shows (or would show).
    pub fn shown_call<'a>(&self, cx: &'a Ctx) -> Option<&'a Call> {
        self.llm.shown_call(cx)
    }

    /// Whether a streaming call's text is on screen (its deltas need a redraw).
    pub fn shows_call(&self, cx: &Ctx, call: CallId) -> bool {
        self.tab == Tab::Llm && self.llm.shown_call(cx).map(|c| c.id) == Some(call)
    }

    /// A call started: while following, the LLM tab moves to it.
    pub fn call_started(&mut self, cx: &Ctx, call: CallId) {
        if cx.follow && self.tab == Tab::Llm && self.llm.show(cx, call) {
            self.view.reset();
        }
    }

    /// The search entered in the pane's input: the view goes where it finds, so a
    /// streaming answer stops pulling it to its end.
    pub fn search(&mut self, text: &str) {
        self.view.set_search(text);
        self.llm.stop_tail();
    }

    /// A message the last frame left for the message line (where a search landed).
    pub fn take_message(&mut self) -> Option<String> {
        self.view.message.take()
    }

    fn current(&mut self) -> &mut dyn TabView {
        match self.tab {
            Tab::Code => &mut self.code,
            Tab::Diff => &mut self.diff,
            Tab::Compare => &mut self.compare,
            Tab::Llm => &mut self.llm,
            Tab::Eval => &mut self.eval,
            Tab::Analysis => &mut self.analysis,
        }
    }

    fn search_input(&self, cx: &Ctx) -> Overlay {
        Overlay::Input(InputView::new(
            format!(
                "search the {} tab (enter finds; {}/{} next/previous; esc in the pane clears)",
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
                self.llm.stop_tail()
            }
            Action::Bottom => self.llm.follow_tail(),
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
        match action {
            Action::TabNext | Action::TabPrev => {
                let i = self.tab.index();
                let j = if action == Action::TabNext {
                    (i + 1) % 6
                } else {
                    (i + 5) % 6
                };
                self.set_tab(Tab::ALL[j]);
            }
            Action::TabCode => self.set_tab(Tab::Code),
            Action::TabDiff => self.set_tab(Tab::Diff),
            Action::TabCompare => self.set_tab(Tab::Compare),
            Action::TabLlm => self.set_tab(Tab::Llm),
            Action::TabEval => self.set_tab(Tab::Eval),
            Action::TabAnalysis => self.set_tab(Tab::Analysis),
            // The diff and call keys show their tab first.
            Action::DiffLayout | Action::NextHunk | Action::PrevHunk => {
                self.set_tab(Tab::Diff);
                return self.diff.on_action(action, cx, &mut self.view, out);
            }
            Action::NextCall | Action::PrevCall => {
                self.set_tab(Tab::Llm);
                return self.llm.on_action(action, cx, &mut self.view, out);
            }
            _ => {
                let view = &mut self.view;
                return match self.tab {
                    Tab::Code => self.code.on_action(action, cx, view, out),
                    Tab::Diff => self.diff.on_action(action, cx, view, out),
                    Tab::Compare => self.compare.on_action(action, cx, view, out),
                    Tab::Llm => self.llm.on_action(action, cx, view, out),
                    Tab::Eval => self.eval.on_action(action, cx, view, out),
                    Tab::Analysis => self.analysis.on_action(action, cx, view, out),
                };
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
                self.llm.stop_tail();
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
        self.current().draw(cx, frame, body, &mut view);
        // A search just entered lands on its first match once the text is known.
        view.find_pending(title);
        self.view = view;
    }
}

impl DetailPane {
    /// The hints of the shown tab, whatever pane has the keyboard (its keys work
    /// everywhere).
    pub fn shared_hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        match self.tab {
            Tab::Code => self.code.hints(cx, out),
            Tab::Diff => self.diff.hints(cx, out),
            Tab::Compare => self.compare.hints(cx, out),
            Tab::Llm => self.llm.hints(cx, out),
            Tab::Eval => self.eval.hints(cx, out),
            Tab::Analysis => self.analysis.hints(cx, out),
        }
    }
}
