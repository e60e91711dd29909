//! Drawing pieces more than one component uses: pane and dialog frames, candidate glyphs,
//! wrapping, numbered and highlighted code, diff rows. Pure functions of what they are
//! given.

use std::sync::Arc;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

use crate::protocol::{Category, StepKey};
use crate::session::state::{Call, Candidate, CandidateStatus, indistinguishable};

use super::component::{Ctx, Look};
use super::diff::{RowKind, Segments};
use super::glyphs::Glyph;
use super::shared::Focus;
use super::theme::Role;

/// A pane's frame, its border and title brighter while it has the keyboard.
pub fn pane_block<'a>(cx: &Ctx, title: impl Into<Line<'a>>, pane: Focus) -> Block<'a> {
    let focused = cx.focused(pane) && !cx.overlay_open;
    Block::bordered()
        .border_style(cx.theme.get(if focused {
            Role::BorderFocus
        } else {
            Role::Border
        }))
        .title(title)
        .title_style(cx.theme.get(if focused {
            Role::TitleFocus
        } else {
            Role::Title
        }))
}

pub fn dialog<'a>(cx: &impl Look, title: impl Into<Line<'a>>) -> Block<'a> {
    Block::bordered()
        .borders(Borders::ALL)
        .border_style(cx.theme().get(Role::DialogBorder))
        .title(title)
        .title_style(cx.theme().get(Role::DialogBorder))
}

/// A one-line bar of (priority, text, role) parts joined by ` │ `: while the line is wider
/// than `width`, the part of lowest priority is left out (the status bar and the batch
/// view's header).
pub fn parts_line(cx: &impl Look, mut parts: Vec<(u8, String, Role)>, width: u16) -> Line<'static> {
    let len =
        |parts: &[(u8, String, Role)]| parts.iter().map(|p| p.1.chars().count() + 3).sum::<usize>();
    while len(&parts) > width as usize && parts.len() > 1 {
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
            spans.push(Span::styled(" │ ", cx.theme().get(Role::Border)));
        }
        spans.push(Span::styled(text, cx.theme().get(role)));
    }
    Line::from(spans)
}

/// A filtered pane's count in its title, the same in every pane: `3/9 /stage` (matches of
/// all, then the filter as typed).
pub fn filtered(matches: usize, total: usize, filter: &str) -> String {
    format!("{matches}/{total} /{filter}")
}

pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2));
    let h = height.min(area.height.saturating_sub(2));
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push_str(Glyph::Cut.text());
    out
}

pub fn fmt_tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// A call's step in words: `seed 1`, `repair 2 of seed 1`, `analysis of #2`,
/// `optimization of #3`, `stage block_tiling`, `follow-up to analysis of #1`, `your action
/// 2`; the call's kind where its key is not one this version writes.
pub fn call_label(call: &Call) -> String {
    match call.step_key() {
        Some(key) => step_label(&key),
        None => call.kind.word().to_string(),
    }
}

fn step_label(key: &StepKey) -> String {
    match key {
        StepKey::Seed { index } => format!("seed {index}"),
        StepKey::Repair { of, attempt } => format!("repair {attempt} of {}", step_label(of)),
        StepKey::Again { of } => format!("follow-up to {}", step_label(of)),
        StepKey::Analysis { candidate } => format!("analysis of #{candidate}"),
        StepKey::Optimize { candidate } => format!("optimization of #{candidate}"),
        StepKey::Stage { name } => format!("stage {name}"),
        StepKey::Shapes { candidate } => format!("unseen shapes of #{candidate}"),
        StepKey::Action { number, .. } => format!("your action {number}"),
    }
}

/// Glyph and its theme role for a candidate.
pub fn glyph(cx: &Ctx, c: &Candidate) -> (&'static str, Role) {
    match c.status {
        CandidateStatus::Pending => (Glyph::Pending.text(), Role::Pending),
        CandidateStatus::Evaluating => (Glyph::Evaluating.text(), Role::Running),
        CandidateStatus::Correct if cx.state.best == Some(c.id) => (Glyph::Best.text(), Role::Best),
        CandidateStatus::Correct => (Glyph::Correct.text(), Role::Ok),
        CandidateStatus::Failed => (Glyph::Failed.text(), Role::Fail),
        CandidateStatus::Dropped => (Glyph::Dropped.text(), Role::Dropped),
    }
}

