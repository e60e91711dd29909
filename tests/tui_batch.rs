//! The batch view (`kforge open BATCH`) on a batch directory written the way kforge writes
//! one (tui_common/batch.rs: tasks finished, failed, interrupted, running, untimed,
//! waiting and refused): the screen in insta snapshots (text, then styles) and its cells,
//! its keys and what they ask for (a session to open, a message), the help dialog, the
//! feed that reads the batch off the UI thread, and a batch changing under the view.

mod tui_common;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use kforge::batch::manifest::Manifest;
use kforge::batch::results::TaskStatus;
use kforge::protocol::{EngineState, Event, RunEnd, TaskKey};
use kforge::session::store::{EventWriter, SessionDir};
use kforge::tui::batch::{
    BatchApp, BatchCtx, BatchFeed, BatchInput, BatchStep, BatchView, read_batch,
};
use kforge::tui::component::{AppEvent, AppEvents, Component, Hint};
use kforge::tui::keymap::{Action, Keymap};
use kforge::tui::overlays::Overlay;
use kforge::tui::testing::{
    HarnessOptions, batch_app_for, buffer_text, draw_alone, draw_batch, key_event,
};
use kforge::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use tui_common::batch::*;

fn app(dir: &Path) -> BatchApp {
    batch_app_for(dir, &HarnessOptions::default()).unwrap()
}

fn key(app: &mut BatchApp, name: &str) {
    app.handle(BatchInput::Key(key_event(name)));
}

fn events(out: &mut AppEvents) -> Vec<AppEvent> {
    std::iter::from_fn(|| out.pop()).collect()
}

/// The screen's lines and the foreground colour of the first cell of `text` on it.
struct Screen {
    lines: Vec<String>,
    buffer: ratatui::buffer::Buffer,
}

impl Screen {
    fn of(app: &mut BatchApp, width: u16, height: u16) -> Screen {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| app.render(f)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        Screen {
            lines: buffer_text(&buffer).lines().map(String::from).collect(),
            buffer,
        }
    }

    /// The table row of a task.
    fn row(&self, key: &str) -> &str {
        self.lines
            .iter()
            .find(|l| l.starts_with(&format!("│ {key} ")))
            .unwrap_or_else(|| panic!("no row for {key}:\n{}", self.lines.join("\n")))
    }

    /// The cells of a task's row after the key.
    fn cells(&self, key: &str) -> Vec<String> {
        self.row(key)
            .trim_matches(|c| c == '│' || c == ' ')
            .split_whitespace()
            .skip(1)
            .map(String::from)
            .collect()
    }

    fn fg(&self, key: &str, text: &str) -> Option<Color> {
        let y = self.lines.iter().position(|l| l == self.row(key)).unwrap();
        let line = &self.lines[y];
        let x = line[..line.find(text).unwrap()].chars().count();
        self.buffer[(x as u16, y as u16)].style().fg
    }
}

