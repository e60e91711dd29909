//! The application: the shared context, the components, and the routing between them,
//! free of any terminal. The loop (`runtime`) feeds it `Input`s and carries out the
//! `Effect`s it asks for; `render` lays the components out and draws them.
//!
//! A key goes to the open dialog if there is one (help, confirmation, input), else to the
//! open gate dialog, else to the focused pane, then to the detail tabs (their keys work
//! from any pane), then to the app's own global actions. Whatever a component wants done
//! comes back on the app-event queue and is carried out here, in order.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use crossterm::event::{KeyEvent, KeyEventKind, MouseEvent};
use ratatui::layout::Rect;

use crate::protocol::{CallId, CandidateId, Command, Decision, EngineState, Event, EventRecord};
use crate::session::state::{Call, CandidateStatus, SessionState};
use crate::session::store::SessionDir;

use super::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use super::detail::DetailPane;
use super::docs::{self, Docs};
use super::editor::TextBuf;
use super::highlight::{self, Highlighter};
use super::keymap::{Action, Context, Keymap};
use super::overlays::{
    ChoiceView, ConfirmKind, ConfirmView, GateView, HelpView, InputView, Overlay,
};
use super::panes::{ChartPane, ConsolePane, TreePane};
use super::route::{CandidateAction, Route, RunAction, ViewAction};
use super::theme::{Role, Theme};

pub use super::detail::{DiffLayout, Tab};
/// The types the components share, where callers of the app (the tests) look for them.
pub use super::shared::{AppOptions, EditPurpose, Focus, TuiExit};

/// Everything the loop feeds the app.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
    Event(EventRecord),
    Highlighted(highlight::Done),
    /// A session file read off the UI thread.
    Loaded(docs::Loaded),
    /// Once a second: elapsed time, hot reload of the theme and of shown files.
    Tick,
}

/// What the app asks of the loop.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Command(Command),
    Copy(String),
    /// Open `text` in the editor; the result comes back through `App::edited`.
    Edit {
        text: String,
        suffix: &'static str,
        purpose: EditPurpose,
    },
    Quit(TuiExit),
    /// Stop the process as Ctrl-Z would (the terminal restored first).
    Suspend,
}

pub use crate::protocol::manual::ANSWER_MARKER;

/// Screen areas of the last frame (the mouse, tests).
#[derive(Debug, Clone, Default)]
pub struct Areas {
    pub tree: Rect,
    pub chart: Rect,
    pub tabs: Vec<(Tab, Rect)>,
    pub detail: Rect,
    pub console: Rect,
}

pub struct App {
    pub(super) cx: Ctx,
    pub(super) tree: TreePane,
    pub(super) chart: ChartPane,
    pub(super) detail: DetailPane,
    pub(super) console: ConsolePane,
    pub(super) overlay: Option<Overlay>,
    /// The gate dialog the person opened (`a`); gates never open by themselves.
    pub(super) gate: Option<GateView>,
    /// The message of the last key, until the next.
    pub(super) flash: Option<String>,
    /// Something changed since the last frame.
    pub dirty: bool,
    events: AppEvents,
    effects: Vec<Effect>,
    /// Gates this window answered (another window's answer is announced).
    answered: HashSet<crate::protocol::GateId>,
    /// The elapsed time and activity line as last drawn (a tick redraws when they change).
    last_elapsed: String,
    last_activity: Vec<(String, Role)>,
}

fn is_press(k: &KeyEvent) -> bool {
    k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat
}

impl App {
    pub fn new(
        session: SessionDir,
        initial: &[EventRecord],
        options: AppOptions,
        theme: Theme,
        keymap: Keymap,
        highlighter: Highlighter,
        docs: Docs,
    ) -> App {
        let state = SessionState::from_records(initial);
        // Open on the best candidate of a finished session, else the newest.
        let selected = if state.state.is_over() {
            state
                .best
                .or_else(|| state.candidates.keys().last().copied())
        } else {
            state.candidates.keys().last().copied()
        };
        let cx = Ctx {
            state,
            session,
            options,
            theme,
            keymap,
            highlighter,
            docs,
            focus: Focus::Tree,
            selected,
            marked: None,
            follow: true,
            overlay_open: false,
        };
        let console = ConsolePane::new(&cx);
        let mut app = App {
            cx,
            tree: TreePane::default(),
            chart: ChartPane::default(),
            detail: DetailPane::default(),
            console,
            overlay: None,
            gate: None,
            flash: None,
            dirty: true,
            events: AppEvents::default(),
            effects: Vec::new(),
            answered: HashSet::new(),
            last_elapsed: String::new(),
            last_activity: Vec::new(),
        };
        app.last_elapsed = super::bars::elapsed_text(&app.cx);
        app
    }

