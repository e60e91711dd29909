//! Actions, their default keys, overrides from `[tui.keys]`, and the help text generated
//! from the live keymap. Keys are written `j`, `G`, `?`, `ctrl-c`, `alt-x`, `enter`,
//! `esc`, `tab`, `backtab`, `space`, `up`, `pagedown`, `f1`, ... An override replaces an
//! action's keys; an empty list unbinds it.

use std::collections::BTreeMap;
use std::fmt;

use anyhow::{Result, bail};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where an action applies. `Global` keys work in every pane (unless a pane's own
/// binding of the same key comes first); dialogs see only their own context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Context {
    Global,
    Tree,
    Chart,
    Detail,
    Console,
    Gate,
    Confirm,
    /// The batch view (`kforge open BATCH`).
    Batch,
}

impl Context {
    pub fn title(&self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Tree => "Candidate tree",
            Context::Chart => "Score timeline",
            Context::Detail => "Detail tabs",
            Context::Console => "Console",
            Context::Gate => "Gate dialog",
            Context::Confirm => "Confirmation",
            Context::Batch => "Batch view",
        }
    }
}

macro_rules! actions {
    ($($variant:ident, $name:literal, $ctx:ident, [$($key:literal),*], $desc:literal;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Action { $($variant),* }

        pub const ALL: &[Action] = &[$(Action::$variant),*];

        impl Action {
            /// The name used in `[tui.keys]`.
            pub fn name(&self) -> &'static str {
                match self { $(Action::$variant => $name),* }
            }
            pub fn context(&self) -> Context {
                match self { $(Action::$variant => Context::$ctx),* }
            }
            pub fn description(&self) -> &'static str {
                match self { $(Action::$variant => $desc),* }
            }
            pub fn default_keys(&self) -> &'static [&'static str] {
                match self { $(Action::$variant => &[$($key),*]),* }
            }
        }
    };
}

