//! The candidate tree: one row per candidate under its parent, folds, the selection, and
//! placeholder rows for candidates an LLM call is writing now.

use std::collections::{HashMap, HashSet};

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::protocol::{CallAnswer, CandidateId};
use crate::session::state::{Candidate, CandidateStatus};

use crate::protocol::figures::duration_text;
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint, inside};
use crate::tui::glyphs::Glyph;
use crate::tui::keymap::{Action, Context};
use crate::tui::overlays::{InputView, Overlay};
use crate::tui::shared::Focus;
use crate::tui::theme::Role;
use crate::tui::widgets::{glyph, outcome, pane_block, truncate};

/// A row of the flattened candidate tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub id: CandidateId,
    pub depth: usize,
    pub has_children: bool,
    pub collapsed: bool,
}

#[derive(Debug, Default)]
pub struct TreePane {
    collapsed: HashSet<CandidateId>,
    /// Shows only the candidates whose row text matches (label, kind, status, outcome),
    /// each with its ancestors; folds are ignored while it is on.
    filter: String,
    /// The flattened rows, rebuilt when the tree or a fold changes.
    rows: Option<Vec<TreeRow>>,
    /// First row shown.
    offset: usize,
    /// Where it was last drawn (the mouse).
    pub area: Rect,
}

impl TreePane {
    /// The tree changed (a candidate appeared): rebuild the rows on the next use.
    pub fn invalidate(&mut self) {
        self.rows = None;
    }

    /// The visible rows (cached until the tree, a fold or the filter changes).
    pub fn rows(&mut self, cx: &Ctx) -> &[TreeRow] {
        if self.rows.is_none() {
            self.rows = Some(build_rows(cx, &self.collapsed, &self.filter));
        }
        self.rows.as_deref().unwrap_or(&[])
    }

    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// The first row the filter matches (not an ancestor shown for context).
    pub fn first_match(&mut self, cx: &Ctx) -> Option<CandidateId> {
        let needle = self.filter.trim().to_lowercase();
        let edited = cx.rewritten_kernels();
        self.rows(cx)
            .iter()
            .map(|r| r.id)
            .find(|id| row_text(cx, &cx.state.candidates[id], &edited).contains(&needle))
    }

    pub fn set_filter(&mut self, filter: String) {
        if filter != self.filter {
            self.filter = filter;
            self.rows = None;
        }
    }

    /// The filter's input, drawn over the tree's last lines.
    pub fn filter_input(&self) -> Overlay {
        Overlay::Input(InputView::filter(
            Focus::Tree,
            "filter the candidates (enter keeps, esc clears)",
            &self.filter,
        ))
    }

    /// Makes a candidate visible: unfolds its ancestors.
    pub fn reveal(&mut self, id: Option<CandidateId>, cx: &Ctx) {
        let mut cur = id
            .and_then(|i| cx.state.candidates.get(&i))
            .and_then(|c| c.parent);
        while let Some(p) = cur {
            if self.collapsed.remove(&p) {
                self.rows = None;
            }
            cur = cx.state.candidates.get(&p).and_then(|c| c.parent);
        }
    }

    fn select_row(&mut self, cx: &Ctx, out: &mut AppEvents, pick: impl Fn(usize, usize) -> usize) {
        let sel = cx.selected;
        let rows = self.rows(cx);
        if rows.is_empty() {
            return;
        }
        let cur = sel
            .and_then(|s| rows.iter().position(|r| r.id == s))
            .unwrap_or(0);
        let next = pick(cur, rows.len()).min(rows.len() - 1);
        out.push(AppEvent::Select {
            id: Some(rows[next].id),
            by_user: true,
        });
    }

    fn move_by(&mut self, delta: isize, cx: &Ctx, out: &mut AppEvents) {
        self.select_row(cx, out, |cur, _| (cur as isize + delta).max(0) as usize);
    }
}

/// The marks after a candidate's label: ` final`, ` shapes✗`, ` ✎` (its kernel rewritten
/// by the person at its gate: in `edited`, `Ctx::rewritten_kernels`).
fn marks(cx: &Ctx, c: &Candidate, edited: &HashSet<CandidateId>) -> String {
    let mut out = String::new();
    if cx.state.is_final(c.id) {
        out.push_str(&format!(" {}", Glyph::Final.text()));
    }
    if c.shapes.as_ref().is_some_and(|s| s.fails()) {
        out.push_str(&format!(" {}", Glyph::ShapesWrong.text()));
    }
    if edited.contains(&c.id) {
        out.push_str(&format!(" {}", Glyph::Edited.text()));
    }
    out
}