    // ------------------------------------------------------------- what tests read

    /// The shared context: the session state, selection, theme, caches.
    pub fn ctx(&self) -> &Ctx {
        &self.cx
    }

    /// The context alone (to draw components on their own).
    pub fn into_ctx(self) -> Ctx {
        self.cx
    }

    pub fn state(&self) -> &SessionState {
        &self.cx.state
    }

    pub fn selected(&self) -> Option<CandidateId> {
        self.cx.selected
    }

    pub fn focus(&self) -> Focus {
        self.cx.focus
    }

    pub fn follow(&self) -> bool {
        self.cx.follow
    }

    pub fn tab(&self) -> Tab {
        self.detail.tab()
    }

    /// The detail tab's first line shown.
    pub fn detail_scroll(&self) -> usize {
        self.detail.view.scroll
    }

    pub fn search(&self) -> Option<&str> {
        self.detail.view.search()
    }

    pub fn tree_filter(&self) -> &str {
        self.tree.filter()
    }

    pub fn console_filter(&self) -> &str {
        self.console.filter()
    }

    /// Indices into the log of the lines that pass the console's filter.
    pub fn console_lines(&self) -> &[usize] {
        self.console.lines()
    }

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    pub fn set_flash(&mut self, text: String) {
        self.flash = Some(text);
        self.dirty = true;
    }

    /// Fixes "now" (tests).
    pub fn set_clock(&mut self, now: DateTime<Utc>) {
        self.cx.options.clock = Some(now);
    }

    pub fn areas(&self) -> Areas {
        Areas {
            tree: self.tree.area,
            chart: self.chart.area,
            tabs: self.detail.tab_areas.clone(),
            detail: self.detail.area,
            console: self.console.area,
        }
    }

    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// The open gate dialog's view, while its gate waits and nothing covers it.
    fn gate_shown(&self) -> Option<&GateView> {
        if self.cx.options.read_only || self.overlay.is_some() {
            return None;
        }
        self.gate.as_ref().filter(|g| g.waiting(&self.cx).is_some())
    }

    // ---------------------------------------------------------------- inputs

    pub fn handle(&mut self, input: Input) {
        match input {
            Input::Key(k) if is_press(&k) => {
                self.flash = None;
                self.on_key(k);
                self.dirty = true;
            }
            Input::Key(_) => {}
            Input::Mouse(m) => self.on_mouse(m),
            Input::Resize(..) => self.dirty = true,
            Input::Event(r) => self.on_event(r),
            Input::Highlighted(done) => {
                self.cx.highlighter.done(done);
                self.dirty = true;
            }
            Input::Loaded(l) => {
                self.cx.docs.loaded(l);
                self.dirty = true;
            }
            Input::Tick => self.on_tick(),
        }
        self.drain();
    }

    fn on_key(&mut self, key: KeyEvent) {
        let gate_shown = self.gate_shown().is_some();
        let out = &mut self.events;
        if let Some(overlay) = &mut self.overlay {
            overlay.on_key(&key, &self.cx, out);
            return;
        }
        if gate_shown && let Some(gate) = &mut self.gate {
            let _ = gate.on_key(&key, &self.cx, out);
            return;
        }
        let pane: &mut dyn Component = match self.cx.focus {
            Focus::Tree => &mut self.tree,
            Focus::Chart => &mut self.chart,
            Focus::Detail => &mut self.detail,
            Focus::Console => &mut self.console,
        };
        let contexts: Vec<Context> = pane
            .context()
            .into_iter()
            .chain([Context::Global])
            .collect();
        let Some(action) = self.cx.keymap.lookup(&key, &contexts) else {
            return;
        };
        // The detail pane is asked next in any case (its tab keys work from every pane).
        let handled = if self.cx.focus == Focus::Detail {
            Handled::Ignored
        } else {
            pane.on_action(action, &self.cx, out)
        };
        if handled == Handled::Consumed
            || self.detail.on_action(action, &self.cx, out) == Handled::Consumed
        {
            return;
        }
        self.global(action);
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        if self.overlay.is_some() || self.gate_shown().is_some() {
            return;
        }
        // A click on a tab label is inside the detail pane too: tabs first.
        let out = &mut self.events;
        let used = [
            self.tree.on_mouse(&m, &self.cx, out),
            self.chart.on_mouse(&m, &self.cx, out),
            self.detail.on_mouse(&m, &self.cx, out),
            self.console.on_mouse(&m, &self.cx, out),
        ];
        if used.contains(&Handled::Consumed) {
            self.dirty = true;
        }
    }