/// A candidate's outcome in a few characters (score, failure category, phase). A score is
/// followed by `≈` when its 95% interval overlaps the best's (the measurements cannot tell
/// it from the best), else by `~` when its timing stayed noisy.
pub fn outcome(cx: &Ctx, c: &Candidate) -> String {
    match c.status {
        CandidateStatus::Pending => "pending".into(),
        CandidateStatus::Evaluating => c.phase.clone().unwrap_or_else(|| "eval".into()),
        CandidateStatus::Correct => c
            .score()
            .map(|s| format!("{s:.2}x{}{}", score_marker(cx, c), c.sol_suffix()))
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

/// `≈` (indistinguishable from the session's best), `~` (noisy timing) or nothing.
pub fn score_marker(cx: &Ctx, c: &Candidate) -> &'static str {
    let best = cx
        .state
        .best
        .filter(|b| *b != c.id)
        .and_then(|b| cx.state.candidates.get(&b));
    if best.is_some_and(|b| indistinguishable(b, c)) {
        Glyph::Indistinguishable.text()
    } else if c.noisy() {
        Glyph::Noisy.text()
    } else {
        ""
    }
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

/// Cuts a styled line into rows of at most `width` characters at word boundaries (a word
/// longer than a row is cut), keeping each piece's style; rows after the first start with
/// `indent` spaces (under a line-number gutter, a diff's sign). Nothing is dropped, and a
/// line never breaks inside its gutter or its own leading indentation.
pub fn wrap_line(line: Line<'static>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(indent + 8);
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let mut rows = Vec::new();
    let mut start = 0;
    loop {
        let first = rows.is_empty();
        let room = if first { width } else { width - indent };
        let rest = &cells[start..];
        // Where the row's text begins: past the gutter and the line's own indentation.
        let skip = if first { indent.min(rest.len()) } else { 0 };
        let lead = skip + rest[skip..].iter().take_while(|(c, _)| *c == ' ').count();
        let take = if rest.len() <= room {
            rest.len()
        } else {
            match rest[..room].iter().rposition(|(c, _)| *c == ' ') {
                Some(i) if i >= lead => i + 1,
                _ => room,
            }
        };
        let mut spans: Vec<Span<'static>> = Vec::new();
        if !first {
            spans.push(Span::raw(" ".repeat(indent)));
        }
        for &(c, style) in &rest[..take] {
            match spans.last_mut() {
                Some(last) if last.style == style => last.content.to_mut().push(c),
                _ => spans.push(Span::styled(c.to_string(), style)),
            }
        }
        rows.push(Line::from(spans).style(line.style));
        start += take;
        if start >= cells.len() {
            break;
        }
    }
    rows
}

pub fn section(cx: &Ctx, title: &str) -> Line<'static> {
    Line::styled(format!("── {title} ──"), cx.theme.get(Role::Accent))
}

pub fn kv(cx: &Ctx, key: &str, value: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{key:<12}"), cx.theme.get(Role::Muted)),
        Span::styled(value, cx.theme.get(Role::Text)),
    ])
}

/// Skips `n` display columns of a line (horizontal scroll).
pub fn skip_cols(line: Line<'static>, n: usize) -> Line<'static> {
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

/// Two columns of lines side by side, split in the middle by a border-coloured rule (the
/// side-by-side diff, Compare).
pub fn draw_columns(
    cx: &Ctx,
    frame: &mut ratatui::Frame,
    area: Rect,
    left: Vec<Line<'static>>,
    right: Vec<Line<'static>>,
) {
    let half = area.width.saturating_sub(1) / 2;
    let rule = Rect::new(area.x + half, area.y, 1, area.height);
    let right_area = Rect::new(
        area.x + half + 1,
        area.y,
        area.width.saturating_sub(half + 1),
        area.height,
    );
    frame.render_widget(
        ratatui::widgets::Paragraph::new(left),
        Rect::new(area.x, area.y, half, area.height),
    );
    frame.render_widget(
        ratatui::widgets::Paragraph::new(vec![Line::from("│"); area.height as usize])
            .style(cx.theme.get(Role::Border)),
        rule,
    );
    frame.render_widget(ratatui::widgets::Paragraph::new(right), right_area);
}

/// The plain text of a line (what a search looks through).
pub fn plain(line: &Line) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// Python code as lines, syntax highlighted once the highlighter has them (plain until
/// then, or for text too long to highlight).
pub fn code_lines(cx: &Ctx, text: &Arc<str>) -> Arc<Vec<Line<'static>>> {
    match cx.highlighter.get(text, cx.theme.syntax.as_deref()) {
        Some(lines) => lines,
        None => Arc::new(
            text.lines()
                .map(|l| Line::styled(super::highlight::clean_line(l), cx.theme.get(Role::Text)))
                .collect(),
        ),
    }
}

/// Lines `start..start+height` with a line-number gutter, scrolled `hscroll` columns;
/// `mark` dresses each line's text (search matches) before the gutter goes on.
pub fn numbered(
    cx: &Ctx,
    lines: &[Line<'static>],
    start: usize,
    height: usize,
    hscroll: usize,
    mark: impl Fn(Line<'static>) -> Line<'static>,
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
                cx.theme.get(Role::LineNumber),
            )];
            spans.extend(mark(skip_cols(l.clone(), hscroll)).spans);
            Line::from(spans)
        })
        .collect()
}

/// The sign column of a unified diff row and its style.
pub fn diff_sign(cx: &Ctx, kind: RowKind) -> (&'static str, Style) {
    match kind {
        RowKind::Added => ("+", cx.theme.get(Role::DiffAdd)),
        RowKind::Removed => ("-", cx.theme.get(Role::DiffDel)),
        _ => (" ", cx.theme.get(Role::Muted)),
    }
}

