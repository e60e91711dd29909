//! The LLM tab: a call's prompt, reasoning and answer, streaming live; the calls of the
//! selected candidate and every call in flight, one at a time.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{ScrollView, TabView};
use crate::protocol::CallId;
use crate::session::state::Call;
use crate::tui::component::{AppEvents, Ctx, Handled, Hint};
use crate::tui::glyphs::Glyph;
use crate::tui::keymap::Action;
use crate::tui::theme::Role;
use crate::tui::widgets::{call_label, fmt_tokens, section, wrap};

#[derive(Debug)]
pub struct LlmTab {
    /// Which of the listed calls is shown.
    call_index: usize,
    /// Follow the end of a streaming answer.
    tail: bool,
    /// The call shown while it streamed: when it finishes, the view stays at its end
    /// instead of jumping back to the prompt.
    streamed: Option<CallId>,
}

impl Default for LlmTab {
    fn default() -> Self {
        LlmTab {
            call_index: 0,
            tail: true,
            streamed: None,
        }
    }
}

/// Where a call's answer and reasoning are written, next to its prompt.
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

impl LlmTab {
    /// A new selection: its first call, following its end.
    pub fn reset(&mut self) {
        self.call_index = 0;
        self.tail = true;
        self.streamed = None;
    }

    pub fn follow_tail(&mut self) {
        self.tail = true;
    }

    pub fn stop_tail(&mut self) {
        self.tail = false;
    }

    /// The calls the tab steps through: those of the selected candidate (the one that
    /// wrote it, then those that worked on it), then every other call in flight (a seed's
    /// call can be watched before it has a candidate) and the one watched as it streamed.
    pub fn calls<'a>(&self, cx: &'a Ctx) -> Vec<&'a Call> {
        let mut out: Vec<&Call> = Vec::new();
        if let Some(c) = cx.selected_candidate() {
            if let Some(call) = c.call.and_then(|id| cx.state.calls.get(&id)) {
                out.push(call);
            }
            for call in cx.state.calls.values() {
                if call.candidate == Some(c.id) && Some(call.id) != c.call {
                    out.push(call);
                }
            }
        }
        for call in cx.state.calls.values() {
            let watched = self.streamed == Some(call.id);
            if (call.ok.is_none() || watched) && !out.iter().any(|c| c.id == call.id) {
                out.push(call);
            }
        }
        out
    }

    /// The call shown: the chosen one of the list, else the newest call in flight.
    pub fn shown_call<'a>(&self, cx: &'a Ctx) -> Option<&'a Call> {
        let calls = self.calls(cx);
        if !calls.is_empty() {
            return calls.get(self.call_index.min(calls.len() - 1)).copied();
        }
        cx.state.calls.values().rev().find(|c| c.ok.is_none())
    }

    /// Shows a call (following new ones); `false` when it is not in the list.
    pub fn show(&mut self, cx: &Ctx, call: CallId) -> bool {
        match self.calls(cx).iter().position(|c| c.id == call) {
            Some(i) => {
                self.call_index = i;
                self.tail = true;
                true
            }
            None => false,
        }
    }
}