    fn on_event(&mut self, record: EventRecord) {
        let log_before = self.cx.state.log.len();
        match &record.event {
            Event::CandidateCreated { id, .. } => {
                let id = *id;
                self.cx.state.apply(&record);
                self.tree.invalidate();
                if self.cx.follow || self.cx.selected.is_none() {
                    self.select(Some(id), false);
                }
            }
            Event::LlmDelta { call, .. } => {
                // Only a visible stream needs a redraw.
                let shown = self.detail.shows_call(&self.cx, *call);
                self.cx.state.apply(&record);
                if shown {
                    self.dirty = true;
                }
                return;
            }
            Event::LlmCallStarted { call, .. } => {
                let call = *call;
                self.cx.state.apply(&record);
                self.detail.call_started(&self.cx, call);
            }
            Event::EvalFinished { result_file, .. } => {
                self.cx.docs.forget(result_file);
                self.cx.state.apply(&record);
            }
            Event::LlmCallFinished {
                response_file: Some(f),
                ..
            } => {
                self.cx.docs.forget(f);
                self.cx.state.apply(&record);
            }
            Event::GateResolved { gate, decision } => {
                let (gate, decision) = (*gate, decision.clone());
                self.cx.state.apply(&record);
                // Answered in another window while this one showed it: say so.
                if self.gate.as_ref().is_some_and(|g| g.gate == gate)
                    && !self.answered.contains(&gate)
                {
                    self.gate = None;
                    self.flash = Some(format!(
                        "gate {gate} was answered in another window ({})",
                        decision.word()
                    ));
                }
            }
            _ => self.cx.state.apply(&record),
        }
        if self.cx.state.log.len() > log_before {
            self.console.appended(&self.cx, log_before);
        }
        // A filtered tree follows statuses and scores as they change.
        if !self.tree.filter().is_empty() {
            self.tree.invalidate();
        }
        self.dirty = true;
    }

    fn on_tick(&mut self) {
        if self.cx.theme.changed_on_disk() {
            let name = self.cx.theme.name.clone();
            self.reload_theme(&name);
        }
        // Files on screen may have been rewritten (a prompt edited, a kernel replaced):
        // the docs worker checks and sends what changed.
        if self.cx.docs.check() {
            self.dirty = true;
        }
        let elapsed = super::bars::elapsed_text(&self.cx);
        if elapsed != self.last_elapsed {
            self.last_elapsed = elapsed;
            self.dirty = true;
        }
        // The activity line (streaming progress, phases) refreshes on ticks, not per delta.
        let activity = super::bars::activity(&self.cx);
        if activity != self.last_activity {
            self.last_activity = activity;
            self.dirty = true;
        }
    }

    pub fn reload_theme(&mut self, name: &str) {
        match Theme::load(name, self.cx.theme.no_color) {
            Ok(t) => self.cx.theme = t,
            Err(e) => {
                // Keep the old one; stop re-reading a broken file every tick.
                if let Some((path, stamp)) = &mut self.cx.theme.source {
                    *stamp = std::fs::metadata(&*path).and_then(|m| m.modified()).ok();
                }
                self.flash = Some(format!("{e:#}"));
            }
        }
        self.dirty = true;
    }

    /// Text back from the editor (`None`: cancelled or failed).
    pub fn edited(&mut self, purpose: EditPurpose, original: &str, text: Option<String>) {
        self.dirty = true;
        match text {
            None => self.flash = Some("edit cancelled".into()),
            Some(t) if t == original && matches!(purpose, EditPurpose::GateRewrite(_)) => {
                self.flash = Some(format!(
                    "unchanged: nothing sent ({} approves as is)",
                    self.cx.keymap.hint(Action::Approve)
                ));
            }
            Some(t) => self.events.push(AppEvent::Submit { purpose, text: t }),
        }
        self.drain();
    }

