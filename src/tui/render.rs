//! Drawing the app: candidate tree, score timeline, detail tabs, console, status bar and
//! the dialogs. Only what is visible is turned into lines (the console may hold 100k).

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Clear, Dataset, GraphType, Paragraph};

use crate::protocol::{CallId, CallKind, CandidateId, Category, EngineState, GateKind, LogLevel};
use crate::session::state::{Candidate, CandidateStatus};

use super::app::{App, ConfirmKind, DiffLayout, EditPurpose, Focus, Overlay, Tab};
use super::diff::{RowKind, Segments, SideRow};
use super::keymap::Action;
use super::theme::Role;

pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// Draws one frame.
pub fn render(app: &mut App, frame: &mut Frame) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = vec![
            Line::from("terminal too small"),
            Line::from(format!(
                "need {MIN_WIDTH}x{MIN_HEIGHT}, have {}x{}",
                area.width, area.height
            )),
            Line::from("enlarge it, or q to quit"),
        ];
        let y = area.height.saturating_sub(3) / 2;
        let r = Rect::new(area.x, area.y + y, area.width, 3.min(area.height));
        frame.render_widget(
            Paragraph::new(msg)
                .style(app.theme.get(Role::Warn))
                .alignment(ratatui::layout::Alignment::Center),
            r,
        );
        return;
    }
    // Panes grow with the terminal: the console takes about a fifth of the height, the
    // tree about a quarter of the width (within limits that keep the others usable).
    let console_h = if area.height >= 36 {
        (area.height / 5).clamp(9, 24)
    } else {
        6
    };
    let [main, console, activity, status, hints] = Layout::vertical([
        Constraint::Min(6),
        Constraint::Length(console_h),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let tree_w = (area.width * 28 / 100).clamp(26, 44.max(area.width / 4));
    let [tree, right] =
        Layout::horizontal([Constraint::Length(tree_w), Constraint::Min(20)]).areas(main);
    let chart_h = (main.height * 30 / 100).clamp(6, 14);
    let [chart, detail] =
        Layout::vertical([Constraint::Length(chart_h), Constraint::Min(4)]).areas(right);
    app.areas.tree = tree;
    app.areas.chart = chart;
    app.areas.detail = detail;
    app.areas.console = console;
    draw_tree(app, frame, tree);
    draw_chart(app, frame, chart);
    draw_detail(app, frame, detail);
    draw_console(app, frame, console);
    // A search just entered finds its first match once the document's text is known
    // (the next frame shows it).
    if app.pending_find && app.search.is_some() {
        app.pending_find = false;
        app.find(true, true);
    }
    draw_activity(app, frame, activity);
    draw_status(app, frame, status);
    draw_hints(app, frame, hints);
    let overlay = app.overlay.clone();
    match overlay {
        Some(Overlay::Help { scroll }) => draw_help(app, frame, area, scroll),
        Some(Overlay::Confirm(kind)) => draw_confirm(app, frame, area, &kind),
        Some(Overlay::Input(input)) => draw_input(app, frame, area, &input),
        None => {
            if app.gate_visible().is_some() {
                draw_gate(app, frame, area);
            }
        }
    }
}

fn pane_block<'a>(app: &App, title: impl Into<Line<'a>>, focus: Focus) -> Block<'a> {
    let focused = app.focus == focus && app.overlay.is_none();
    Block::bordered()
        .border_style(app.theme.get(if focused {
            Role::BorderFocus
        } else {
            Role::Border
        }))
        .title(title)
        .title_style(app.theme.get(if focused {
            Role::TitleFocus
        } else {
            Role::Title
        }))
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn fmt_tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// Glyph and its theme role for a candidate.
pub fn glyph(app: &App, c: &Candidate) -> (&'static str, Role) {
    match c.status {
        CandidateStatus::Pending => ("○", Role::Pending),
        CandidateStatus::Evaluating => ("◐", Role::Running),
        CandidateStatus::Correct if app.state.best == Some(c.id) => ("★", Role::Best),
        CandidateStatus::Correct => ("✓", Role::Ok),
        CandidateStatus::Failed => ("✗", Role::Fail),
        CandidateStatus::Dropped => ("⊘", Role::Dropped),
    }
}

fn outcome(c: &Candidate) -> String {
    match c.status {
        CandidateStatus::Pending => "…".into(),
        CandidateStatus::Evaluating => c.phase.clone().unwrap_or_else(|| "eval".into()),
        CandidateStatus::Correct => c
            .score()
            .map(|s| format!("{s:.2}x"))
            .unwrap_or_else(|| "ok".into()),
        CandidateStatus::Failed => match c.eval.as_ref().and_then(|e| e.category) {
            Some(Category::OutOfResources) => "resources".into(),
            Some(Category::StaticCheck) => "static".into(),
            Some(cat) => cat.to_string(),
            None => "failed".into(),
        },
        CandidateStatus::Dropped => "dropped".into(),
    }
}

