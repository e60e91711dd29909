//! `kforge open SESSION`: browse a session in the TUI. A finished session opens
//! read-only; one that another process is running (it holds the session lock) is
//! attached: its events are followed live and decisions go to its control file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::session::store::SessionDir;
use crate::tui::runtime::{RunOptions, run_tui_with};
use crate::tui::{TuiConfig, TuiExit, TuiLink, attach};

#[derive(clap::Args, Debug)]
pub struct OpenArgs {
    /// The session directory (sessions/<stamp>_<task>_<provider>_<model>).
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
/// it, read-only otherwise. `nested`: the terminal is set up already by the caller and
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
        TuiExit::Quit | TuiExit::QuitWhileActive => None,
    }
}