    // ---------------------------------------------------------------- app events

    /// Carries out what the components asked, in order (one may lead to more).
    fn drain(&mut self) {
        while let Some(event) = self.events.pop() {
            self.dispatch(event);
            self.dirty = true;
        }
    }

    fn dispatch(&mut self, event: AppEvent) {
        match event {
            AppEvent::Send { command, done } => {
                if self.send(command) && !done.is_empty() {
                    self.flash = Some(done);
                }
            }
            AppEvent::Flash(text) => self.flash = Some(text),
            AppEvent::Select { id, by_user } => self.select(id, by_user),
            AppEvent::Focus(f) => self.cx.focus = f,
            AppEvent::Open(overlay) => self.open(overlay),
            AppEvent::Close => {
                self.overlay = None;
                self.cx.overlay_open = false;
            }
            AppEvent::CloseGate => self.gate = None,
            AppEvent::Resolve { gate, decision } => {
                if self.send(Command::Resolve { gate, decision }) {
                    self.answered.insert(gate);
                }
                // The dialog closes; the next waiting gate opens only when the person asks.
                self.gate = None;
            }
            AppEvent::Edit {
                text,
                suffix,
                purpose,
            } => self.effects.push(Effect::Edit {
                text,
                suffix,
                purpose,
            }),
            AppEvent::Submit { purpose, text } => self.submit(purpose, text),
            AppEvent::Filter { pane, text } => self.set_filter(pane, text),
            AppEvent::Copy(text) => self.effects.push(Effect::Copy(text)),
            AppEvent::Quit(exit) => self.effects.push(Effect::Quit(exit)),
            AppEvent::AskQuit { interrupt } => {
                if self.cx.run_active() {
                    self.open(Overlay::Confirm(ConfirmView::new(ConfirmKind::Quit {
                        interrupt,
                    })));
                } else {
                    self.effects
                        .push(Effect::Quit(self.cx.quit_exit(interrupt)));
                }
            }
            AppEvent::Suspend => self.effects.push(Effect::Suspend),
            AppEvent::Follow(on) => {
                self.cx.follow = on;
                if on {
                    self.console.follow_tail();
                }
            }
            AppEvent::ToggleMark => {
                let sel = self.cx.selected;
                if self.cx.marked.is_some() && self.cx.marked == sel {
                    self.cx.marked = None;
                    self.flash = Some("mark cleared".into());
                } else if let Some(id) = sel {
                    self.cx.marked = Some(id);
                    self.flash = Some(format!("#{id} marked: Diff and Compare use it"));
                }
                self.detail.mark_changed();
            }
            // Only the batch view opens tasks.
            AppEvent::OpenTask(_) => {}
        }
    }

    fn open(&mut self, mut overlay: Overlay) {
        // `/` works alike in every pane: its input sits over the pane it filters or
        // searches.
        if let Overlay::Input(v) = &mut overlay {
            v.anchor = match v.purpose {
                EditPurpose::Filter(Focus::Tree) => Some(self.tree.area),
                EditPurpose::Filter(_) => Some(self.console.area),
                EditPurpose::Search => Some(self.detail.area),
                _ => None,
            };
        }
        self.overlay = Some(overlay);
        self.cx.overlay_open = true;
    }

    /// Sends a command; `false` (with the reason on the message line) when this window
    /// cannot act.
    fn send(&mut self, command: Command) -> bool {
        if let Some(why) = self.cx.cannot_act() {
            self.flash = Some(why.into());
            return false;
        }
        self.effects.push(Effect::Command(command));
        true
    }

    /// Selects a candidate; `by_user` stops following new ones.
    fn select(&mut self, id: Option<CandidateId>, by_user: bool) {
        if by_user {
            self.cx.follow = false;
        }
        if id != self.cx.selected {
            self.cx.selected = id;
            self.detail.selection_changed();
            self.tree.reveal(id, &self.cx);
        }
        self.dirty = true;
    }