fn draw_tree(app: &mut App, frame: &mut Frame, area: Rect) {
    let total = app.state.candidates.len();
    let title = format!(" Candidates {total}{} ", if app.follow { " ⇣" } else { "" });
    let block = pane_block(app, title, Focus::Tree);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = app.rows_ref().to_vec();
    let height = inner.height as usize;
    let sel_pos = app
        .selected
        .and_then(|s| rows.iter().position(|r| r.id == s));
    if let Some(p) = sel_pos {
        if p < app.tree_offset {
            app.tree_offset = p;
        } else if p >= app.tree_offset + height {
            app.tree_offset = p + 1 - height;
        }
    }
    app.tree_offset = app.tree_offset.min(rows.len().saturating_sub(height));
    let width = inner.width as usize;
    let mut lines = Vec::with_capacity(height);
    for row in rows.iter().skip(app.tree_offset).take(height) {
        let Some(c) = app.state.candidates.get(&row.id) else {
            continue;
        };
        let indent = "  ".repeat(row.depth.min(8));
        let fold = if !row.has_children {
            "  "
        } else if row.collapsed {
            "▸ "
        } else {
            "▾ "
        };
        let (g, role) = glyph(app, c);
        let mark = match (app.marked == Some(c.id), app.state.is_final(c.id)) {
            (true, true) => " final◆",
            (false, true) => " final",
            (true, false) => "◆",
            (false, false) => "",
        };
        let right = outcome(c);
        let left_fixed = format!("{indent}{fold}");
        let label = format!(" #{} {}{mark}", c.id, c.kind.short_label());
        let room = width.saturating_sub(left_fixed.chars().count() + 1 + right.chars().count() + 1);
        let label = truncate(&label, room);
        let pad = width.saturating_sub(
            left_fixed.chars().count() + 1 + label.chars().count() + right.chars().count(),
        );
        let right_role = match c.status {
            CandidateStatus::Correct if app.state.best == Some(c.id) => Role::Best,
            CandidateStatus::Correct if c.score().is_some_and(|s| s < 1.0) => Role::Warn,
            CandidateStatus::Correct => Role::Ok,
            _ => role,
        };
        let mut line = Line::from(vec![
            Span::styled(left_fixed, app.theme.get(Role::Muted)),
            Span::styled(g, app.theme.get(role)),
            Span::styled(
                label,
                if mark.is_empty() {
                    app.theme.get(Role::Text)
                } else {
                    app.theme.get(Role::Marked)
                },
            ),
            Span::raw(" ".repeat(pad)),
            Span::styled(right, app.theme.get(right_role)),
        ]);
        if Some(c.id) == app.selected {
            line = line.patch_style(app.theme.get(Role::Selection));
        }
        lines.push(line);
    }
    // Placeholders for the candidates being written now: a call in flight that will
    // answer with a kernel (not an analysis), below the tree while there is room.
    let now = app.now();
    for call in app
        .state
        .calls_in_flight()
        .filter(|c| c.kind != CallKind::Analysis)
    {
        if lines.len() >= height {
            break;
        }
        let of = call
            .candidate
            .map(|p| format!(" of #{p}"))
            .unwrap_or_default();
        let secs = (now - call.started).num_seconds().max(0);
        let text = format!(" ◌ {}{of}: being written ({secs}s)", call.kind.word());
        lines.push(Line::styled(
            truncate(&text, width),
            app.theme.get(Role::Pending),
        ));
    }
    if rows.is_empty() && lines.is_empty() {
        lines.push(Line::styled(
            "no candidates yet",
            app.theme.get(Role::Muted),
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Without GPU timing there is no speedup to plot: one glyph per candidate in creation
/// order (correct, best, failed, dropped, pending), no axes and no 1.0x line.
fn draw_correctness_strip(app: &mut App, frame: &mut Frame, area: Rect, ids: &[CandidateId]) {
    let block = pane_block(
        app,
        " Correctness per candidate (CPU interpreter: speed not measured) ",
        Focus::Chart,
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut spans = Vec::new();
    let (mut correct, mut failed) = (0, 0);
    for id in ids {
        let c = &app.state.candidates[id];
        let (g, role) = glyph(app, c);
        match c.status {
            CandidateStatus::Correct => correct += 1,
            CandidateStatus::Failed => failed += 1,
            _ => {}
        }
        let mut style = app.theme.get(role);
        if app.selected == Some(*id) {
            style = style.patch(app.theme.get(Role::Selection));
        }
        spans.push(Span::styled(g.to_string(), style));
        spans.push(Span::raw(" "));
    }
    let lines = vec![
        Line::from(spans),
        Line::styled(
            format!(
                "{} candidates: {correct} correct, {failed} failed (the latest correct one is the best)",
                ids.len()
            ),
            app.theme.get(Role::Muted),
        ),
    ];
    frame.render_widget(
        Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
        inner,
    );
}

fn draw_chart(app: &mut App, frame: &mut Frame, area: Rect) {
    let ids: Vec<_> = app.state.candidates.keys().copied().collect();
    let n = ids.len();
    let mut scores = Vec::new();
    let mut fails = Vec::new();
    let mut best = Vec::new();
    let mut selected = Vec::new();
    let mut max: f64 = 2.0;
    for (i, id) in ids.iter().enumerate() {
        let c = &app.state.candidates[id];
        let x = (i + 1) as f64;
        match (c.status, c.score()) {
            (CandidateStatus::Correct, Some(s)) => {
                max = max.max(s * 1.1);
                scores.push((x, s));
                if app.state.best == Some(*id) {
                    best.push((x, s));
                }
                if app.selected == Some(*id) {
                    selected.push((x, s));
                }
            }
            (CandidateStatus::Failed, _) | (CandidateStatus::Dropped, _) => {
                fails.push((x, 0.0));
                if app.selected == Some(*id) {
                    selected.push((x, 0.0));
                }
            }
            _ => {
                if app.selected == Some(*id) {
                    selected.push((x, 0.0));
                }
            }
        }
    }
    let xmax = (n as f64 + 1.0).max(2.0);
    let baseline = vec![(0.0, 1.0), (xmax, 1.0)];
    let best_text = app
        .state
        .best
        .and_then(|b| app.state.candidates.get(&b))
        .map(|c| {
            format!(
                "  best #{} {}",
                c.id,
                c.score().map(|s| format!("{s:.2}x")).unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let meaningful = app.state.info.as_ref().is_none_or(|i| i.timing_meaningful);
    if !meaningful {
        draw_correctness_strip(app, frame, area, &ids);
        return;
    }
    let title = format!(" Speedup per candidate{best_text} ");
    let block = pane_block(app, title, Focus::Chart);
    let datasets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(app.theme.get(Role::ChartBaseline))
            .data(&baseline),
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(app.theme.get(Role::ChartScore))
            .data(&scores),
        Dataset::default()
            .marker(Marker::Custom('✗'))
            .graph_type(GraphType::Scatter)
            .style(app.theme.get(Role::ChartFail))
            .data(&fails),
        Dataset::default()
            .marker(Marker::Custom('★'))
            .graph_type(GraphType::Scatter)
            .style(app.theme.get(Role::ChartBest))
            .data(&best),
        Dataset::default()
            .marker(Marker::Custom('◆'))
            .graph_type(GraphType::Scatter)
            .style(app.theme.get(Role::ChartSelected))
            .data(&selected),
    ];
    let axis = app.theme.get(Role::ChartAxis);
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
}

fn draw_detail(app: &mut App, frame: &mut Frame, area: Rect) {
    let sel_title = app
        .selected_candidate()
        .map(|c| format!(" #{} {} ", c.id, c.kind.label()))
        .unwrap_or_else(|| " no candidate ".into());
    let block = pane_block(app, sel_title, Focus::Detail);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 {
        return;
    }
    // Tab bar, remembered for mouse clicks.
    let mut spans = Vec::new();
    let mut x = inner.x;
    app.areas.tabs.clear();
    let full: usize = Tab::ALL.iter().map(|t| t.title().len() + 5).sum();
    let compact = full > inner.width as usize;
    for (i, tab) in Tab::ALL.iter().enumerate() {
        let label = if compact {
            let short = match tab {
                Tab::Compare => "Cmp",
                Tab::Analysis => "Anl",
                other => other.title(),
            };
            format!("{}{short}", i + 1)
        } else {
            format!(" {} {} ", i + 1, tab.title())
        };
        let w = label.chars().count() as u16;
        app.areas.tabs.push((*tab, Rect::new(x, inner.y, w, 1)));
        x += w + 1;
        spans.push(Span::styled(
            label,
            app.theme.get(if *tab == app.tab {
                Role::TabActive
            } else {
                Role::Tab
            }),
        ));
        spans.push(Span::styled("│", app.theme.get(Role::Border)));
    }
    frame.render_widget(
        Paragraph::new(Line::from(spans)),
        Rect::new(inner.x, inner.y, inner.width, 1),
    );
    let body = Rect::new(inner.x, inner.y + 1, inner.width, inner.height - 1);
    match app.tab {
        Tab::Code => draw_code(app, frame, body),
        Tab::Diff => draw_diff(app, frame, body),
        Tab::Compare => draw_compare(app, frame, body),
        Tab::Llm => draw_llm(app, frame, body),
        Tab::Eval => draw_doc(app, frame, body, eval_doc),
        Tab::Analysis => draw_doc(app, frame, body, analysis_doc),
    }
}

/// Skips `n` display columns of a line (horizontal scroll).
fn skip_cols(line: Line<'static>, n: usize) -> Line<'static> {
    if n == 0 {
        return line;
    }
    let mut left = n;
    let mut spans = Vec::new();
    for span in line.spans {
        let len = span.content.chars().count();
        if left >= len {
            left -= len;
            continue;
        }
        let rest: String = span.content.chars().skip(left).collect();
        left = 0;
        spans.push(Span::styled(rest, span.style));
    }
    Line::from(spans).style(line.style)
}

/// Clamps the scroll to the document and returns the visible range start.
/// While a search is active, keeps the plain text of the detail document's lines (what
/// `App::find` looks through); the line index is the scroll offset.
fn record_plain(app: &mut App, lines: &[Line]) {
    if app.search.is_some() {
        app.detail_plain = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
    }
}

fn clamp_scroll(app: &mut App, total: usize, height: usize) -> usize {
    let max = total.saturating_sub(height);
    if app.scroll > max {
        app.scroll = max;
    }
    app.scroll
}

fn code_lines(app: &mut App, text: &Arc<str>) -> Arc<Vec<Line<'static>>> {
    let syntax = app.theme.syntax.clone();
    match app.highlighter.get(text, syntax.as_deref()) {
        Some(lines) => lines,
        None => Arc::new(
            text.lines()
                .map(|l| Line::styled(super::highlight::clean_line(l), app.theme.get(Role::Text)))
                .collect(),
        ),
    }
}

fn numbered(
    app: &App,
    lines: &[Line<'static>],
    start: usize,
    height: usize,
    hscroll: usize,
) -> Vec<Line<'static>> {
    let digits = lines.len().max(1).to_string().len();
    lines
        .iter()
        .enumerate()
        .skip(start)
        .take(height)
        .map(|(i, l)| {
            let mut spans = vec![Span::styled(
                format!("{:>digits$} ", i + 1),
                app.theme.get(Role::LineNumber),
            )];
            spans.extend(skip_cols(l.clone(), hscroll).spans);
            Line::from(spans)
        })
        .collect()
}

fn draw_code(app: &mut App, frame: &mut Frame, area: Rect) {
    let Some(id) = app.selected else {
        return;
    };
    let Some(text) = app.candidate_code(id) else {
        let file = app.state.candidates[&id].file.clone();
        frame.render_widget(
            Paragraph::new(format!("{file} is not there (yet)")).style(app.theme.get(Role::Muted)),
            area,
        );
        return;
    };
    let lines = code_lines(app, &text);
    record_plain(app, &lines);
    let h = area.height as usize;
    let start = clamp_scroll(app, lines.len(), h);
    let out = numbered(app, &lines, start, h, app.hscroll);
    frame.render_widget(Paragraph::new(out), area);
}

/// The sign column of a unified diff row and its style.
fn diff_sign(app: &App, kind: RowKind) -> (&'static str, Style) {
    match kind {
        RowKind::Added => ("+", app.theme.get(Role::DiffAdd)),
        RowKind::Removed => ("-", app.theme.get(Role::DiffDel)),
        _ => (" ", app.theme.get(Role::Muted)),
    }
}

fn seg_spans(app: &App, text: &Segments, kind: RowKind, skip: usize) -> Vec<Span<'static>> {
    let (base, emph) = match kind {
        RowKind::Added => (
            app.theme.get(Role::DiffAdd),
            app.theme.get(Role::DiffAddEmph),
        ),
        RowKind::Removed => (
            app.theme.get(Role::DiffDel),
            app.theme.get(Role::DiffDelEmph),
        ),
        RowKind::Hunk => (app.theme.get(Role::DiffHunk), app.theme.get(Role::DiffHunk)),
        RowKind::Context => (app.theme.get(Role::Text), app.theme.get(Role::Text)),
    };
    let spans: Vec<Span<'static>> = text
        .0
        .iter()
        .map(|(e, t)| Span::styled(t.replace('\t', "    "), if *e { emph } else { base }))
        .collect();
    skip_cols(Line::from(spans), skip).spans
}

/// A diff row's text: context lines syntax highlighted (from the file's highlighted
/// lines), changed lines in diff colours with the changed words emphasized.
fn row_spans(
    app: &App,
    text: &Segments,
    kind: RowKind,
    line_no: Option<usize>,
    highlighted: &[Line<'static>],
    skip: usize,
) -> Vec<Span<'static>> {
    if kind == RowKind::Context
        && let Some(line) = line_no.and_then(|n| highlighted.get(n.wrapping_sub(1)))
    {
        return skip_cols(line.clone(), skip).spans;
    }
    seg_spans(app, text, kind, skip)
}

fn draw_diff(app: &mut App, frame: &mut Frame, area: Rect) {
    let Some((diff, base, sel)) = app.current_diff() else {
        let msg = if app.selected.is_some() {
            format!(
                "nothing to diff against: this candidate has no parent; mark one with {} to diff against it",
                app.keymap.hint(Action::Mark)
            )
        } else {
            "no candidate selected".into()
        };
        frame.render_widget(
            Paragraph::new(msg)
                .style(app.theme.get(Role::Muted))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    };
    let old_text = app.candidate_code(base).unwrap_or_else(|| Arc::from(""));
    let new_text = app.candidate_code(sel).unwrap_or_else(|| Arc::from(""));
    let old_hl = code_lines(app, &old_text);
    let new_hl = code_lines(app, &new_text);
    let against = if app.marked == Some(base) {
        "marked"
    } else {
        "parent"
    };
    let hunks = match app.diff_layout {
        DiffLayout::Unified => &diff.hunks_unified,
        DiffLayout::SideBySide => &diff.hunks_side,
    };
    let current_hunk = if hunks.is_empty() {
        0
    } else {
        app.hunk.min(hunks.len() - 1) + 1
    };
    let header = Line::from(vec![
        Span::styled(format!("#{base}"), app.theme.get(Role::Accent)),
        Span::styled(format!(" ({against}) → "), app.theme.get(Role::Muted)),
        Span::styled(format!("#{sel}"), app.theme.get(Role::Accent)),
        Span::styled(format!("  +{}", diff.added), app.theme.get(Role::DiffAdd)),
        Span::styled(format!(" −{}", diff.removed), app.theme.get(Role::DiffDel)),
        Span::styled(
            format!(
                "  hunk {current_hunk}/{}  {}",
                hunks.len(),
                match app.diff_layout {
                    DiffLayout::Unified => "unified",
                    DiffLayout::SideBySide => "side by side",
                }
            ),
            app.theme.get(Role::Muted),
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
            Paragraph::new("the two kernels are identical").style(app.theme.get(Role::Muted)),
            body,
        );
        return;
    }
    if app.search.is_some() {
        let text = |t: &Segments| t.0.iter().map(|(_, s)| s.as_str()).collect::<String>();
        app.detail_plain = match app.diff_layout {
            DiffLayout::Unified => diff.unified.iter().map(|r| text(&r.text)).collect(),
            DiffLayout::SideBySide => diff
                .side
                .iter()
                .map(|r| match r {
                    SideRow::Hunk(h) => h.clone(),
                    SideRow::Pair(a, b) => {
                        let half = |x: &Option<super::diff::Half>| {
                            x.as_ref().map(|h| text(&h.text)).unwrap_or_default()
                        };
                        format!("{} {}", half(a), half(b))
                    }
                })
                .collect(),
        };
    }
    let h = body.height as usize;
    let hs = app.hscroll;
    match app.diff_layout {
        DiffLayout::Unified => {
            let start = clamp_scroll(app, diff.unified.len(), h);
            let lines: Vec<Line> = diff
                .unified
                .iter()
                .skip(start)
                .take(h)
                .map(|r| {
                    if r.kind == RowKind::Hunk {
                        return Line::from(seg_spans(app, &r.text, r.kind, 0));
                    }
                    let num = |n: Option<usize>| n.map_or("    ".into(), |n| format!("{n:>4}"));
                    let (sign, sign_style) = diff_sign(app, r.kind);
                    let mut spans = vec![
                        Span::styled(
                            format!("{} {} ", num(r.old_no), num(r.new_no)),
                            app.theme.get(Role::LineNumber),
                        ),
                        Span::styled(format!("{sign} "), sign_style),
                    ];
                    spans.extend(row_spans(app, &r.text, r.kind, r.new_no, &new_hl, hs));
                    Line::from(spans)
                })
                .collect();
            frame.render_widget(Paragraph::new(lines), body);
        }
        DiffLayout::SideBySide => {
            let start = clamp_scroll(app, diff.side.len(), h);
            let half = (body.width.saturating_sub(1)) / 2;
            let left = Rect::new(body.x, body.y, half, body.height);
            let sep = Rect::new(body.x + half, body.y, 1, body.height);
            let right = Rect::new(
                body.x + half + 1,
                body.y,
                body.width - half - 1,
                body.height,
            );
            let mut l_lines = Vec::new();
            let mut r_lines = Vec::new();
            for row in diff.side.iter().skip(start).take(h) {
                match row {
                    SideRow::Hunk(t) => {
                        l_lines.push(Line::styled(t.clone(), app.theme.get(Role::DiffHunk)));
                        r_lines.push(Line::styled(t.clone(), app.theme.get(Role::DiffHunk)));
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
                                        app.theme.get(Role::LineNumber),
                                    )];
                                    spans.extend(row_spans(
                                        app,
                                        &hf.text,
                                        hf.kind,
                                        Some(hf.no),
                                        hl,
                                        hs,
                                    ));
                                    Line::from(spans)
                                }
                            });
                        }
                    }
                }
            }
            frame.render_widget(Paragraph::new(l_lines), left);
            frame.render_widget(
                Paragraph::new(vec![Line::from("│"); h]).style(app.theme.get(Role::Border)),
                sep,
            );
            frame.render_widget(Paragraph::new(r_lines), right);
        }
    }
}

fn metric_rows(app: &mut App, id: CandidateId) -> Vec<String> {
    let Some(c) = app.state.candidates.get(&id).cloned() else {
        return vec![String::new(); 6];
    };
    let e = c.eval.clone().unwrap_or_default();
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4} ms"));
    vec![
        format!("#{} {}", c.id, c.kind.label()),
        format!("{} {}", glyph(app, &c).0, outcome(&c)),
        c.score().map_or("–".into(), |s| format!("{s:.3}x")),
        ms(e.kernel_ms),
        ms(e.reference_ms),
        if e.flags.is_empty() && e.warnings.is_empty() {
            "–".into()
        } else {
            [e.flags.clone(), e.warnings.clone()].concat().join(", ")
        },
    ]
}

fn draw_compare(app: &mut App, frame: &mut Frame, area: Rect) {
    let (Some(sel), Some(other)) = (app.selected, app.compare_other()) else {
        frame.render_widget(
            Paragraph::new(format!(
                "nothing to compare with: mark a candidate with {}",
                app.keymap.hint(Action::Mark)
            ))
            .style(app.theme.get(Role::Muted)),
            area,
        );
        return;
    };
    let labels = ["", "status", "score", "kernel", "reference", "flags"];
    let a = metric_rows(app, other);
    let b = metric_rows(app, sel);
    let half = (area.width.saturating_sub(1)) / 2;
    let label_w = 10usize;
    let col_w = (half as usize).saturating_sub(label_w / 2 + 1);
    let mut lines = Vec::new();
    for i in 0..labels.len() {
        let style = if i == 0 {
            app.theme.get(Role::Accent)
        } else {
            app.theme.get(Role::Text)
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{:<label_w$}", labels[i]),
                app.theme.get(Role::Muted),
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
    let left_text = app.candidate_code(other).unwrap_or_else(|| Arc::from(""));
    let right_text = app.candidate_code(sel).unwrap_or_else(|| Arc::from(""));
    let ll = code_lines(app, &left_text);
    let rl = code_lines(app, &right_text);
    let start = clamp_scroll(app, ll.len().max(rl.len()), h);
    let hs = app.hscroll;
    let l_out = numbered(app, &ll, start, h, hs);
    let r_out = numbered(app, &rl, start, h, hs);
    let left = Rect::new(body.x, body.y, half, body.height);
    let sep = Rect::new(body.x + half, body.y, 1, body.height);
    let right = Rect::new(
        body.x + half + 1,
        body.y,
        body.width - half - 1,
        body.height,
    );
    frame.render_widget(Paragraph::new(l_out), left);
    frame.render_widget(
        Paragraph::new(vec![Line::from("│"); h]).style(app.theme.get(Role::Border)),
        sep,
    );
    frame.render_widget(Paragraph::new(r_out), right);
}

/// Word-wraps plain text to `width` columns.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(8);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let para = para.trim_end_matches('\r').replace('\t', "    ");
        let indent_len = para.len() - para.trim_start_matches(' ').len();
        let indent = " ".repeat(indent_len.min(width / 2));
        let mut line = indent.clone();
        for word in para[indent_len..].split(' ') {
            let wl = word.chars().count();
            let ll = line.chars().count();
            if ll > indent.len() && ll + 1 + wl > width {
                out.push(std::mem::replace(&mut line, indent.clone()));
            }
            if line.len() > indent.len() {
                line.push(' ');
            }
            line.push_str(word);
            while line.chars().count() > width {
                let head: String = line.chars().take(width).collect();
                let tail: String = line.chars().skip(width).collect();
                out.push(head);
                line = tail;
            }
        }
        out.push(line);
    }
    out
}

fn section(app: &App, title: &str) -> Line<'static> {
    Line::styled(format!("── {title} ──"), app.theme.get(Role::Accent))
}

