//! The loop: inputs from one channel (keys from an input thread, engine events, highlight
//! results, a one-second tick), handled by `App`, drawn only when something changed and
//! at most every 16 ms (streaming text coalesces). The terminal side: raw mode, alternate
//! screen, optional mouse, synchronized updates, a panic hook that restores the
//! terminal, `$EDITOR` with the input thread parked, OSC 52 copy.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use crossterm::event::{self as ct, Event as CtEvent, KeyEventKind};
use crossterm::{execute, terminal};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::app::{App, Effect, Input};
use super::docs::Docs;
use super::highlight::Highlighter;
use super::keymap::Keymap;
use super::shared::AppOptions;
use super::theme::{self, Theme};
use super::{TuiConfig, TuiExit, TuiLink};
use crate::protocol::Command;

/// Side effects that need the outside world.
pub trait Host {
    fn send(&mut self, command: Command) -> Result<()>;
    fn copy(&mut self, text: &str) -> Result<()>;
    /// Opens `text` in an editor; `Ok(None)` when the editor failed or was aborted.
    fn edit(&mut self, text: &str, suffix: &str) -> Result<Option<String>>;
    /// Suspends the process (Ctrl-Z) and returns once it is continued.
    fn suspend(&mut self) -> Result<()> {
        Ok(())
    }
    fn begin_frame(&mut self) {}
    fn end_frame(&mut self) {}
}

pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);

/// Handles one input and carries out its effects. `Some(exit)` ends the loop.
pub fn process<B: Backend>(
    app: &mut App,
    input: Input,
    host: &mut dyn Host,
    terminal: &mut Terminal<B>,
) -> Result<Option<TuiExit>> {
    app.handle(input);
    // Effects can lead to more (an edit resolves a gate): run until none are left.
    let mut queue: std::collections::VecDeque<Effect> = app.take_effects().into();
    while let Some(effect) = queue.pop_front() {
        match effect {
            Effect::Command(c) => {
                tracing::info!(?c, "command");
                if let Err(e) = host.send(c) {
                    app.set_flash(format!("cannot send the command: {e:#}"));
                }
            }
            Effect::Copy(text) => {
                if let Err(e) = host.copy(&text) {
                    app.set_flash(format!("copy failed: {e:#}"));
                }
            }
            Effect::Edit {
                text,
                suffix,
                purpose,
            } => {
                let (result, failure) = match host.edit(&text, suffix) {
                    Ok(r) => (r, None),
                    Err(e) => (None, Some(format!("editor: {e:#}"))),
                };
                terminal.clear().map_err(|e| anyhow!("{e}"))?;
                app.edited(purpose, &text, result);
                // Why the editor failed says more than "edit cancelled".
                if let Some(f) = failure {
                    app.set_flash(f);
                }
            }
            Effect::Suspend => {
                if let Err(e) = host.suspend() {
                    app.set_flash(format!("cannot suspend: {e:#}"));
                }
                terminal.clear().map_err(|e| anyhow!("{e}"))?;
                app.dirty = true;
            }
            Effect::Quit(exit) => return Ok(Some(exit)),
        }
        queue.extend(app.take_effects());
    }
    Ok(None)
}

/// Draws a frame if anything changed.
pub fn draw<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    host: &mut dyn Host,
) -> Result<()> {
    app.dirty = false;
    host.begin_frame();
    let r = terminal.draw(|f| super::render::render(app, f));
    host.end_frame();
    r.map_err(|e| anyhow!("cannot draw: {e}"))?;
    Ok(())
}

/// The loop, on any backend: runs until the app asks to quit or every sender is gone.
pub async fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &mut UnboundedReceiver<Input>,
    host: &mut dyn Host,
) -> Result<TuiExit> {
    draw(terminal, app, host)?;
    let mut last_draw = Instant::now();
    loop {
        let input = if app.dirty {
            let wait = FRAME_INTERVAL.saturating_sub(last_draw.elapsed());
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(i)) => Some(i),
                Ok(None) => return Ok(TuiExit::Quit),
                Err(_) => None,
            }
        } else {
            match rx.recv().await {
                Some(i) => Some(i),
                None => return Ok(TuiExit::Quit),
            }
        };
        if let Some(i) = input {
            if let Some(exit) = process(app, i, host, terminal)? {
                return Ok(exit);
            }
            // Coalesce whatever else is queued (a burst of deltas, key repeat).
            for _ in 0..4096 {
                let Ok(i) = rx.try_recv() else { break };
                if let Some(exit) = process(app, i, host, terminal)? {
                    return Ok(exit);
                }
            }
        }
        if app.dirty && last_draw.elapsed() >= FRAME_INTERVAL {
            draw(terminal, app, host)?;
            last_draw = Instant::now();
        }
    }
}

/// How `run_tui_with` is run (`kforge open` attaches; `kforge run` does not).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub attached: bool,
    /// The terminal is set up already (raw mode, alternate screen) and stays so after: the
    /// batch view opens a task's session on its own screen and comes back to it.
    pub nested: bool,
}