    fn submit(&mut self, purpose: EditPurpose, text: String) {
        let send = |command, done: String| AppEvent::Send { command, done };
        let event = match purpose {
            EditPurpose::Filter(pane) => AppEvent::Filter { pane, text },
            EditPurpose::Search => {
                self.detail.search(&text);
                return;
            }
            EditPurpose::Repair(id) => send(
                Command::Repair {
                    candidate: id,
                    instruction: text.trim().to_string(),
                },
                format!("repair of #{id} requested"),
            ),
            EditPurpose::Optimize(id) => send(
                Command::Optimize {
                    candidate: id,
                    instruction: text.trim().to_string(),
                },
                format!("optimization of #{id} requested"),
            ),
            EditPurpose::Manual { parent } => send(
                Command::Manual { parent, code: text },
                "manual candidate sent for evaluation".into(),
            ),
            EditPurpose::GateRewrite(gate) => AppEvent::Resolve {
                gate,
                decision: Decision::Rewrite { text },
            },
            EditPurpose::ManualAnswer(call) => match crate::protocol::manual::answer_from(&text) {
                None => AppEvent::Flash("empty answer: nothing sent".into()),
                Some(answer) => send(
                    Command::ManualAnswer { call, text: answer },
                    format!("answer to call #{call} sent"),
                ),
            },
        };
        self.events.push(event);
    }

    // ---------------------------------------------------------------- global actions

    /// The candidate an action works on (the selection), or why there is none.
    fn acting_on(&mut self) -> Option<CandidateId> {
        if let Some(why) = self.cx.cannot_act() {
            self.flash = Some(why.into());
            return None;
        }
        if self.cx.selected.is_none() {
            self.flash = Some("no candidate selected".into());
        }
        self.cx.selected
    }

    fn input(&mut self, title: String, purpose: EditPurpose, text: TextBuf, multiline: bool) {
        self.open(Overlay::Input(InputView::new(
            title, purpose, text, multiline,
        )));
    }

    /// The call of the `manual` provider waiting for the person's answer: the one shown
    /// in the LLM tab if it is one, else the newest.
    pub fn manual_call(&self) -> Option<&Call> {
        let waiting = |c: &&Call| c.ok.is_none() && c.answered_by_person();
        self.detail
            .shown_call(&self.cx)
            .filter(waiting)
            .or_else(|| self.cx.state.calls.values().rev().find(waiting))
    }

    /// Actions of the whole app (no component used them): on the selected candidate, on
    /// the run, or on the view (`Route`: every action has its place).
    fn global(&mut self, action: Action) {
        match Route::of(action) {
            Route::Candidate(a) => self.candidate_action(a),
            Route::Run(a) => self.run_action(a),
            Route::View(a) => self.view_action(a),
            // A key of a pane, a tab or a dialog that none of them used here.
            Route::Component => {}
        }
    }

    /// What the person asks of the selected candidate.
    fn candidate_action(&mut self, action: CandidateAction) {
        let sel = self.cx.selected;
        match action {
            CandidateAction::Repair | CandidateAction::Optimize => {
                let Some(id) = self.acting_on() else { return };
                let (title, purpose) = if action == CandidateAction::Repair {
                    (
                        format!("repair #{id}: instruction (empty: the usual repair)"),
                        EditPurpose::Repair(id),
                    )
                } else {
                    (
                        format!("optimize #{id}: instruction"),
                        EditPurpose::Optimize(id),
                    )
                };
                self.input(title, purpose, TextBuf::new(""), false);
            }
            CandidateAction::EditEval | CandidateAction::EditInline => {
                let Some(id) = self.acting_on() else { return };
                let Some(code) = self
                    .cx
                    .state
                    .candidates
                    .get(&id)
                    .and_then(|c| self.cx.docs.text_now(&c.file))
                else {
                    self.flash = Some(format!("#{id}'s code cannot be read"));
                    return;
                };
                let purpose = EditPurpose::Manual { parent: Some(id) };
                if action == CandidateAction::EditEval {
                    self.effects.push(Effect::Edit {
                        text: code.to_string(),
                        suffix: ".py",
                        purpose,
                    });
                } else {
                    let view = InputView::new(
                        format!("edit #{id} (ctrl-s evaluates, esc cancels)"),
                        purpose,
                        TextBuf::at_start(&code),
                        true,
                    )
                    .python();
                    self.open(Overlay::Input(view));
                }
            }
            CandidateAction::Reevaluate => {
                if let Some(id) = self.acting_on() {
                    self.events.push(AppEvent::Send {
                        command: Command::Reevaluate { candidate: id },
                        done: format!("re-evaluation of #{id} requested"),
                    });
                }
            }
            CandidateAction::Profile => {
                if let Some(id) = self.acting_on() {
                    self.events.push(AppEvent::Send {
                        command: Command::Profile { candidate: id },
                        done: format!("profile of #{id} requested"),
                    });
                }
            }
            CandidateAction::MarkFinal => {
                if let Some(id) = self.acting_on() {
                    self.open(Overlay::Confirm(ConfirmView::new(ConfirmKind::MarkFinal(
                        id,
                    ))));
                }
            }
            CandidateAction::Copy => match sel.map(|id| (id, self.cx.code(id))) {
                Some((id, Some(code))) => {
                    self.effects.push(Effect::Copy(code.to_string()));
                    self.flash = Some(format!("copied #{id} ({} lines)", code.lines().count()));
                }
                Some((id, None)) => self.flash = Some(format!("#{id}'s code is not read yet")),
                None => self.flash = Some("no candidate selected".into()),
            },
        }
    }