/// What the tree's filter looks through: `#9 stage 3 memory_and_tuning correct best
/// 1.83x`.
fn row_text(cx: &Ctx, c: &Candidate, edited: &HashSet<CandidateId>) -> String {
    let status = match c.status {
        CandidateStatus::Pending => "pending",
        CandidateStatus::Evaluating => "evaluating",
        CandidateStatus::Correct => "correct",
        CandidateStatus::Failed => "failed",
        CandidateStatus::Dropped => "dropped",
    };
    let best = if cx.state.best == Some(c.id) {
        " best"
    } else {
        ""
    };
    let word = if edited.contains(&c.id) {
        " edited"
    } else {
        ""
    };
    format!(
        "#{} {} {status}{best}{}{word} {}",
        c.id,
        c.kind.label(),
        marks(cx, c, edited),
        outcome(cx, c)
    )
    .to_lowercase()
}

fn build_rows(cx: &Ctx, collapsed: &HashSet<CandidateId>, filter: &str) -> Vec<TreeRow> {
    let mut children: HashMap<Option<CandidateId>, Vec<CandidateId>> = HashMap::new();
    for c in cx.state.candidates.values() {
        // A parent that does not exist makes a root.
        let parent = c.parent.filter(|p| cx.state.candidates.contains_key(p));
        children.entry(parent).or_default().push(c.id);
    }
    // With a filter: the matching candidates and their ancestors, unfolded.
    let needle = filter.trim().to_lowercase();
    let shown: Option<HashSet<CandidateId>> = (!needle.is_empty()).then(|| {
        let mut keep = HashSet::new();
        let edited = cx.rewritten_kernels();
        for c in cx.state.candidates.values() {
            if row_text(cx, c, &edited).contains(&needle) {
                let mut cur = Some(c.id);
                while let Some(id) = cur {
                    if !keep.insert(id) {
                        break;
                    }
                    cur = cx.state.candidates.get(&id).and_then(|c| c.parent);
                }
            }
        }
        keep
    });
    let visible = |id: &CandidateId| shown.as_ref().is_none_or(|k| k.contains(id));
    let mut rows = Vec::with_capacity(cx.state.candidates.len());
    let mut stack: Vec<(CandidateId, usize)> = children
        .get(&None)
        .map(|v| {
            v.iter()
                .rev()
                .filter(|id| visible(id))
                .map(|id| (*id, 0))
                .collect()
        })
        .unwrap_or_default();
    while let Some((id, depth)) = stack.pop() {
        let kids = children.get(&Some(id));
        let folded = shown.is_none() && collapsed.contains(&id);
        rows.push(TreeRow {
            id,
            depth,
            has_children: kids.is_some(),
            collapsed: folded,
        });
        if !folded && let Some(k) = kids {
            stack.extend(
                k.iter()
                    .rev()
                    .filter(|c| visible(c))
                    .map(|c| (*c, depth + 1)),
            );
        }
    }
    rows
}

