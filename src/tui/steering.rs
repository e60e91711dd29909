//! How the run is steered, in the words every part of the screen uses (the status bar,
//! the gate dialog, the mode and revocation dialogs, the confirmations): which gates a mode
//! asks, and the approvals given for the rest of the session. Generated from
//! `Mode::asks` and `GateKind`, so the words follow the engine's rules.

use crate::protocol::{GateKind, Mode};

/// `a`, `a and b`, `a, b and c`.
pub fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

/// The kinds of gate a mode asks, in the order a run meets them.
pub fn asked_kinds(mode: Mode) -> Vec<GateKind> {
    GateKind::ALL
        .into_iter()
        .filter(|k| mode.asks(*k))
        .collect()
}

/// `asks at every gate (LLM calls, ...)`, `asks before algorithm optimization steps,
/// tuning stage runs and final best declarations`, `asks nothing`.
pub fn asks(mode: Mode) -> String {
    let kinds = asked_kinds(mode);
    if kinds.is_empty() {
        "asks nothing".into()
    } else if kinds.len() == GateKind::ALL.len() {
        format!("asks at every gate ({})", kinds_text(&kinds))
    } else {
        format!("asks before {}", kinds_text(&kinds))
    }
}

/// `review mode asks before algorithm optimization steps, tuning stage runs and final best
/// declarations.`
pub fn asks_text(mode: Mode) -> String {
    format!("{} mode {}.", mode.word(), asks(mode))
}

/// The standing approvals in words: `LLM calls and evaluations`.
pub fn kinds_text(kinds: &[GateKind]) -> String {
    and_list(&kinds.iter().map(|k| k.plural()).collect::<Vec<_>>())
}

/// What taking back the approval of `kind` does in `mode`: asked again, or still not asked
/// because the mode does not ask it.
pub fn after_revoke(mode: Mode, kind: GateKind) -> String {
    if mode.asks(kind) {
        "asked again from now on".into()
    } else {
        format!(
            "{} mode still does not ask them (step mode does)",
            mode.word()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_say_what_they_ask() {
        assert_eq!(
            asks_text(Mode::Review),
            "review mode asks before algorithm optimization steps, tuning stage runs and final best declarations."
        );
        assert_eq!(asks_text(Mode::Auto), "auto mode asks nothing.");
        assert!(asks_text(Mode::Step).starts_with("step mode asks at every gate (LLM calls, "));
        assert_eq!(and_list(&["a"]), "a");
        assert_eq!(and_list(&["a", "b", "c"]), "a, b and c");
        assert_eq!(
            after_revoke(Mode::Review, GateKind::Evaluation),
            "review mode still does not ask them (step mode does)"
        );
        assert_eq!(
            after_revoke(Mode::Step, GateKind::Evaluation),
            "asked again from now on"
        );
    }
}