    /// What the person asks of the run: pause, cancel, ask again, gates, modes,
    /// approvals, manual answers.
    fn run_action(&mut self, action: RunAction) {
        match action {
            RunAction::PauseResume => {
                let command = if self.cx.state.state == EngineState::Paused {
                    Command::Resume
                } else {
                    Command::Pause
                };
                self.send(command);
            }
            RunAction::CancelCall => self.cancel_call(),
            // A list of the modes, each saying what it would approve now; never a switch
            // by itself.
            RunAction::SwitchMode => match self.cx.cannot_act() {
                Some(why) => self.flash = Some(why.into()),
                None => self.open(Overlay::Choice(ChoiceView::mode(&self.cx))),
            },
            RunAction::Revoke => match self.cx.cannot_act() {
                Some(why) => self.flash = Some(why.into()),
                None if self.cx.state.standing.is_empty() => {
                    self.flash = Some(format!(
                        "no approval to take back ({} in a gate dialog approves a kind for the session)",
                        self.cx.keymap.hint(Action::ApproveAlways)
                    ))
                }
                None => self.open(Overlay::Choice(ChoiceView::revoke())),
            },
            RunAction::CancelAllCalls => {
                let n = self.cx.state.calls_in_flight().count();
                if let Some(why) = self.cx.cannot_act() {
                    self.flash = Some(why.into());
                } else if n == 0 {
                    self.flash = Some("no LLM call in flight".into());
                } else {
                    self.open(Overlay::Confirm(ConfirmView::new(
                        ConfirmKind::CancelAllCalls(n),
                    )));
                }
            }
            RunAction::Reask => {
                let failed = |c: &&Call| c.ok == Some(false);
                let call = self
                    .detail
                    .shown_call(&self.cx)
                    .filter(failed)
                    .or_else(|| self.cx.state.calls.values().rev().find(failed))
                    .map(|c| c.id);
                match call {
                    Some(call) => self.events.push(AppEvent::Send {
                        command: Command::Reask { call },
                        done: format!("asking call {call} again"),
                    }),
                    None => self.flash = Some("no failed LLM call to ask again".into()),
                }
            }
            RunAction::OpenGate => match self.cx.state.open_gate().map(|g| (g.id, g.candidate)) {
                Some(_) if let Some(why) = self.cx.cannot_act() => self.flash = Some(why.into()),
                Some((gate, candidate)) => {
                    // The panes behind the dialog show the gate's candidate.
                    if candidate.is_some() {
                        self.select(candidate, false);
                    }
                    self.gate = Some(GateView::new(gate));
                }
                None => self.flash = Some("no gate is waiting".into()),
            },
            RunAction::AnswerCall => self.answer_call(),
        }
    }