fn llm_files(prompt_file: &str, call: CallId) -> (String, String) {
    match prompt_file.strip_suffix(".prompt.md") {
        Some(stem) => (
            format!("{stem}.response.md"),
            format!("{stem}.reasoning.md"),
        ),
        None => (
            format!("llm/{call}.response.md"),
            format!("llm/{call}.reasoning.md"),
        ),
    }
}

fn draw_llm(app: &mut App, frame: &mut Frame, area: Rect) {
    let calls: Vec<CallId> = app.calls_of_selected().iter().map(|c| c.id).collect();
    let Some(call) = app.shown_call().cloned() else {
        frame.render_widget(
            Paragraph::new("no LLM call for this candidate (it was written by hand)")
                .style(app.theme.get(Role::Muted)),
            area,
        );
        return;
    };
    let width = area.width as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let status = match call.ok {
        None => Span::styled("streaming…", app.theme.get(Role::Running)),
        Some(true) => Span::styled("✓ done", app.theme.get(Role::Ok)),
        Some(false) => Span::styled(
            format!("✗ {}", call.error.clone().unwrap_or_default()),
            app.theme.get(Role::Fail),
        ),
    };
    let position = if calls.len() > 1 {
        format!(
            "  ({}/{} — {}/{} switch)",
            calls
                .iter()
                .position(|c| *c == call.id)
                .map_or(0, |i| i + 1),
            calls.len(),
            app.keymap.hint(Action::PrevCall),
            app.keymap.hint(Action::NextCall)
        )
    } else {
        String::new()
    };
    lines.push(Line::from(vec![
        Span::styled(
            format!("call #{} {} ", call.id, call.kind.word()),
            app.theme.get(Role::Accent),
        ),
        Span::styled(
            format!("{}/{}  ", call.provider, call.model),
            app.theme.get(Role::Muted),
        ),
        status,
        Span::styled(position, app.theme.get(Role::Muted)),
    ]));
    if call.ok.is_some() {
        lines.push(Line::styled(
            format!(
                "tokens {} in ({} cached) / {} out ({} reasoning)   cost {}   {:.1} s",
                fmt_tokens(call.usage.input),
                fmt_tokens(call.usage.cached),
                fmt_tokens(call.usage.output),
                fmt_tokens(call.usage.reasoning),
                call.cost_usd
                    .map_or("unknown".into(), |c| format!("${c:.4}")),
                call.latency_s
            ),
            app.theme.get(Role::Muted),
        ));
    }
    if !call.retries.is_empty() {
        lines.push(Line::styled(
            format!(
                "retried {}x: {}",
                call.retries.len(),
                call.retries.last().map(String::as_str).unwrap_or_default()
            ),
            app.theme.get(Role::Warn),
        ));
    }
    if call.ok == Some(false) {
        let key = app.keymap.hint(Action::Reask);
        lines.push(Line::styled(
            format!(
                "failed: {}   ({key}: ask again)",
                call.error.as_deref().unwrap_or("?")
            ),
            app.theme.get(Role::Fail),
        ));
    }
    // The header stays; the rest scrolls.
    let header_h = (lines.len() as u16).min(area.height);
    frame.render_widget(
        Paragraph::new(std::mem::take(&mut lines)),
        Rect::new(area.x, area.y, area.width, header_h),
    );
    let area = Rect::new(
        area.x,
        area.y + header_h,
        area.width,
        area.height - header_h,
    );
    let (resp_file, reason_file) = llm_files(&call.prompt_file, call.id);
    let prompt = app.file(&call.prompt_file);
    lines.push(section(app, &format!("prompt  {}", call.prompt_file)));
    match prompt {
        Some(p) => lines.extend(wrap(&p, width).into_iter().map(Line::from)),
        None => lines.push(Line::styled("(no prompt file)", app.theme.get(Role::Muted))),
    }
    let reasoning = if call.ok.is_none() && !call.live_reasoning.is_empty() {
        Some(call.live_reasoning.clone())
    } else {
        app.file(&reason_file).map(|t| t.to_string())
    };
    if let Some(r) = reasoning.filter(|r| !r.trim().is_empty()) {
        lines.push(section(app, "reasoning"));
        let style = app.theme.get(Role::Muted).add_modifier(Modifier::ITALIC);
        lines.extend(wrap(&r, width).into_iter().map(|l| Line::styled(l, style)));
    }
    let answer = if call.ok.is_none() {
        // Opened in the middle of a call: what streamed before is in the growing file.
        if call.live_text.is_empty() {
            Some(
                app.file(&resp_file)
                    .map(|t| t.to_string())
                    .unwrap_or_default(),
            )
        } else {
            Some(call.live_text.clone())
        }
    } else {
        call.response_file
            .clone()
            .or(Some(resp_file))
            .and_then(|f| app.file(&f))
            .map(|t| t.to_string())
    };
    lines.push(section(app, "answer"));
    match answer {
        Some(a) => {
            lines.extend(wrap(&a, width).into_iter().map(Line::from));
            if call.ok.is_none() {
                lines.push(Line::styled("▌", app.theme.get(Role::Running)));
            }
        }
        None => lines.push(Line::styled("(no answer)", app.theme.get(Role::Muted))),
    }
    record_plain(app, &lines);
    let h = area.height as usize;
    if call.ok.is_none() {
        app.llm_streamed = Some(call.id);
    }
    if app.llm_tail && (call.ok.is_none() || app.llm_streamed == Some(call.id)) {
        app.scroll = lines.len().saturating_sub(h);
    }
    let start = clamp_scroll(app, lines.len(), h);
    let visible: Vec<Line> = lines.into_iter().skip(start).take(h).collect();
    frame.render_widget(Paragraph::new(visible), area);
}

