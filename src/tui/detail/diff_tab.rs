//! The Diff tab: the selection against its parent (or the marked candidate), unified or
//! side by side, word-level emphasis, hunk by hunk.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{ScrollView, TabView};
use crate::protocol::CandidateId;
use crate::tui::component::{AppEvents, Ctx, Handled, Hint};
use crate::tui::diff::{self, Diff, Half, RowKind, Segments, SideRow};
use crate::tui::highlight::hash_text;
use crate::tui::keymap::Action;
use crate::tui::theme::Role;
use crate::tui::widgets::{code_lines, diff_sign, draw_columns, row_spans, seg_spans};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffLayout {
    #[default]
    Unified,
    SideBySide,
}

#[derive(Debug, Default)]
pub struct DiffTab {
    layout: DiffLayout,
    /// The hunk the view is at.
    hunk: usize,
    /// The last diff, by the hashes of its two texts.
    cache: Option<((u64, u64), Arc<Diff>)>,
}

/// The candidate the Diff tab compares against: the marked one, else the parent.
pub fn diff_base(cx: &Ctx) -> Option<CandidateId> {
    let sel = cx.selected?;
    match cx.marked {
        Some(m) if m != sel => Some(m),
        _ => cx.state.candidates.get(&sel)?.parent,
    }
}

impl DiffTab {
    pub fn reset(&mut self) {
        self.hunk = 0;
    }

    /// The diff of the selection against its base (cached), with the two ids.
    fn current(&mut self, cx: &Ctx) -> Option<(Arc<Diff>, CandidateId, CandidateId)> {
        let sel = cx.selected?;
        let base = diff_base(cx)?;
        let old = cx.code(base).unwrap_or_else(|| Arc::from(""));
        let new = cx.code(sel).unwrap_or_else(|| Arc::from(""));
        let key = (hash_text(&old), hash_text(&new));
        if let Some((k, d)) = &self.cache
            && *k == key
        {
            return Some((d.clone(), base, sel));
        }
        let d = Arc::new(diff::diff(&old, &new, 3));
        self.cache = Some((key, d.clone()));
        Some((d, base, sel))
    }

    fn hunks<'a>(&self, d: &'a Diff) -> &'a [usize] {
        match self.layout {
            DiffLayout::Unified => &d.hunks_unified,
            DiffLayout::SideBySide => &d.hunks_side,
        }
    }

    fn jump_hunk(&mut self, forward: bool, cx: &Ctx, view: &mut ScrollView, out: &mut AppEvents) {
        let Some((diff, _, _)) = self.current(cx) else {
            return;
        };
        let hunks = self.hunks(&diff);
        if hunks.is_empty() {
            return;
        }
        let cur = self.hunk.min(hunks.len() - 1);
        let next = if forward {
            (cur + 1 < hunks.len()).then_some(cur + 1)
        } else {
            cur.checked_sub(1)
        };
        match next {
            Some(n) => {
                self.hunk = n;
                view.scroll = hunks[n];
            }
            None => out.flash(if forward { "last hunk" } else { "first hunk" }),
        }
    }
}