    /// Moving around: quit, help, focus, filter, follow, mark, jumps, theme.
    fn view_action(&mut self, action: ViewAction) {
        let sel = self.cx.selected;
        match action {
            ViewAction::Quit => self.events.push(AppEvent::AskQuit { interrupt: false }),
            ViewAction::Interrupt => self.events.push(AppEvent::AskQuit { interrupt: true }),
            ViewAction::Help => self.open(Overlay::Help(HelpView::default())),
            ViewAction::FocusNext | ViewAction::FocusPrev => {
                let i = Focus::ORDER
                    .iter()
                    .position(|f| *f == self.cx.focus)
                    .unwrap_or(0);
                let n = Focus::ORDER.len();
                let j = if action == ViewAction::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.cx.focus = Focus::ORDER[j];
            }
            // The tree, the console and the detail pane answer `/` themselves.
            ViewAction::Filter => {
                self.flash = Some(format!(
                    "the timeline has no filter: {} filters the tree or the console, and searches the detail pane, where they have the focus ({} moves it)",
                    self.cx.keymap.hint(Action::Filter),
                    self.cx.keymap.hint(Action::FocusNext)
                ));
            }
            // The focused pane had no filter on to clear.
            ViewAction::ClearFilter => self.flash = Some(self.filters_state()),
            ViewAction::Follow => {
                let on = !self.cx.follow;
                self.events.push(AppEvent::Follow(on));
                if on {
                    let last = self.cx.state.candidates.keys().last().copied();
                    self.select(last, false);
                }
                self.flash = Some(if on {
                    "following new candidates".into()
                } else {
                    "not following".into()
                });
            }
            ViewAction::Mark => self.events.push(AppEvent::ToggleMark),
            ViewAction::JumpBest => match self.cx.state.best {
                Some(best) => self.select(Some(best), true),
                None => self.flash = Some("no best candidate yet".into()),
            },
            ViewAction::JumpFailure => {
                // The next failed candidate after the selection, in creation order, wrapping.
                let failed: Vec<CandidateId> = self
                    .cx
                    .state
                    .candidates
                    .values()
                    .filter(|c| c.status == CandidateStatus::Failed)
                    .map(|c| c.id)
                    .collect();
                let next = failed
                    .iter()
                    .find(|id| Some(**id) > sel)
                    .or(failed.first())
                    .copied();
                match next {
                    Some(id) => self.select(Some(id), true),
                    None => self.flash = Some("no failed candidate".into()),
                }
            }
            ViewAction::Theme => {
                let names = ["dark", "light", "high-contrast"];
                let i = names
                    .iter()
                    .position(|n| *n == self.cx.theme.name)
                    .map_or(0, |i| (i + 1) % names.len());
                self.reload_theme(names[i]);
                self.flash = Some(format!("theme {}", self.cx.theme.name));
            }
            ViewAction::Suspend => self.effects.push(Effect::Suspend),
        }
    }

    /// A pane's filter changed (typed, kept, or cleared).
    fn set_filter(&mut self, pane: Focus, text: String) {
        match pane {
            Focus::Tree => {
                self.tree.set_filter(text);
                // The selection stays among the rows shown: else the first match.
                let sel = self.cx.selected;
                if !self.tree.rows(&self.cx).iter().any(|r| Some(r.id) == sel)
                    && let Some(first) = self.tree.first_match(&self.cx)
                {
                    self.select(Some(first), false);
                }
            }
            _ => self.console.set_filter(&self.cx, text),
        }
    }

    /// Which filters are on, for the message line (`esc` where none is).
    pub fn filters_state(&self) -> String {
        let on: Vec<String> = [
            ("tree", self.tree.filter()),
            ("console", self.console.filter()),
        ]
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .map(|(pane, f)| {
            format!("the {pane}'s filter '{f}' stays on (esc in the {pane} clears it)")
        })
        .collect();
        if on.is_empty() {
            "no filter is on".into()
        } else {
            format!("nothing to clear here: {}", on.join("; "))
        }
    }

    /// `x`: cancels one call only, the one shown in the LLM tab, or the only one in flight.
    fn cancel_call(&mut self) {
        let in_flight: Vec<CallId> = self.cx.state.calls_in_flight().map(|c| c.id).collect();
        let shown = self
            .detail
            .shown_call(&self.cx)
            .filter(|c| c.ok.is_none() && self.detail.tab() == Tab::Llm)
            .map(|c| c.id);
        let call = shown.or(if in_flight.len() == 1 {
            Some(in_flight[0])
        } else {
            None
        });
        match call {
            _ if in_flight.is_empty() => self.flash = Some("no LLM call in flight".into()),
            Some(call) => {
                self.send(Command::CancelCall { call: Some(call) });
            }
            None => {
                self.flash = Some(format!(
                    "{} calls in flight: show one in the LLM tab, then {} cancels it ({} cancels them all)",
                    in_flight.len(),
                    self.cx.keymap.hint(Action::CancelCall),
                    self.cx.keymap.hint(Action::CancelAllCalls)
                ));
            }
        }
    }

