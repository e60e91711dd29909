//! The three panes around the detail tabs: the candidate tree, the score timeline and the
//! console.

pub mod chart;
pub mod console;
pub mod tree;

pub use chart::ChartPane;
pub use console::ConsolePane;
pub use tree::{TreePane, TreeRow};