#[test]
fn the_batch_view_shows_every_task_and_the_batchs_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    let s = Screen::of(&mut app, 120, 20);
    // The header: the counts, then the figures over all tasks.
    assert!(
        s.lines[0].contains("openai/gpt-x")
            && s.lines[0]
                .contains(" kb_level1 │ openai/gpt-x │ 3 finished, 1 running, 1 waiting, 1 refused, 1 resumable"),
        "{}",
        s.lines[0]
    );
    let wide = Screen::of(&mut app, 160, 20);
    for part in [
        "correct 2/7 (29%)",
        "fast_1 1/7 (14%, confident 14%)",
        "geomean 1.52x",
        "tok 7.5k",
        "$0.0323 + 1 unpriced call",
        "elapsed ",
        "task-time ",
    ] {
        assert!(wide.lines[1].contains(part), "{part} in {}", wide.lines[1]);
    }
    // One row per task: status, best, candidates, tokens, cost, wall, device.
    assert_eq!(
        s.cells(COMPLETE),
        ["complete", "1.52x", "2", "2.5k", "$0.0223", "0s", "cuda:0"]
    );
    assert_eq!(
        s.cells(NO_CORRECT),
        ["no_correct_kernel", "-", "2", "2.5k", "≥$0.0050", "0s", "-"]
    );
    assert_eq!(s.cells(INTERRUPTED)[..2], ["interrupted", "-"]);
    assert!(s.lines[2].starts_with("┌ Tasks 7 "), "{}", s.lines[2]);
    assert_eq!(
        s.cells(RUNNING)[..5],
        ["running", "-", "0", "0", "$0.0000"],
        "no call finished: nothing spent"
    );
    assert_eq!(s.cells(CPU)[..2], ["complete", "correct"]);
    assert_eq!(s.cells(CPU)[6], "cpu");
    assert_eq!(s.cells(WAITING), ["waiting"]);
    assert_eq!(s.cells(REFUSED), ["refused"]);
    // Status words in their roles' colours (dark theme).
    assert_eq!(s.fg(COMPLETE, "complete"), Some(Color::Green));
    assert_eq!(s.fg(NO_CORRECT, "no_correct_kernel"), Some(Color::Red));
    assert_eq!(s.fg(RUNNING, "running"), Some(Color::LightBlue));
    assert_eq!(s.fg(INTERRUPTED, "interrupted"), Some(Color::Yellow));
    assert_eq!(s.fg(WAITING, "waiting"), Some(Color::Gray));
    assert_eq!(s.fg(COMPLETE, "1.52x"), Some(Color::Green));
    // The first task is selected; its line under the table says where its best kernel is.
    let under = &s.lines[18];
    assert!(
        under.contains("tasks/L1_019_ReLU · ReLU · best #2 tasks/L1_019_ReLU/kernels/2-seed.py"),
        "{under}"
    );
    insta::assert_snapshot!("batch_view", draw_batch(&mut app, 120, 20));
    insta::assert_snapshot!("batch_view_80x16", draw_batch(&mut app, 80, 16));
}

/// Issue 39, item 3: the header gives the batch's elapsed time (its tasks ran side by side)
/// and, labelled apart, their times added up; rows and header write durations one way.
#[test]
fn the_header_tells_elapsed_time_from_task_time() {
    use chrono::TimeZone;
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    let at = |secs: i64| chrono::Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap();
    app.cx.now = at(3600);
    // Two tasks ran for 8m41s and 6m49s from the same start; nothing else ran.
    for r in app.cx.results.as_mut().unwrap() {
        let secs = match r.key.as_str() {
            k if k == COMPLETE => 521,
            k if k == NO_CORRECT => 409,
            _ => 0,
        };
        r.runs = if secs > 0 {
            vec![(at(0), at(secs))]
        } else {
            vec![]
        };
        r.wall_s = secs as f64;
        r.last_event_at = None;
    }
    let s = Screen::of(&mut app, 160, 20);
    assert!(
        s.lines[1].contains("│ elapsed 8m41s │ task-time 15m30s"),
        "{}",
        s.lines[1]
    );
    assert_eq!(s.cells(COMPLETE)[5], "8m41s");
    assert_eq!(s.cells(NO_CORRECT)[5], "6m49s");
}

#[test]
fn rows_say_loading_until_the_first_read_arrives() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let dir = &fixture.dir;
    // A feed whose reads never reach the view: what the screen shows before the first.
    let feed = BatchFeed::threaded(dir, Duration::from_secs(3600), |_| true);
    let cx = BatchCtx::new(
        dir,
        Manifest::load(dir).unwrap(),
        Theme::builtin("dark", false).unwrap(),
        Keymap::default(),
        feed,
    );
    let mut app = BatchApp::new(cx);
    let s = Screen::of(&mut app, 100, 14);
    assert!(s.lines[0].contains("reading the tasks …"), "{}", s.lines[0]);
    assert_eq!(s.cells(COMPLETE), ["loading", "…"]);
    // Enter before the first read says so instead of opening anything.
    key(&mut app, "enter");
    assert_eq!(app.take_step(), None);
    assert!(app.flash.as_deref().unwrap().contains("still reading"));
    insta::assert_snapshot!("batch_view_loading", draw_batch(&mut app, 100, 14));
    // The first read arrives.
    app.handle(BatchInput::Feed(Box::new(read_batch(dir))));
    let s = Screen::of(&mut app, 100, 14);
    assert_eq!(s.cells(COMPLETE)[..2], ["complete", "1.52x"]);
}

