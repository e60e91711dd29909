//! The application state and its handling of inputs, free of any terminal: the loop
//! (`runtime`) feeds it `Input`s and carries out the `Effect`s it asks for; `render`
//! draws it. Tests drive the same code on a `TestBackend`.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;

use crate::eval::protocol::EvalResult;
use crate::protocol::{
    CallId, CandidateId, Command, Decision, EngineState, Event, EventRecord, GateId,
};
use crate::session::state::{Call, Candidate, CandidateStatus, Gate, SessionState};
use crate::session::store::SessionDir;

use super::config::TuiConfig;
use super::diff::{self, Diff};
use super::highlight::{self, Highlighter};
use super::keymap::{Action, Context, Keymap};
use super::theme::Theme;
use super::{TuiExit, editor::TextBuf};

/// Everything the loop feeds the app.
#[derive(Debug)]
pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
    Event(EventRecord),
    Highlighted(highlight::Done),
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

#[derive(Debug, Clone, PartialEq)]
pub enum EditPurpose {
    Repair(CandidateId),
    Optimize(CandidateId),
    Manual {
        parent: Option<CandidateId>,
    },
    GateRewrite(GateId),
    /// The answer of a call of the `manual` provider.
    ManualAnswer(CallId),
    Filter,
    /// A search in the detail pane (Code, Diff, LLM, ...).
    Search,
}

/// The line that separates the prompt (dropped) from the answer in a manual answer file.
pub const ANSWER_MARKER: &str =
    "----- kforge: write the answer below this line; everything above it is dropped -----";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Tree,
    Chart,
    Detail,
    Console,
}

impl Focus {
    pub const ORDER: [Focus; 4] = [Focus::Tree, Focus::Chart, Focus::Detail, Focus::Console];
    fn context(&self) -> Context {
        match self {
            Focus::Tree => Context::Tree,
            Focus::Chart => Context::Chart,
            Focus::Detail => Context::Detail,
            Focus::Console => Context::Console,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Code,
    Diff,
    Compare,
    Llm,
    Eval,
    Analysis,
}

impl Tab {
    pub const ALL: [Tab; 6] = [
        Tab::Code,
        Tab::Diff,
        Tab::Compare,
        Tab::Llm,
        Tab::Eval,
        Tab::Analysis,
    ];
    pub fn title(&self) -> &'static str {
        match self {
            Tab::Code => "Code",
            Tab::Diff => "Diff",
            Tab::Compare => "Compare",
            Tab::Llm => "LLM",
            Tab::Eval => "Eval",
            Tab::Analysis => "Analysis",
        }
    }
    pub fn index(&self) -> usize {
        Tab::ALL.iter().position(|t| t == self).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffLayout {
    Unified,
    SideBySide,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConfirmKind {
    Quit,
    MarkFinal(CandidateId),
    /// Rejecting a gate skips a step or drops a candidate: asked first.
    RejectGate(GateId),
}

#[derive(Debug, Clone)]
pub struct InputState {
    pub title: String,
    pub purpose: EditPurpose,
    pub text: TextBuf,
    pub multiline: bool,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    Help { scroll: usize },
    Confirm(ConfirmKind),
    Input(InputState),
}

/// A row of the flattened candidate tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub id: CandidateId,
    pub depth: usize,
    pub has_children: bool,
    pub collapsed: bool,
}

/// Screen areas of the last frame, for the mouse.
#[derive(Debug, Clone, Default)]
pub struct Areas {
    pub tree: Rect,
    pub chart: Rect,
    pub tabs: Vec<(Tab, Rect)>,
    pub detail: Rect,
    pub console: Rect,
}

/// How the app was started.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// No commands can be sent (a finished session opened with `kforge open`).
    pub read_only: bool,
    /// Attached to a run in another process: quitting detaches.
    pub attached: bool,
    pub config: TuiConfig,
    /// A fixed "now" (tests); `None` = the clock.
    pub clock: Option<DateTime<Utc>>,
}

pub struct App {
    pub state: SessionState,
    pub session: SessionDir,
    pub options: AppOptions,
    pub theme: Theme,
    pub keymap: Keymap,
    pub highlighter: Highlighter,
    pub focus: Focus,
    pub tab: Tab,
    pub diff_layout: DiffLayout,
    pub selected: Option<CandidateId>,
    pub follow: bool,
    pub collapsed: HashSet<CandidateId>,
    pub marked: Option<CandidateId>,
    pub tree_offset: usize,
    /// Vertical scroll of the detail tab and horizontal scroll.
    pub scroll: usize,
    pub hscroll: usize,
    /// The diff hunk the Diff tab is at.
    pub hunk: usize,
    /// Which of the candidate's calls the LLM tab shows (index into `calls_of`).
    pub call_index: usize,
    /// Follow the end of a streaming answer in the LLM tab.
    pub llm_tail: bool,
    /// The call the LLM tab showed while it streamed: when it finishes, the view stays at
    /// its end instead of jumping back to the prompt.
    pub llm_streamed: Option<CallId>,
    /// The activity line as last drawn (a tick redraws when it changed).
    pub last_activity: Vec<(String, super::theme::Role)>,
    pub console_filter: String,
    /// Lines from the bottom; 0 follows the tail.
    pub console_offset: usize,
    console_index: Vec<usize>,
    pub overlay: Option<Overlay>,
    /// The gate whose dialog the person opened (`a`); gates never open by themselves.
    pub gate_open: Option<GateId>,
    /// How far the gate dialog's preview is scrolled.
    pub gate_scroll: usize,
    /// The search in the detail pane (`/` there), if any: `n`/`N` go to its matches.
    pub search: Option<String>,
    /// The plain text of every line of the detail pane's document, as last drawn while a
    /// search is active (what the search looks through).
    pub detail_plain: Vec<String>,
    /// A search was entered: find its first match once the next frame has the text.
    pub pending_find: bool,
    /// An evaluation gate shows the kernel's diff against its parent instead of the kernel.
    pub gate_diff: bool,
    pub flash: Option<String>,
    pub dirty: bool,
    pub areas: Areas,
    rows: Option<Vec<TreeRow>>,
    files: HashMap<String, (Arc<str>, Option<SystemTime>, u64)>,
    evals: HashMap<String, Option<Arc<EvalResult>>>,
    diff_cache: Option<((u64, u64), Arc<Diff>)>,
    effects: Vec<Effect>,
    /// The elapsed time last drawn (a tick redraws only when it changes).
    pub last_elapsed: String,
    pub theme_error: Option<String>,
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
    ) -> App {
        let state = SessionState::from_records(initial);
        let mut app = App {
            state,
            session,
            options,
            theme,
            keymap,
            highlighter,
            focus: Focus::Tree,
            tab: Tab::Code,
            diff_layout: DiffLayout::Unified,
            selected: None,
            follow: true,
            collapsed: HashSet::new(),
            marked: None,
            tree_offset: 0,
            scroll: 0,
            hscroll: 0,
            hunk: 0,
            call_index: 0,
            llm_tail: true,
            llm_streamed: None,
            last_activity: Vec::new(),
            console_filter: String::new(),
            console_offset: 0,
            console_index: Vec::new(),
            overlay: None,
            gate_open: None,
            gate_scroll: 0,
            search: None,
            detail_plain: Vec::new(),
            pending_find: false,
            gate_diff: false,
            flash: None,
            dirty: true,
            areas: Areas::default(),
            rows: None,
            files: HashMap::new(),
            evals: HashMap::new(),
            diff_cache: None,
            effects: Vec::new(),
            last_elapsed: String::new(),
            theme_error: None,
        };
        app.rebuild_console_index();
        app.last_elapsed = app.elapsed_text();
        // Open on the best candidate of a finished session, else the newest.
        app.selected = if app.state.state.is_over() {
            app.state
                .best
                .or_else(|| app.state.candidates.keys().last().copied())
        } else {
            app.state.candidates.keys().last().copied()
        };
        app
    }

    /// Whether commands can reach an engine: not a read-only view, and not a window
    /// attached to a run that has ended (its process is gone; `kforge resume` continues).
    pub fn can_act(&self) -> bool {
        self.cannot_act().is_none()
    }

    /// Why this window cannot send commands, if it cannot.
    fn cannot_act(&self) -> Option<&'static str> {
        if self.options.read_only {
            Some("read-only: this session is not running")
        } else if self.attached_to_ended_run() {
            Some("the run has ended: this window is read-only now (kforge resume continues it)")
        } else {
            None
        }
    }