impl Component for TreePane {
    fn context(&self) -> Option<Context> {
        Some(Context::Tree)
    }

    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::Down, "move"),
            Hint::new(Action::Toggle, "fold"),
            Hint::new(Action::Mark, "mark"),
            Hint::new(Action::Filter, "filter"),
        ]);
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        let sel = cx.selected;
        match action {
            Action::Up => self.move_by(-1, cx, out),
            Action::Down => self.move_by(1, cx, out),
            Action::PageUp => self.move_by(-10, cx, out),
            Action::PageDown => self.move_by(10, cx, out),
            Action::Top => self.select_row(cx, out, |_, _| 0),
            Action::Bottom => {
                self.select_row(cx, out, |_, n| n - 1);
                out.push(AppEvent::Follow(true));
            }
            Action::Collapse => {
                if let Some(id) = sel {
                    let has_children = cx.state.children(id).next().is_some();
                    if has_children && !self.collapsed.contains(&id) {
                        self.collapsed.insert(id);
                        self.rows = None;
                    } else if let Some(p) = cx.state.candidates.get(&id).and_then(|c| c.parent) {
                        out.push(AppEvent::Select {
                            id: Some(p),
                            by_user: true,
                        });
                    }
                }
            }
            Action::Expand => {
                if let Some(id) = sel
                    && self.collapsed.remove(&id)
                {
                    self.rows = None;
                }
            }
            Action::Toggle => {
                if let Some(id) = sel {
                    if !self.collapsed.remove(&id) && cx.state.children(id).next().is_some() {
                        self.collapsed.insert(id);
                    }
                    self.rows = None;
                }
            }
            Action::Filter => out.push(AppEvent::Open(self.filter_input())),
            // Nothing to clear here: the app says which filters are on.
            Action::ClearFilter if self.filter.is_empty() => return Handled::Ignored,
            Action::ClearFilter => {
                out.push(AppEvent::Filter {
                    pane: Focus::Tree,
                    text: String::new(),
                });
                out.flash(format!(
                    "tree filter cleared: all {} candidates shown",
                    cx.state.candidates.len()
                ));
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn on_mouse(&mut self, m: &MouseEvent, cx: &Ctx, out: &mut AppEvents) -> Handled {
        if !inside(m, self.area) {
            return Handled::Ignored;
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.move_by(3, cx, out),
            MouseEventKind::ScrollUp => self.move_by(-3, cx, out),
            MouseEventKind::Down(MouseButton::Left) => {
                out.push(AppEvent::Focus(Focus::Tree));
                let row = (m.row.saturating_sub(self.area.y + 1)) as usize + self.offset;
                if let Some(id) = self.rows(cx).get(row).map(|r| r.id) {
                    out.push(AppEvent::Select {
                        id: Some(id),
                        by_user: true,
                    });
                }
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        self.area = area;
        let total = cx.state.candidates.len();
        let edited = cx.rewritten_kernels();
        // Filtered: `Candidates 3/9 /stage` (the matches, not their ancestors).
        let shown = if self.filter.trim().is_empty() {
            total.to_string()
        } else {
            let needle = self.filter.trim().to_lowercase();
            let n = cx
                .state
                .candidates
                .values()
                .filter(|c| row_text(cx, c, &edited).contains(&needle))
                .count();
            crate::tui::widgets::filtered(n, total, &self.filter)
        };
        let follow = if cx.follow {
            format!(" {}", Glyph::Following.text())
        } else {
            String::new()
        };
        let title = format!(" Candidates {shown}{follow} ");
        let block = pane_block(cx, title, Focus::Tree);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let height = inner.height as usize;
        let mut offset = self.offset;
        let rows = self.rows(cx);
        if let Some(p) = cx
            .selected
            .and_then(|s| rows.iter().position(|r| r.id == s))
        {
            if p < offset {
                offset = p;
            } else if p >= offset + height {
                offset = p + 1 - height;
            }
        }
        offset = offset.min(rows.len().saturating_sub(height));
        let width = inner.width as usize;
        let mut lines = Vec::with_capacity(height);
        for row in rows.iter().skip(offset).take(height) {
            let Some(c) = cx.state.candidates.get(&row.id) else {
                continue;
            };
            let indent = "  ".repeat(row.depth.min(8));
            let fold = if !row.has_children {
                "  ".to_string()
            } else if row.collapsed {
                format!("{} ", Glyph::Folded.text())
            } else {
                format!("{} ", Glyph::Unfolded.text())
            };
            let (g, role) = glyph(cx, c);
            let marked = if cx.marked == Some(c.id) {
                Glyph::Marked.text()
            } else {
                ""
            };
            let mark = format!("{}{marked}", marks(cx, c, &edited));
            // A pending candidate's `○` says it all: its label keeps the room.
            let right = match c.status {
                CandidateStatus::Pending => String::new(),
                _ => outcome(cx, c),
            };
            let left_fixed = format!("{indent}{fold}");
            let room =
                width.saturating_sub(left_fixed.chars().count() + 1 + right.chars().count() + 1);
            // Where room is short the kind's label gives way, not the marks after it.
            let head = format!(" #{} ", c.id);
            let keep = head.chars().count() + mark.chars().count();
            let label = if room > keep + 1 {
                format!(
                    "{head}{}{mark}",
                    truncate(&c.kind.short_label(), room - keep)
                )
            } else {
                truncate(&format!("{head}{}{mark}", c.kind.short_label()), room)
            };
            let pad = width.saturating_sub(
                left_fixed.chars().count() + 1 + label.chars().count() + right.chars().count(),
            );
            let right_role = match c.status {
                CandidateStatus::Correct if cx.state.best == Some(c.id) => Role::Best,
                CandidateStatus::Correct if c.score().is_some_and(|s| s < 1.0) => Role::Warn,
                CandidateStatus::Correct => Role::Ok,
                _ => role,
            };
            let mut line = Line::from(vec![
                Span::styled(left_fixed, cx.theme.get(Role::Muted)),
                Span::styled(g, cx.theme.get(role)),
                Span::styled(
                    label,
                    cx.theme.get(if mark.is_empty() {
                        Role::Text
                    } else {
                        Role::Marked
                    }),
                ),
                Span::raw(" ".repeat(pad)),
                Span::styled(right, cx.theme.get(right_role)),
            ]);
            if Some(c.id) == cx.selected {
                line = line.patch_style(cx.theme.get(Role::Selection));
            }
            lines.push(line);
        }
        let no_rows = rows.is_empty();
        self.offset = offset;
        // Placeholders for the candidates being written now: a call in flight that will
        // answer with a kernel (not an analysis), below the tree while there is room.
        let now = cx.now();
        for call in cx
            .state
            .calls_in_flight()
            .filter(|c| c.kind.descriptor().answer == CallAnswer::Kernel)
        {
            if lines.len() >= height {
                break;
            }
            let of = call
                .candidate
                .map(|p| format!(" of #{p}"))
                .unwrap_or_default();
            let secs = (now - call.started).num_seconds().max(0);
            let text = format!(
                " {} {}{of}: being written ({})",
                Glyph::Writing.text(),
                call.kind.word(),
                duration_text(secs as f64)
            );
            lines.push(Line::styled(
                truncate(&text, width),
                cx.theme.get(Role::Pending),
            ));
        }
        if no_rows && lines.is_empty() {
            lines.push(Line::styled("no candidates yet", cx.theme.get(Role::Muted)));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