actions! {
    Quit, "quit", Global, ["q"], "quit (asks first while a run is active; in a batch: back to the batch)";
    Interrupt, "interrupt", Global, ["ctrl-c"], "quit as Ctrl-C does: asks first while a run is active, then kforge run stops it and exits 130";
    Help, "help", Global, ["?", "f1"], "this help";
    FocusNext, "focus_next", Global, ["tab"], "next pane";
    FocusPrev, "focus_prev", Global, ["backtab"], "previous pane";
    Up, "up", Global, ["k", "up"], "move up / scroll up";
    Down, "down", Global, ["j", "down"], "move down / scroll down";
    PageUp, "page_up", Global, ["pageup", "ctrl-u"], "page up";
    PageDown, "page_down", Global, ["pagedown", "ctrl-d"], "page down";
    Top, "top", Global, ["g", "home"], "first line / candidate";
    Bottom, "bottom", Global, ["G", "end"], "last line / candidate (follows again)";
    TabNext, "tab_next", Global, ["]"], "next detail tab";
    TabPrev, "tab_prev", Global, ["["], "previous detail tab";
    TabCode, "tab_code", Global, ["1"], "Code tab";
    TabDiff, "tab_diff", Global, ["2"], "Diff tab";
    TabCompare, "tab_compare", Global, ["3"], "Compare tab";
    TabLlm, "tab_llm", Global, ["4"], "LLM tab";
    TabEval, "tab_eval", Global, ["5"], "Eval tab";
    TabAnalysis, "tab_analysis", Global, ["6"], "Analysis tab";
    Filter, "filter", Global, ["/"], "filter / search the focused pane (tree, console, detail)";
    Follow, "follow", Global, ["f"], "follow new candidates and the log tail";
    Mark, "mark", Global, ["m"], "mark the candidate for diff / compare (again: unmark)";
    DiffLayout, "diff_layout", Global, ["s"], "diff: unified / side by side";
    NextHunk, "next_hunk", Global, ["n"], "diff: next hunk";
    PrevHunk, "prev_hunk", Global, ["N"], "diff: previous hunk";
    NextCall, "next_call", Global, ["."], "LLM tab: next call of this candidate";
    PrevCall, "prev_call", Global, [","], "LLM tab: previous call of this candidate";
    Repair, "repair", Global, ["r"], "repair the candidate with an instruction";
    Optimize, "optimize", Global, ["o"], "optimize the candidate with an instruction";
    EditEval, "edit_eval", Global, ["e"], "edit the code in $EDITOR and evaluate it as a new candidate";
    EditInline, "edit_inline", Global, ["E"], "edit the code inline and evaluate it";
    Reevaluate, "reevaluate", Global, ["v"], "evaluate the candidate again";
    Profile, "profile", Global, ["p"], "profile the candidate (Nsight Compute)";
    MarkFinal, "mark_final", Global, ["F"], "make the candidate the final answer";
    Copy, "copy", Global, ["y"], "copy the candidate's code (OSC 52)";
    PauseResume, "pause_resume", Global, ["P"], "pause / resume the engine";
    CancelCall, "cancel_call", Global, ["x"], "cancel the LLM call in flight";
    CancelAllCalls, "cancel_all_calls", Global, ["X"], "cancel every LLM call in flight (asks first)";
    Reask, "reask", Global, ["R"], "ask a failed LLM call again (the one shown, else the newest)";
    JumpBest, "jump_best", Global, ["b"], "select the best candidate";
    JumpFailure, "jump_failure", Global, ["!"], "select the next failed candidate";
    OpenGate, "open_gate", Global, ["a"], "open the oldest waiting gate (it never opens by itself)";
    AnswerCall, "answer_call", Global, ["A"], "manual provider: write the answer of the call in $EDITOR";
    SwitchMode, "switch_mode", Global, ["M"], "choose the run's mode: step, review or auto (a switch that approves waiting gates asks first)";
    Revoke, "revoke", Global, ["u"], "take back approvals given with Y (one kind or all; approves nothing)";
    Theme, "theme", Global, ["t"], "next theme (dark, light, high-contrast)";
    Suspend, "suspend", Global, ["ctrl-z"], "suspend to the shell (fg comes back)";
    Collapse, "collapse", Tree, ["h", "left"], "collapse / go to parent";
    Expand, "expand", Tree, ["l", "right"], "expand";
    Toggle, "toggle", Tree, ["space", "enter"], "collapse / expand";
    PointPrev, "point_prev", Chart, ["h", "left"], "previous point";
    PointNext, "point_next", Chart, ["l", "right"], "next point";
    ScrollLeft, "scroll_left", Detail, ["h", "left"], "scroll left";
    ScrollRight, "scroll_right", Detail, ["l", "right"], "scroll right";
    ClearFilter, "clear_filter", Global, ["esc"], "clear the focused pane's filter (else: say which are on)";
    ClearSearch, "clear_search", Detail, ["esc"], "clear the search (n/N go back to hunks)";
    Approve, "approve", Gate, ["y"], "approve";
    ApproveAlways, "approve_always", Gate, ["Y"], "approve, and every gate of this kind for the rest of the session";
    Reject, "reject", Gate, ["n"], "reject (skip the step / drop the candidate; asks first)";
    Rewrite, "rewrite", Gate, ["e"], "rewrite the prompt or kernel in $EDITOR";
    RewriteInline, "rewrite_inline", Gate, ["i"], "rewrite the prompt or kernel inline";
    GateDiff, "gate_diff", Gate, ["d"], "evaluation gate: the kernel, or its diff against its parent";
    Later, "later", Gate, ["esc"], "close; the gate keeps waiting (a opens it again)";
    Yes, "yes", Confirm, ["y", "enter"], "yes";
    StopRun, "stop_run", Confirm, ["s"], "stop the run, then quit";
    No, "no", Confirm, ["n", "esc"], "no";
    OpenTask, "open_task", Batch, ["enter"], "open the task's session (q comes back to the batch)";
}