impl TabView for LlmTab {
    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.push(Hint::new(Action::NextCall, "call"));
    }

    fn on_action(
        &mut self,
        action: Action,
        cx: &Ctx,
        view: &mut ScrollView,
        _out: &mut AppEvents,
    ) -> Handled {
        match action {
            Action::NextCall | Action::PrevCall => {
                let n = self.calls(cx).len().max(1);
                self.call_index = if action == Action::NextCall {
                    (self.call_index + 1) % n
                } else {
                    (self.call_index + n - 1) % n
                };
                view.reset();
                self.tail = true;
                Handled::Consumed
            }
            _ => Handled::Ignored,
        }
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        let calls: Vec<CallId> = self.calls(cx).iter().map(|c| c.id).collect();
        let Some(call) = self.shown_call(cx) else {
            frame.render_widget(
                Paragraph::new("no LLM call for this candidate (it was written by hand)")
                    .style(cx.theme.get(Role::Muted)),
                area,
            );
            return;
        };
        let width = area.width as usize;
        let mut lines: Vec<Line<'static>> = Vec::new();
        let status = match call.ok {
            None => Span::styled(
                format!("streaming{}", Glyph::Cut.text()),
                cx.theme.get(Role::Running),
            ),
            Some(true) => Span::styled(
                format!("{} done", Glyph::Correct.text()),
                cx.theme.get(Role::Ok),
            ),
            Some(false) => Span::styled(
                format!(
                    "{} {}",
                    Glyph::Failed.text(),
                    call.error.clone().unwrap_or_default()
                ),
                cx.theme.get(Role::Fail),
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
                cx.keymap.hint(Action::PrevCall),
                cx.keymap.hint(Action::NextCall)
            )
        } else {
            String::new()
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("call #{} {} ", call.id, call_label(call)),
                cx.theme.get(Role::Accent),
            ),
            Span::styled(
                format!("{}/{}  ", call.provider, call.model),
                cx.theme.get(Role::Muted),
            ),
            status,
            Span::styled(position, cx.theme.get(Role::Muted)),
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
                cx.theme.get(Role::Muted),
            ));
        }
        if !call.retries.is_empty() {
            lines.push(Line::styled(
                format!(
                    "retried {}x: {}",
                    call.retries.len(),
                    call.retries.last().map(String::as_str).unwrap_or_default()
                ),
                cx.theme.get(Role::Warn),
            ));
        }
        if call.ok == Some(false) {
            let key = cx.keymap.hint(Action::Reask);
            lines.push(Line::styled(
                format!(
                    "failed: {}   ({key}: ask again)",
                    call.error.as_deref().unwrap_or("?")
                ),
                cx.theme.get(Role::Fail),
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
        lines.push(section(cx, &format!("prompt  {}", call.prompt_file)));
        // A prompt the person rewrote at its gate is theirs, not the template's.
        if let Some(gate) = cx.rewritten_prompt(call.id) {
            lines.push(Line::styled(
                format!(
                    "{} rewritten by you at gate {gate}: this is the prompt that was sent",
                    Glyph::Edited.text()
                ),
                cx.theme.get(Role::Marked),
            ));
        }
        match cx.docs.text(&call.prompt_file) {
            Some(p) => lines.extend(wrap(&p, width).into_iter().map(Line::from)),
            None if cx.docs.loading(&call.prompt_file) => {
                lines.push(Line::styled("(loading…)", cx.theme.get(Role::Muted)))
            }
            None => lines.push(Line::styled("(no prompt file)", cx.theme.get(Role::Muted))),
        }
        let reasoning = if call.ok.is_none() && !call.live_reasoning.is_empty() {
            Some(call.live_reasoning.clone())
        } else {
            cx.docs.text(&reason_file).map(|t| t.to_string())
        };
        if let Some(r) = reasoning.filter(|r| !r.trim().is_empty()) {
            lines.push(section(cx, "reasoning"));
            let style = cx.theme.get(Role::Muted).add_modifier(Modifier::ITALIC);
            lines.extend(wrap(&r, width).into_iter().map(|l| Line::styled(l, style)));
        }
        let answer = if call.ok.is_none() {
            // Opened in the middle of a call: what streamed before is in the growing file.
            if call.live_text.is_empty() {
                Some(
                    cx.docs
                        .text(&resp_file)
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                )
            } else {
                Some(call.live_text.clone())
            }
        } else {
            cx.docs
                .text(call.response_file.as_deref().unwrap_or(&resp_file))
                .map(|t| t.to_string())
        };
        lines.push(section(cx, "answer"));
        match answer {
            Some(a) => {
                lines.extend(wrap(&a, width).into_iter().map(Line::from));
                if call.ok.is_none() {
                    lines.push(Line::styled(
                        Glyph::Streaming.text(),
                        cx.theme.get(Role::Running),
                    ));
                }
            }
            None => lines.push(Line::styled("(no answer)", cx.theme.get(Role::Muted))),
        }
        view.record(&lines);
        let h = area.height as usize;
        if call.ok.is_none() {
            self.streamed = Some(call.id);
        }
        if self.tail && (call.ok.is_none() || self.streamed == Some(call.id)) {
            view.scroll = lines.len().saturating_sub(h);
        }
        let start = view.clamp(lines.len(), h);
        let visible: Vec<Line> = lines
            .into_iter()
            .skip(start)
            .take(h)
            .map(|l| view.marked(cx, l))
            .collect();
        frame.render_widget(Paragraph::new(visible), area);
    }
}
