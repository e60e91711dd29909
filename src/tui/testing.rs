//! Test and benchmark support: a harness that drives the real input handling, effects
//! and drawing (`runtime::process` / `runtime::draw`) on a `TestBackend`, renderings of
//! a buffer's text and styles for snapshots, and a generator of big sessions.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Result, anyhow};
use chrono::{DateTime, Duration, TimeZone, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Style;

use super::app::{App, Input};
use super::batch::{BatchApp, BatchCtx, BatchFeed};
use super::component::Ctx;
use super::docs::Docs;
use super::highlight::Highlighter;
use super::keymap::{Key, Keymap};
use super::runtime::{self, Host};
use super::shared::AppOptions;
use super::theme::Theme;
use super::{TuiConfig, TuiExit};
use crate::batch::manifest::Manifest;
use crate::protocol::{
    CallId, CallKind, CandidateId, CandidateKind, Category, Command, EngineState, EvalSummary,
    Event, EventRecord, LogLevel, Mode, TokenUsage,
};
use crate::session::store::SessionDir;

/// A host that records what the app asked for; editor answers are scripted.
#[derive(Debug, Default)]
pub struct RecordingHost {
    pub commands: Vec<Command>,
    pub copies: Vec<String>,
    /// The texts the editor was opened with.
    pub edits: Vec<String>,
    /// What the "editor" returns, in order (`None`: aborted). Empty: returns the input.
    pub edit_answers: VecDeque<Option<String>>,
    pub suspends: usize,
}

impl Host for RecordingHost {
    fn send(&mut self, command: Command) -> Result<()> {
        self.commands.push(command);
        Ok(())
    }
    fn copy(&mut self, text: &str) -> Result<()> {
        self.copies.push(text.to_string());
        Ok(())
    }
    fn suspend(&mut self) -> Result<()> {
        self.suspends += 1;
        Ok(())
    }
    fn edit(&mut self, text: &str, _suffix: &str) -> Result<Option<String>> {
        self.edits.push(text.to_string());
        Ok(self
            .edit_answers
            .pop_front()
            .unwrap_or_else(|| Some(text.to_string())))
    }
}

/// A `KeyEvent` from a key name as written in the keymap (`j`, `G`, `ctrl-c`, `enter`).
pub fn key_event(name: &str) -> KeyEvent {
    let k = Key::parse(name).unwrap_or_else(|e| panic!("{e}"));
    let mut modifiers = KeyModifiers::NONE;
    if k.ctrl {
        modifiers |= KeyModifiers::CONTROL;
    }
    if k.alt {
        modifiers |= KeyModifiers::ALT;
    }
    if let KeyCode::Char(c) = k.code
        && c.is_ascii_uppercase()
    {
        modifiers |= KeyModifiers::SHIFT;
    }
    if k.code == KeyCode::BackTab {
        modifiers |= KeyModifiers::SHIFT;
    }
    KeyEvent {
        code: k.code,
        modifiers,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    }
}

/// The app on a `TestBackend`, driven through the same functions as the real loop.
pub struct Harness {
    pub app: App,
    pub terminal: Terminal<TestBackend>,
    pub host: RecordingHost,
    pub exit: Option<TuiExit>,
    /// Frames drawn so far.
    pub frames: usize,
}

/// How a harness opens a session.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    pub width: u16,
    pub height: u16,
    pub read_only: bool,
    pub attached: bool,
    /// Opened from the batch view (`q` goes back to it).
    pub in_batch: bool,
    pub theme: String,
    pub no_color: bool,
    pub config: TuiConfig,
    /// Files are read on a worker whose reads never arrive: what the app sees in the
    /// moment before the worker answers (`loading …`).
    pub docs_never_arrive: bool,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        HarnessOptions {
            width: 120,
            height: 40,
            read_only: true,
            attached: false,
            in_batch: false,
            theme: "dark".into(),
            no_color: false,
            config: TuiConfig::default(),
            docs_never_arrive: false,
        }
    }
}

impl Harness {
    /// Opens a session dir with all its events.
    pub fn open(dir: &Path, options: HarnessOptions) -> Result<Harness> {
        let session = SessionDir::open(dir)?;
        let records = session.read_events()?.records;
        Harness::with_records(session, &records, options)
    }

