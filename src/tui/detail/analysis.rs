//! The Analysis tab: the algorithm analysis of the selected candidate, the persistent
//! kernel check, the tuning stages that started from it or produced it, why it was dropped.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{ScrollView, TabView};
use crate::protocol::StageVerdict;
use crate::tui::component::Ctx;
use crate::tui::glyphs::Glyph;
use crate::tui::theme::Role;
use crate::tui::widgets::{section, wrap};

#[derive(Debug, Default)]
pub struct AnalysisTab;

impl TabView for AnalysisTab {
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        view.draw_lines(cx, frame, area, analysis_doc(cx, area.width as usize));
    }
}

fn analysis_doc(cx: &Ctx, width: usize) -> Vec<Line<'static>> {
    let Some(c) = cx.selected_candidate() else {
        return vec![];
    };
    let mut lines = Vec::new();
    match &c.analysis {
        Some(analysis) => {
            lines.push(section(cx, "algorithm analysis"));
            for (k, v) in analysis.rows() {
                lines.push(Line::styled(
                    k.replace('_', " "),
                    cx.theme.get(Role::Accent),
                ));
                let role = match (k, analysis.worth_optimizing) {
                    ("worth_optimizing", Some(true)) => Role::Ok,
                    ("worth_optimizing", _) => Role::Warn,
                    _ => Role::Text,
                };
                lines.extend(
                    wrap(&v, width.saturating_sub(2))
                        .into_iter()
                        .map(|l| Line::styled(format!("  {l}"), cx.theme.get(role))),
                );
            }
        }
        None => lines.push(Line::styled(
            "no analysis of this candidate",
            cx.theme.get(Role::Muted),
        )),
    }
    if let Some((persistent, reasons)) = &c.persistent {
        lines.push(section(cx, "persistent-kernel check"));
        lines.push(Line::styled(
            if *persistent {
                "persistent: stages skipped"
            } else {
                "not persistent: stages may tune it"
            },
            cx.theme
                .get(if *persistent { Role::Warn } else { Role::Ok }),
        ));
        for r in reasons {
            lines.extend(wrap(&format!("· {r}"), width).into_iter().map(Line::from));
        }
    }
    let stages: Vec<_> = cx
        .state
        .stages
        .iter()
        .filter(|s| s.base == c.id || s.result == Some(c.id))
        .collect();
    if !stages.is_empty() {
        lines.push(section(cx, "stages"));
        for s in stages {
            lines.push(Line::from(vec![
                Span::styled(
                    format!(
                        "{} ",
                        match s.verdict {
                            StageVerdict::Replaced => Glyph::Correct,
                            // Correct, but nothing to compare with: not a failure.
                            StageVerdict::NotCompared => Glyph::Nothing,
                            StageVerdict::Kept
                            | StageVerdict::NotCorrect
                            | StageVerdict::NoKernel => Glyph::Failed,
                        }
                        .text()
                    ),
                    cx.theme.get(match s.verdict {
                        StageVerdict::Replaced => Role::Ok,
                        StageVerdict::NotCompared => Role::Muted,
                        _ => Role::Fail,
                    }),
                ),
                Span::raw(format!(
                    "{}  #{} {} {}  {}",
                    s.stage,
                    s.base,
                    Glyph::Becomes.text(),
                    s.result
                        .map_or(Glyph::Nothing.text().to_string(), |r| format!("#{r}")),
                    s.reason
                )),
            ]));
        }
    }
    if let Some(r) = &c.dropped_reason {
        lines.push(section(cx, "dropped"));
        lines.push(Line::from(r.clone()));
    }
    lines
}
