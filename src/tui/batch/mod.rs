//! The batch view (`kforge open BATCH`): one row per task of a batch, live while the batch
//! runs in another process or a Slurm job array writes into it, and enter to open a task's
//! session in the session view on the same screen (quitting it comes back here).
//!
//! - `feed`: every task's figures (`batch::results`) and batch.json, read off the UI
//!   thread once a second (`BatchFeed::sync` reads on the calling thread, for tests);
//! - `view`: the task table, a component (its selection, keys and hints);
//! - `lines`: the header, the selected task's line, the cells' texts;
//! - `app`: `BatchApp`, the routing between the table and the help dialog, no terminal;
//! - `screen`: the loop on the real terminal, handing the task to open to its caller
//!   (`commands::open`, which opens sessions the same way for both paths).
//!
//! Drawing never touches the disk: it reads `BatchCtx` (`ctx`), which holds what the feed
//! read last.

mod app;
mod ctx;
mod feed;
mod lines;
mod screen;
mod view;

pub use app::{BatchApp, BatchInput, BatchStep};
pub use ctx::{BatchCtx, KEYS};
pub use feed::{BatchFeed, Snapshot, read_batch};
pub use screen::BatchScreen;
pub use view::BatchView;