    /// Opens a session dir with the given events (a prefix of a recording, say). The
    /// clock is fixed at the last event's time.
    pub fn with_records(
        session: SessionDir,
        records: &[EventRecord],
        options: HarnessOptions,
    ) -> Result<Harness> {
        let app = app_for(session, records, &options)?;
        let terminal = Terminal::new(TestBackend::new(options.width, options.height))
            .map_err(|e| anyhow!("{e}"))?;
        let mut h = Harness {
            app,
            terminal,
            host: RecordingHost::default(),
            exit: None,
            frames: 0,
        };
        h.draw_if_dirty();
        Ok(h)
    }

    /// Draws while the app is dirty, as the loop does (a frame can leave work for the next
    /// one, like a search finding its match once the text is known), at most twice.
    fn draw_if_dirty(&mut self) {
        for _ in 0..2 {
            if !self.app.dirty {
                break;
            }
            runtime::draw(&mut self.terminal, &mut self.app, &mut self.host).expect("draw");
            self.frames += 1;
        }
    }

    /// Feeds one input, carries out its effects and draws if anything changed.
    pub fn input(&mut self, input: Input) {
        if self.exit.is_some() {
            return;
        }
        self.exit = runtime::process(&mut self.app, input, &mut self.host, &mut self.terminal)
            .expect("process");
        self.draw_if_dirty();
    }

    pub fn key(&mut self, name: &str) {
        self.input(Input::Key(key_event(name)));
    }

    pub fn keys(&mut self, names: &[&str]) {
        for k in names {
            self.key(k);
        }
    }

    /// Types text character by character.
    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let ev = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
            self.input(Input::Key(ev));
        }
    }

    /// Appends an event (next sequence number, one second after the last).
    pub fn event(&mut self, event: Event) {
        let seq = self.app.state().last_seq + 1;
        let ts = self.app.state().last_ts.unwrap_or_else(Utc::now) + Duration::seconds(1);
        self.app.set_clock(ts);
        self.input(Input::Event(EventRecord { seq, ts, event }));
    }

    pub fn resize(&mut self, width: u16, height: u16) {
        self.terminal.backend_mut().resize(width, height);
        self.input(Input::Resize(width, height));
    }

    /// Forces a frame (benchmarks).
    pub fn redraw(&mut self) {
        self.app.dirty = true;
        self.draw_if_dirty();
    }

    pub fn buffer(&self) -> &Buffer {
        self.terminal.backend().buffer()
    }

    pub fn screen(&self) -> String {
        buffer_text(self.buffer())
    }

    pub fn styles(&self) -> String {
        buffer_styles(self.buffer())
    }
}

/// An app on a session's events, with embedded themes (a user's theme files cannot change
/// snapshots), files and highlighting on the calling thread, the clock at the last event.
pub fn app_for(
    session: SessionDir,
    records: &[EventRecord],
    options: &HarnessOptions,
) -> Result<App> {
    let theme = match Theme::builtin(&options.theme, options.no_color) {
        Some(t) => t,
        None => Theme::load(&options.theme, options.no_color)?,
    };
    let keymap = Keymap::with_overrides(&options.config.key_overrides())?;
    let clock = records.last().map(|r| r.ts);
    let session_path = session.path.clone();
    Ok(App::new(
        session,
        records,
        AppOptions {
            read_only: options.read_only,
            attached: options.attached,
            in_batch: options.in_batch,
            config: options.config.clone(),
            clock,
        },
        theme,
        keymap,
        Highlighter::sync(options.config.highlight_max_lines),
        if options.docs_never_arrive {
            Docs::threaded(&session_path, |_| {})
        } else {
            Docs::sync(&session_path)
        },
    ))
}

/// The context components read, for drawing one on its own (component snapshots).
pub fn context_for(
    dir: &Path,
    records: Option<&[EventRecord]>,
    options: &HarnessOptions,
) -> Result<Ctx> {
    let session = SessionDir::open(dir)?;
    let all;
    let records = match records {
        Some(r) => r,
        None => {
            all = session.read_events()?.records;
            &all
        }
    };
    Ok(app_for(session, records, options)?.into_ctx())
}

/// The batch view on a batch directory, with embedded themes and the batch read on the
/// calling thread (at once, and again on `BatchApp::refresh`).
pub fn batch_app_for(dir: &Path, options: &HarnessOptions) -> Result<BatchApp> {
    let theme = match Theme::builtin(&options.theme, options.no_color) {
        Some(t) => t,
        None => Theme::load(&options.theme, options.no_color)?,
    };
    let keymap = Keymap::with_overrides(&options.config.key_overrides())?;
    let manifest = Manifest::load(dir)?;
    Ok(BatchApp::new(BatchCtx::new(
        dir,
        manifest,
        theme,
        keymap,
        BatchFeed::sync(dir),
    )))
}

