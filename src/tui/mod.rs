//! The terminal UI (docs/architecture.md, TUI). It knows the engine only through its events
//! and commands: `run_tui` takes a `TuiLink` (events so far, a channel of new ones, a
//! command sender) and returns when the person quits.
//!
//! - `app`: the shared context, the components and the routing of inputs between them,
//!   no terminal; `render`: the layout;
//! - `component`: what a component is (state, keys, hints, drawing) and the app-event
//!   queue they talk through;
//! - `panes` (tree, timeline, console), `detail` (the six tabs), `overlays` (help,
//!   confirmations, input, the gate dialog), `bars` (activity, status, hints): the
//!   components;
//! - `docs` and `highlight`: session files and syntax colours, off the UI thread;
//! - `runtime`: the loop (terminal, input thread, draw throttling, `$EDITOR`, OSC 52);
//! - `attach`: following a session that another process writes;
//! - `batch`: the batch view (`kforge open BATCH`), its own small app on the same parts;
//! - `glyphs`: the glyph vocabulary (one meaning each, wherever drawn, and the help's
//!   legend);
//! - `route`: where an action no component used is carried out (exhaustive);
//! - `steering`: the words for modes and standing approvals;
//! - `theme`, `keymap`, `config`, `diff`, `editor`, `widgets`: the parts;
//! - `testing`: a harness driving the real loop on a `TestBackend`, and big-session
//!   generation for the benchmark.

pub mod app;
pub mod attach;
pub mod bars;
pub mod batch;
pub mod component;
pub mod detail;
pub mod diff;
pub mod docs;
pub mod editor;
pub mod glyphs;
pub mod highlight;
pub mod job;
pub mod keymap;
pub mod overlays;
pub mod panes;
pub mod render;
pub mod route;
pub mod runtime;
pub mod shared;
pub mod steering;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod theme;
pub mod widgets;

pub use crate::config::tui::TuiConfig;
pub use runtime::run_tui;
pub use shared::{TuiExit, TuiLink};