#[test]
fn keys_move_the_selection_and_enter_opens_only_tasks_with_a_session() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    let cx = &app.cx;
    let mut view = BatchView::default();
    let mut out = AppEvents::default();
    let mut press = |view: &mut BatchView, name: &str| {
        let _ = view.on_key(&key_event(name), cx, &mut out);
        events(&mut out)
    };
    let keys_of = |i: usize| cx.manifest.tasks[i].key.clone();
    assert_eq!(view.selected(), 0);
    press(&mut view, "k");
    assert_eq!(view.selected(), 0, "nothing above the first");
    press(&mut view, "j");
    press(&mut view, "down");
    assert_eq!(view.selected(), 2);
    press(&mut view, "G");
    assert_eq!(view.selected(), 6);
    press(&mut view, "j");
    assert_eq!(view.selected(), 6, "nothing below the last");
    press(&mut view, "g");
    assert_eq!(view.selected(), 0);
    press(&mut view, "end");
    press(&mut view, "home");
    assert_eq!(view.selected(), 0);

    // Enter on a finished task asks for its session; on a waiting or refused one it says
    // why there is none.
    assert_eq!(
        press(&mut view, "enter"),
        [AppEvent::OpenTask(TaskKey(COMPLETE.into()))]
    );
    press(&mut view, "G");
    press(&mut view, "k");
    assert_eq!(keys_of(view.selected()).as_str(), WAITING);
    assert_eq!(
        press(&mut view, "enter"),
        [AppEvent::Flash(format!(
            "{WAITING} is waiting: it has no session yet"
        ))]
    );
    press(&mut view, "j");
    assert_eq!(
        press(&mut view, "enter"),
        [AppEvent::Flash(format!(
            "{REFUSED} was refused by the task check: {REFUSED_WHY}"
        ))]
    );
    // Interrupted and running tasks have sessions to open.
    view.select(2, cx);
    assert_eq!(
        press(&mut view, "enter"),
        [AppEvent::OpenTask(TaskKey(INTERRUPTED.into()))]
    );
    view.select(3, cx);
    assert_eq!(
        press(&mut view, "enter"),
        [AppEvent::OpenTask(TaskKey(RUNNING.into()))]
    );
    assert!(matches!(
        press(&mut view, "?")[..],
        [AppEvent::Open(Overlay::Help(_))]
    ));
    assert!(matches!(press(&mut view, "q")[..], [AppEvent::Quit(_)]));
    // Keys of the session view do nothing here.
    assert!(press(&mut view, "r").is_empty());

    // Its hints: enter only where there is a session.
    let hints = |view: &BatchView| {
        let mut v: Vec<Hint> = Vec::new();
        view.hints(cx, &mut v);
        v.iter().map(|h| h.action).collect::<Vec<_>>()
    };
    view.select(0, cx);
    assert!(hints(&view).contains(&Action::OpenTask));
    assert!(hints(&view).contains(&Action::Help));
    view.select(5, cx);
    assert!(!hints(&view).contains(&Action::OpenTask));

    // Through the app: the session to open, and quitting, leave as steps.
    key(&mut app, "enter");
    assert_eq!(
        app.take_step(),
        Some(BatchStep::Open(fixture.dir.join("tasks").join(COMPLETE)))
    );
    key(&mut app, "G");
    key(&mut app, "enter");
    assert_eq!(app.take_step(), None);
    assert!(app.flash.as_deref().unwrap().contains(REFUSED_WHY));
    key(&mut app, "q");
    assert_eq!(app.take_step(), Some(BatchStep::Quit));
}

