//! What every detail tab shares: where it is scrolled to, and the search (`/` in the pane):
//! the text it looks through is what the tab drew last, its matches are marked on screen,
//! `n`/`N` go from match to match.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use crate::tui::component::Ctx;
use crate::tui::theme::Role;
use crate::tui::widgets::{mark_matches, plain};

#[derive(Debug, Default)]
pub struct ScrollView {
    /// First line shown, and columns scrolled right.
    pub scroll: usize,
    pub hscroll: usize,
    search: Option<String>,
    /// The plain text of every line of the tab's document, as last drawn while a search
    /// is active (what the search looks through).
    plain: Vec<String>,
    /// A search was entered: find its first match once the next frame has the text.
    pending_find: bool,
    /// For the message line, once drawn.
    pub message: Option<String>,
}

impl ScrollView {
    /// Back to the top (a new tab, a new candidate); the search stays.
    pub fn reset(&mut self) {
        self.scroll = 0;
        self.hscroll = 0;
    }

    pub fn scroll_by(&mut self, delta: isize) {
        self.scroll = (self.scroll as isize + delta).max(0) as usize;
    }

    pub fn search(&self) -> Option<&str> {
        self.search.as_deref()
    }

    /// A new search (empty clears it); its first match is found once the text is drawn.
    pub fn set_search(&mut self, text: &str) {
        let text = text.trim();
        self.search = (!text.is_empty()).then(|| text.to_string());
        self.plain.clear();
        self.pending_find = self.search.is_some();
    }

    /// Clamps the scroll to a document of `total` lines shown `height` at a time; the
    /// first line to show.
    pub fn clamp(&mut self, total: usize, height: usize) -> usize {
        self.scroll = self.scroll.min(total.saturating_sub(height));
        self.scroll
    }

    /// Keeps the document's text for the search (only while one is active).
    pub fn record(&mut self, lines: &[Line]) {
        if self.search.is_some() {
            self.plain = lines.iter().map(plain).collect();
        }
    }

    /// Keeps text given as strings (documents not drawn as one list of lines).
    pub fn record_plain(&mut self, text: impl FnOnce() -> Vec<String>) {
        if self.search.is_some() {
            self.plain = text();
        }
    }

    /// A visible line with the search's matches marked.
    pub fn marked(&self, cx: &Ctx, line: Line<'static>) -> Line<'static> {
        match &self.search {
            Some(q) => mark_matches(line, q, cx.theme.get(Role::SearchMatch)),
            None => line,
        }
    }

    /// Draws a document that scrolls as a whole (the Eval and Analysis tabs).
    pub fn draw_lines(
        &mut self,
        cx: &Ctx,
        frame: &mut Frame,
        area: Rect,
        lines: Vec<Line<'static>>,
    ) {
        self.record(&lines);
        let h = area.height as usize;
        let start = self.clamp(lines.len(), h);
        let visible: Vec<Line> = lines
            .into_iter()
            .skip(start)
            .take(h)
            .map(|l| self.marked(cx, l))
            .collect();
        frame.render_widget(Paragraph::new(visible), area);
    }

    /// Runs a search entered since the last frame.
    pub fn find_pending(&mut self, tab: &str) {
        if self.pending_find && self.search.is_some() {
            self.pending_find = false;
            self.message = self.find(true, true, tab);
        }
    }

    /// Scrolls to the next (or previous) line holding the search, from the current line
    /// (`here`: it counts), wrapping around. Returns what to say on the message line.
    pub fn find(&mut self, forward: bool, here: bool, tab: &str) -> Option<String> {
        let query = self.search.clone()?;
        let needle = query.to_lowercase();
        let hits: Vec<usize> = self
            .plain
            .iter()
            .enumerate()
            .filter(|(_, l)| l.to_lowercase().contains(&needle))
            .map(|(i, _)| i)
            .collect();
        if hits.is_empty() {
            return Some(format!("\"{query}\" is not in the {tab} tab"));
        }
        let cur = self.scroll;
        let next = if forward {
            hits.iter()
                .find(|&&i| if here { i >= cur } else { i > cur })
                .or(hits.first())
        } else {
            hits.iter().rev().find(|&&i| i < cur).or(hits.last())
        };
        let at = *next.expect("hits is not empty");
        self.scroll = at;
        let n = hits.iter().position(|&i| i == at).unwrap_or(0) + 1;
        Some(format!(
            "\"{query}\": match {n} of {} (line {})",
            hits.len(),
            at + 1
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(lines: &[&str]) -> Vec<Line<'static>> {
        lines.iter().map(|l| Line::from(l.to_string())).collect()
    }

    #[test]
    fn find_goes_round_the_matches_and_says_where() {
        let mut v = ScrollView::default();
        v.set_search("foo");
        v.record(&doc(&["a", "foo 1", "b", "FOO 2", "c"]));
        v.find_pending("Code");
        assert_eq!(v.scroll, 1);
        assert_eq!(v.message.as_deref(), Some("\"foo\": match 1 of 2 (line 2)"));
        assert!(
            v.find(true, false, "Code")
                .unwrap()
                .contains("match 2 of 2")
        );
        assert_eq!(v.scroll, 3);
        v.find(true, false, "Code");
        assert_eq!(v.scroll, 1, "wraps around");
        v.find(false, false, "Code");
        assert_eq!(v.scroll, 3, "backwards wraps too");
        v.set_search("zzz");
        v.record(&doc(&["a"]));
        assert_eq!(
            v.find(true, true, "Diff").as_deref(),
            Some("\"zzz\" is not in the Diff tab")
        );
        v.set_search("  ");
        assert!(v.search().is_none(), "blank clears");
    }

    #[test]
    fn the_scroll_stays_inside_the_document() {
        let mut v = ScrollView {
            scroll: 50,
            ..Default::default()
        };
        assert_eq!(v.clamp(30, 10), 20);
        assert_eq!(v.clamp(5, 10), 0);
    }
}