impl Action {
    pub fn from_name(name: &str) -> Option<Action> {
        ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// The scroll keys every scrolling dialog (and the batch view's table) shares: the new
/// offset, or `None` for another action.
pub fn scrolled(action: Action, at: usize, page: usize) -> Option<usize> {
    Some(match action {
        Action::Down => at + 1,
        Action::Up => at.saturating_sub(1),
        Action::PageDown => at + page,
        Action::PageUp => at.saturating_sub(page),
        Action::Top => 0,
        Action::Bottom => usize::MAX / 2,
        _ => return None,
    })
}

/// A key as bound: code plus ctrl/alt (shift is part of the character for printable keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl Key {
    pub fn from_event(ev: &KeyEvent) -> Key {
        let code = match ev.code {
            KeyCode::Tab if ev.modifiers.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
            c => c,
        };
        Key {
            code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
            alt: ev.modifiers.contains(KeyModifiers::ALT),
        }
    }

    pub fn parse(text: &str) -> Result<Key> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = text;
        loop {
            let lower = rest.to_ascii_lowercase();
            if rest.len() > 2 && (lower.starts_with("ctrl-") || lower.starts_with("ctrl+")) {
                ctrl = true;
                rest = &rest[5..];
            } else if rest.len() > 2 && (lower.starts_with("c-")) {
                ctrl = true;
                rest = &rest[2..];
            } else if rest.len() > 2 && (lower.starts_with("alt-") || lower.starts_with("alt+")) {
                alt = true;
                rest = &rest[4..];
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(if ctrl { c.to_ascii_lowercase() } else { c }),
            _ => match rest.to_ascii_lowercase().as_str() {
                "enter" | "return" => KeyCode::Enter,
                "esc" | "escape" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "backtab" | "shift-tab" => KeyCode::BackTab,
                "space" => KeyCode::Char(' '),
                "backspace" => KeyCode::Backspace,
                "delete" | "del" => KeyCode::Delete,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "pageup" | "pgup" => KeyCode::PageUp,
                "pagedown" | "pgdn" => KeyCode::PageDown,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "insert" => KeyCode::Insert,
                f if f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => bail!("unknown key `{text}`"),
            },
        };
        Ok(Key { code, ctrl, alt })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            write!(f, "ctrl-")?;
        }
        if self.alt {
            write!(f, "alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => write!(f, "space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => write!(f, "enter"),
            KeyCode::Esc => write!(f, "esc"),
            KeyCode::Tab => write!(f, "tab"),
            KeyCode::BackTab => write!(f, "shift-tab"),
            KeyCode::Backspace => write!(f, "backspace"),
            KeyCode::Delete => write!(f, "delete"),
            KeyCode::Up => write!(f, "↑"),
            KeyCode::Down => write!(f, "↓"),
            KeyCode::Left => write!(f, "←"),
            KeyCode::Right => write!(f, "→"),
            KeyCode::PageUp => write!(f, "pgup"),
            KeyCode::PageDown => write!(f, "pgdn"),
            KeyCode::Home => write!(f, "home"),
            KeyCode::End => write!(f, "end"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Keys bound to actions, per context.
#[derive(Debug, Clone)]
pub struct Keymap {
    bindings: BTreeMap<Action, Vec<Key>>,
}

impl Default for Keymap {
    fn default() -> Self {
        let bindings = ALL
            .iter()
            .map(|a| {
                let keys = a
                    .default_keys()
                    .iter()
                    .map(|k| Key::parse(k).expect("default keys parse"))
                    .collect();
                (*a, keys)
            })
            .collect();
        Keymap { bindings }
    }
}

impl Keymap {
    /// The defaults with `[tui.keys]` overrides (action name -> keys; empty unbinds).
    pub fn with_overrides(overrides: &BTreeMap<String, Vec<String>>) -> Result<Keymap> {
        let mut map = Keymap::default();
        for (name, keys) in overrides {
            let Some(action) = Action::from_name(name) else {
                bail!(
                    "[tui.keys]: unknown action `{name}` (known: {})",
                    ALL.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
                );
            };
            let parsed = keys
                .iter()
                .map(|k| Key::parse(k).map_err(|e| anyhow::anyhow!("[tui.keys] {name}: {e}")))
                .collect::<Result<Vec<_>>>()?;
            map.bindings.insert(action, parsed);
        }
        Ok(map)
    }

    pub fn keys(&self, action: Action) -> &[Key] {
        self.bindings.get(&action).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The first key of an action, for hints ("" when unbound).
    pub fn hint(&self, action: Action) -> String {
        self.keys(action)
            .first()
            .map(|k| k.to_string())
            .unwrap_or_default()
    }

    /// The action a key triggers, looking in `contexts` in order.
    pub fn lookup(&self, key: &KeyEvent, contexts: &[Context]) -> Option<Action> {
        let k = Key::from_event(key);
        for ctx in contexts {
            for (action, keys) in &self.bindings {
                if action.context() == *ctx && keys.contains(&k) {
                    return Some(*action);
                }
            }
        }
        None
    }

    /// Help text of the session view: one section per context, one line per bound action.
    pub fn help(&self) -> Vec<(Context, Vec<(String, &'static str)>)> {
        let contexts = [
            Context::Global,
            Context::Tree,
            Context::Chart,
            Context::Detail,
            Context::Console,
            Context::Gate,
            Context::Confirm,
        ];
        self.sections(&contexts, ALL)
    }

    /// Help text of a view that answers only `actions` (the batch view): its own
    /// context's section first, then the global one.
    pub fn help_for(&self, actions: &[Action]) -> Vec<(Context, Vec<(String, &'static str)>)> {
        let mut contexts: Vec<Context> = actions.iter().map(|a| a.context()).collect();
        contexts.sort_by_key(|c| (*c == Context::Global, *c));
        contexts.dedup();
        self.sections(&contexts, actions)
    }

    fn sections(
        &self,
        contexts: &[Context],
        actions: &[Action],
    ) -> Vec<(Context, Vec<(String, &'static str)>)> {
        contexts
            .iter()
            .map(|ctx| {
                let lines = actions
                    .iter()
                    .filter(|a| a.context() == *ctx)
                    .filter_map(|a| {
                        let keys = self.keys(*a);
                        (!keys.is_empty()).then(|| {
                            (
                                keys.iter()
                                    .map(|k| k.to_string())
                                    .collect::<Vec<_>>()
                                    .join(" "),
                                a.description(),
                            )
                        })
                    })
                    .collect();
                (*ctx, lines)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventKind;

    fn ev(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent {
            code,
            modifiers,
            kind: KeyEventKind::Press,
            state: crossterm::event::KeyEventState::NONE,
        }
    }

    #[test]
    fn keys_parse_and_print() {
        assert_eq!(
            Key::parse("ctrl-c").unwrap(),
            Key {
                code: KeyCode::Char('c'),
                ctrl: true,
                alt: false
            }
        );
        assert_eq!(Key::parse("G").unwrap().code, KeyCode::Char('G'));
        assert_eq!(Key::parse("pagedown").unwrap().code, KeyCode::PageDown);
        assert_eq!(Key::parse("f5").unwrap().code, KeyCode::F(5));
        assert_eq!(Key::parse("space").unwrap().to_string(), "space");
        assert!(Key::parse("hyper-x").is_err());
    }

    #[test]
    fn defaults_have_no_clash_within_a_context() {
        let map = Keymap::default();
        let mut seen = std::collections::HashMap::new();
        for a in ALL {
            for k in map.keys(*a) {
                if let Some(other) = seen.insert((a.context(), *k), *a) {
                    panic!("{k} bound to {other:?} and {a:?}");
                }
            }
        }
    }

    #[test]
    fn lookup_respects_context_order_and_shift() {
        let map = Keymap::default();
        let h = ev(KeyCode::Char('h'), KeyModifiers::NONE);
        assert_eq!(
            map.lookup(&h, &[Context::Tree, Context::Global]),
            Some(Action::Collapse)
        );
        assert_eq!(
            map.lookup(&h, &[Context::Chart, Context::Global]),
            Some(Action::PointPrev)
        );
        let big_g = ev(KeyCode::Char('G'), KeyModifiers::SHIFT);
        assert_eq!(map.lookup(&big_g, &[Context::Global]), Some(Action::Bottom));
        let backtab = ev(KeyCode::BackTab, KeyModifiers::SHIFT);
        assert_eq!(
            map.lookup(&backtab, &[Context::Global]),
            Some(Action::FocusPrev)
        );
    }

    #[test]
    fn a_views_help_lists_only_its_actions_its_own_context_first() {
        let map = Keymap::default();
        let help = map.help_for(&[Action::Quit, Action::OpenTask, Action::Down]);
        let contexts: Vec<Context> = help.iter().map(|(c, _)| *c).collect();
        assert_eq!(contexts, [Context::Batch, Context::Global]);
        assert_eq!(
            help[0].1,
            [("enter".to_string(), Action::OpenTask.description())]
        );
        assert_eq!(help[1].1.len(), 2);
        // The session view's help has no batch section.
        assert!(!map.help().iter().any(|(c, _)| *c == Context::Batch));
    }

    /// docs/tui.md lists every action name, in the keymap's order.
    #[test]
    fn the_docs_list_every_action_in_order() {
        let docs = include_str!("../../docs/tui.md");
        let start = docs
            .find("Action names are the ones `?` lists in its order:")
            .expect("the list");
        let end = start + docs[start..].find("\nKeys:").expect("its end");
        let listed: Vec<&str> = docs[start..end].split('`').skip(3).step_by(2).collect();
        let names: Vec<&str> = ALL.iter().map(|a| a.name()).collect();
        assert_eq!(listed, names);
    }

    #[test]
    fn overrides_replace_and_unbind() {
        let mut o = BTreeMap::new();
        o.insert("quit".to_string(), vec!["Q".to_string()]);
        o.insert("theme".to_string(), vec![]);
        let map = Keymap::with_overrides(&o).unwrap();
        let q = ev(KeyCode::Char('q'), KeyModifiers::NONE);
        assert_eq!(map.lookup(&q, &[Context::Global]), None);
        let big_q = ev(KeyCode::Char('Q'), KeyModifiers::SHIFT);
        assert_eq!(map.lookup(&big_q, &[Context::Global]), Some(Action::Quit));
        assert!(map.keys(Action::Theme).is_empty());
        let help = map.help();
        assert!(!help[0].1.iter().any(|(_, d)| d.starts_with("next theme")));
        o.insert("frobnicate".to_string(), vec!["z".to_string()]);
        assert!(Keymap::with_overrides(&o).is_err());
    }
}