#[test]
fn page_keys_move_by_what_fits_and_the_selection_stays_in_view() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    // 11 rows: 2 header lines, the table's border and titles (3), 4 task rows, 2 lines.
    let s = Screen::of(&mut app, 100, 11);
    assert!(
        s.lines
            .iter()
            .any(|l| l.starts_with(&format!("│ {COMPLETE} ")))
    );
    assert!(!s.lines.iter().any(|l| l.contains(CPU)));
    key(&mut app, "pagedown");
    assert_eq!(app.view.selected(), 4);
    let s = Screen::of(&mut app, 100, 11);
    assert_eq!(app.view.offset(), 1);
    assert!(s.lines.iter().any(|l| l.starts_with(&format!("│ {CPU} "))));
    key(&mut app, "pagedown");
    assert_eq!(app.view.selected(), 6);
    Screen::of(&mut app, 100, 11);
    assert_eq!(app.view.offset(), 3, "no blank rows under the last task");
    key(&mut app, "pageup");
    assert_eq!(app.view.selected(), 2);
    Screen::of(&mut app, 100, 11);
    assert_eq!(app.view.offset(), 2);
}

#[test]
fn help_lists_the_batch_views_keys_and_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    key(&mut app, "?");
    assert!(app.help.is_some());
    assert!(app.hints().iter().any(|h| h.label == "scroll"));
    let screen = draw_batch(&mut app, 100, 24);
    assert!(screen.contains("Batch view"), "{screen}");
    assert!(screen.contains("open the task's session"), "{screen}");
    assert!(
        !screen.contains("repair"),
        "session keys are not listed:\n{screen}"
    );
    insta::assert_snapshot!("batch_help", screen);
    key(&mut app, "esc");
    assert!(app.help.is_none());
    // A key that closes the help does nothing else.
    key(&mut app, "?");
    key(&mut app, "q");
    assert!(app.help.is_none());
    assert_eq!(app.take_step(), None);
}

#[test]
fn the_view_follows_the_batch_as_it_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    // The interrupted task is resumed and finishes; the waiting one starts.
    let dir = SessionDir::open(&fixture.dir.join("tasks").join(INTERRUPTED)).unwrap();
    let last = dir.read_events().unwrap().records.last().unwrap().seq;
    let mut w = EventWriter::open(&dir, last).unwrap();
    w.append(Event::SessionResumed { previous_seq: last })
        .unwrap();
    w.append(Event::StateChanged {
        state: EngineState::Finished,
    })
    .unwrap();
    w.append(Event::SessionFinished {
        best: None,
        reason: "no kernel".into(),
        end: Some(RunEnd::NoCorrectKernel),
    })
    .unwrap();
    let started = SessionDir::create_at(&fixture.dir.join("tasks").join(WAITING)).unwrap();
    let _lock = started.lock().unwrap();
    EventWriter::open(&started, 0)
        .unwrap()
        .append(Event::Log {
            level: kforge::protocol::LogLevel::Info,
            tag: "engine".into(),
            message: "starting".into(),
        })
        .unwrap();
    // Nothing changes on screen until the batch is read again.
    let s = Screen::of(&mut app, 120, 20);
    assert_eq!(s.cells(INTERRUPTED)[0], "interrupted");
    app.refresh();
    let s = Screen::of(&mut app, 120, 20);
    assert_eq!(s.cells(INTERRUPTED)[0], "no_correct_kernel");
    assert_eq!(s.cells(WAITING)[0], "running");
    assert!(
        s.lines[0].contains("4 finished, 2 running, 0 waiting, 1 refused, 0 resumable"),
        "{}",
        s.lines[0]
    );
    assert_eq!(
        app.cx.result(5).map(|r| r.status),
        Some(TaskStatus::Running)
    );
}

