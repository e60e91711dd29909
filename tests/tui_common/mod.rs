//! What the TUI tests share: the recorded softmax session they open
//! (tests/fixtures/sessions/softmax, written by make_softmax.py), and a batch directory
//! for the batch view (`batch`).

#![allow(dead_code)]

use std::path::PathBuf;

use kforge::protocol::EventRecord;
use kforge::session::store::SessionDir;

pub mod batch;

pub fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/softmax")
}

/// All of the recorded session's events.
pub fn records() -> Vec<EventRecord> {
    SessionDir::open(&fixture())
        .unwrap()
        .read_events()
        .unwrap()
        .records
}