/// A diff row's segments in diff colours, the changed words emphasized.
pub fn seg_spans(cx: &Ctx, text: &Segments, kind: RowKind, skip: usize) -> Vec<Span<'static>> {
    let (base, emph) = match kind {
        RowKind::Added => (cx.theme.get(Role::DiffAdd), cx.theme.get(Role::DiffAddEmph)),
        RowKind::Removed => (cx.theme.get(Role::DiffDel), cx.theme.get(Role::DiffDelEmph)),
        RowKind::Hunk => (cx.theme.get(Role::DiffHunk), cx.theme.get(Role::DiffHunk)),
        RowKind::Context => (cx.theme.get(Role::Text), cx.theme.get(Role::Text)),
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
pub fn row_spans(
    cx: &Ctx,
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
    seg_spans(cx, text, kind, skip)
}

/// Marks every case-insensitive occurrence of `needle` in a line with `style` on top of
/// its own (search matches), keeping the rest of its spans as they are.
pub fn mark_matches(line: Line<'static>, needle: &str, style: Style) -> Line<'static> {
    if needle.is_empty() {
        return line;
    }
    let text = plain(&line);
    let lower = text.to_lowercase();
    let needle = needle.to_lowercase();
    // Lower-casing can change byte lengths: only mark when it does not (ASCII, most code).
    if lower.len() != text.len() {
        return line;
    }
    let mut hits: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&needle) {
        let start = from + i;
        hits.push((start, start + needle.len()));
        from = start + needle.len().max(1);
    }
    if hits.is_empty() {
        return line;
    }
    let style_line = line.style;
    let mut out = Vec::new();
    let mut pos = 0;
    for span in line.spans {
        let s = span.content.as_ref();
        let (a, b) = (pos, pos + s.len());
        pos = b;
        let mut cut = a;
        for &(h0, h1) in hits.iter().filter(|(h0, h1)| *h1 > a && *h0 < b) {
            let (m0, m1) = (h0.max(a), h1.min(b));
            if m0 > cut {
                out.push(Span::styled(s[cut - a..m0 - a].to_string(), span.style));
            }
            out.push(Span::styled(
                s[m0 - a..m1 - a].to_string(),
                span.style.patch(style),
            ));
            cut = m1;
        }
        if cut < b {
            out.push(Span::styled(s[cut - a..].to_string(), span.style));
        }
    }
    Line::from(out).style(style_line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};

    #[test]
    fn matches_are_marked_across_spans_and_case() {
        let red = Style::default().fg(Color::Red);
        let line = Line::from(vec![
            Span::styled("def Mo", red),
            Span::raw("del(x): model"),
        ]);
        let hit = Style::default().add_modifier(Modifier::REVERSED);
        let out = mark_matches(line, "model", hit);
        assert_eq!(plain(&out), "def Model(x): model");
        let marked: Vec<&str> = out
            .spans
            .iter()
            .filter(|s| s.style.add_modifier.contains(Modifier::REVERSED))
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(marked, ["Mo", "del", "model"]);
        // The first part keeps its own colour under the mark.
        assert_eq!(out.spans[1].style.fg, Some(Color::Red));
        let none = mark_matches(Line::from("abc"), "zz", hit);
        assert_eq!(none.spans.len(), 1);
    }

    #[test]
    fn wrap_line_keeps_styles_and_indents_what_follows() {
        let red = Style::default().fg(Color::Red);
        let line = Line::from(vec![Span::raw("12 "), Span::styled("abcdefghijkl", red)]);
        let rows = wrap_line(line, 12, 3);
        let text: Vec<String> = rows.iter().map(plain).collect();
        assert_eq!(text, ["12 abcdefghi", "   jkl"]);
        assert_eq!(rows[1].spans[1].style.fg, Some(Color::Red));
        // A line that fits stays one row.
        assert_eq!(wrap_line(Line::from("short"), 10, 3).len(), 1);
        // Prose breaks between words, never inside one; never inside the gutter.
        let prose = Line::from(vec![
            Span::raw("7 "),
            Span::raw("Write a kernel that computes softmax"),
        ]);
        let text: Vec<String> = wrap_line(prose, 20, 2).iter().map(plain).collect();
        assert_eq!(
            text,
            ["7 Write a kernel ", "  that computes ", "  softmax"],
            "{text:?}"
        );
    }

    #[test]
    fn call_labels_are_words_not_keys() {
        let label = |key: &str| step_label(&key.parse().unwrap());
        assert_eq!(label("seed1"), "seed 1");
        assert_eq!(label("seed1/repair2"), "repair 2 of seed 1");
        assert_eq!(label("analysis2"), "analysis of #2");
        assert_eq!(label("opt3"), "optimization of #3");
        assert_eq!(label("analysis1/again"), "follow-up to analysis of #1");
        assert_eq!(label("stage/block_tiling"), "stage block_tiling");
        assert_eq!(label("user2-4711"), "your action 2");
    }

    #[test]
    fn wrap_keeps_indentation_and_splits_long_words() {
        assert_eq!(wrap("  a b c", 8), vec!["  a b c"]);
        let w = wrap(&"x".repeat(20), 8);
        assert_eq!(w, vec!["xxxxxxxx", "xxxxxxxx", "xxxx"]);
    }
}
