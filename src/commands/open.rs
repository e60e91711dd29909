//! `kforge open SESSION`: browse a session in the TUI. A finished session opens
//! read-only; one that another process is running (it holds the session lock) is
//! attached: its events are followed live and decisions go to its control file.
//!
//! `kforge open BATCH` (a directory with batch.json) opens the batch view: every task's
//! row, live while the batch runs; enter opens a task's session here, the same way
//! (`open_session`), and quitting it comes back to the batch.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use tokio::sync::mpsc;

use crate::batch::manifest::Manifest;
use crate::config::Config;
use crate::session::store::SessionDir;
use crate::tui::batch::{BatchScreen, BatchStep};
use crate::tui::runtime::{RunOptions, run_tui_with};
use crate::tui::{TuiConfig, TuiExit, TuiLink, attach};

#[derive(clap::Args, Debug)]
pub struct OpenArgs {
    /// A session directory (sessions/<stamp>_<task>_<provider>_<model>), or a batch
    /// directory (the one holding batch.json) for the batch view.
    #[arg(value_name = "SESSION|BATCH")]
    pub session: PathBuf,
    /// Theme: dark, light, high-contrast, or a themes/NAME.toml (overrides [tui] theme).
    #[arg(long)]
    pub theme: Option<String>,
    /// Capture the mouse (clicks select, the wheel scrolls).
    #[arg(long, conflicts_with = "no_mouse")]
    pub mouse: bool,
    /// Leave the mouse to the terminal (overrides [tui] mouse = true).
    #[arg(long)]
    pub no_mouse: bool,
    /// Never send commands, even to a live session.
    #[arg(long)]
    pub read_only: bool,
}

pub async fn run(args: OpenArgs, config_file: Option<&Path>) -> Result<ExitCode> {
    let config = Config::load(config_file)?;
    let mut tui = config.tui.clone();
    if let Some(t) = args.theme {
        tui.theme = t;
    }
    if args.mouse {
        tui.mouse = true;
    }
    if args.no_mouse {
        tui.mouse = false;
    }
    if Manifest::is_batch(&args.session) {
        let manifest = Manifest::load(&args.session)?;
        need_terminal()?;
        return open_batch(&args.session, manifest, &tui, args.read_only).await;
    }
    let dir = SessionDir::open(&args.session)?;
    need_terminal()?;
    let exit = open_session(&dir, &tui, args.read_only, false).await?;
    println!(
        "{}",
        farewell(&dir, exit).unwrap_or_else(|| format!("session: {}", dir.path.display()))
    );
    Ok(ExitCode::SUCCESS)
}

fn need_terminal() -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("kforge open needs a terminal (stdin and stdout must be a TTY)");
    }
    Ok(())
}

/// The session view on `dir` until the person quits it: attached (its events followed,
/// commands written to its control file unless `read_only`) while another process runs
/// it, read-only otherwise. `nested`: the terminal is the batch view's, set up already and
/// left so.
pub async fn open_session(
    dir: &SessionDir,
    tui: &TuiConfig,
    read_only: bool,
    nested: bool,
) -> Result<TuiExit> {
    let live = dir.is_live();
    let (initial, offset) = attach::read_initial(dir)?;
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    let commands = if live {
        tasks.push(attach::follow(
            dir.clone(),
            offset,
            &initial,
            events_tx.clone(),
            attach::POLL_INTERVAL,
        ));
        if read_only {
            None
        } else {
            let (tx, task) = attach::command_writer(dir.clone());
            tasks.push(task);
            Some(tx)
        }
    } else {
        None
    };
    drop(events_tx);
    tracing::info!(session = %dir.path.display(), live, nested, "open");
    let link = TuiLink {
        session_dir: dir.clone(),
        initial,
        events: events_rx,
        commands,
    };
    let options = RunOptions {
        attached: live,
        nested,
    };
    let exit = run_tui_with(link, tui, options).await;
    // Let queued commands reach the control file before leaving.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    for t in tasks {
        t.abort();
    }
    exit
}

/// What to tell the person about the run they leave, when it goes on without them.
pub fn farewell(dir: &SessionDir, exit: TuiExit) -> Option<String> {
    match exit {
        TuiExit::Detached => Some(format!(
            "detached from {} (it goes on; `kforge open` attaches again)",
            dir.path.display()
        )),
        TuiExit::StoppedAndLeft => Some(format!(
            "asked the run of {} to stop, and left (`kforge resume` continues it)",
            dir.path.display()
        )),
        TuiExit::Quit | TuiExit::QuitWhileActive | TuiExit::Interrupted => None,
    }
}

/// The batch view until the person quits it; enter on a task opens its session on the
/// same screen.
async fn open_batch(
    batch: &Path,
    manifest: Manifest,
    tui: &TuiConfig,
    read_only: bool,
) -> Result<ExitCode> {
    let mut screen = BatchScreen::start(batch, manifest, tui)?;
    tracing::info!(batch = %batch.display(), "open batch");
    let result = loop {
        match screen.next().await {
            Ok(BatchStep::Quit) => break Ok(()),
            Ok(BatchStep::Open(path)) => {
                let said = match SessionDir::open(&path) {
                    Ok(dir) => {
                        screen.pause();
                        let exit = open_session(&dir, tui, read_only, true).await;
                        screen.resume();
                        match exit {
                            Ok(exit) => farewell(&dir, exit),
                            Err(e) => Some(format!("{e:#}")),
                        }
                    }
                    Err(e) => Some(format!("{e:#}")),
                };
                if let Some(text) = said {
                    screen.flash(text);
                }
            }
            Err(e) => break Err(e),
        }
    };
    drop(screen);
    result?;
    println!("batch: {}", batch.display());
    Ok(ExitCode::SUCCESS)
}
