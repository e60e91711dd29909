//! `BatchApp`: the batch view free of any terminal. A key goes to the help dialog while it
//! is open, else to the task table; what they ask for comes back on the app-event queue
//! and is carried out here; what needs the outside world (quitting, opening a session)
//! leaves as a `BatchStep`.

use std::collections::VecDeque;
use std::path::PathBuf;

use crossterm::event::{KeyEvent, KeyEventKind, MouseEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::Paragraph;

use super::feed::Snapshot;
use super::lines::{figures, header, selected_line};
use super::{BatchCtx, BatchView};
use crate::tui::bars::draw_hints;
use crate::tui::component::{AppEvent, AppEvents, Component, Handled, Hint};
use crate::tui::overlays::{HelpView, Overlay};

/// Everything the loop feeds the batch view.
#[derive(Debug)]
pub enum BatchInput {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize,
    /// What the feed read.
    Feed(Box<Result<Snapshot, String>>),
}

/// What the batch view asks of its caller.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchStep {
    Quit,
    /// Open this session (`tasks/<key>` of the batch) in the session view, then come back.
    Open(PathBuf),
}

pub struct BatchApp {
    pub cx: BatchCtx,
    pub view: BatchView,
    pub help: Option<HelpView>,
    /// The message of the last key (or of the session view just left), until the next.
    pub flash: Option<String>,
    /// Something changed since the last frame.
    pub dirty: bool,
    events: AppEvents,
    steps: VecDeque<BatchStep>,
}

impl BatchApp {
    /// The view on a context; a sync feed is read at once.
    pub fn new(mut cx: BatchCtx) -> BatchApp {
        cx.refresh();
        BatchApp {
            cx,
            view: BatchView::default(),
            help: None,
            flash: None,
            dirty: true,
            events: AppEvents::default(),
            steps: VecDeque::new(),
        }
    }

    pub fn handle(&mut self, input: BatchInput) {
        match input {
            BatchInput::Key(k) if k.kind != KeyEventKind::Release => {
                self.flash = None;
                let out = &mut self.events;
                match &mut self.help {
                    Some(help) => {
                        let _ = help.on_key(&k, &self.cx, out);
                    }
                    None => {
                        let _ = self.view.on_key(&k, &self.cx, out);
                    }
                }
                self.dirty = true;
            }
            BatchInput::Key(_) => {}
            BatchInput::Mouse(m) => {
                if self.help.is_none()
                    && self.view.on_mouse(&m, &self.cx, &mut self.events) == Handled::Consumed
                {
                    self.dirty = true;
                }
            }
            BatchInput::Resize => self.dirty = true,
            BatchInput::Feed(read) => {
                self.cx.apply(*read);
                self.dirty = true;
            }
        }
        self.drain();
    }

    /// A second went by: running tasks' wall times move on screen.
    pub fn tick(&mut self) {
        if self.cx.any_live() {
            self.cx.now = chrono::Utc::now();
            self.dirty = true;
        }
    }

    /// Reads the batch again now (sync feed), or asks the worker to.
    pub fn refresh(&mut self) {
        self.cx.refresh();
        self.dirty = true;
    }

    pub fn set_flash(&mut self, text: String) {
        self.flash = Some(text);
        self.dirty = true;
    }

    /// Whether something is to be done outside.
    pub fn has_step(&self) -> bool {
        !self.steps.is_empty()
    }

    /// The next thing to do outside (quit, open a session), if any was asked.
    pub fn take_step(&mut self) -> Option<BatchStep> {
        self.steps.pop_front()
    }

    fn drain(&mut self) {
        while let Some(event) = self.events.pop() {
            self.dirty = true;
            match event {
                AppEvent::Flash(text) => self.flash = Some(text),
                AppEvent::Open(Overlay::Help(h)) => {
                    self.help = Some(h);
                    self.cx.overlay_open = true;
                }
                AppEvent::Close => {
                    self.help = None;
                    self.cx.overlay_open = false;
                }
                AppEvent::Quit(_) | AppEvent::AskQuit { .. } => {
                    self.steps.push_back(BatchStep::Quit)
                }
                AppEvent::OpenTask(key) => {
                    match self.cx.manifest.tasks.iter().find(|t| t.key == key) {
                        Some(task) => self
                            .steps
                            .push_back(BatchStep::Open(self.cx.dir.join(task.session()))),
                        None => self.flash = Some(format!("{key} is not a task of this batch")),
                    }
                }
                // The session view's events: no component of the batch view sends them.
                // Listed (not `_`) so that a new event is a decision here too.
                other @ (AppEvent::Send { .. }
                | AppEvent::Select { .. }
                | AppEvent::Focus(_)
                | AppEvent::Open(_)
                | AppEvent::CloseGate
                | AppEvent::Resolve { .. }
                | AppEvent::Edit { .. }
                | AppEvent::Submit { .. }
                | AppEvent::Filter { .. }
                | AppEvent::Copy(_)
                | AppEvent::Suspend
                | AppEvent::Follow(_)
                | AppEvent::ToggleMark) => {
                    tracing::debug!(?other, "an event the batch view does not handle");
                }
            }
        }
    }

    /// The hints of whatever has the keyboard.
    pub fn hints(&self) -> Vec<Hint> {
        let mut v = Vec::new();
        match &self.help {
            Some(h) => h.hints(&self.cx, &mut v),
            None => self.view.hints(&self.cx, &mut v),
        }
        v
    }

    /// Draws one frame: two header lines, the table, the selected task's line, the hints
    /// (or the last message), the help dialog on top.
    pub fn render(&mut self, frame: &mut Frame) {
        let area = frame.area();
        let [head, figs, table, selected, hints] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(area);
        let cx = &self.cx;
        frame.render_widget(Paragraph::new(header(cx, head.width)), head);
        frame.render_widget(Paragraph::new(figures(cx, figs.width)), figs);
        self.view.draw(cx, frame, table);
        frame.render_widget(
            Paragraph::new(selected_line(cx, self.view.selected(), selected.width)),
            selected,
        );
        let hint_list = self.hints();
        draw_hints(cx, frame, hints, self.flash.as_deref(), &hint_list);
        if let Some(help) = &mut self.help {
            help.draw(cx, frame, area);
        }
    }
}