/// The TUI on the real terminal, for `kforge run` (in-process engine).
pub async fn run_tui(link: TuiLink, config: &TuiConfig) -> Result<TuiExit> {
    run_tui_with(link, config, RunOptions::default()).await
}

pub async fn run_tui_with(
    link: TuiLink,
    config: &TuiConfig,
    options: RunOptions,
) -> Result<TuiExit> {
    // Configuration errors surface before the terminal is touched.
    let theme = Theme::load(&config.theme, theme::no_color_env())?;
    let keymap = Keymap::with_overrides(&config.key_overrides())?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Input>();
    let hl_tx = tx.clone();
    let highlighter = Highlighter::threaded(config.highlight_max_lines, move |d| {
        let _ = hl_tx.send(Input::Highlighted(d));
    });
    let TuiLink {
        session_dir,
        initial,
        mut events,
        commands,
    } = link;
    let docs_tx = tx.clone();
    let docs = Docs::threaded(&session_dir.path, move |l| {
        let _ = docs_tx.send(Input::Loaded(l));
    });
    let mut app = App::new(
        session_dir,
        &initial,
        AppOptions {
            read_only: commands.is_none(),
            attached: options.attached,
            in_batch: options.nested,
            config: config.clone(),
            clock: None,
        },
        theme,
        keymap,
        highlighter,
        docs,
    );
    drop(initial);
    let ev_tx = tx.clone();
    let forward = tokio::spawn(async move {
        while let Some(r) = events.recv().await {
            if ev_tx.send(Input::Event(r)).is_err() {
                break;
            }
        }
    });
    let tick_tx = tx.clone();
    let ticker = tokio::spawn(async move {
        let mut iv = tokio::time::interval(Duration::from_secs(1));
        iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        iv.tick().await;
        loop {
            iv.tick().await;
            if tick_tx.send(Input::Tick).is_err() {
                break;
            }
        }
    });

    let key_tx = tx.clone();
    let input = InputControl::start(move |i| key_tx.send(i).is_ok());
    drop(tx);
    let mouse = config.mouse;
    let screen = if options.nested {
        None
    } else {
        Some(Screen::enter(mouse)?)
    };
    let result = async {
        let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .context("cannot start the terminal")?;
        terminal.clear().ok();
        let mut host = TerminalHost {
            commands,
            input: input.clone(),
            editor: config.editor_command(),
            mouse,
        };
        run_loop(&mut terminal, &mut app, &mut rx, &mut host).await
    }
    .await;
    input.stop();
    drop(screen);
    forward.abort();
    ticker.abort();
    result
}

/// The terminal as the TUI has it (raw mode, alternate screen, no cursor, the mouse when
/// asked), with a panic hook that puts it back; put back when dropped.
pub(crate) struct Screen {
    _hook: HookGuard,
}