    /// An attached window whose run ended: it stays open to browse, read-only.
    pub fn attached_to_ended_run(&self) -> bool {
        self.options.attached && self.state.state.is_over()
    }

    /// Whether the engine is still running (not finished, failed or stopped), or still
    /// working on something the person asked for after it finished.
    pub fn run_active(&self) -> bool {
        !self.options.read_only && (!self.state.state.is_over() || self.actions_in_flight() > 0)
    }

    /// LLM calls in flight and evaluations under way: on a finished run, the person's own
    /// actions (a repair, a re-evaluation) that quitting would cancel.
    pub fn actions_in_flight(&self) -> usize {
        self.state.calls_in_flight().count()
            + self
                .state
                .candidates
                .values()
                .filter(|c| c.status == CandidateStatus::Evaluating)
                .count()
    }

    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.options.clock.unwrap_or_else(Utc::now)
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
                self.highlighter.done(done);
                self.dirty = true;
            }
            Input::Tick => self.on_tick(),
        }
    }

    fn on_event(&mut self, record: EventRecord) {
        let log_before = self.state.log.len();
        match &record.event {
            Event::CandidateCreated { id, .. } => {
                self.rows = None;
                let id = *id;
                self.state.apply(&record);
                if self.follow || self.selected.is_none() {
                    self.select(Some(id), false);
                }
                self.dirty = true;
                return;
            }
            Event::EvalFinished {
                candidate,
                result_file,
                ..
            } => {
                self.evals.remove(result_file);
                self.files.remove(result_file);
                let _ = candidate;
            }
            Event::LlmCallStarted { call, .. } if self.follow && self.tab == Tab::Llm => {
                // Following: the LLM tab moves to the new call, at its tail.
                let call = *call;
                self.state.apply(&record);
                if let Some(i) = self.calls_of_selected().iter().position(|c| c.id == call) {
                    self.call_index = i;
                    self.scroll = 0;
                    self.llm_tail = true;
                }
                self.dirty = true;
                return;
            }
            Event::LlmDelta { call, .. } => {
                // Only a visible stream needs a redraw.
                let shown = self.shown_call().map(|c| c.id) == Some(*call) && self.tab == Tab::Llm;
                self.state.apply(&record);
                if shown {
                    self.dirty = true;
                }
                return;
            }
            Event::LlmCallFinished {
                response_file: Some(f),
                ..
            } => {
                self.files.remove(f);
            }
            _ => {}
        }
        self.state.apply(&record);
        if self.state.log.len() > log_before {
            for i in log_before..self.state.log.len() {
                if self.log_matches(i) {
                    self.console_index.push(i);
                    if self.console_offset > 0 {
                        self.console_offset += 1;
                    }
                }
            }
        }
        self.dirty = true;
    }

    fn on_tick(&mut self) {
        if self.theme.changed_on_disk() {
            self.reload_theme(&self.theme.name.clone());
        }
        // Files on screen may have been rewritten (a prompt edited, a kernel replaced).
        // A long browse fills the cache: drop it rather than stat hundreds of files.
        if self.files.len() > 64 {
            self.files.clear();
            self.evals.clear();
        }
        let mut changed = false;
        self.files.retain(|rel, (_, stamp, len)| {
            let meta = std::fs::metadata(self.session.file(rel)).ok();
            let now = meta.as_ref().map(|m| (m.modified().ok(), m.len()));
            let same = now == Some((*stamp, *len));
            changed |= !same;
            same
        });
        if changed {
            self.evals.clear();
            self.dirty = true;
        }
        let elapsed = self.elapsed_text();
        if elapsed != self.last_elapsed {
            self.last_elapsed = elapsed;
            self.dirty = true;
        }
        // The activity line (streaming progress, phases) refreshes on ticks, not per delta.
        let activity = super::render::activity(self);
        if activity != self.last_activity {
            self.last_activity = activity;
            self.dirty = true;
        }
    }

    pub fn reload_theme(&mut self, name: &str) {
        match Theme::load(name, self.theme.no_color) {
            Ok(t) => {
                self.theme = t;
                self.theme_error = None;
            }
            Err(e) => {
                self.theme_error = Some(format!("{e:#}"));
                // Keep the old one; stop re-reading a broken file every tick.
                if let Some((path, stamp)) = &mut self.theme.source {
                    *stamp = std::fs::metadata(&*path).and_then(|m| m.modified()).ok();
                }
                self.flash = self.theme_error.clone();
            }
        }
        self.dirty = true;
    }

    fn contexts(&self) -> Vec<Context> {
        vec![self.focus.context(), Context::Global]
    }

    /// The gate whose dialog is showing: one the person opened that still waits.
    pub fn gate_visible(&self) -> Option<&Gate> {
        if self.options.read_only || self.overlay.is_some() {
            return None;
        }
        self.state
            .gates
            .get(&self.gate_open?)
            .filter(|g| g.is_waiting())
    }

    /// (position, count) of the shown gate in the queue of waiting gates, oldest first.
    pub fn gate_position(&self, gate: GateId) -> (usize, usize) {
        let waiting = self.state.waiting_gates();
        let at = waiting.iter().position(|g| g.id == gate).unwrap_or(0);
        (at + 1, waiting.len())
    }

    fn on_key(&mut self, key: KeyEvent) {
        if let Some(overlay) = self.overlay.take() {
            self.overlay = self.overlay_key(overlay, key);
            return;
        }
        // An open gate dialog has the keyboard: its own keys, and the scroll keys for its
        // preview; nothing else reaches the panes behind it.
        if let Some(gate) = self.gate_visible().cloned() {
            if let Some(action) = self.keymap.lookup(&key, &[Context::Gate]) {
                self.gate_action(&gate, action);
            } else if let Some(action) = self.keymap.lookup(&key, &[Context::Global]) {
                self.gate_scroll_action(action);
            }
            return;
        }
        let Some(action) = self.keymap.lookup(&key, &self.contexts()) else {
            return;
        };
        self.action(action);
    }

    fn gate_scroll_action(&mut self, action: Action) {
        self.gate_scroll = match action {
            Action::Down => self.gate_scroll + 1,
            Action::Up => self.gate_scroll.saturating_sub(1),
            Action::PageDown => self.gate_scroll + 20,
            Action::PageUp => self.gate_scroll.saturating_sub(20),
            Action::Top => 0,
            Action::Bottom => usize::MAX / 2,
            _ => return,
        };
        self.dirty = true;
    }

    fn gate_action(&mut self, gate: &Gate, action: Action) {
        match action {
            Action::Approve => self.resolve(gate.id, Decision::Approve),
            Action::Reject => {
                self.overlay = Some(Overlay::Confirm(ConfirmKind::RejectGate(gate.id)));
            }
            // Stage, algorithm and final-best gates have nothing to rewrite.
            Action::Rewrite | Action::RewriteInline if !gate.rewritable() => {
                self.flash = Some("this gate has nothing to rewrite: approve or reject".into());
            }
            Action::Rewrite | Action::RewriteInline => {
                let text = gate
                    .file
                    .as_deref()
                    .and_then(|f| self.file(f))
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                let suffix = if gate.file.as_deref().is_some_and(|f| f.ends_with(".py")) {
                    ".py"
                } else {
                    ".md"
                };
                if action == Action::Rewrite {
                    self.effects.push(Effect::Edit {
                        text,
                        suffix,
                        purpose: EditPurpose::GateRewrite(gate.id),
                    });
                } else {
                    self.overlay = Some(Overlay::Input(InputState {
                        title: format!("rewrite ({}) — ctrl-s sends, esc cancels", gate.question),
                        purpose: EditPurpose::GateRewrite(gate.id),
                        text: TextBuf::at_start(&text),
                        multiline: true,
                    }));
                }
            }
            Action::GateDiff if gate.kind == crate::protocol::GateKind::Evaluation => {
                self.gate_diff = !self.gate_diff;
                self.gate_scroll = 0;
            }
            Action::Later => {
                self.gate_open = None;
                self.flash = Some(format!(
                    "gate {} keeps waiting: {} opens it again",
                    gate.id,
                    self.keymap.hint(Action::OpenGate)
                ));
            }
            _ => {}
        }
    }

    fn resolve(&mut self, gate: GateId, decision: Decision) {
        self.send(Command::Resolve { gate, decision });
        // The dialog closes; the next waiting gate opens only when the person asks.
        self.gate_open = None;
    }

    /// Sends a command; `false` (with the reason on the message line) when this window
    /// cannot act.
    fn send(&mut self, command: Command) -> bool {
        if let Some(why) = self.cannot_act() {
            self.flash = Some(why.into());
            return false;
        }
        self.effects.push(Effect::Command(command));
        true
    }

    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Option<Overlay> {
        match overlay {
            Overlay::Help { scroll } => {
                match self.keymap.lookup(&key, &[Context::Global]) {
                    Some(Action::Down) => return Some(Overlay::Help { scroll: scroll + 1 }),
                    Some(Action::Up) => {
                        return Some(Overlay::Help {
                            scroll: scroll.saturating_sub(1),
                        });
                    }
                    Some(Action::PageDown) => {
                        return Some(Overlay::Help {
                            scroll: scroll + 10,
                        });
                    }
                    Some(Action::PageUp) => {
                        return Some(Overlay::Help {
                            scroll: scroll.saturating_sub(10),
                        });
                    }
                    _ => {}
                }
                None
            }
            Overlay::Confirm(kind) => match self.keymap.lookup(&key, &[Context::Confirm]) {
                Some(Action::Yes) => {
                    match kind {
                        ConfirmKind::Quit => self.quit_now(),
                        ConfirmKind::MarkFinal(id) => {
                            if self.send(Command::MarkFinal { candidate: id }) {
                                self.flash = Some(format!("#{id} marked final"));
                            }
                        }
                        ConfirmKind::RejectGate(gate) => self.resolve(gate, Decision::Reject),
                    }
                    None
                }
                Some(Action::StopRun) if kind == ConfirmKind::Quit && self.options.attached => {
                    self.send(Command::Stop);
                    self.effects.push(Effect::Quit(TuiExit::StoppedAndLeft));
                    None
                }
                Some(Action::No) => None,
                _ => Some(Overlay::Confirm(kind)),
            },
            Overlay::Input(mut input) => {
                let submit = match key.code {
                    KeyCode::Esc => {
                        if input.purpose == EditPurpose::Filter {
                            self.set_filter(String::new());
                        }
                        return None;
                    }
                    KeyCode::Enter if !input.multiline => true,
                    KeyCode::Char('s') if key.modifiers.contains(KeyModifiers::CONTROL) => true,
                    KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => true,
                    _ => false,
                };
                if submit {
                    self.submit(input.purpose, input.text.text());
                    return None;
                }
                input.text.key(key, input.multiline);
                if input.purpose == EditPurpose::Filter {
                    self.set_filter(input.text.text());
                }
                Some(Overlay::Input(input))
            }
        }
    }

    /// Text back from the editor (`None`: cancelled or failed).
    pub fn edited(&mut self, purpose: EditPurpose, original: &str, text: Option<String>) {
        self.dirty = true;
        match text {
            None => self.flash = Some("edit cancelled".into()),
            Some(t) if t == original && matches!(purpose, EditPurpose::GateRewrite(_)) => {
                self.flash = Some("unchanged: nothing sent (a approves as is)".into());
            }
            Some(t) => self.submit(purpose, t),
        }
    }

    fn submit(&mut self, purpose: EditPurpose, text: String) {
        match purpose {
            EditPurpose::Filter => self.set_filter(text),
            EditPurpose::Search => {
                self.search = (!text.trim().is_empty()).then(|| text.trim().to_string());
                // The document's text comes with the next frame; find from there.
                self.detail_plain.clear();
                self.pending_find = self.search.is_some();
                self.dirty = true;
            }
            EditPurpose::Repair(id) => {
                if self.send(Command::Repair {
                    candidate: id,
                    instruction: text.trim().to_string(),
                }) {
                    self.flash = Some(format!("repair of #{id} requested"));
                }
            }
            EditPurpose::Optimize(id) => {
                if self.send(Command::Optimize {
                    candidate: id,
                    instruction: text.trim().to_string(),
                }) {
                    self.flash = Some(format!("optimization of #{id} requested"));
                }
            }
            EditPurpose::Manual { parent } => {
                if self.send(Command::Manual { parent, code: text }) {
                    self.flash = Some("manual candidate sent for evaluation".into());
                }
            }
            EditPurpose::GateRewrite(gate) => {
                self.resolve(gate, Decision::Rewrite { text });
            }
            EditPurpose::ManualAnswer(call) => {
                let answer = match text.split_once(ANSWER_MARKER) {
                    Some((_, after)) => after.trim_start_matches(['\r', '\n']).to_string(),
                    None => text,
                };
                if answer.trim().is_empty() {
                    self.flash = Some("empty answer: nothing sent".into());
                } else {
                    if self.send(Command::ManualAnswer { call, text: answer }) {
                        self.flash = Some(format!("answer to call #{call} sent"));
                    }
                }
            }
        }
    }

    fn quit_now(&mut self) {
        let exit = if self.options.attached && !self.attached_to_ended_run() {
            TuiExit::Detached
        } else if self.run_active() {
            TuiExit::QuitWhileActive
        } else {
            TuiExit::Quit
        };
        self.effects.push(Effect::Quit(exit));
    }

    pub fn action(&mut self, action: Action) {
        let sel = self.selected;
        match action {
            Action::Quit => {
                if self.run_active() {
                    self.overlay = Some(Overlay::Confirm(ConfirmKind::Quit));
                } else {
                    self.quit_now();
                }
            }
            Action::Help => self.overlay = Some(Overlay::Help { scroll: 0 }),
            Action::FocusNext | Action::FocusPrev => {
                let i = Focus::ORDER
                    .iter()
                    .position(|f| *f == self.focus)
                    .unwrap_or(0);
                let n = Focus::ORDER.len();
                let j = if action == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = Focus::ORDER[j];
            }
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-10),
            Action::PageDown => self.move_by(10),
            Action::Top => self.move_to_end(false),
            Action::Bottom => self.move_to_end(true),
            Action::TabNext | Action::TabPrev => {
                let i = self.tab.index();
                let j = if action == Action::TabNext {
                    (i + 1) % 6
                } else {
                    (i + 5) % 6
                };
                self.set_tab(Tab::ALL[j]);
            }
            Action::TabCode => self.set_tab(Tab::Code),
            Action::TabDiff => self.set_tab(Tab::Diff),
            Action::TabCompare => self.set_tab(Tab::Compare),
            Action::TabLlm => self.set_tab(Tab::Llm),
            Action::TabEval => self.set_tab(Tab::Eval),
            Action::TabAnalysis => self.set_tab(Tab::Analysis),
            // In the detail pane `/` searches what it shows; elsewhere it filters the console.
            Action::Filter if self.focus == Focus::Detail => {
                self.overlay = Some(Overlay::Input(InputState {
                    title: format!(
                        "search the {} tab (enter finds; {}/{} next/previous; esc in the pane clears)",
                        self.tab.title(),
                        self.keymap.hint(Action::NextHunk),
                        self.keymap.hint(Action::PrevHunk)
                    ),
                    purpose: EditPurpose::Search,
                    text: TextBuf::new(self.search.as_deref().unwrap_or("")),
                    multiline: false,
                }));
            }
            Action::Filter => {
                self.overlay = Some(Overlay::Input(InputState {
                    title: "filter the console (enter keeps, esc clears)".into(),
                    purpose: EditPurpose::Filter,
                    text: TextBuf::new(&self.console_filter),
                    multiline: false,
                }));
            }
            Action::ClearFilter => self.set_filter(String::new()),
            Action::ClearSearch => {
                self.search = None;
                self.detail_plain.clear();
            }
            Action::Follow => {
                self.follow = !self.follow;
                if self.follow {
                    self.console_offset = 0;
                    let last = self.state.candidates.keys().last().copied();
                    self.select(last, false);
                }
                self.flash = Some(if self.follow {
                    "following new candidates".into()
                } else {
                    "not following".into()
                });
            }
            Action::Mark => {
                if self.marked.is_some() && self.marked == sel {
                    self.marked = None;
                    self.flash = Some("mark cleared".into());
                } else if let Some(id) = sel {
                    self.marked = Some(id);
                    self.flash = Some(format!("#{id} marked: Diff and Compare use it"));
                }
                self.diff_cache = None;
            }
            Action::DiffLayout => {
                self.diff_layout = match self.diff_layout {
                    DiffLayout::Unified => DiffLayout::SideBySide,
                    DiffLayout::SideBySide => DiffLayout::Unified,
                };
                self.scroll = 0;
                self.hunk = 0;
                if self.tab != Tab::Diff {
                    self.set_tab(Tab::Diff);
                }
            }
            Action::NextHunk | Action::PrevHunk
                if self.search.is_some() && self.focus == Focus::Detail =>
            {
                self.find(action == Action::NextHunk, false);
            }
            Action::NextHunk | Action::PrevHunk => self.jump_hunk(action == Action::NextHunk),
            Action::NextCall | Action::PrevCall => {
                let n = self.calls_of_selected().len().max(1);
                self.call_index = if action == Action::NextCall {
                    (self.call_index + 1) % n
                } else {
                    (self.call_index + n - 1) % n
                };
                self.scroll = 0;
                self.llm_tail = true;
                if self.tab != Tab::Llm {
                    self.set_tab(Tab::Llm);
                }
            }
            Action::Repair | Action::Optimize => {
                let Some(id) = self.acting_on() else { return };
                let (title, purpose) = if action == Action::Repair {
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
                self.overlay = Some(Overlay::Input(InputState {
                    title,
                    purpose,
                    text: TextBuf::new(""),
                    multiline: false,
                }));
            }
            Action::EditEval | Action::EditInline => {
                let Some(id) = self.acting_on() else { return };
                let code = self
                    .candidate_code(id)
                    .map(|c| c.to_string())
                    .unwrap_or_default();
                let purpose = EditPurpose::Manual { parent: Some(id) };
                if action == Action::EditEval {
                    self.effects.push(Effect::Edit {
                        text: code,
                        suffix: ".py",
                        purpose,
                    });
                } else {
                    self.overlay = Some(Overlay::Input(InputState {
                        title: format!("edit #{id} (ctrl-s evaluates, esc cancels)"),
                        purpose,
                        text: TextBuf::at_start(&code),
                        multiline: true,
                    }));
                }
            }
            Action::Reevaluate => {
                if let Some(id) = self.acting_on()
                    && self.send(Command::Reevaluate { candidate: id })
                {
                    self.flash = Some(format!("re-evaluation of #{id} requested"));
                }
            }
            Action::Profile => {
                if let Some(id) = self.acting_on()
                    && self.send(Command::Profile { candidate: id })
                {
                    self.flash = Some(format!("profile of #{id} requested"));
                }
            }
            Action::MarkFinal => {
                if let Some(id) = self.acting_on() {
                    self.overlay = Some(Overlay::Confirm(ConfirmKind::MarkFinal(id)));
                }
            }
            Action::Copy => {
                if let Some(id) = sel
                    && let Some(code) = self.candidate_code(id)
                {
                    self.effects.push(Effect::Copy(code.to_string()));
                    self.flash = Some(format!("copied #{id} ({} lines)", code.lines().count()));
                }
            }
            Action::PauseResume => {
                if self.state.state == EngineState::Paused {
                    self.send(Command::Resume);
                } else {
                    self.send(Command::Pause);
                }
            }
            Action::CancelCall => {
                let in_flight: Vec<CallId> = self.state.calls_in_flight().map(|c| c.id).collect();
                let shown = self
                    .shown_call()
                    .filter(|c| c.ok.is_none() && self.tab == Tab::Llm)
                    .map(|c| c.id);
                // Only ever one call: the one shown in the LLM tab, or the only one in
                // flight. Several in flight and none shown cancels nothing.
                let call = shown.or(if in_flight.len() == 1 {
                    Some(in_flight[0])
                } else {
                    None
                });
                match call {
                    _ if in_flight.is_empty() => {
                        self.flash = Some("no LLM call in flight".into());
                    }
                    Some(call) => {
                        self.send(Command::CancelCall { call: Some(call) });
                    }
                    None => {
                        self.flash = Some(format!(
                            "{} calls in flight: show one in the LLM tab, then x cancels it",
                            in_flight.len()
                        ));
                    }
                }
            }
            Action::JumpBest => match self.state.best {
                Some(best) => self.select(Some(best), true),
                None => self.flash = Some("no best candidate yet".into()),
            },
            Action::JumpFailure => {
                // The next failed candidate after the selection, in creation order, wrapping.
                let failed: Vec<CandidateId> = self
                    .state
                    .candidates
                    .values()
                    .filter(|c| c.status == CandidateStatus::Failed)
                    .map(|c| c.id)
                    .collect();
                let next = failed
                    .iter()
                    .find(|id| Some(**id) > self.selected)
                    .or(failed.first())
                    .copied();
                match next {
                    Some(id) => self.select(Some(id), true),
                    None => self.flash = Some("no failed candidate".into()),
                }
            }
            Action::Reask => {
                let failed = |c: &&Call| c.ok == Some(false);
                let call = self
                    .shown_call()
                    .filter(failed)
                    .or_else(|| self.state.calls.values().rev().find(failed))
                    .map(|c| c.id);
                match call {
                    Some(call) => {
                        if self.send(Command::Reask { call }) {
                            self.flash = Some(format!("asking call {call} again"));
                        }
                    }
                    None => self.flash = Some("no failed LLM call to ask again".into()),
                }
            }
            Action::OpenGate => match self.state.open_gate().map(|g| (g.id, g.candidate)) {
                Some(_) if let Some(why) = self.cannot_act() => self.flash = Some(why.into()),
                Some((gate, candidate)) => {
                    // The panes behind the dialog show the gate's candidate.
                    if candidate.is_some() {
                        self.select(candidate, false);
                    }
                    self.gate_open = Some(gate);
                    self.gate_scroll = 0;
                }
                None => self.flash = Some("no gate is waiting".into()),
            },
            Action::Theme => {
                let names = ["dark", "light", "high-contrast"];
                let i = names
                    .iter()
                    .position(|n| *n == self.theme.name)
                    .map_or(0, |i| (i + 1) % names.len());
                self.reload_theme(names[i]);
                self.flash = Some(format!("theme {}", self.theme.name));
            }
            Action::Suspend => self.effects.push(Effect::Suspend),
            Action::AnswerCall => {
                if self.options.read_only {
                    self.flash = Some("read-only: this session is not running".into());
                    return;
                }
                let Some(call) = self.manual_call().cloned() else {
                    self.flash = Some("no call of the manual provider is waiting".into());
                    return;
                };
                let prompt = self
                    .file(&call.prompt_file)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                self.effects.push(Effect::Edit {
                    text: format!("{prompt}\n{ANSWER_MARKER}\n"),
                    suffix: ".md",
                    purpose: EditPurpose::ManualAnswer(call.id),
                });
            }
            Action::Collapse => {
                if let Some(id) = sel {
                    let has_children = self.state.children(id).next().is_some();
                    if has_children && !self.collapsed.contains(&id) {
                        self.collapsed.insert(id);
                        self.rows = None;
                    } else if let Some(p) = self.state.candidates.get(&id).and_then(|c| c.parent) {
                        self.select(Some(p), true);
                    }
                }
            }
            Action::Expand => {
                if let Some(id) = sel
                    && self.collapsed.remove(&id)
                {
                    self.rows = None;
                }
            }
            Action::Toggle => {
                if let Some(id) = sel {
                    if !self.collapsed.remove(&id) && self.state.children(id).next().is_some() {
                        self.collapsed.insert(id);
                    }
                    self.rows = None;
                }
            }
            Action::PointPrev => self.move_by(-1),
            Action::PointNext => self.move_by(1),
            Action::ScrollLeft => self.hscroll = self.hscroll.saturating_sub(4),
            Action::ScrollRight => self.hscroll += 4,
            // Dialog actions reach here only through their dialogs.
            _ => {}
        }
    }

    /// The candidate an action works on (the selection), with a message when none.
    fn acting_on(&mut self) -> Option<CandidateId> {
        if self.options.read_only {
            self.flash = Some("read-only: this session is not running".into());
            return None;
        }
        if self.selected.is_none() {
            self.flash = Some("no candidate selected".into());
        }
        self.selected
    }

    fn set_tab(&mut self, tab: Tab) {
        if self.tab != tab {
            self.tab = tab;
            self.hunk = 0;
            self.scroll = 0;
            self.hscroll = 0;
            self.llm_tail = true;
        }
    }

    /// Scrolls the detail pane to the next (or previous) line holding the search, from
    /// the current position (`here`: the current line counts), wrapping around.
    pub fn find(&mut self, forward: bool, here: bool) {
        let Some(query) = self.search.clone() else {
            return;
        };
        let needle = query.to_lowercase();
        let hits: Vec<usize> = self
            .detail_plain
            .iter()
            .enumerate()
            .filter(|(_, l)| l.to_lowercase().contains(&needle))
            .map(|(i, _)| i)
            .collect();
        if hits.is_empty() {
            self.flash = Some(format!(
                "\"{query}\" is not in the {} tab",
                self.tab.title()
            ));
            return;
        }
        let cur = self.scroll;
        let next = if forward {
            hits.iter()
                .find(|&&i| if here { i >= cur } else { i > cur })
                .or(hits.first())
        } else {
            hits.iter().rev().find(|&&i| i < cur).or(hits.last())
        };
        let at = *next.expect("hits is not empty");
        self.scroll = at;
        self.llm_tail = false;
        let n = hits.iter().position(|&i| i == at).unwrap_or(0) + 1;
        self.flash = Some(format!(
            "\"{query}\": match {n} of {} (line {})",
            hits.len(),
            at + 1
        ));
        self.dirty = true;
    }

    fn set_filter(&mut self, filter: String) {
        if filter != self.console_filter {
            self.console_filter = filter;
            self.console_offset = 0;
            self.rebuild_console_index();
        }
    }

    fn log_matches(&self, i: usize) -> bool {
        if self.console_filter.is_empty() {
            return true;
        }
        let line = &self.state.log[i];
        let f = self.console_filter.to_lowercase();
        line.tag.to_lowercase().contains(&f) || line.message.to_lowercase().contains(&f)
    }

    fn rebuild_console_index(&mut self) {
        self.console_index = (0..self.state.log.len())
            .filter(|i| self.log_matches(*i))
            .collect();
    }

    /// Indices into `state.log` of the lines that pass the filter.
    pub fn console_lines(&self) -> &[usize] {
        &self.console_index
    }

    fn move_by(&mut self, delta: isize) {
        match self.focus {
            Focus::Tree => {
                let rows = self.rows();
                if rows.is_empty() {
                    return;
                }
                let cur = self
                    .selected
                    .and_then(|s| rows.iter().position(|r| r.id == s))
                    .unwrap_or(0);
                let next = (cur as isize + delta).clamp(0, rows.len() as isize - 1) as usize;
                let id = rows[next].id;
                self.select(Some(id), true);
            }
            Focus::Chart => {
                let ids: Vec<CandidateId> = self.state.candidates.keys().copied().collect();
                if ids.is_empty() {
                    return;
                }
                let cur = self
                    .selected
                    .and_then(|s| ids.iter().position(|i| *i == s))
                    .unwrap_or(0);
                let next = (cur as isize + delta).clamp(0, ids.len() as isize - 1) as usize;
                self.select(Some(ids[next]), true);
            }
            Focus::Detail => {
                self.scroll = (self.scroll as isize + delta).max(0) as usize;
                self.llm_tail = false;
            }
            Focus::Console => {
                // The renderer clamps to the first page; keep the offset near it.
                let max = self
                    .console_index
                    .len()
                    .saturating_sub(self.areas.console.height.saturating_sub(2) as usize);
                self.console_offset =
                    (self.console_offset.min(max) as isize - delta).clamp(0, max as isize) as usize;
            }
        }
    }

    fn move_to_end(&mut self, end: bool) {
        match self.focus {
            Focus::Tree | Focus::Chart => {
                let rows = self.rows();
                let pick = if self.focus == Focus::Tree {
                    if end { rows.last() } else { rows.first() }.map(|r| r.id)
                } else if end {
                    self.state.candidates.keys().last().copied()
                } else {
                    self.state.candidates.keys().next().copied()
                };
                self.select(pick, true);
                if end {
                    self.follow = true;
                }
            }
            Focus::Detail => {
                self.scroll = if end { usize::MAX / 2 } else { 0 };
                self.llm_tail = end;
            }
            Focus::Console => {
                self.console_offset = if end {
                    0
                } else {
                    self.console_index
                        .len()
                        .saturating_sub(self.areas.console.height.saturating_sub(2) as usize)
                };
            }
        }
    }

    /// Selects a candidate; `by_user` stops following new ones.
    pub fn select(&mut self, id: Option<CandidateId>, by_user: bool) {
        if by_user {
            self.follow = false;
        }
        if id != self.selected {
            self.selected = id;
            self.scroll = 0;
            self.hscroll = 0;
            self.hunk = 0;
            self.call_index = 0;
            self.llm_tail = true;
            self.llm_streamed = None;
            // Make it visible: expand its ancestors.
            let mut cur = id
                .and_then(|i| self.state.candidates.get(&i))
                .and_then(|c| c.parent);
            while let Some(p) = cur {
                if self.collapsed.remove(&p) {
                    self.rows = None;
                }
                cur = self.state.candidates.get(&p).and_then(|c| c.parent);
            }
        }
        self.dirty = true;
    }

    fn jump_hunk(&mut self, forward: bool) {
        if self.tab != Tab::Diff {
            self.set_tab(Tab::Diff);
        }
        let Some((diff, _, _)) = self.current_diff() else {
            return;
        };
        let hunks = match self.diff_layout {
            DiffLayout::Unified => &diff.hunks_unified,
            DiffLayout::SideBySide => &diff.hunks_side,
        };
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
                self.scroll = hunks[n];
            }
            None => {
                self.flash = Some(if forward { "last hunk" } else { "first hunk" }.into());
            }
        }
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        use crossterm::event::{MouseButton, MouseEventKind};
        let inside = |r: Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let pane = if inside(self.areas.tree) {
            Some(Focus::Tree)
        } else if inside(self.areas.chart) {
            Some(Focus::Chart)
        } else if inside(self.areas.detail) {
            Some(Focus::Detail)
        } else if inside(self.areas.console) {
            Some(Focus::Console)
        } else {
            None
        };
        match m.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                if let Some(p) = pane {
                    let old = self.focus;
                    self.focus = p;
                    self.move_by(if m.kind == MouseEventKind::ScrollDown {
                        3
                    } else {
                        -3
                    });
                    if p == Focus::Tree || p == Focus::Chart {
                        self.focus = p;
                    } else {
                        self.focus = old;
                    }
                    self.dirty = true;
                }
            }
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some((tab, _)) = self.areas.tabs.iter().find(|(_, r)| inside(*r)) {
                    let tab = *tab;
                    self.set_tab(tab);
                    self.dirty = true;
                    return;
                }
                let Some(p) = pane else { return };
                self.focus = p;
                match p {
                    Focus::Tree => {
                        let r = self.areas.tree;
                        let row = (m.row.saturating_sub(r.y + 1)) as usize + self.tree_offset;
                        if let Some(id) = self.rows().get(row).map(|r| r.id) {
                            self.select(Some(id), true);
                        }
                    }
                    Focus::Chart => {
                        let r = self.areas.chart;
                        let ids: Vec<CandidateId> = self.state.candidates.keys().copied().collect();
                        if !ids.is_empty() && r.width > 8 {
                            // The plot spans the chart's inner width after the y labels.
                            let left = r.x + 7;
                            let width = (r.width - 8).max(1) as f64;
                            let frac = (m.column.saturating_sub(left)) as f64 / width;
                            let i = ((frac * ids.len() as f64).floor() as usize).min(ids.len() - 1);
                            self.select(Some(ids[i]), true);
                        }
                    }
                    _ => {}
                }
                self.dirty = true;
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------- derived data

    /// The visible rows of the candidate tree (cached until the tree changes).
    pub fn rows(&mut self) -> Vec<TreeRow> {
        if self.rows.is_none() {
            self.rows = Some(self.build_rows());
        }
        self.rows.clone().unwrap_or_default()
    }

    pub fn rows_ref(&mut self) -> &[TreeRow] {
        if self.rows.is_none() {
            self.rows = Some(self.build_rows());
        }
        self.rows.as_deref().unwrap_or(&[])
    }

    fn build_rows(&self) -> Vec<TreeRow> {
        let mut children: HashMap<Option<CandidateId>, Vec<CandidateId>> = HashMap::new();
        for c in self.state.candidates.values() {
            // A parent that does not exist makes a root.
            let parent = c.parent.filter(|p| self.state.candidates.contains_key(p));
            children.entry(parent).or_default().push(c.id);
        }
        let mut rows = Vec::with_capacity(self.state.candidates.len());
        let mut stack: Vec<(CandidateId, usize)> = children
            .get(&None)
            .map(|v| v.iter().rev().map(|id| (*id, 0)).collect())
            .unwrap_or_default();
        while let Some((id, depth)) = stack.pop() {
            let kids = children.get(&Some(id));
            let collapsed = self.collapsed.contains(&id);
            rows.push(TreeRow {
                id,
                depth,
                has_children: kids.is_some(),
                collapsed,
            });
            if !collapsed && let Some(k) = kids {
                stack.extend(k.iter().rev().map(|c| (*c, depth + 1)));
            }
        }
        rows
    }

    pub fn selected_candidate(&self) -> Option<&Candidate> {
        self.selected.and_then(|id| self.state.candidates.get(&id))
    }

    /// The calls the LLM tab steps through: those of the selected candidate (the one that
    /// wrote it, then those that worked on it), then every other call in flight (a seed's
    /// call can be watched before it has a candidate) and the one watched as it streamed.
    pub fn calls_of_selected(&self) -> Vec<&Call> {
        let mut out: Vec<&Call> = Vec::new();
        if let Some(c) = self.selected_candidate() {
            if let Some(call) = c.call.and_then(|id| self.state.calls.get(&id)) {
                out.push(call);
            }
            for call in self.state.calls.values() {
                if call.candidate == Some(c.id) && Some(call.id) != c.call {
                    out.push(call);
                }
            }
        }
        for call in self.state.calls.values() {
            let watched = self.llm_streamed == Some(call.id);
            if (call.ok.is_none() || watched) && !out.iter().any(|c| c.id == call.id) {
                out.push(call);
            }
        }
        out
    }

    /// The call the LLM tab shows: the chosen call of the selection, else the newest call
    /// in flight.
    pub fn shown_call(&self) -> Option<&Call> {
        let calls = self.calls_of_selected();
        if !calls.is_empty() {
            return calls.get(self.call_index.min(calls.len() - 1)).copied();
        }
        self.state.calls.values().rev().find(|c| c.ok.is_none())
    }

    /// The call of the `manual` provider waiting for the person's answer: the one shown
    /// in the LLM tab if it is one, else the newest.
    pub fn manual_call(&self) -> Option<&Call> {
        let waiting = |c: &&Call| c.ok.is_none() && c.provider == "manual";
        self.shown_call()
            .filter(waiting)
            .or_else(|| self.state.calls.values().rev().find(waiting))
    }

    /// A session file's text, cached (re-read when it changes on disk, checked on ticks).
    pub fn file(&mut self, rel: &str) -> Option<Arc<str>> {
        if let Some((text, _, _)) = self.files.get(rel) {
            return Some(text.clone());
        }
        let path: PathBuf = self.session.file(rel);
        let bytes = std::fs::read(&path).ok()?;
        let meta = std::fs::metadata(&path).ok();
        let text: Arc<str> = Arc::from(String::from_utf8_lossy(&bytes).as_ref());
        self.files.insert(
            rel.to_string(),
            (
                text.clone(),
                meta.as_ref().and_then(|m| m.modified().ok()),
                meta.map_or(0, |m| m.len()),
            ),
        );
        Some(text)
    }

    pub fn candidate_code(&mut self, id: CandidateId) -> Option<Arc<str>> {
        let file = self.state.candidates.get(&id)?.file.clone();
        self.file(&file)
    }

    pub fn eval_result(&mut self, id: CandidateId) -> Option<Arc<EvalResult>> {
        let rel = self.state.candidates.get(&id)?.eval_file.clone()?;
        if let Some(r) = self.evals.get(&rel) {
            return r.clone();
        }
        let parsed = self
            .file(&rel)
            .and_then(|t| serde_json::from_str::<EvalResult>(&t).ok())
            .map(Arc::new);
        self.evals.insert(rel, parsed.clone());
        parsed
    }

    /// The candidate the Diff tab compares against: the marked one, else the parent.
    pub fn diff_base(&self) -> Option<CandidateId> {
        let sel = self.selected?;
        match self.marked {
            Some(m) if m != sel => Some(m),
            _ => self.state.candidates.get(&sel)?.parent,
        }
    }

    /// The diff of the selection against its base, cached: (diff, base, selected).
    pub fn current_diff(&mut self) -> Option<(Arc<Diff>, CandidateId, CandidateId)> {
        let sel = self.selected?;
        let base = self.diff_base()?;
        let old = self.candidate_code(base).unwrap_or_else(|| Arc::from(""));
        let new = self.candidate_code(sel).unwrap_or_else(|| Arc::from(""));
        let key = (highlight::hash_text(&old), highlight::hash_text(&new));
        if let Some((k, d)) = &self.diff_cache
            && *k == key
        {
            return Some((d.clone(), base, sel));
        }
        let d = Arc::new(diff::diff(&old, &new, 3));
        self.diff_cache = Some((key, d.clone()));
        Some((d, base, sel))
    }

    /// The candidate Compare puts on the left: the marked one, else the best, else the
    /// parent.
    pub fn compare_other(&self) -> Option<CandidateId> {
        let sel = self.selected?;
        [
            self.marked,
            self.state.best,
            self.state.candidates.get(&sel)?.parent,
        ]
        .into_iter()
        .flatten()
        .find(|c| *c != sel)
    }

    pub fn elapsed_text(&self) -> String {
        let Some(start) = self.state.started else {
            return "--:--:--".into();
        };
        let end = if self.state.state.is_over() || self.options.read_only {
            self.state.last_ts.unwrap_or(start)
        } else {
            self.now()
        };
        let secs = (end - start).num_seconds().max(0);
        format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    }

    pub fn status_of(&self, c: &Candidate) -> CandidateStatus {
        c.status
    }
}
