//! The Compare tab: two candidates' figures side by side over their code.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{ScrollView, TabView};
use crate::protocol::CandidateId;
use crate::tui::component::Ctx;
use crate::tui::keymap::Action;
use crate::tui::theme::Role;
use crate::tui::widgets::{code_lines, draw_columns, glyph, numbered, outcome, plain, truncate};

#[derive(Debug, Default)]
pub struct CompareTab;

/// The candidate Compare puts on the left: the marked one, else the best, else the parent.
pub fn compare_other(cx: &Ctx) -> Option<CandidateId> {
    let sel = cx.selected?;
    [
        cx.marked,
        cx.state.best,
        cx.state.candidates.get(&sel)?.parent,
    ]
    .into_iter()
    .flatten()
    .find(|c| *c != sel)
}

fn metric_rows(cx: &Ctx, id: CandidateId) -> Vec<String> {
    let Some(c) = cx.state.candidates.get(&id) else {
        return vec![String::new(); 6];
    };
    let e = c.eval.clone().unwrap_or_default();
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4} ms"));
    vec![
        format!("#{} {}", c.id, c.kind.label()),
        format!("{} {}", glyph(cx, c).0, outcome(cx, c)),
        match (c.score(), c.score_interval()) {
            (Some(s), Some((low, high))) => format!("{s:.3}x [{low:.3}-{high:.3}]"),
            (Some(s), None) => format!("{s:.3}x"),
            (None, _) => "–".into(),
        },
        ms(e.kernel_ms),
        ms(e.reference_ms),
        if e.flags.is_empty() && e.warnings.is_empty() {
            "–".into()
        } else {
            [e.flags.clone(), e.warnings.clone()].concat().join(", ")
        },
    ]
}

impl TabView for CompareTab {
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        let (Some(sel), Some(other)) = (cx.selected, compare_other(cx)) else {
            frame.render_widget(
                Paragraph::new(format!(
                    "nothing to compare with: mark a candidate with {}",
                    cx.keymap.hint(Action::Mark)
                ))
                .style(cx.theme.get(Role::Muted)),
                area,
            );
            return;
        };
        let labels = ["", "status", "score", "kernel", "reference", "flags"];
        let a = metric_rows(cx, other);
        let b = metric_rows(cx, sel);
        let half = (area.width.saturating_sub(1)) / 2;
        let label_w = 10usize;
        let col_w = (half as usize).saturating_sub(label_w / 2 + 1);
        let mut lines = Vec::new();
        for i in 0..labels.len() {
            let style = if i == 0 {
                cx.theme.get(Role::Accent)
            } else {
                cx.theme.get(Role::Text)
            };
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{:<label_w$}", labels[i]),
                    cx.theme.get(Role::Muted),
                ),
                Span::styled(format!("{:<col_w$} ", truncate(&a[i], col_w)), style),
                Span::styled(truncate(&b[i], col_w), style),
            ]));
        }
        let head_h = (lines.len() as u16).min(area.height);
        frame.render_widget(
            Paragraph::new(lines),
            Rect::new(area.x, area.y, area.width, head_h),
        );
        let body = Rect::new(
            area.x,
            area.y + head_h,
            area.width,
            area.height.saturating_sub(head_h),
        );
        let h = body.height as usize;
        let left_text = cx.code(other).unwrap_or_else(|| Arc::from(""));
        let right_text = cx.code(sel).unwrap_or_else(|| Arc::from(""));
        let ll = code_lines(cx, &left_text);
        let rl = code_lines(cx, &right_text);
        view.record_plain(|| {
            (0..ll.len().max(rl.len()))
                .map(|i| {
                    let side = |v: &[Line]| v.get(i).map(plain).unwrap_or_default();
                    format!("{} {}", side(&ll), side(&rl))
                })
                .collect()
        });
        let start = view.clamp(ll.len().max(rl.len()), h);
        let hs = view.hscroll;
        let l_out = numbered(cx, &ll, start, h, hs, |l| view.marked(cx, l));
        let r_out = numbered(cx, &rl, start, h, hs, |l| view.marked(cx, l));
        draw_columns(cx, frame, body, l_out, r_out);
    }
}
