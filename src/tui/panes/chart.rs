//! The score timeline: speedup per candidate in creation order, the 1.0x line, failures,
//! the best and the selection; on the CPU (no timing) a correctness strip instead.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph};

use crate::protocol::CandidateId;
use crate::session::state::CandidateStatus;

use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint, inside};
use crate::tui::glyphs::Glyph;
use crate::tui::keymap::{Action, Context};
use crate::tui::shared::Focus;
use crate::tui::theme::Role;
use crate::tui::widgets::{glyph, pane_block, score_marker};

#[derive(Debug, Default)]
pub struct ChartPane {
    /// Where it was last drawn (the mouse).
    pub area: Rect,
}

impl ChartPane {
    /// Moves the selection `delta` points along the timeline (creation order).
    fn move_by(&self, delta: isize, cx: &Ctx, out: &mut AppEvents) {
        let ids: Vec<CandidateId> = cx.state.candidates.keys().copied().collect();
        if ids.is_empty() {
            return;
        }
        let cur = cx
            .selected
            .and_then(|s| ids.iter().position(|i| *i == s))
            .unwrap_or(0);
        let next = (cur as isize + delta).clamp(0, ids.len() as isize - 1) as usize;
        out.push(AppEvent::Select {
            id: Some(ids[next]),
            by_user: true,
        });
    }
}