fn draw_doc(
    app: &mut App,
    frame: &mut Frame,
    area: Rect,
    build: fn(&mut App, usize) -> Vec<Line<'static>>,
) {
    let lines = build(app, area.width as usize);
    record_plain(app, &lines);
    let h = area.height as usize;
    let start = clamp_scroll(app, lines.len(), h);
    let visible: Vec<Line> = lines.into_iter().skip(start).take(h).collect();
    frame.render_widget(Paragraph::new(visible), area);
}

fn kv(app: &App, key: &str, value: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{key:<12}"), app.theme.get(Role::Muted)),
        Span::styled(value, app.theme.get(Role::Text)),
    ])
}

fn eval_doc(app: &mut App, width: usize) -> Vec<Line<'static>> {
    let Some(c) = app.selected_candidate().cloned() else {
        return vec![];
    };
    let mut lines = Vec::new();
    let Some(summary) = c.eval.clone() else {
        let text = match c.status {
            CandidateStatus::Evaluating => {
                format!("evaluating… {}", c.phase.clone().unwrap_or_default())
            }
            CandidateStatus::Dropped => {
                format!("dropped: {}", c.dropped_reason.clone().unwrap_or_default())
            }
            _ => "not evaluated yet".into(),
        };
        return vec![Line::styled(text, app.theme.get(Role::Muted))];
    };
    let (g, role) = glyph(app, &c);
    let verdict = if summary.correct {
        "correct".to_string()
    } else {
        format!("failed: {}", summary.category.map_or("?", |c| c.as_str()))
    };
    lines.push(Line::from(vec![
        Span::styled(format!("{:<12}", "verdict"), app.theme.get(Role::Muted)),
        Span::styled(format!("{g} {verdict}"), app.theme.get(role)),
    ]));
    if !summary.summary.is_empty() {
        lines.push(kv(app, "summary", summary.summary.clone()));
    }
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4} ms"));
    lines.push(kv(
        app,
        "score",
        format!(
            "{}   kernel {}   reference {}",
            summary.score.map_or("–".into(), |s| format!("{s:.3}x")),
            ms(summary.kernel_ms),
            ms(summary.reference_ms)
        ),
    ));
    for f in &summary.flags {
        lines.push(Line::styled(format!("⚑ {f}"), app.theme.get(Role::Warn)));
    }
    let result = app.eval_result(c.id);
    let Some(r) = result else {
        for w in &summary.warnings {
            lines.push(Line::styled(format!("! {w}"), app.theme.get(Role::Warn)));
        }
        return lines;
    };
    if let Some(name) = &r.device.name {
        lines.push(kv(
            app,
            "device",
            format!(
                "{name}{}",
                r.versions
                    .torch
                    .as_ref()
                    .map(|t| format!("   torch {t}"))
                    .unwrap_or_default()
            ),
        ));
    }
    if !r.trials.is_empty() {
        lines.push(section(app, "trials"));
        for t in &r.trials {
            let (g, role) = if t.passed {
                ("✓", Role::Ok)
            } else {
                ("✗", Role::Fail)
            };
            let detail = t
                .outputs
                .iter()
                .map(|o| {
                    let err = match (o.max_abs_err, o.max_rel_err) {
                        (Some(a), Some(r)) => format!(" abs {a:.1e} rel {r:.1e}"),
                        _ => String::new(),
                    };
                    format!(
                        "{}{}{}",
                        o.output,
                        err,
                        o.reason
                            .as_ref()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            lines.push(Line::from(vec![
                Span::styled(format!("{g} "), app.theme.get(role)),
                Span::styled(
                    format!("{} {}  ", t.kind, t.index),
                    app.theme.get(Role::Muted),
                ),
                Span::raw(truncate(&detail, width.saturating_sub(16))),
            ]));
        }
    }
    if let Some(t) = &r.timing {
        lines.push(section(
            app,
            if t.meaningful {
                "timing (ms)"
            } else {
                "timing (not meaningful)"
            },
        ));
        lines.push(Line::styled(
            format!(
                "{:<11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>6}",
                "", "median", "mean", "min", "max", "std", "runs"
            ),
            app.theme.get(Role::Muted),
        ));
        for (name, s) in [("reference", &t.reference), ("kernel", &t.kernel)] {
            lines.push(Line::from(format!(
                "{:<11}{:>9.4}{:>9.4}{:>9.4}{:>9.4}{:>9.4}{:>6}{}",
                name,
                s.median_ms,
                s.mean_ms,
                s.min_ms,
                s.max_ms,
                s.std_ms,
                s.runs,
                if s.cached { " (cached)" } else { "" }
            )));
        }
    }
    if !r.static_report.warnings.is_empty() || !r.static_report.errors.is_empty() {
        lines.push(section(app, "static checks"));
        for (f, role) in r
            .static_report
            .errors
            .iter()
            .map(|f| (f, Role::Fail))
            .chain(r.static_report.warnings.iter().map(|f| (f, Role::Warn)))
        {
            lines.push(Line::styled(
                format!(
                    "{}: {}{}",
                    f.rule,
                    f.message,
                    f.line.map(|l| format!(" (line {l})")).unwrap_or_default()
                ),
                app.theme.get(role),
            ));
        }
    }
    if !r.message.trim().is_empty() {
        lines.push(section(app, "error"));
        lines.extend(
            wrap(&r.message, width)
                .into_iter()
                .map(|l| Line::styled(l, app.theme.get(Role::Fail))),
        );
    }
    if let Some(serde_json::Value::Object(p)) = &r.profile {
        lines.push(section(app, "profile"));
        for (k, v) in p {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            lines.push(Line::from(vec![
                Span::styled(format!("{k:<28}"), app.theme.get(Role::Muted)),
                Span::raw(v),
            ]));
        }
    }
    if !r.phases_s.is_empty() {
        lines.push(section(app, "phases (s)"));
        lines.push(Line::styled(
            r.phases_s
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join("   "),
            app.theme.get(Role::Muted),
        ));
    }
    lines
}

fn analysis_doc(app: &mut App, width: usize) -> Vec<Line<'static>> {
    let Some(c) = app.selected_candidate().cloned() else {
        return vec![];
    };
    let mut lines = Vec::new();
    match &c.analysis {
        Some(analysis) => {
            lines.push(section(app, "algorithm analysis"));
            for (k, v) in analysis.rows() {
                lines.push(Line::styled(
                    k.replace('_', " "),
                    app.theme.get(Role::Accent),
                ));
                let role = match (k, analysis.worth_optimizing) {
                    ("worth_optimizing", Some(true)) => Role::Ok,
                    ("worth_optimizing", _) => Role::Warn,
                    _ => Role::Text,
                };
                lines.extend(
                    wrap(&v, width.saturating_sub(2))
                        .into_iter()
                        .map(|l| Line::styled(format!("  {l}"), app.theme.get(role))),
                );
            }
        }
        None => lines.push(Line::styled(
            "no analysis of this candidate",
            app.theme.get(Role::Muted),
        )),
    }
    if let Some((persistent, reasons)) = &c.persistent {
        lines.push(section(app, "persistent-kernel check"));
        lines.push(Line::styled(
            if *persistent {
                "persistent: stages skipped"
            } else {
                "not persistent: stages may tune it"
            },
            app.theme
                .get(if *persistent { Role::Warn } else { Role::Ok }),
        ));
        for r in reasons {
            lines.extend(wrap(&format!("· {r}"), width).into_iter().map(Line::from));
        }
    }
    let stages: Vec<_> = app
        .state
        .stages
        .iter()
        .filter(|s| s.base == c.id || s.result == Some(c.id))
        .cloned()
        .collect();
    if !stages.is_empty() {
        lines.push(section(app, "stages"));
        for s in stages {
            lines.push(Line::from(vec![
                Span::styled(
                    if s.accepted { "✓ " } else { "✗ " },
                    app.theme
                        .get(if s.accepted { Role::Ok } else { Role::Fail }),
                ),
                Span::raw(format!(
                    "{}  #{} → {}  {}",
                    s.stage,
                    s.base,
                    s.result.map_or("–".into(), |r| format!("#{r}")),
                    s.reason
                )),
            ]));
        }
    }
    if let Some(r) = &c.dropped_reason {
        lines.push(section(app, "dropped"));
        lines.push(Line::from(r.clone()));
    }
    lines
}

fn draw_console(app: &mut App, frame: &mut Frame, area: Rect) {
    let total = app.state.log.len();
    let shown = app.console_lines().len();
    let mut title = format!(" Console {shown}");
    if !app.console_filter.is_empty() {
        title.push_str(&format!("/{total}  filter: {}", app.console_filter));
    }
    title.push_str(if app.console_offset == 0 {
        "  ⇣ "
    } else {
        "  (scrolled) "
    });
    let block = pane_block(app, title, Focus::Console);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let h = inner.height as usize;
    let idx = app.console_lines();
    // Scrolled to the top at most: the first page.
    let max_offset = idx.len().saturating_sub(h);
    let offset = app.console_offset.min(max_offset);
    let end = idx.len() - offset;
    let start = end.saturating_sub(h);
    let mut lines = Vec::with_capacity(h);
    for &i in &idx[start..end] {
        let l = &app.state.log[i];
        let (lvl, role) = match l.level {
            LogLevel::Info => (" ", Role::LogInfo),
            LogLevel::Warn => ("!", Role::LogWarn),
            LogLevel::Error => ("✗", Role::LogError),
        };
        lines.push(Line::from(vec![
            Span::styled(
                l.ts.format("%H:%M:%S ").to_string(),
                app.theme.get(Role::LogTime),
            ),
            Span::styled(lvl, app.theme.get(role)),
            Span::styled(format!(" [{}] ", l.tag), app.theme.get(Role::LogTag)),
            Span::styled(l.message.clone(), app.theme.get(role)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// What the engine is doing now, for the activity line: each LLM call in flight (step,
/// model, elapsed, waiting for its first token or streaming), each evaluation and its
/// phase, the gates waiting for the person. Empty when nothing runs.
pub fn activity(app: &App) -> Vec<(String, Role)> {
    let now = app.now();
    let s = &app.state;
    let mut items: Vec<(String, Role)> = Vec::new();
    for call in s.calls_in_flight() {
        let secs = (now - call.started).num_seconds().max(0);
        let progress = if call.live_text.is_empty() && call.live_reasoning.is_empty() {
            "waiting for the first token".to_string()
        } else {
            let chars = call.live_text.chars().count() + call.live_reasoning.chars().count();
            format!("streaming ~{} tokens", chars / 4)
        };
        let step = if call.key.is_empty() {
            call.kind.word().to_string()
        } else {
            call.key.clone()
        };
        items.push((
            format!(
                "call {} {step} ({}) {secs}s, {progress}",
                call.id, call.model
            ),
            Role::Running,
        ));
    }
    for c in s
        .candidates
        .values()
        .filter(|c| c.status == CandidateStatus::Evaluating)
    {
        let phase = c.phase.as_deref().unwrap_or("starting");
        items.push((format!("evaluating #{}: {phase}", c.id), Role::Running));
    }
    let waiting = s.waiting_gates().len();
    if waiting > 0 && !s.state.is_over() {
        items.push((
            format!(
                "{waiting} gate{} waiting for you ({} opens the oldest)",
                if waiting == 1 { "" } else { "s" },
                app.keymap.hint(Action::OpenGate)
            ),
            Role::Warn,
        ));
    }
    items
}

fn draw_activity(app: &mut App, frame: &mut Frame, area: Rect) {
    let items = activity(app);
    let line = if items.is_empty() {
        let idle = match app.state.state {
            EngineState::Paused => "paused: no new step starts",
            s if s.is_over() => "nothing running",
            _ => "idle",
        };
        Line::styled(format!(" {idle}"), app.theme.get(Role::Muted))
    } else {
        let mut spans = vec![Span::raw(" ")];
        for (i, (text, role)) in items.into_iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(" · ", app.theme.get(Role::Muted)));
            }
            spans.push(Span::styled(text, app.theme.get(role)));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_status(app: &mut App, frame: &mut Frame, area: Rect) {
    app.last_elapsed = app.elapsed_text();
    let s = &app.state;
    let (task, pm) = s.info.as_ref().map_or(("?".into(), "?".into()), |i| {
        (i.task.clone(), format!("{}/{}", i.provider, i.model))
    });
    let (state_text, role) = match s.state {
        EngineState::Starting => ("starting", Role::Pending),
        EngineState::Running => ("● running", Role::Running),
        EngineState::Paused => ("‖ paused", Role::Warn),
        EngineState::Waiting => ("◆ waiting for you", Role::Warn),
        EngineState::Finished => ("✓ finished", Role::Ok),
        EngineState::Failed => ("✗ failed", Role::Fail),
        EngineState::Stopped => ("■ stopped", Role::Warn),
    };
    // Gates waiting say so whatever the engine's last state change was (seeds run
    // concurrently: one gate's answer does not mean nothing else waits).
    let waiting = s.waiting_gates().len();
    let waiting_text;
    let (state_text, role) = if waiting > 0 && !s.state.is_over() && s.state != EngineState::Paused
    {
        waiting_text = format!("◆ {waiting} waiting for you");
        (waiting_text.as_str(), Role::Warn)
    } else {
        (state_text, role)
    };
    let usage = s.total_usage();
    let cost = s.total_cost().map_or("$?".into(), |c| format!("${c:.3}"));
    let best = s
        .best
        .and_then(|b| s.candidates.get(&b))
        .map(|c| {
            format!(
                "best #{} {}",
                c.id,
                c.score().map(|x| format!("{x:.2}x")).unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "no best yet".into());
    // (priority, text, role): the lowest priorities go first when the line is too long.
    let mut parts: Vec<(u8, String, Role)> = vec![
        (9, format!(" {task}"), Role::Title),
        (4, pm, Role::Status),
        (10, state_text.to_string(), role),
        (
            5,
            format!(
                "tok {} in {} out",
                fmt_tokens(usage.input),
                fmt_tokens(usage.output)
            ),
            Role::Status,
        ),
        (7, cost, Role::Status),
        (6, app.last_elapsed.clone(), Role::Status),
        (8, best, Role::Best),
    ];
    if app.options.read_only {
        parts.push((3, "read-only".into(), Role::Muted));
    } else if app.attached_to_ended_run() {
        parts.push((9, "read-only: the run ended".into(), Role::Warn));
    } else if app.options.attached {
        parts.push((3, "attached".into(), Role::Muted));
    }
    let width =
        |parts: &[(u8, String, Role)]| parts.iter().map(|p| p.1.chars().count() + 3).sum::<usize>();
    while width(&parts) > area.width as usize && parts.len() > 1 {
        let (i, _) = parts
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| p.0)
            .unwrap_or((0, &parts[0]));
        parts.remove(i);
    }
    let mut spans = Vec::new();
    for (i, (_, text, role)) in parts.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" │ ", app.theme.get(Role::Border)));
        }
        spans.push(Span::styled(text, app.theme.get(role)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn hint_actions(app: &App) -> Vec<(Action, &'static str)> {
    let mut v = vec![(Action::Help, "help"), (Action::Quit, "quit")];
    if let Some(gate) = app.gate_visible() {
        let mut v = vec![(Action::Approve, "approve"), (Action::Reject, "reject")];
        if gate.rewritable() {
            v.extend([
                (Action::Rewrite, "rewrite"),
                (Action::RewriteInline, "inline"),
            ]);
        }
        v.extend([(Action::Down, "scroll"), (Action::Later, "close")]);
        return v;
    }
    if app.can_act() && app.manual_call().is_some() {
        // Urgent: the run waits for it.
        v.push((Action::AnswerCall, "answer the call"));
    }
    v.push((Action::FocusNext, "pane"));
    match app.focus {
        Focus::Tree => v.extend([
            (Action::Down, "move"),
            (Action::Toggle, "fold"),
            (Action::Mark, "mark"),
        ]),
        Focus::Chart => v.extend([(Action::PointNext, "next point"), (Action::Mark, "mark")]),
        Focus::Detail => v.extend([(Action::Down, "scroll"), (Action::TabNext, "tab")]),
        Focus::Console => v.extend([(Action::Down, "scroll"), (Action::Filter, "filter")]),
    }
    if app.tab == Tab::Diff {
        v.extend([(Action::DiffLayout, "layout"), (Action::NextHunk, "hunk")]);
    }
    if app.can_act() {
        v.extend([
            (Action::Repair, "repair"),
            (Action::Optimize, "optimize"),
            (Action::EditEval, "edit"),
            (Action::PauseResume, "pause"),
        ]);
        if app.state.open_gate().is_some() {
            v.insert(0, (Action::OpenGate, "answer the waiting gate"));
        }
    }
    v.push((Action::Copy, "copy"));
    v
}

fn draw_hints(app: &mut App, frame: &mut Frame, area: Rect) {
    if let Some(msg) = &app.flash {
        frame.render_widget(
            Paragraph::new(Line::styled(format!(" {msg}"), app.theme.get(Role::Warn))),
            area,
        );
        return;
    }
    let mut spans = vec![Span::raw(" ")];
    for (action, label) in hint_actions(app) {
        let key = app.keymap.hint(action);
        if key.is_empty() {
            continue;
        }
        spans.push(Span::styled(key, app.theme.get(Role::StatusKey)));
        spans.push(Span::styled(
            format!(" {label}  "),
            app.theme.get(Role::Muted),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2));
    let h = height.min(area.height.saturating_sub(2));
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn dialog<'a>(app: &App, title: impl Into<Line<'a>>) -> Block<'a> {
    Block::bordered()
        .borders(Borders::ALL)
        .border_style(app.theme.get(Role::DialogBorder))
        .title(title)
        .title_style(app.theme.get(Role::DialogBorder))
}

fn draw_help(app: &mut App, frame: &mut Frame, area: Rect, scroll: usize) {
    let r = centered(area, 84, area.height.saturating_sub(4));
    frame.render_widget(Clear, r);
    let block = dialog(app, " Keys (from your keymap) — esc closes ");
    let inner = block.inner(r);
    frame.render_widget(block, r);
    let mut lines = Vec::new();
    for (ctx, entries) in app.keymap.help() {
        if entries.is_empty() {
            continue;
        }
        lines.push(Line::styled(ctx.title(), app.theme.get(Role::Accent)));
        for (keys, desc) in entries {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<18}"), app.theme.get(Role::StatusKey)),
                Span::styled(desc, app.theme.get(Role::Text)),
            ]));
        }
    }
    lines.push(Line::styled(
        "Keys are set in [tui.keys] of config.toml; see docs/tui.md.",
        app.theme.get(Role::Muted),
    ));
    let h = inner.height as usize;
    let start = scroll.min(lines.len().saturating_sub(h));
    if let Some(Overlay::Help { scroll }) = &mut app.overlay {
        *scroll = start;
    }
    let visible: Vec<Line> = lines.into_iter().skip(start).take(h).collect();
    frame.render_widget(Paragraph::new(visible), inner);
}

fn gate_kind(kind: GateKind) -> &'static str {
    match kind {
        GateKind::LlmCall => "before an LLM call",
        GateKind::Evaluation => "before an evaluation",
        GateKind::AlgorithmOptimization => "before algorithm optimization",
        GateKind::Stages => "before the tuning stages",
        GateKind::FinalBest => "before declaring the final best",
    }
}

fn draw_gate(app: &mut App, frame: &mut Frame, area: Rect) {
    let Some(gate) = app.gate_visible().cloned() else {
        return;
    };
    let (at, of) = app.gate_position(gate.id);
    let r = centered(
        area,
        area.width.saturating_sub(8).max(60),
        area.height.saturating_sub(4).max(12),
    );
    frame.render_widget(Clear, r);
    let block = dialog(
        app,
        format!(
            " Waiting for you — gate {} ({at} of {of} waiting, oldest first): {} ",
            gate.id,
            gate_kind(gate.kind)
        ),
    );
    let inner = block.inner(r);
    frame.render_widget(block, r);
    let w = inner.width as usize;
    let mut head: Vec<Line> = wrap(&gate.question, w)
        .into_iter()
        .map(|l| Line::styled(l, app.theme.get(Role::Title)))
        .collect();
    if let Some(c) = gate.candidate.and_then(|c| app.state.candidates.get(&c)) {
        head.push(Line::styled(
            format!("candidate #{} {} — {}", c.id, c.kind.label(), outcome(c)),
            app.theme.get(Role::Muted),
        ));
    }
    let button = |a: Action, label: &'static str, role: Role| {
        [
            Span::styled(
                format!("[{}] ", app.keymap.hint(a)),
                app.theme.get(Role::StatusKey),
            ),
            Span::styled(label, app.theme.get(role)),
        ]
    };
    let mut buttons = vec![
        button(Action::Approve, "approve   ", Role::Ok),
        button(Action::Reject, "reject…   ", Role::Fail),
    ];
    if gate.rewritable() {
        buttons.push(button(Action::Rewrite, "rewrite in $EDITOR   ", Role::Text));
        buttons.push(button(Action::RewriteInline, "inline   ", Role::Text));
    }
    buttons.push(button(
        Action::Later,
        "close (it keeps waiting)",
        Role::Muted,
    ));
    let foot = Line::from(buttons.concat());
    // What the gate will send or evaluate, exactly: the prompt or the kernel file; for the
    // other gates, the candidate's code.
    let shown = gate.file.clone().or_else(|| {
        gate.candidate
            .and_then(|c| app.state.candidates.get(&c))
            .map(|c| c.file.clone())
    });
    let parent = gate
        .candidate
        .and_then(|c| app.state.candidates.get(&c))
        .and_then(|c| c.parent);
    let diff_against = parent.filter(|_| gate.kind == GateKind::Evaluation && app.gate_diff);
    let preview: Vec<Line> = match (shown.as_deref(), diff_against) {
        (Some(file), Some(parent)) => {
            let new = app.file(file).map(|t| t.to_string()).unwrap_or_default();
            let old = app
                .candidate_code(parent)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let d = super::diff::diff(&old, &new, 3);
            let mut lines = vec![Line::styled(
                format!(
                    "── {file} against its parent #{parent}: +{} −{} ({} shows the kernel) ──",
                    d.added,
                    d.removed,
                    app.keymap.hint(Action::GateDiff)
                ),
                app.theme.get(Role::Accent),
            )];
            if d.is_empty() {
                lines.push(Line::styled(
                    "identical to its parent",
                    app.theme.get(Role::Muted),
                ));
            }
            // The Diff tab's rows (colours, word emphasis), without its line numbers.
            lines.extend(d.unified.iter().map(|r| {
                let mut spans = Vec::new();
                if r.kind != RowKind::Hunk {
                    let (sign, style) = diff_sign(app, r.kind);
                    spans.push(Span::styled(sign, style));
                }
                spans.extend(seg_spans(app, &r.text, r.kind, 0));
                Line::from(spans)
            }));
            lines
        }
        (Some(file), None) => {
            let text = app.file(file).map(|t| t.to_string()).unwrap_or_default();
            let what = match gate.kind {
                GateKind::LlmCall => "what is sent",
                GateKind::Evaluation => "what is evaluated",
                _ => "the candidate's code",
            };
            let toggle = if gate.kind == GateKind::Evaluation && parent.is_some() {
                format!(
                    ", {} shows the diff against its parent",
                    app.keymap.hint(Action::GateDiff)
                )
            } else {
                String::new()
            };
            let mut lines = vec![Line::styled(
                format!("── {file} ({what}{toggle}) ──"),
                app.theme.get(Role::Accent),
            )];
            let digits = text.lines().count().max(1).to_string().len();
            lines.extend(text.lines().enumerate().map(|(i, l)| {
                Line::from(vec![
                    Span::styled(format!("{:>digits$} ", i + 1), app.theme.get(Role::Muted)),
                    Span::styled(l.replace('\t', "    "), app.theme.get(Role::Text)),
                ])
            }));
            lines
        }
        (None, _) => Vec::new(),
    };
    let body_h = (inner.height as usize).saturating_sub(head.len() + 2);
    let start = app.gate_scroll.min(preview.len().saturating_sub(body_h));
    app.gate_scroll = start;
    let mut lines = head;
    lines.extend(preview.into_iter().skip(start).take(body_h));
    let used = lines.len();
    lines.extend((used..(inner.height as usize).saturating_sub(1)).map(|_| Line::from("")));
    lines.push(foot);
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_confirm(app: &mut App, frame: &mut Frame, area: Rect, kind: &ConfirmKind) {
    let (title, text) = match kind {
        ConfirmKind::Quit if app.options.attached => (
            " Detach? ",
            "The run goes on in its own process; kforge open attaches again.\n[y] detach   [s] stop the run and detach   [n] stay".to_string(),
        ),
        ConfirmKind::Quit if app.state.state.is_over() => (
            " Quit while your actions run? ",
            format!(
                "{} of your actions (LLM calls, evaluations) are still running: quitting cancels them.\n[y] quit   [n] stay",
                app.actions_in_flight()
            ),
        ),
        ConfirmKind::Quit => (
            " Quit while the run is active? ",
            "The engine stops cleanly; the session stays resumable.\n[y] quit   [n] stay".to_string(),
        ),
        ConfirmKind::MarkFinal(id) => (
            " Mark final? ",
            format!("Make #{id} the final answer of this session?\n[y] yes   [n] no"),
        ),
        ConfirmKind::RejectGate(gate) => {
            let what = app
                .state
                .gates
                .get(gate)
                .map(|g| match (g.kind, g.candidate) {
                    (GateKind::Evaluation, Some(c)) => {
                        format!("Drop candidate #{c} without evaluating it?")
                    }
                    (GateKind::LlmCall, _) => "Skip this LLM call (its step gives up)?".into(),
                    (GateKind::AlgorithmOptimization, Some(c)) => {
                        format!("Skip the analysis and optimization of #{c}?")
                    }
                    (GateKind::Stages, _) => "Skip the tuning stages?".into(),
                    (GateKind::FinalBest, _) => "Declare no final kernel?".into(),
                    _ => "Reject this step?".into(),
                })
                .unwrap_or_else(|| "Reject this step?".into());
            (
                " Reject? ",
                format!("{what}\n[y] reject   [n] back to the gate"),
            )
        }
    };
    let r = centered(area, 64, 6);
    frame.render_widget(Clear, r);
    let block = dialog(app, title);
    let inner = block.inner(r);
    frame.render_widget(block, r);
    let lines: Vec<Line> = text
        .lines()
        .flat_map(|l| wrap(l, inner.width as usize))
        .map(Line::from)
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_input(app: &mut App, frame: &mut Frame, area: Rect, input: &super::app::InputState) {
    let h = if input.multiline {
        area.height.saturating_sub(6).max(6)
    } else {
        3
    };
    let r = if input.purpose == EditPurpose::Filter {
        let c = app.areas.console;
        Rect::new(
            c.x,
            (c.y + c.height).saturating_sub(3),
            c.width,
            3.min(c.height),
        )
    } else {
        centered(area, area.width.saturating_sub(8).min(100), h)
    };
    frame.render_widget(Clear, r);
    let block = dialog(app, format!(" {} ", input.title));
    let inner = block.inner(r);
    frame.render_widget(block, r);
    let ih = inner.height as usize;
    // The view follows the cursor without pinning it to the bottom; the offset lives in
    // the overlay's buffer so the next frame starts from it.
    let mut text = input.text.clone();
    let start = text.scroll_to_cursor(ih);
    if let Some(Overlay::Input(shown)) = &mut app.overlay {
        shown.text.top = text.top;
        shown.text.page = text.page;
    }
    // Multi-line edits get line numbers.
    let gutter = if input.multiline {
        text.lines.len().to_string().len() + 1
    } else {
        0
    };
    let iw = (inner.width as usize).saturating_sub(gutter);
    let hstart = text.col.saturating_sub(iw.saturating_sub(1));
    let lines: Vec<Line> = text
        .lines
        .iter()
        .enumerate()
        .skip(start)
        .take(ih)
        .map(|(i, l)| {
            let mut spans = Vec::new();
            if gutter > 0 {
                spans.push(Span::styled(
                    format!("{:>w$} ", i + 1, w = gutter - 1),
                    app.theme.get(Role::LineNumber),
                ));
            }
            spans.push(Span::raw(l.chars().skip(hstart).collect::<String>()));
            Line::from(spans)
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).style(app.theme.get(Role::Text)),
        inner,
    );
    frame.set_cursor_position(Position::new(
        inner.x + (gutter + text.col - hstart) as u16,
        inner.y + (text.row - start) as u16,
    ));
}
