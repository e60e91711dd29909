//! The batch view on the real terminal: the screen set up once, keys from an input thread,
//! the feed's reads, a frame whenever something changed. `next` runs until the person
//! quits or asks for a task's session; the caller opens it on this same screen (the session
//! view runs nested: it neither leaves nor re-enters the alternate screen) between `pause`
//! and `resume`.

use std::io::Stdout;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow};
use crossterm::{execute, terminal};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::feed::INTERVAL;
use super::{BatchApp, BatchCtx, BatchFeed, BatchInput, BatchStep};
use crate::batch::manifest::Manifest;
use crate::tui::TuiConfig;
use crate::tui::app::Input;
use crate::tui::keymap::Keymap;
use crate::tui::runtime::{InputControl, Screen};
use crate::tui::theme::{Theme, no_color_env};

pub struct BatchScreen {
    app: BatchApp,
    rx: UnboundedReceiver<BatchInput>,
    input: InputControl,
    terminal: Terminal<CrosstermBackend<Stdout>>,
    /// Dropped last: puts the terminal back.
    _screen: Screen,
}

impl BatchScreen {
    /// Sets the terminal up and starts reading keys and the batch.
    pub fn start(dir: &Path, manifest: Manifest, config: &TuiConfig) -> Result<BatchScreen> {
        // Configuration errors surface before the terminal is touched.
        let theme = Theme::load(&config.theme, no_color_env())?;
        let keymap = Keymap::with_overrides(&config.key_overrides())?;
        let (tx, rx) = mpsc::unbounded_channel::<BatchInput>();
        let feed_tx = tx.clone();
        let feed = BatchFeed::threaded(dir, INTERVAL, move |read| {
            feed_tx.send(BatchInput::Feed(Box::new(read))).is_ok()
        });
        let app = BatchApp::new(BatchCtx::new(dir, manifest, theme, keymap, feed));
        let screen = Screen::enter(config.mouse)?;
        let input = InputControl::start(move |i| {
            let i = match i {
                Input::Key(k) => BatchInput::Key(k),
                Input::Mouse(m) => BatchInput::Mouse(m),
                _ => BatchInput::Resize,
            };
            tx.send(i).is_ok()
        });
        let terminal = match Terminal::new(CrosstermBackend::new(std::io::stdout())) {
            Ok(t) => t,
            Err(e) => {
                input.stop();
                return Err(anyhow!("cannot start the terminal: {e}"));
            }
        };
        let mut s = BatchScreen {
            app,
            rx,
            input,
            terminal,
            _screen: screen,
        };
        s.terminal.clear().ok();
        Ok(s)
    }

    /// Runs until the person quits or opens a task.
    pub async fn next(&mut self) -> Result<BatchStep> {
        loop {
            if let Some(step) = self.app.take_step() {
                return Ok(step);
            }
            if self.app.dirty {
                self.draw()?;
            }
            let input =
                match tokio::time::timeout(std::time::Duration::from_secs(1), self.rx.recv()).await
                {
                    Ok(Some(input)) => input,
                    Ok(None) => return Ok(BatchStep::Quit),
                    Err(_) => {
                        self.app.tick();
                        continue;
                    }
                };
            self.app.handle(input);
            // Whatever else is queued (key repeat, reads that came in meanwhile), up to a
            // step: keys typed after enter wait for the session view's end.
            while !self.app.has_step()
                && let Ok(i) = self.rx.try_recv()
            {
                self.app.handle(i);
            }
        }
    }

    fn draw(&mut self) -> Result<()> {
        self.app.dirty = false;
        let mut out = std::io::stdout();
        let _ = execute!(out, terminal::BeginSynchronizedUpdate);
        let r = self.terminal.draw(|f| self.app.render(f));
        let _ = execute!(out, terminal::EndSynchronizedUpdate);
        r.map(|_| ()).context("cannot draw")
    }

    /// Lends the terminal to the session view: this view stops reading keys.
    pub fn pause(&mut self) {
        self.input.pause();
    }

    /// The terminal is back: read keys again, redraw it all, read the batch now.
    pub fn resume(&mut self) {
        self.input.resume();
        self.terminal.clear().ok();
        self.app.refresh();
    }

    /// A line on the message bar until the next key.
    pub fn flash(&mut self, text: String) {
        self.app.set_flash(text);
    }
}

impl Drop for BatchScreen {
    fn drop(&mut self) {
        self.input.stop();
    }
}