impl Screen {
    pub(crate) fn enter(mouse: bool) -> Result<Screen> {
        if let Err(e) = setup_terminal(mouse) {
            restore_terminal();
            return Err(e);
        }
        Ok(Screen {
            _hook: install_panic_hook(mouse),
        })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn setup_terminal(mouse: bool) -> Result<()> {
    terminal::enable_raw_mode().context("cannot switch the terminal to raw mode")?;
    let mut out = std::io::stdout();
    execute!(out, terminal::EnterAlternateScreen, crossterm::cursor::Hide)?;
    if mouse {
        execute!(out, ct::EnableMouseCapture)?;
    }
    Ok(())
}

/// Puts the terminal back (also from the panic hook; safe to call twice).
pub fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = execute!(
        out,
        ct::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Restores the previous panic hook when dropped.
struct HookGuard;

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

static PREVIOUS_HOOK: Mutex<Option<PanicHook>> = Mutex::new(None);

fn install_panic_hook(_mouse: bool) -> HookGuard {
    let previous = std::panic::take_hook();
    if let Ok(mut slot) = PREVIOUS_HOOK.lock() {
        *slot = Some(previous);
    }
    std::panic::set_hook(Box::new(|info| {
        restore_terminal();
        if let Ok(slot) = PREVIOUS_HOOK.lock()
            && let Some(prev) = slot.as_ref()
        {
            prev(info);
        }
    }));
    HookGuard
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        let _ = std::panic::take_hook();
        if let Ok(mut slot) = PREVIOUS_HOOK.lock()
            && let Some(prev) = slot.take()
        {
            std::panic::set_hook(prev);
        }
    }
}

#[derive(Default)]
struct InputFlags {
    paused: bool,
    parked: bool,
    stop: bool,
    done: bool,
}

/// The thread reading the terminal; it can be parked while an editor (or the session view
/// opened from the batch view) owns the terminal.
#[derive(Clone)]
pub(crate) struct InputControl {
    shared: Arc<(Mutex<InputFlags>, Condvar)>,
}

impl InputControl {
    /// Starts the thread; it hands each key, mouse event and resize to `send`, and ends
    /// when `send` says no one listens any more.
    pub(crate) fn start(send: impl Fn(Input) -> bool + Send + 'static) -> InputControl {
        let shared = Arc::new((Mutex::new(InputFlags::default()), Condvar::new()));
        let s = shared.clone();
        std::thread::Builder::new()
            .name("kforge-input".into())
            .spawn(move || input_thread(s, send))
            .ok();
        InputControl { shared }
    }

    fn set(&self, f: impl FnOnce(&mut InputFlags)) {
        let (m, cv) = &*self.shared;
        if let Ok(mut g) = m.lock() {
            f(&mut g);
            cv.notify_all();
        }
    }

    /// Parks the thread and waits until it no longer reads the terminal.
    pub(crate) fn pause(&self) {
        self.set(|f| f.paused = true);
        let (m, cv) = &*self.shared;
        if let Ok(mut g) = m.lock() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !g.parked && !g.done && Instant::now() < deadline {
                g = match cv.wait_timeout(g, Duration::from_millis(50)) {
                    Ok((g, _)) => g,
                    Err(_) => return,
                };
            }
        }
    }

    pub(crate) fn resume(&self) {
        self.set(|f| f.paused = false);
    }

    pub(crate) fn stop(&self) {
        self.set(|f| f.stop = true);
        let (m, cv) = &*self.shared;
        if let Ok(mut g) = m.lock() {
            let deadline = Instant::now() + Duration::from_millis(600);
            while !g.done && Instant::now() < deadline {
                g = match cv.wait_timeout(g, Duration::from_millis(50)) {
                    Ok((g, _)) => g,
                    Err(_) => return,
                };
            }
        }
    }
}

fn input_thread(shared: Arc<(Mutex<InputFlags>, Condvar)>, send: impl Fn(Input) -> bool) {
    let (m, cv) = &*shared;
    loop {
        {
            let Ok(mut g) = m.lock() else { break };
            if g.stop {
                break;
            }
            if g.paused {
                g.parked = true;
                cv.notify_all();
                while g.paused && !g.stop {
                    g = match cv.wait(g) {
                        Ok(g) => g,
                        Err(_) => return,
                    };
                }
                g.parked = false;
                continue;
            }
        }
        // A short poll keeps the thread responsive to pause/stop; nothing is drawn
        // unless an input arrives.
        match ct::poll(Duration::from_millis(200)) {
            Ok(true) => {
                let input = match ct::read() {
                    Ok(CtEvent::Key(k)) if k.kind != KeyEventKind::Release => Some(Input::Key(k)),
                    Ok(CtEvent::Mouse(mo)) => Some(Input::Mouse(mo)),
                    Ok(CtEvent::Resize(w, h)) => Some(Input::Resize(w, h)),
                    Ok(CtEvent::FocusGained) => Some(Input::Resize(0, 0)),
                    _ => None,
                };
                if let Some(i) = input
                    && !send(i)
                {
                    break;
                }
            }
            Ok(false) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    if let Ok(mut g) = m.lock() {
        g.done = true;
        cv.notify_all();
    }
}

struct TerminalHost {
    commands: Option<UnboundedSender<Command>>,
    input: InputControl,
    editor: String,
    mouse: bool,
}

impl Host for TerminalHost {
    fn send(&mut self, command: Command) -> Result<()> {
        match &self.commands {
            Some(tx) => tx
                .send(command)
                .map_err(|_| anyhow!("the engine is no longer listening")),
            None => Err(anyhow!("read-only session")),
        }
    }

    fn copy(&mut self, text: &str) -> Result<()> {
        let mut out = std::io::stdout();
        out.write_all(osc52(text).as_bytes())?;
        out.flush()?;
        Ok(())
    }

    fn edit(&mut self, text: &str, suffix: &str) -> Result<Option<String>> {
        use crate::external_editor::{Edited, edit};
        self.input.pause();
        restore_terminal();
        let edited = edit(&self.editor, text, suffix);
        let back = setup_terminal(self.mouse);
        self.input.resume();
        back?;
        Ok(match edited? {
            Edited::Text(t) => Some(t),
            Edited::Failed(_) => None,
        })
    }

    fn suspend(&mut self) -> Result<()> {
        self.input.pause();
        restore_terminal();
        // SIGTSTP to ourselves: the process stops here and goes on after `fg`.
        let status = std::process::Command::new("kill")
            .arg("-TSTP")
            .arg(std::process::id().to_string())
            .status();
        let back = setup_terminal(self.mouse);
        self.input.resume();
        back?;
        status.context("cannot run kill")?;
        Ok(())
    }

    fn begin_frame(&mut self) {
        let _ = execute!(std::io::stdout(), terminal::BeginSynchronizedUpdate);
    }

    fn end_frame(&mut self) {
        let _ = execute!(std::io::stdout(), terminal::EndSynchronizedUpdate);
    }
}

/// The OSC 52 sequence that puts `text` on the terminal's clipboard (works over SSH and
/// in tmux with `set-clipboard on`).
pub fn osc52(text: &str) -> String {
    format!("\x1b]52;c;{}\x07", base64(text.as_bytes()))
}

pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
    }
}