/// A running task whose session waits at a gate says so in its row, in the header's
/// counts and in `kforge batch status`'s words, and its wall time goes on.
#[test]
fn a_task_waiting_at_a_gate_says_it_waits_for_you() {
    use kforge::protocol::{GateId, GateKind};
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let started = SessionDir::create_at(&fixture.dir.join("tasks").join(WAITING)).unwrap();
    let _lock = started.lock().unwrap();
    let mut w = EventWriter::open(&started, 0).unwrap();
    for gate in [1, 2] {
        w.append(Event::GateOpened {
            gate: GateId(gate),
            key: format!("call/seed{gate}"),
            kind: GateKind::LlmCall,
            candidate: None,
            call: None,
            question: "Send the seed prompt?".into(),
            file: None,
        })
        .unwrap();
    }
    let mut app = app(&fixture.dir);
    app.refresh();
    let s = Screen::of(&mut app, 120, 20);
    assert_eq!(s.cells(WAITING)[0], "waiting_for_you");
    assert!(
        s.lines[0].contains("2 running (1 waiting for you), 0 waiting"),
        "{}",
        s.lines[0]
    );
    let result = app.cx.result(5).unwrap();
    assert_eq!(result.status, TaskStatus::AwaitingYou { gates: 2 });
    // A live run writes no event while it waits: its wall time goes on all the same.
    let last = result.last_event_at.unwrap();
    let later = result.wall_now(last + chrono::Duration::seconds(77));
    assert!(
        (later - result.wall_s - 77.0).abs() < 1e-6,
        "{later} {}",
        result.wall_s
    );
    app.cx.now = last + chrono::Duration::seconds(77);
    let s = Screen::of(&mut app, 120, 20);
    assert!(
        s.lines
            .iter()
            .any(|l| l.contains("waiting_for_you") && l.contains("1m17s")),
        "{}",
        s.lines.join("\n")
    );
}

#[test]
fn the_feed_reads_off_the_ui_thread_and_sends_only_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let (tx, rx) = mpsc::channel();
    let mut feed = BatchFeed::threaded(&fixture.dir, Duration::from_millis(50), move |r| {
        tx.send(r).is_ok()
    });
    let wait = Duration::from_secs(10);
    let first = rx.recv_timeout(wait).unwrap().unwrap();
    assert_eq!(first.results.len(), 7);
    assert_eq!(first.results[0].status, TaskStatus::Ended(RunEnd::Complete));
    assert_eq!(first, read_batch(&fixture.dir).unwrap());
    // Reads that find nothing new send nothing.
    assert!(rx.recv_timeout(Duration::from_millis(400)).is_err());
    // A session that grows is read again.
    let dir = SessionDir::open(&fixture.dir.join("tasks").join(INTERRUPTED)).unwrap();
    let last = dir.read_events().unwrap().records.last().unwrap().seq;
    EventWriter::open(&dir, last)
        .unwrap()
        .append(Event::StateChanged {
            state: EngineState::Stopped,
        })
        .unwrap();
    let next = rx.recv_timeout(wait).unwrap().unwrap();
    assert_eq!(
        next.results[2].status,
        TaskStatus::Ended(RunEnd::Stopped),
        "{:?}",
        next.results[2]
    );
    // A batch.json that cannot be read is said, and reading goes on.
    std::fs::write(fixture.dir.join("batch.json"), "{").unwrap();
    assert!(
        feed.refresh().is_none(),
        "the worker answers, not the caller"
    );
    let err = rx.recv_timeout(wait).unwrap().unwrap_err();
    assert!(err.contains("not a valid batch manifest"), "{err}");
    drop(feed);
    // Its worker ends once the feed is gone (and with it the sender it held).
    loop {
        match rx.recv_timeout(wait) {
            Ok(_) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("the worker goes on"),
        }
    }
}

#[test]
fn a_tiny_terminal_draws_without_panicking() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = write_batch(&tmp.path().join("kb_level1"));
    let mut app = app(&fixture.dir);
    for (w, h) in [(1, 1), (10, 3), (30, 6), (200, 5)] {
        draw_alone(w, h, |f| app.render(f));
    }
}