    /// `A`: the manual provider's waiting call, answered in $EDITOR.
    fn answer_call(&mut self) {
        if let Some(why) = self.cx.cannot_act() {
            self.flash = Some(why.into());
            return;
        }
        let Some(call) = self.manual_call().cloned() else {
            self.flash = Some("no call of the manual provider is waiting".into());
            return;
        };
        // Read now if the worker has not brought it yet: the console named it, so it is
        // there, and the person asked for it.
        let Some(prompt) = self.cx.docs.text_now(&call.prompt_file) else {
            self.flash = Some(format!("{} cannot be read", call.prompt_file));
            return;
        };
        // The model would get the system prompt too: the person sees it above the prompt.
        let system_file = match call.prompt_file.strip_suffix(".prompt.md") {
            Some(stem) => format!("{stem}.system.md"),
            None => format!("llm/{}.system.md", call.id),
        };
        let shown = match self.cx.docs.text_now(&system_file) {
            Some(system) if !system.trim().is_empty() => format!(
                "===== system prompt ({system_file}) =====\n{system}\n\n===== prompt ({}) =====\n{prompt}",
                call.prompt_file
            ),
            _ => prompt.to_string(),
        };
        self.effects.push(Effect::Edit {
            text: crate::protocol::manual::answer_template(&shown),
            suffix: ".md",
            purpose: EditPurpose::ManualAnswer(call.id),
        });
    }

    // ---------------------------------------------------------------- hints

    /// The hints of whatever has the keyboard.
    pub(super) fn hints(&self) -> Vec<Hint> {
        let cx = &self.cx;
        if let Some(o) = &self.overlay {
            let mut v = Vec::new();
            o.hints(cx, &mut v);
            return v;
        }
        if let Some(g) = self.gate_shown() {
            let mut v = Vec::new();
            g.hints(cx, &mut v);
            return v;
        }
        let mut v = vec![
            Hint::new(Action::Help, "help"),
            // Opened from the batch view, `q` goes back to it.
            Hint::new(
                Action::Quit,
                if cx.options.in_batch {
                    "back to the batch"
                } else {
                    "quit"
                },
            ),
        ];
        if cx.can_act() && self.manual_call().is_some() {
            // Urgent: the run waits for it.
            v.push(Hint::new(Action::AnswerCall, "answer the call"));
        }
        v.push(Hint::new(Action::FocusNext, "pane"));
        match cx.focus {
            Focus::Tree => self.tree.hints(cx, &mut v),
            Focus::Chart => self.chart.hints(cx, &mut v),
            Focus::Detail => self.detail.hints(cx, &mut v),
            Focus::Console => self.console.hints(cx, &mut v),
        }
        if cx.focus != Focus::Detail {
            self.detail.shared_hints(cx, &mut v);
        }
        if cx.can_act() {
            v.extend([
                Hint::new(Action::Repair, "repair"),
                Hint::new(Action::Optimize, "optimize"),
                Hint::new(Action::EditEval, "edit"),
                Hint::new(Action::PauseResume, "pause"),
            ]);
            // How the run is steered comes first while it matters: a gate waits (a switch
            // of mode, or `Y` in the dialog, asks fewer), approvals stand (`u` takes them
            // back); else the mode's key comes last.
            let mut steering = Vec::new();
            if cx.state.open_gate().is_some() {
                steering.push(Hint::new(Action::OpenGate, "answer the waiting gate"));
                steering.push(Hint::new(Action::SwitchMode, "mode"));
            }
            if !cx.state.standing.is_empty() {
                steering.push(Hint::new(Action::Revoke, "take back approvals"));
            }
            if steering.is_empty() {
                v.push(Hint::new(Action::SwitchMode, "mode"));
            }
            v.splice(0..0, steering);
        }
        v.push(Hint::new(Action::Copy, "copy"));
        v
    }
}