impl Component for ChartPane {
    fn context(&self) -> Option<Context> {
        Some(Context::Chart)
    }

    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::PointNext, "next point"),
            Hint::new(Action::Mark, "mark"),
        ]);
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        match action {
            Action::Up | Action::PointPrev => self.move_by(-1, cx, out),
            Action::Down | Action::PointNext => self.move_by(1, cx, out),
            Action::PageUp => self.move_by(-10, cx, out),
            Action::PageDown => self.move_by(10, cx, out),
            Action::Top => self.move_by(isize::MIN / 2, cx, out),
            Action::Bottom => {
                self.move_by(isize::MAX / 2, cx, out);
                out.push(AppEvent::Follow(true));
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn on_mouse(&mut self, m: &MouseEvent, cx: &Ctx, out: &mut AppEvents) -> Handled {
        let r = self.area;
        if !inside(m, r) {
            return Handled::Ignored;
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.move_by(3, cx, out),
            MouseEventKind::ScrollUp => self.move_by(-3, cx, out),
            MouseEventKind::Down(MouseButton::Left) => {
                out.push(AppEvent::Focus(Focus::Chart));
                let ids: Vec<CandidateId> = cx.state.candidates.keys().copied().collect();
                if !ids.is_empty() && r.width > 8 {
                    // The plot spans the chart's inner width after the y labels.
                    let left = r.x + 7;
                    let width = (r.width - 8).max(1) as f64;
                    let frac = (m.column.saturating_sub(left)) as f64 / width;
                    let i = ((frac * ids.len() as f64).floor() as usize).min(ids.len() - 1);
                    out.push(AppEvent::Select {
                        id: Some(ids[i]),
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
        let ids: Vec<_> = cx.state.candidates.keys().copied().collect();
        let meaningful = cx.state.info.as_ref().is_none_or(|i| i.timing_meaningful);
        if !meaningful {
            draw_correctness_strip(cx, frame, area, &ids);
            return;
        }
        let n = ids.len();
        let mut scores = Vec::new();
        let mut fails = Vec::new();
        let mut best = Vec::new();
        let mut marked = Vec::new();
        let mut selected = Vec::new();
        // The selected point's 95% interval, drawn as a vertical bar through it.
        let mut error_bar = Vec::new();
        let mut max: f64 = 2.0;
        for (i, id) in ids.iter().enumerate() {
            let c = &cx.state.candidates[id];
            let x = (i + 1) as f64;
            let y = match (c.status, c.score()) {
                (CandidateStatus::Correct, Some(s)) => {
                    let top = c.score_interval().map_or(s, |(_, high)| high.max(s));
                    max = max.max(top * 1.1);
                    if cx.selected == Some(*id)
                        && let Some((low, high)) = c.score_interval()
                    {
                        error_bar = vec![(x, low), (x, high)];
                    }
                    scores.push((x, s));
                    if cx.state.best == Some(*id) {
                        best.push((x, s));
                    }
                    s
                }
                (CandidateStatus::Failed, _) | (CandidateStatus::Dropped, _) => {
                    fails.push((x, 0.0));
                    0.0
                }
                _ => 0.0,
            };
            if cx.marked == Some(*id) {
                marked.push((x, y));
            }
            if cx.selected == Some(*id) {
                selected.push((x, y));
            }
        }
        // The selection keeps the point's own glyph where it has one (the best's `★`,
        // highlighted), else `●`.
        // The selected best stays `★` (highlighted below); any other selection is `●`.
        let (selected_glyph, selected_role) = match cx.selected_candidate() {
            Some(c) if cx.state.best == Some(c.id) && c.is_correct() => {
                (Glyph::Best, Role::ChartBest)
            }
            _ => (Glyph::Selected, Role::ChartSelected),
        };
        let xmax = (n as f64 + 1.0).max(2.0);
        let baseline = vec![(0.0, 1.0), (xmax, 1.0)];
        let best_text = cx
            .state
            .best
            .and_then(|b| cx.state.candidates.get(&b))
            .map(|c| {
                format!(
                    "  best #{} {}",
                    c.id,
                    c.speedup().map(|s| s.text()).unwrap_or_default()
                )
            })
            .unwrap_or_default();
        // The selected point, when it is not the best and has an interval to show.
        let selected_text = cx
            .selected
            .filter(|s| Some(*s) != cx.state.best)
            .and_then(|s| cx.state.candidates.get(&s))
            .filter(|c| c.is_correct() && c.score_interval().is_some())
            .and_then(|c| {
                let s = c.speedup()?;
                Some(format!(
                    "  {} #{} {}{}",
                    Glyph::Selected.text(),
                    c.id,
                    s.text(),
                    score_marker(cx, c)
                ))
            })
            .unwrap_or_default();
        let title = format!(" Speedup per candidate{best_text}{selected_text} ");
        let block = pane_block(cx, title, Focus::Chart);
        let series = |marker: Marker, kind: GraphType, role: Role, data| {
            Dataset::default()
                .marker(marker)
                .graph_type(kind)
                .style(cx.theme.get(role))
                .data(data)
        };
        let point = |g: Glyph, role: Role, data| {
            series(Marker::Custom(g.ch()), GraphType::Scatter, role, data)
        };
        let datasets = vec![
            series(
                Marker::Braille,
                GraphType::Line,
                Role::ChartBaseline,
                &baseline,
            ),
            series(Marker::Braille, GraphType::Line, Role::ChartScore, &scores),
            series(
                Marker::Braille,
                GraphType::Line,
                Role::ChartSelected,
                &error_bar,
            ),
            point(Glyph::Failed, Role::ChartFail, &fails),
            // The best's `★` over the mark: the best is never hidden.
            point(Glyph::Marked, Role::Marked, &marked),
            point(Glyph::Best, Role::ChartBest, &best),
            // Drawn last.
            point(selected_glyph, selected_role, &selected),
        ];
        let axis = cx.theme.get(Role::ChartAxis);
        let chart = Chart::new(datasets)
            .block(block)
            .x_axis(
                Axis::default()
                    .style(axis)
                    .bounds([0.0, xmax])
                    .labels(vec![Line::from("0"), Line::from(format!("{n}"))]),
            )
            .y_axis(Axis::default().style(axis).bounds([0.0, max]).labels(vec![
                Line::from("0.0x"),
                Line::from("1.0x"),
                Line::from(format!("{max:.1}x")),
            ]));
        frame.render_widget(chart, area);
        // The chart colours a point's glyph only: the selection is highlighted as the
        // tree's selected row is, on the cell of its glyph (one glyph is only ever one
        // point: the best's `★`, the selection's `●`).
        if !selected.is_empty() {
            let highlight = cx.theme.get(Role::Selection);
            let plot = area.inner(ratatui::layout::Margin::new(1, 1));
            let buf = frame.buffer_mut();
            for y in plot.top()..plot.bottom() {
                for x in plot.left()..plot.right() {
                    let cell = &mut buf[(x, y)];
                    if cell.symbol() == selected_glyph.text() {
                        let style = cell.style().patch(highlight);
                        cell.set_style(style);
                    }
                }
            }
        }
    }
}

/// Without GPU timing there is no speedup to plot: one glyph per candidate in creation
/// order (correct, best, failed, dropped, pending), no axes and no 1.0x line.
fn draw_correctness_strip(cx: &Ctx, frame: &mut Frame, area: Rect, ids: &[CandidateId]) {
    let block = pane_block(
        cx,
        " Correctness per candidate (CPU interpreter: speed not measured) ",
        Focus::Chart,
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut spans = Vec::new();
    let (mut correct, mut failed) = (0, 0);
    for id in ids {
        let c = &cx.state.candidates[id];
        let (g, role) = glyph(cx, c);
        match c.status {
            CandidateStatus::Correct => correct += 1,
            CandidateStatus::Failed => failed += 1,
            _ => {}
        }
        let mut style = cx.theme.get(role);
        if cx.selected == Some(*id) {
            style = style.patch(cx.theme.get(Role::Selection));
        }
        spans.push(Span::styled(g.to_string(), style));
        spans.push(Span::raw(" "));
    }
    let lines = vec![
        Line::from(spans),
        Line::styled(
            format!(
                "{} candidates: {correct} correct, {failed} failed (nothing is timed: the earliest correct one is the best)",
                ids.len()
            ),
            cx.theme.get(Role::Muted),
        ),
    ];
    frame.render_widget(
        Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
        inner,
    );
}