/// Draws the batch view on a `width` x `height` buffer; its text then its styles.
pub fn draw_batch(app: &mut BatchApp, width: u16, height: u16) -> String {
    draw_alone(width, height, |f| app.render(f))
}

/// Draws one component alone on a `width` x `height` buffer; its text then its styles.
pub fn draw_alone(width: u16, height: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal.draw(draw).expect("draw");
    let buf = terminal.backend().buffer();
    format!("{}--- styles ---\n{}", buffer_text(buf), buffer_styles(buf))
}

/// Whether tmux can be run (the terminal end-to-end tests); says how to get it when not.
pub fn have_tmux() -> bool {
    let ok = std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping: tmux is not installed (apt-get install -y tmux)");
    }
    ok
}

/// The buffer's text, one line per row, trailing spaces kept off.
pub fn buffer_text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        let mut skip = 0;
        for x in 0..buf.area.width {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let sym = buf[(x, y)].symbol();
            line.push_str(sym);
            skip = unicode_width(sym).saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn unicode_width(s: &str) -> usize {
    // Cells hold one grapheme; wide ones are followed by filler cells.
    if s.chars().any(|c| (c as u32) >= 0x1100 && is_wide(c)) {
        2
    } else {
        1
    }
}

fn is_wide(c: char) -> bool {
    matches!(c as u32, 0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x1F300..=0x1F64F | 0x1F900..=0x1F9FF)
}

/// The buffer's styles: a legend of the distinct styles (letters) and a grid of those
/// letters (`.` for the default style), so colour regressions show in snapshots.
pub fn buffer_styles(buf: &Buffer) -> String {
    let mut legend: BTreeMap<String, char> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let mut grid = String::new();
    for y in 0..buf.area.height {
        let mut row = String::new();
        for x in 0..buf.area.width {
            let cell = &buf[(x, y)];
            let style = cell.style();
            let desc = describe_style(style);
            if desc.is_empty() {
                row.push('.');
                continue;
            }
            let next = letters.get(order.len()).copied().unwrap_or('#');
            let ch = *legend.entry(desc.clone()).or_insert_with(|| {
                order.push(desc.clone());
                next
            });
            row.push(ch);
        }
        grid.push_str(row.trim_end_matches('.'));
        grid.push('\n');
    }
    let mut out = String::new();
    for d in &order {
        let _ = writeln!(out, "{} = {d}", legend[d]);
    }
    out.push_str("---\n");
    out.push_str(&grid);
    out
}

fn describe_style(s: Style) -> String {
    let mut parts = Vec::new();
    if let Some(fg) = s.fg
        && fg != ratatui::style::Color::Reset
    {
        parts.push(format!("fg:{fg}"));
    }
    if let Some(bg) = s.bg
        && bg != ratatui::style::Color::Reset
    {
        parts.push(format!("bg:{bg}"));
    }
    if !s.add_modifier.is_empty() {
        parts.push(format!("{:?}", s.add_modifier));
    }
    parts.join(" ")
}

/// Writes a big session for the benchmark: `candidates` candidates in trees of seeds,
/// repairs and stages, each with a kernel file and an eval result, `log_lines` console
/// lines, and LLM files for every call.
pub fn write_big_session(dir: &Path, candidates: u32, log_lines: u32) -> Result<()> {
    for sub in ["kernels", "llm", "eval"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let t0 = Utc
        .with_ymd_and_hms(2026, 11, 21, 8, 0, 0)
        .single()
        .unwrap_or_default();
    let mut seq = 0u64;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("events.jsonl"))?);
    let mut emit = |event: Event, secs: i64| -> Result<()> {
        seq += 1;
        let r = EventRecord {
            seq,
            ts: t0 + Duration::milliseconds(secs),
            event,
        };
        serde_json::to_writer(&mut out, &r)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    emit(
        Event::SessionStarted {
            task: "big_synthetic".into(),
            task_hash: "0".into(),
            provider: "mock".into(),
            model: "mock-1".into(),
            mode: Mode::Auto,
            device: "cuda:0".into(),
            timing_meaningful: true,
            precision: None,
        },
        0,
    )?;
    emit(
        Event::StateChanged {
            state: EngineState::Running,
        },
        1,
    )?;
    let kernel = |id: u32| {
        let mut s = String::from(
            "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n",
        );
        let _ = writeln!(s, "def kernel_{id}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):");
        for i in 0..40 {
            let _ = writeln!(
                s,
                "    v{i} = tl.load(x_ptr + {i})  # step {i} of candidate {id}"
            );
        }
        s.push_str(
            "\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        );
        s
    };
    let mut best: Option<(u32, f64)> = None;
    let logs_per = log_lines / candidates.max(1);
    let mut logs_written = 0u32;
    let mut t = 10i64;
    for id in 1..=candidates {
        let parent = if id % 10 == 1 {
            None
        } else {
            Some(CandidateId(id - 1))
        };
        let kind = match id % 10 {
            1 => CandidateKind::Seed {
                index: id / 10 + 1,
                direction: None,
            },
            2..=4 => CandidateKind::Repair {
                attempt: id % 10 - 1,
            },
            5 => CandidateKind::Algorithm,
            _ => CandidateKind::Stage {
                name: "block_tiling".into(),
                index: if id % 10 == 0 { 5 } else { id % 10 - 5 },
            },
        };
        let file = format!("kernels/{id}-{}.py", kind.word());
        std::fs::write(dir.join(&file), kernel(id))?;
        let prompt = format!("llm/{id}.prompt.md");
        std::fs::write(
            dir.join(&prompt),
            format!("# prompt {id}\n{}", "text ".repeat(200)),
        )?;
        std::fs::write(
            dir.join(format!("llm/{id}.response.md")),
            format!("```python\n{}```\n", kernel(id)),
        )?;
        t += 50;
        emit(
            Event::LlmCallStarted {
                call: CallId(id),
                key: format!("step{id}"),
                kind: CallKind::Seed,
                candidate: parent,
                provider: "mock".into(),
                model: "mock-1".into(),
                prompt_file: prompt,
            },
            t,
        )?;
        emit(
            Event::LlmCallFinished {
                call: CallId(id),
                ok: true,
                error: None,
                usage: TokenUsage {
                    input: 3000,
                    output: 900,
                    ..Default::default()
                },
                cost_usd: Some(0.002),
                latency_s: 4.2,
                response_file: Some(format!("llm/{id}.response.md")),
            },
            t + 10,
        )?;
        emit(
            Event::CandidateCreated {
                id: CandidateId(id),
                key: format!("step{id}"),
                parent,
                kind,
                file,
                call: Some(CallId(id)),
            },
            t + 11,
        )?;
        let correct = id % 3 != 0;
        let score = correct.then(|| 0.5 + ((id * 37) % 200) as f64 / 100.0);
        let summary = EvalSummary {
            correct,
            category: (!correct).then_some(Category::Mismatch),
            summary: if correct {
                "correct".into()
            } else {
                "output 0 mismatch".into()
            },
            score,
            kernel_ms: score.map(|s| 1.0 / s),
            reference_ms: Some(1.0),
            ..Default::default()
        };
        std::fs::write(
            dir.join(format!("eval/{id}.json")),
            serde_json::json!({"schema":1,"correct":correct,"status": if correct {"correct"} else {"failed"},
                "summary": summary.summary, "message": if correct {""} else {"max abs error 0.5"}}).to_string(),
        )?;
        emit(
            Event::EvalStarted {
                candidate: CandidateId(id),
            },
            t + 12,
        )?;
        emit(
            Event::EvalFinished {
                candidate: CandidateId(id),
                result_file: format!("eval/{id}.json"),
                summary,
            },
            t + 20,
        )?;
        if let Some(s) = score
            && best.is_none_or(|(_, b)| s > b)
        {
            best = Some((id, s));
            emit(
                Event::BestChanged {
                    candidate: CandidateId(id),
                    score: Some(s),
                },
                t + 21,
            )?;
        }
        let n = if id == candidates {
            log_lines - logs_written
        } else {
            logs_per
        };
        for i in 0..n {
            emit(
                Event::Log {
                    level: if i % 50 == 0 {
                        LogLevel::Warn
                    } else {
                        LogLevel::Info
                    },
                    tag: format!("seed {}", id % 7),
                    message: format!("candidate {id}: step {i} of the pipeline, nothing unusual"),
                },
                t + 22,
            )?;
        }
        logs_written += n;
    }
    emit(
        Event::StateChanged {
            state: EngineState::Finished,
        },
        t + 100,
    )?;
    emit(
        Event::SessionFinished {
            best: best.map(|b| CandidateId(b.0)),
            reason: "done".into(),
            end: None,
        },
        t + 101,
    )?;
    std::fs::write(dir.join("task.py"), "import torch\n")?;
    out.flush()?;
    Ok(())
}

/// A fixed instant for tests.
pub fn fixed_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0)
        .single()
        .unwrap_or_default()
}