impl TabView for DiffTab {
    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::DiffLayout, "layout"),
            Hint::new(Action::NextHunk, "hunk"),
        ]);
    }

    fn on_action(
        &mut self,
        action: Action,
        cx: &Ctx,
        view: &mut ScrollView,
        out: &mut AppEvents,
    ) -> Handled {
        match action {
            Action::DiffLayout => {
                self.layout = match self.layout {
                    DiffLayout::Unified => DiffLayout::SideBySide,
                    DiffLayout::SideBySide => DiffLayout::Unified,
                };
                view.reset();
                self.hunk = 0;
            }
            Action::NextHunk | Action::PrevHunk => {
                self.jump_hunk(action == Action::NextHunk, cx, view, out)
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        let Some((diff, base, sel)) = self.current(cx) else {
            let msg = if cx.selected.is_some() {
                format!(
                    "nothing to diff against: this candidate has no parent; mark one with {} to diff against it",
                    cx.keymap.hint(Action::Mark)
                )
            } else {
                "no candidate selected".into()
            };
            frame.render_widget(
                Paragraph::new(msg)
                    .style(cx.theme.get(Role::Muted))
                    .wrap(ratatui::widgets::Wrap { trim: true }),
                area,
            );
            return;
        };
        let old_text = cx.code(base).unwrap_or_else(|| Arc::from(""));
        let new_text = cx.code(sel).unwrap_or_else(|| Arc::from(""));
        let old_hl = code_lines(cx, &old_text);
        let new_hl = code_lines(cx, &new_text);
        let against = if cx.marked == Some(base) {
            "marked"
        } else {
            "parent"
        };
        let hunks = self.hunks(&diff);
        let current_hunk = if hunks.is_empty() {
            0
        } else {
            self.hunk.min(hunks.len() - 1) + 1
        };
        let header = Line::from(vec![
            Span::styled(format!("#{base}"), cx.theme.get(Role::Accent)),
            Span::styled(format!(" ({against}) → "), cx.theme.get(Role::Muted)),
            Span::styled(format!("#{sel}"), cx.theme.get(Role::Accent)),
            Span::styled(format!("  +{}", diff.added), cx.theme.get(Role::DiffAdd)),
            Span::styled(format!(" −{}", diff.removed), cx.theme.get(Role::DiffDel)),
            Span::styled(
                format!(
                    "  hunk {current_hunk}/{}  {}",
                    hunks.len(),
                    match self.layout {
                        DiffLayout::Unified => "unified",
                        DiffLayout::SideBySide => "side by side",
                    }
                ),
                cx.theme.get(Role::Muted),
            ),
        ]);
        frame.render_widget(
            Paragraph::new(header),
            Rect::new(area.x, area.y, area.width, 1),
        );
        let body = Rect::new(
            area.x,
            area.y + 1,
            area.width,
            area.height.saturating_sub(1),
        );
        if diff.is_empty() {
            frame.render_widget(
                Paragraph::new("the two kernels are identical").style(cx.theme.get(Role::Muted)),
                body,
            );
            return;
        }
        let text = |t: &Segments| t.0.iter().map(|(_, s)| s.as_str()).collect::<String>();
        let half_text = |x: &Option<Half>| x.as_ref().map(|h| text(&h.text)).unwrap_or_default();
        view.record_plain(|| match self.layout {
            DiffLayout::Unified => diff.unified.iter().map(|r| text(&r.text)).collect(),
            DiffLayout::SideBySide => diff
                .side
                .iter()
                .map(|r| match r {
                    SideRow::Hunk(h) => h.clone(),
                    SideRow::Pair(a, b) => format!("{} {}", half_text(a), half_text(b)),
                })
                .collect(),
        });
        let h = body.height as usize;
        let hs = view.hscroll;
        match self.layout {
            DiffLayout::Unified => {
                let start = view.clamp(diff.unified.len(), h);
                let lines: Vec<Line> = diff
                    .unified
                    .iter()
                    .skip(start)
                    .take(h)
                    .map(|r| {
                        if r.kind == RowKind::Hunk {
                            return Line::from(seg_spans(cx, &r.text, r.kind, 0));
                        }
                        let num = |n: Option<usize>| n.map_or("    ".into(), |n| format!("{n:>4}"));
                        let (sign, sign_style) = diff_sign(cx, r.kind);
                        let mut spans = vec![
                            Span::styled(
                                format!("{} {} ", num(r.old_no), num(r.new_no)),
                                cx.theme.get(Role::LineNumber),
                            ),
                            Span::styled(format!("{sign} "), sign_style),
                        ];
                        let row = Line::from(row_spans(cx, &r.text, r.kind, r.new_no, &new_hl, hs));
                        spans.extend(view.marked(cx, row).spans);
                        Line::from(spans)
                    })
                    .collect();
                frame.render_widget(Paragraph::new(lines), body);
            }
            DiffLayout::SideBySide => {
                let start = view.clamp(diff.side.len(), h);
                let mut l_lines = Vec::new();
                let mut r_lines = Vec::new();
                for row in diff.side.iter().skip(start).take(h) {
                    match row {
                        SideRow::Hunk(t) => {
                            l_lines.push(Line::styled(t.clone(), cx.theme.get(Role::DiffHunk)));
                            r_lines.push(Line::styled(t.clone(), cx.theme.get(Role::DiffHunk)));
                        }
                        SideRow::Pair(l, r) => {
                            for (half, out, hl) in
                                [(l, &mut l_lines, &old_hl), (r, &mut r_lines, &new_hl)]
                            {
                                out.push(match half {
                                    None => Line::from(""),
                                    Some(hf) => {
                                        let mut spans = vec![Span::styled(
                                            format!("{:>4} ", hf.no),
                                            cx.theme.get(Role::LineNumber),
                                        )];
                                        let row = Line::from(row_spans(
                                            cx,
                                            &hf.text,
                                            hf.kind,
                                            Some(hf.no),
                                            hl,
                                            hs,
                                        ));
                                        spans.extend(view.marked(cx, row).spans);
                                        Line::from(spans)
                                    }
                                });
                            }
                        }
                    }
                }
                draw_columns(cx, frame, body, l_lines, r_lines);
            }
        }
    }
}
