//! Laying the screen out and drawing it: the panes, the three bars, then the dialog on
//! top. Each component draws itself; this only decides where.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::app::App;
use super::bars;
use super::component::Component;
use super::theme::Role;

pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// Where each part goes at a terminal size.
pub struct Layout5 {
    pub tree: Rect,
    pub chart: Rect,
    pub detail: Rect,
    pub console: Rect,
    pub activity: Rect,
    pub status: Rect,
    pub hints: Rect,
}

/// Panes grow with the terminal: the console takes about a fifth of the height, the tree
/// about a quarter of the width (within limits that keep the others usable).
pub fn layout(area: Rect) -> Layout5 {
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
    Layout5 {
        tree,
        chart,
        detail,
        console,
        activity,
        status,
        hints,
    }
}

/// Draws one frame.
pub fn render(app: &mut App, frame: &mut Frame) {
    let area = frame.area();
    let cx = &app.cx;
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
                .style(cx.theme.get(Role::Warn))
                .alignment(ratatui::layout::Alignment::Center),
            r,
        );
        return;
    }
    let l = layout(area);
    app.tree.draw(cx, frame, l.tree);
    app.chart.draw(cx, frame, l.chart);
    app.detail.draw(cx, frame, l.detail);
    app.console.draw(cx, frame, l.console);
    bars::draw_activity(cx, frame, l.activity);
    bars::draw_status(cx, frame, l.status);
    // Where a search entered in the detail pane landed, once its text was drawn.
    if let Some(msg) = app.detail.take_message() {
        app.flash = Some(msg);
    }
    let hints = app.hints();
    bars::draw_hints(cx, frame, l.hints, app.flash.as_deref(), &hints);
    if let Some(overlay) = &mut app.overlay {
        overlay.draw(cx, frame, area);
    } else if !cx.options.read_only
        && let Some(gate) = &mut app.gate
    {
        gate.draw(cx, frame, area);
    }
}
