//! The TUI on a recorded session (tests/fixtures/sessions/softmax, written by
//! make_softmax.py): insta snapshots of every view, text and styles, at 120x40 and 80x24;
//! key sequences through the real input handling, effects and drawing on `TestBackend`;
//! the async loop itself; following a session another process appends to.

mod tui_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kforge::config::tui::{KeyList, TuiConfig};
use kforge::protocol::{
    CallId, CallKind, CandidateId, CandidateKind, Command, Decision, EngineState, Event,
    EventRecord, GateId, GateKind,
};
use kforge::session::store::SessionDir;
use kforge::tui::TuiExit;
use kforge::tui::app::{Focus, Input, Tab};
use kforge::tui::glyphs::Glyph;
use kforge::tui::testing::{Harness, HarnessOptions, key_event, write_big_session};
use tui_common::{fixture, records};

fn opts(width: u16, height: u16) -> HarnessOptions {
    HarnessOptions {
        width,
        height,
        ..Default::default()
    }
}

/// The finished session, read-only.
fn open(width: u16, height: u16) -> Harness {
    Harness::open(&fixture(), opts(width, height)).unwrap()
}

/// The session cut just after the event matching `until`, as a live run (commands on).
fn live_until(until: impl Fn(&Event) -> bool, mut o: HarnessOptions) -> Harness {
    let all = records();
    let end = all.iter().position(|r| until(&r.event)).unwrap() + 1;
    o.read_only = false;
    Harness::with_records(SessionDir::open(&fixture()).unwrap(), &all[..end], o).unwrap()
}

fn gate_opened(n: u32) -> impl Fn(&Event) -> bool {
    move |e| matches!(e, Event::GateOpened { gate, .. } if gate.0 == n)
}

fn snapshot(h: &Harness) -> String {
    format!("{}--- styles ---\n{}", h.screen(), h.styles())
}

fn code_of(id: u32) -> String {
    let name = std::fs::read_dir(fixture().join("kernels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(&format!("{id}-")))
        .unwrap();
    std::fs::read_to_string(fixture().join("kernels").join(name)).unwrap()
}

/// Selects a candidate through the tree with keys (top, then down).
fn select(h: &mut Harness, id: u32) {
    h.key("g");
    for _ in 0..20 {
        if h.app.selected() == Some(CandidateId(id)) {
            return;
        }
        h.key("j");
    }
    panic!("cannot reach #{id}");
}

// ------------------------------------------------------------------ snapshots

type Setup = fn(&mut Harness);

fn views() -> Vec<(&'static str, Setup)> {
    vec![
        ("code", |_| {}),
        ("diff_unified", |h| h.key("2")),
        ("diff_side_by_side", |h| h.keys(&["2", "s"])),
        ("diff_marked", |h| {
            select(h, 9);
            h.key("m");
            select(h, 2);
            h.key("2");
        }),
        ("compare", |h| h.key("3")),
        ("llm", |h| {
            select(h, 4);
            h.key("4");
        }),
        ("eval_correct", |h| h.key("5")),
        ("eval_failed", |h| {
            select(h, 1);
            h.key("5");
        }),
        ("analysis", |h| {
            select(h, 4);
            h.key("6");
        }),
        ("help", |h| h.key("?")),
        ("console_filter", |h| {
            h.key("backtab");
            h.key("/");
            h.type_text("stage");
            h.key("enter");
        }),
        ("tree_filter", |h| {
            h.key("/");
            h.type_text("repair");
            h.key("enter");
        }),
        ("collapsed_tree", |h| {
            select(h, 4);
            h.key("space");
        }),
    ]
}

#[test]
fn every_view_at_two_sizes() {
    for (w, hgt) in [(120, 40), (80, 24)] {
        for (name, setup) in views() {
            let mut h = open(w, hgt);
            setup(&mut h);
            insta::assert_snapshot!(format!("{name}_{w}x{hgt}"), snapshot(&h));
        }
        // The gate dialog of a live run, opened by the person.
        let mut h = live_until(gate_opened(3), opts(w, hgt));
        h.key("a");
        insta::assert_snapshot!(format!("gate_{w}x{hgt}"), snapshot(&h));
        // The quit confirmation of a live run.
        h.keys(&["esc", "q"]);
        insta::assert_snapshot!(format!("confirm_quit_{w}x{hgt}"), snapshot(&h));
    }
}

#[test]
fn other_themes_and_no_color() {
    for theme in ["light", "high-contrast"] {
        let mut o = opts(80, 24);
        o.theme = theme.into();
        let h = Harness::open(&fixture(), o).unwrap();
        insta::assert_snapshot!(format!("theme_{theme}_80x24"), snapshot(&h));
    }
    let mut o = opts(80, 24);
    o.no_color = true;
    let h = Harness::open(&fixture(), o).unwrap();
    let buf = h.buffer();
    for cell in buf.content() {
        assert!(
            cell.fg == ratatui::style::Color::Reset && cell.bg == ratatui::style::Color::Reset,
            "NO_COLOR painted {cell:?}"
        );
    }
    // Selection still shows (reversed).
    assert!(h.styles().contains("REVERSED"));
}

#[test]
fn no_background_is_painted_by_default() {
    let h = open(120, 40);
    for cell in h.buffer().content() {
        assert_eq!(cell.bg, ratatui::style::Color::Reset, "{cell:?}");
    }
}

#[test]
fn too_small_terminal_says_so_and_recovers() {
    let mut h = open(120, 40);
    h.resize(50, 12);
    insta::assert_snapshot!("too_small_50x12", h.screen());
    assert!(h.screen().contains("terminal too small"));
    h.resize(80, 24);
    assert!(h.screen().contains("Candidates 9"));
}

// ------------------------------------------------------------------ keys

#[test]
fn opens_on_the_best_and_navigates_the_tree() {
    let mut h = open(120, 40);
    assert_eq!(h.app.selected(), Some(CandidateId(9)));
    h.key("g");
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    assert!(!h.app.follow(), "moving stops following");
    h.key("j");
    assert_eq!(h.app.selected(), Some(CandidateId(3)));
    h.key("h"); // a leaf: goes to the parent
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    h.key("h"); // collapses #1 and its subtree
    assert!(!h.screen().contains("#3 rep"));
    h.key("j");
    assert_eq!(
        h.app.selected(),
        Some(CandidateId(2)),
        "collapsed rows are skipped"
    );
    h.keys(&["k", "l"]);
    assert!(h.screen().contains("#3 rep"));
    h.key("G");
    assert_eq!(h.app.selected(), Some(CandidateId(2)));
    assert!(h.app.follow(), "G follows again");
}

#[test]
fn chart_points_select_candidates() {
    let mut h = open(120, 40);
    h.key("tab");
    assert_eq!(h.app.focus(), Focus::Chart);
    h.key("h");
    assert_eq!(h.app.selected(), Some(CandidateId(8)));
    h.key("g");
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    h.key("l");
    assert_eq!(h.app.selected(), Some(CandidateId(2)));
}

/// The chart's part of the screen, row by row.
fn chart_text(h: &Harness) -> String {
    let r = h.app.areas().chart;
    h.screen()
        .lines()
        .skip(r.y as usize)
        .take(r.height as usize)
        .map(|l| {
            let row: String = l
                .chars()
                .skip(r.x as usize)
                .take(r.width as usize)
                .collect();
            format!("{row}\n")
        })
        .collect()
}

#[test]
fn glyphs_mean_one_thing_in_the_tree_and_the_chart() {
    // Opened on the best: the chart still shows its `★` (highlighted), and no other
    // glyph stands for the selection.
    let mut h = open(120, 40);
    assert_eq!(h.app.selected(), Some(CandidateId(9)));
    let chart = chart_text(&h);
    assert!(chart.contains('★'), "{chart}");
    assert!(!chart.contains('◆') && !chart.contains('◉'), "{chart}");
    // `◆` is the mark, in the tree and in the chart alike.
    select(&mut h, 4);
    h.key("m");
    let chart = chart_text(&h);
    assert!(chart.contains('◉'), "the selected point: {chart}");
    h.key("b");
    let chart = chart_text(&h);
    assert!(chart.contains('◆') && chart.contains('★'), "{chart}");
    assert!(!chart.contains('◉'), "{chart}");
    assert!(
        h.screen().lines().any(|l| l.contains("#4 repair 2◆")),
        "{}",
        h.screen()
    );
    insta::assert_snapshot!("chart_best_selected_4_marked", snapshot(&h));
    // The help's legend draws the same vocabulary.
    let help = help_text(&mut h);
    for g in [Glyph::Marked, Glyph::Selected, Glyph::Waiting, Glyph::Best] {
        assert!(legend_has(&help, g), "{g:?}: {help}");
    }
}

/// Every line of the help dialog, scrolled from top to bottom (its frame cut off).
fn help_text(h: &mut Harness) -> String {
    h.keys(&["?", "g"]);
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..40 {
        let screen = h.screen();
        let inside: Vec<String> = screen
            .lines()
            .filter_map(|l| {
                let start = l.find("│  ").or_else(|| l.find("│Everywhere"))?;
                Some(
                    l[start..]
                        .trim_matches(|c| c == '│' || c == ' ')
                        .to_string(),
                )
            })
            .collect();
        for l in inside {
            if !seen.contains(&l) {
                seen.push(l);
            }
        }
        h.key("pgdn");
    }
    h.key("esc");
    seen.join("\n")
}

/// Whether the legend gives `g` with the start of its meaning on one line.
fn legend_has(help: &str, g: Glyph) -> bool {
    let start: String = g.meaning().chars().take(24).collect();
    let start = start
        .rsplit_once(' ')
        .map_or(start.as_str(), |(a, _)| a)
        .to_string();
    help.lines()
        .any(|l| l.starts_with(g.text()) && l[g.text().len()..].trim_start().starts_with(&start))
}

/// Issue 39, item 4: the legend lists every glyph of the one table the screens draw from
/// (≈ ~ ◌ ⇣ ▾ … final shapes✗ among them), and every glyph any view puts on the screen is
/// in that table: none means something the legend does not say.
#[test]
fn every_glyph_on_the_screens_is_in_the_legend() {
    let mut h = open(120, 40);
    let help = help_text(&mut h);
    for g in Glyph::ALL {
        assert!(
            legend_has(&help, g),
            "{g:?} missing from the legend:\n{help}"
        );
    }
    let known: std::collections::HashSet<char> =
        Glyph::ALL.iter().flat_map(|g| g.text().chars()).collect();
    // Frames, the chart's dots and punctuation mean nothing by themselves.
    let frame = |c: char| {
        ('\u{2500}'..='\u{257F}').contains(&c)
            || ('\u{2800}'..='\u{28FF}').contains(&c)
            || "·—−±".contains(c)
    };
    let mut screens: Vec<(String, String)> = Vec::new();
    for (w, hgt) in [(120, 40), (80, 24)] {
        for (name, setup) in views() {
            if name == "help" {
                continue; // key names (↑ ↓ ← →), not glyphs
            }
            let mut h = open(w, hgt);
            setup(&mut h);
            screens.push((format!("{name} {w}x{hgt}"), h.screen()));
        }
    }
    let mut h = at_evaluation_gate();
    screens.push(("live".into(), h.screen()));
    h.key("a");
    screens.push(("gate".into(), h.screen()));
    h.keys(&["esc", "M"]);
    screens.push(("mode".into(), h.screen()));
    for (name, screen) in screens {
        for c in screen.chars().filter(|c| !c.is_ascii() && !frame(*c)) {
            assert!(
                known.contains(&c),
                "{c:?} on the {name} screen is not in the glyph table:\n{screen}"
            );
        }
    }
}

#[test]
fn tabs_switch_by_number_and_brackets() {
    let mut h = open(120, 40);
    for (k, tab) in [
        ("2", Tab::Diff),
        ("]", Tab::Compare),
        ("]", Tab::Llm),
        ("[", Tab::Compare),
        ("6", Tab::Analysis),
        ("]", Tab::Code),
    ] {
        h.key(k);
        assert_eq!(h.app.tab(), tab);
    }
}

#[test]
fn diff_uses_the_mark_and_walks_hunks() {
    let mut h = open(120, 40);
    h.key("2");
    assert!(h.screen().contains("#7 (parent) → #9"));
    assert!(h.screen().contains("hunk 1/2"));
    h.keys(&["tab", "tab"]); // detail pane
    h.key("n");
    assert!(h.screen().contains("hunk 2/2"), "{}", h.screen());
    h.key("n");
    assert!(h.screen().contains("last hunk"));
    h.key("N");
    assert!(h.screen().contains("hunk 1/2"));
    h.keys(&["tab", "tab"]); // back to the tree
    select(&mut h, 1);
    h.key("m");
    select(&mut h, 4);
    assert!(h.screen().contains("#1 (marked) → #4"));
    h.key("s");
    assert!(h.screen().contains("side by side"));
    // Seeds have no parent: the Diff tab says how to get one.
    h.keys(&["m", "m"]); // mark #4, then unmark it
    select(&mut h, 2);
    assert!(h.screen().contains("no parent"));
}

#[test]
fn compare_puts_metrics_over_both_kernels() {
    let mut h = open(120, 40);
    select(&mut h, 8);
    h.key("3");
    let s = h.screen();
    assert!(s.contains("#9 stage 3 memory_and_tuning"), "{s}");
    assert!(s.contains("#8 stage 2 block_tiling"));
    assert!(s.contains("1.520x") && s.contains("1.830x"));
}

#[test]
fn llm_tab_switches_between_the_candidates_calls() {
    let mut h = open(120, 40);
    select(&mut h, 4);
    h.key("4");
    assert!(h.screen().contains("call #4 repair"));
    assert!(h.screen().contains("(1/3"));
    h.key(".");
    assert!(h.screen().contains("call #5 analysis"));
    h.key(",");
    assert!(h.screen().contains("call #4 repair"));
}

#[test]
fn console_filters_and_scrolls() {
    let mut h = open(120, 40);
    h.key("backtab");
    assert_eq!(h.app.focus(), Focus::Console);
    h.key("/");
    h.type_text("stage 2");
    // Live filtering while typing, shown as the tree shows its own.
    assert!(
        h.screen().contains("Console 3/33 /stage 2"),
        "{}",
        h.screen()
    );
    h.key("enter");
    let s = h.screen();
    assert!(s.contains("rejected #8"));
    assert!(!s.contains("final best #9"));
    assert_eq!(h.app.console_lines().len(), 3);
    h.key("esc");
    assert_eq!(h.app.console_filter(), "");
    h.key("g");
    assert!(h.screen().contains("(scrolled)"));
    assert!(h.screen().contains("session sessions/"));
    h.key("G");
    assert!(h.screen().contains("report written"));
}

#[test]
fn slash_filters_the_focused_pane_and_esc_clears_its_own() {
    // The tree has the focus on open: `/` filters the candidates, not the console.
    let mut h = open(120, 40);
    assert_eq!(h.app.focus(), Focus::Tree);
    h.key("/");
    h.type_text("stage");
    assert_eq!(h.app.tree_filter(), "stage");
    assert_eq!(h.app.console_filter(), "");
    h.key("enter");
    let s = h.screen();
    assert!(s.contains("Candidates 3/9 /stage"), "{s}");
    assert!(s.contains("#8 stage 2"), "{s}");
    assert!(!s.contains("#2 seed 2"), "{s}");
    assert!(s.contains("#1 seed 1"), "an ancestor stays: {s}");
    // Matches by status too.
    h.key("/");
    h.keys(&["ctrl-u"]);
    h.type_text("failed");
    h.key("enter");
    assert!(h.screen().contains("Candidates 3/9 /failed"));
    // `esc` in the tree clears the tree's filter and says so.
    h.key("esc");
    assert_eq!(h.app.tree_filter(), "");
    assert!(
        h.screen()
            .contains("tree filter cleared: all 9 candidates shown")
    );
    assert!(h.screen().contains("#2 seed 2"));
    // The console's filter is cleared in the console only; elsewhere esc says it stays.
    h.key("backtab");
    h.key("/");
    h.type_text("stage 2");
    h.key("enter");
    h.key("tab");
    assert_eq!(h.app.focus(), Focus::Tree);
    h.key("esc");
    assert_eq!(h.app.console_filter(), "stage 2");
    assert!(
        h.screen()
            .contains("the console's filter 'stage 2' stays on (esc in the console clears it)"),
        "{}",
        h.screen()
    );
    h.key("backtab");
    h.key("esc");
    assert_eq!(h.app.console_filter(), "");
    assert!(h.screen().contains("console filter cleared"));
    h.key("esc");
    assert!(h.screen().contains("no filter is on"));
    // The timeline has nothing to filter: it says so and filters nothing else.
    h.keys(&["tab", "tab"]);
    assert_eq!(h.app.focus(), Focus::Chart);
    h.key("/");
    assert!(h.app.overlay().is_none());
    assert!(
        h.screen().contains("the timeline has no filter"),
        "{}",
        h.screen()
    );
    assert_eq!((h.app.tree_filter(), h.app.console_filter()), ("", ""));
}

#[test]
fn a_gate_dialog_wraps_what_it_shows_instead_of_cutting_it() {
    // Tall enough for the final-best gate's evidence above the kernel.
    let mut h = live_until(gate_opened(3), opts(80, 40));
    h.key("a");
    let s = h.screen();
    // The gate's kind (once cut off the end of the title) and a kernel line wider than
    // the dialog, its end on the row below.
    assert!(s.contains("before declaring the final best"), "{s}");
    let long = code_of(9).lines().nth(7).unwrap().to_string();
    assert!(long.chars().count() > 70, "{long}");
    let tail: String = long.chars().skip(long.chars().count() - 12).collect();
    assert!(s.contains(tail.trim()), "{tail} in {s}");
}

#[test]
fn help_comes_from_the_keymap_with_overrides() {
    let mut config = TuiConfig::default();
    config.keys.insert("quit".into(), KeyList::One("Q".into()));
    config.keys.insert("theme".into(), KeyList::Many(vec![]));
    let mut o = opts(120, 40);
    o.config = config;
    let mut h = Harness::open(&fixture(), o).unwrap();
    h.key("?");
    let s = h.screen();
    assert!(
        s.lines()
            .any(|l| l.contains("  Q  ") && l.contains("quit (asks first")),
        "{s}"
    );
    assert!(!s.contains("next theme"));
    h.key("esc");
    h.key("q");
    assert_eq!(h.exit, None);
    h.key("Q");
    assert_eq!(h.exit, Some(TuiExit::Quit));
}

#[test]
fn read_only_sessions_send_nothing() {
    let mut h = open(120, 40);
    for k in ["r", "o", "e", "v", "p", "F", "P", "a"] {
        h.key(k);
    }
    assert!(h.host.commands.is_empty());
    assert!(h.app.overlay().is_none());
    h.key("r");
    assert!(h.screen().contains("read-only"));
}

#[test]
fn ctrl_z_suspends_through_the_host() {
    let mut h = open(120, 40);
    let frames = h.frames;
    h.key("ctrl-z");
    assert_eq!(h.host.suspends, 1);
    assert!(h.frames > frames, "redrawn after coming back");
}

#[test]
fn copy_goes_through_the_host() {
    let mut h = open(120, 40);
    h.key("y");
    assert_eq!(h.host.copies, vec![code_of(9)]);
    assert!(h.screen().contains("copied #9"));
}

#[test]
fn gate_dialog_approves() {
    let mut h = live_until(gate_opened(2), opts(120, 40));
    assert!(
        !h.screen().contains("Waiting for you"),
        "never opens by itself"
    );
    assert!(h.screen().contains("1 waiting for you"), "{}", h.screen());
    h.key("a");
    assert!(
        h.screen()
            .contains("Waiting for you — gate 2 (1 of 1 waiting")
    );
    assert!(h.screen().contains("Run the three tuning stages on #6"));
    h.key("y");
    assert_eq!(
        h.host.commands,
        vec![Command::Resolve {
            gate: GateId(2),
            decision: Decision::Approve
        }]
    );
    assert!(!h.screen().contains("Waiting for you"));
}

/// Issue 23, item 4 and issue 39, item 1: `Y` approves the gate and every later gate of
/// its kind for the session (one command, recorded by the engine); the mode shows in the
/// status bar and the dialog says it is why the gate is asked; `M` opens the list of modes
/// (never a switch by itself), and a switch that approves waiting gates asks first, naming
/// how many; one that approves none is sent at once.
#[test]
fn the_mode_shows_and_a_switch_that_approves_waiting_gates_asks_first() {
    let mut h = at_evaluation_gate();
    assert!(h.screen().contains("│ step mode │"), "{}", h.screen());
    h.key("a");
    let s = h.screen();
    assert!(s.contains("approve all evaluations this session"), "{s}");
    assert!(
        s.contains("Asked because the run is in step mode (M changes the mode)."),
        "{s}"
    );
    // No mode button beside approve: the switch is not one key away from `y`/`Y`.
    assert!(!s.contains("[M]") && !s.contains("mode ->"), "{s}");
    insta::assert_snapshot!("gate_approve_always_120x40", snapshot(&h));
    // The main view offers the mode while gates wait (once the message line clears).
    h.keys(&["esc", "j"]);
    assert!(h.screen().contains("M mode"), "{}", h.screen());

    // `M`: the list, on the mode now; nothing is sent.
    h.key("M");
    let s = h.screen();
    assert!(s.contains("Mode — now step"), "{s}");
    assert!(
        s.contains("> step (now)  asks at every gate (LLM calls, evaluations,"),
        "the selection starts on the mode now: {s}"
    );
    assert!(
        s.contains("  review      asks before algorithm optimization steps,"),
        "{s}"
    );
    assert!(
        s.contains("Approves the 1 gate waiting now (asks you first)."),
        "{s}"
    );
    insta::assert_snapshot!("mode_dialog_120x40", snapshot(&h));
    h.key("enter");
    assert!(h.host.commands.is_empty(), "the mode now: nothing to send");
    assert!(h.screen().contains("already in step mode"));
    // Auto approves the evaluation gate waiting: asked first, naming it; `n` goes back
    // without a switch.
    h.keys(&["M", "j", "j", "enter"]);
    let s = h.screen();
    assert!(
        s.contains("Switch from step to auto mode? It approves the 1 gate waiting")
            && s.contains("now (gate 4). Auto mode asks nothing."),
        "{s}"
    );
    insta::assert_snapshot!("confirm_switch_mode_120x40", snapshot(&h));
    h.key("n");
    assert!(h.host.commands.is_empty(), "no switch without a yes");
    h.keys(&["M", "j", "j", "enter", "y"]);
    assert_eq!(
        h.host.commands,
        [Command::SetMode {
            mode: kforge::protocol::Mode::Auto
        }]
    );

    // `Y` in the dialog: one command, and the message says how to take it back.
    let mut h = at_evaluation_gate();
    h.keys(&["a", "Y"]);
    assert_eq!(
        h.host.commands,
        vec![Command::ApproveAlways {
            kind: GateKind::Evaluation
        }]
    );
    assert!(!h.screen().contains("Waiting for you"), "the dialog closes");
    assert!(
        h.screen()
            .contains("all evaluations approved for this session (u takes it back)"),
        "{}",
        h.screen()
    );
    // Back in auto mode (another window switched): step approves nothing, so it is sent
    // at once.
    h.event(Event::ModeChanged {
        mode: kforge::protocol::Mode::Auto,
    });
    h.keys(&["M", "g", "enter"]);
    assert_eq!(
        h.host.commands.last(),
        Some(&Command::SetMode {
            mode: kforge::protocol::Mode::Step
        })
    );
}

/// Issue 39, item 2: approvals given with `Y` show in the status bar with the key that
/// takes them back; `u` lists them (all, or one kind) and taking one back approves
/// nothing: no gate is answered, no confirmation is needed.
#[test]
fn standing_approvals_show_and_u_takes_them_back() {
    let mut h = at_evaluation_gate();
    h.key("u");
    assert!(
        h.screen().contains("no approval to take back"),
        "{}",
        h.screen()
    );
    h.event(Event::StandingApproval {
        kind: GateKind::LlmCall,
    });
    h.event(Event::StandingApproval {
        kind: GateKind::Stages,
    });
    h.key("j");
    let s = h.screen();
    assert!(
        s.contains("approved always: LLM calls and tuning stage runs (u takes back)"),
        "{s}"
    );
    assert!(s.contains("u take back approvals"), "{s}");
    h.key("u");
    let s = h.screen();
    assert!(s.contains("Take back an approval"), "{s}");
    assert!(s.contains("> all "), "{s}");
    assert!(
        s.contains("LLM calls          asked again from now on"),
        "{s}"
    );
    insta::assert_snapshot!("revoke_dialog_120x40", snapshot(&h));
    // One kind.
    h.keys(&["j", "enter"]);
    assert_eq!(
        h.host.commands,
        [Command::RevokeApprovals {
            kind: Some(GateKind::LlmCall)
        }]
    );
    // All of them, from the gate dialog too.
    h.keys(&["a", "u", "enter"]);
    assert_eq!(
        h.host.commands.last(),
        Some(&Command::RevokeApprovals { kind: None })
    );
    assert!(
        !h.host
            .commands
            .iter()
            .any(|c| matches!(c, Command::Resolve { .. })),
        "taking back answers no gate"
    );
    // Once the engine records it, the status bar says so.
    h.event(Event::StandingApprovalRevoked { kind: None });
    assert!(!h.screen().contains("approved always"), "{}", h.screen());
}

#[test]
fn gate_dialog_rejects_after_asking_and_can_wait() {
    let mut h = live_until(gate_opened(1), opts(120, 40));
    h.key("a");
    h.key("esc");
    assert!(!h.screen().contains("Waiting for you"));
    assert!(h.screen().contains("keeps waiting"), "{}", h.screen());
    // Browsing while it waits.
    h.key("g");
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    h.key("a");
    assert!(h.screen().contains("Waiting for you — gate 1"));
    h.key("n");
    assert!(h.host.commands.is_empty(), "a rejection asks first");
    assert!(h.screen().contains("Reject?"), "{}", h.screen());
    h.key("n");
    assert!(h.host.commands.is_empty(), "n goes back to the gate");
    assert!(h.screen().contains("Waiting for you — gate 1"));
    h.keys(&["n", "y"]);
    assert_eq!(
        h.host.commands,
        vec![Command::Resolve {
            gate: GateId(1),
            decision: Decision::Reject
        }]
    );
}

/// A call of deepseek-chat starting (`candidate`: the one it works on).
fn call_started(
    call: u32,
    key: &str,
    kind: CallKind,
    candidate: Option<u32>,
    prompt_file: &str,
) -> Event {
    Event::LlmCallStarted {
        key: key.to_string(),
        call: CallId(call),
        kind,
        candidate: candidate.map(CandidateId),
        provider: "deepseek".into(),
        model: "deepseek-chat".into(),
        prompt_file: prompt_file.into(),
    }
}

/// A call answering (the answer in `response_file` when given).
fn call_finished(call: u32, response_file: Option<String>) -> Event {
    Event::LlmCallFinished {
        call: CallId(call),
        ok: true,
        error: None,
        usage: Default::default(),
        cost_usd: None,
        latency_s: 1.0,
        response_file,
    }
}

/// The recorded run waiting at an evaluation gate for #9 (its final-best gate answered).
fn at_evaluation_gate() -> Harness {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    // Evaluation gates are step mode's.
    h.event(Event::ModeChanged {
        mode: kforge::protocol::Mode::Step,
    });
    h.event(Event::GateResolved {
        gate: GateId(3),
        decision: Decision::Approve,
    });
    h.event(Event::GateOpened {
        key: "eval9".into(),
        gate: GateId(4),
        kind: GateKind::Evaluation,
        candidate: Some(CandidateId(9)),
        call: None,
        question: "Evaluate candidate 9 (stage 3 memory_and_tuning)?".into(),
        file: Some("kernels/9-stage.py".into()),
    });
    h
}

#[test]
fn gate_rewrite_in_the_editor_and_inline() {
    let mut h = at_evaluation_gate();
    h.host.edit_answers.push_back(Some("# rewritten\n".into()));
    h.keys(&["a", "e"]);
    assert_eq!(
        h.host.edits,
        vec![code_of(9)],
        "the editor gets the gate's file"
    );
    assert_eq!(
        h.host.commands,
        vec![Command::Resolve {
            gate: GateId(4),
            decision: Decision::Rewrite {
                text: "# rewritten\n".into()
            }
        }]
    );

    let mut h = at_evaluation_gate();
    h.keys(&["a", "i"]);
    assert!(h.screen().contains("rewrite"));
    h.type_text("# note");
    h.key("ctrl-s");
    // The inline editor opens at the start of the kernel.
    let expected = format!("# note{}", code_of(9));
    assert_eq!(
        h.host.commands,
        vec![Command::Resolve {
            gate: GateId(4),
            decision: Decision::Rewrite { text: expected }
        }]
    );

    // An unchanged edit sends nothing.
    let mut h = at_evaluation_gate();
    h.keys(&["a", "e"]);
    assert!(h.host.commands.is_empty());
    assert!(h.screen().contains("unchanged"));
}

#[test]
fn candidate_actions_send_commands() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    select(&mut h, 1);
    h.key("r");
    h.type_text("use a constexpr BLOCK");
    h.key("enter");
    h.key("o");
    h.type_text("two rows per program");
    h.key("enter");
    h.keys(&["v", "p", "F", "y"]);
    h.host
        .edit_answers
        .push_back(Some("print('manual')\n".into()));
    h.key("e");
    h.key("E");
    h.key("esc"); // cancels the inline editor
    assert_eq!(
        h.host.commands,
        vec![
            Command::Repair {
                candidate: CandidateId(1),
                instruction: "use a constexpr BLOCK".into()
            },
            Command::Optimize {
                candidate: CandidateId(1),
                instruction: "two rows per program".into()
            },
            Command::Reevaluate {
                candidate: CandidateId(1)
            },
            Command::Profile {
                candidate: CandidateId(1)
            },
            Command::MarkFinal {
                candidate: CandidateId(1)
            },
            Command::Manual {
                parent: Some(CandidateId(1)),
                code: "print('manual')\n".into()
            },
        ]
    );
}

#[test]
fn pause_resume_and_cancel() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.key("P");
    h.event(Event::StateChanged {
        state: EngineState::Paused,
    });
    assert!(h.screen().contains("paused"));
    h.key("P");
    h.key("x"); // nothing in flight
    assert!(h.screen().contains("no LLM call in flight"));
    h.event(call_started(
        11,
        "",
        CallKind::Repair,
        Some(9),
        "llm/10.prompt.md",
    ));
    h.key("x");
    assert_eq!(
        h.host.commands,
        vec![
            Command::Pause,
            Command::Resume,
            Command::CancelCall {
                call: Some(CallId(11))
            }
        ]
    );
}

#[test]
fn x_never_cancels_every_call_at_once() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    for call in [21, 22] {
        h.event(Event::LlmCallStarted {
            key: format!("seed{call}"),
            call: CallId(call),
            kind: CallKind::Seed,
            candidate: None,
            provider: "deepseek".into(),
            model: "deepseek-chat".into(),
            prompt_file: format!("llm/{call}.prompt.md"),
        });
    }
    h.key("x");
    assert!(
        h.host.commands.is_empty(),
        "nothing cancelled: {:?}",
        h.host.commands
    );
    assert!(h.screen().contains("2 calls in flight"), "{}", h.screen());
    // Cancelling them all is its own key, and asks first: `n` keeps them.
    h.key("X");
    assert!(
        h.screen().contains("Cancel all 2 LLM calls"),
        "{}",
        h.screen()
    );
    h.key("n");
    assert!(h.host.commands.is_empty());
    h.keys(&["X", "y"]);
    assert_eq!(h.host.commands, [Command::CancelCall { call: None }]);
}

#[test]
fn a_failed_call_shows_its_retries_and_is_asked_again_with_r() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.key("R");
    assert!(h.screen().contains("no failed LLM call to ask again"));
    h.event(call_started(
        12,
        "seed3",
        CallKind::Seed,
        None,
        "llm/12.prompt.md",
    ));
    h.event(Event::LlmRetry {
        call: CallId(12),
        attempt: 2,
        delay_s: 1.0,
        reason: "HTTP 503: overloaded".into(),
    });
    h.event(Event::LlmCallFinished {
        call: CallId(12),
        ok: false,
        error: Some("HTTP 503: overloaded".into()),
        usage: Default::default(),
        cost_usd: None,
        latency_s: 3.0,
        response_file: None,
    });
    h.key("R");
    assert_eq!(h.host.commands, vec![Command::Reask { call: CallId(12) }]);
    assert!(
        h.screen().contains("asking call 12 again"),
        "{}",
        h.screen()
    );
    assert_eq!(h.app.state().calls[&CallId(12)].retries.len(), 1);
}

#[test]
fn a_candidate_marked_final_says_so_in_the_tree() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(Event::FinalMarked {
        candidate: CandidateId(2),
    });
    assert_eq!(h.app.state().best, Some(CandidateId(2)));
    let screen = h.screen();
    assert!(
        screen
            .lines()
            .any(|l| l.contains("★ #2 ") && l.contains(" final")),
        "{screen}"
    );
}

/// Call 11 of the `manual` provider starts: the person is the model.
fn manual_call_started() -> Event {
    Event::LlmCallStarted {
        key: String::new(),
        call: CallId(11),
        kind: CallKind::Repair,
        candidate: Some(CandidateId(9)),
        provider: "manual".into(),
        model: "you".into(),
        prompt_file: "llm/10.prompt.md".into(),
    }
}

#[test]
fn the_person_answers_calls_of_the_manual_provider() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.key("A");
    assert!(h.screen().contains("no call of the manual provider"));
    h.event(manual_call_started());
    h.key("1"); // clears the message line
    assert!(h.screen().contains("A answer the call"), "{}", h.screen());
    h.host.edit_answers.push_back(Some(format!(
        "the prompt, edited\n{}\n```python\nprint(1)\n```\n",
        kforge::tui::app::ANSWER_MARKER
    )));
    h.key("A");
    assert!(h.host.edits[0].starts_with("# stage prompt"));
    assert_eq!(
        h.host.commands,
        vec![Command::ManualAnswer {
            call: CallId(11),
            text: "```python\nprint(1)\n```\n".into()
        }]
    );
    // Leaving only the marker sends nothing.
    h.key("A");
    assert_eq!(h.host.commands.len(), 1);
    assert!(h.screen().contains("empty answer"));
}

#[test]
fn a_manual_call_is_answered_before_its_prompt_is_cached_and_the_person_is_told_it_waits() {
    // Files read off the UI thread have not arrived: `A` reads the prompt itself.
    let mut h = live_until(
        gate_opened(3),
        HarnessOptions {
            docs_never_arrive: true,
            ..opts(120, 40)
        },
    );
    h.event(manual_call_started());
    let s = h.screen();
    assert!(
        s.contains("waiting for your answer (A writes it, or write llm/11.answer.md)"),
        "{s}"
    );
    assert!(!s.contains("waiting for the first token"), "{s}");
    h.host.edit_answers.push_back(Some(format!(
        "{}\nmy answer\n",
        kforge::tui::app::ANSWER_MARKER
    )));
    h.key("A");
    assert!(!h.screen().contains("still loading"), "{}", h.screen());
    assert!(h.host.edits[0].starts_with("# stage prompt"));
    assert_eq!(
        h.host.commands,
        vec![Command::ManualAnswer {
            call: CallId(11),
            text: "my answer\n".into()
        }]
    );
}

#[test]
fn quitting_a_live_run_asks_first() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.keys(&["esc", "q"]);
    assert!(h.screen().contains("Quit while the run is active?"));
    h.key("n");
    assert_eq!(h.exit, None);
    h.keys(&["q", "y"]);
    assert_eq!(h.exit, Some(TuiExit::QuitWhileActive));
    assert!(TuiExit::QuitWhileActive.stop_engine());

    let mut o = opts(120, 40);
    o.attached = true;
    let mut h = live_until(gate_opened(3), o);
    h.keys(&["esc", "q"]);
    assert!(h.screen().contains("Detach?"));
    h.key("s");
    assert_eq!(h.host.commands, vec![Command::Stop]);
    assert_eq!(h.exit, Some(TuiExit::StoppedAndLeft), "not 'detached'");
}

#[test]
fn quitting_while_a_requested_repair_runs_asks_first() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(Event::StateChanged {
        state: EngineState::Finished,
    });
    h.event(call_started(
        30,
        "user1-1",
        CallKind::Instructed,
        Some(9),
        "llm/30.prompt.md",
    ));
    h.key("q");
    assert_eq!(h.exit, None);
    assert!(
        h.screen().contains("Quit while your actions run?"),
        "{}",
        h.screen()
    );
    h.key("n");
    h.event(call_finished(30, None));
    h.key("q");
    assert_eq!(h.exit, Some(TuiExit::Quit), "nothing left to cancel");
}

#[test]
fn an_attached_window_of_an_ended_run_becomes_read_only() {
    let mut o = opts(120, 40);
    o.attached = true;
    let mut h = live_until(gate_opened(3), o);
    h.key("esc");
    h.event(Event::StateChanged {
        state: EngineState::Stopped,
    });
    assert!(
        h.screen().contains("read-only: the run ended"),
        "{}",
        h.screen()
    );
    // Actions are refused with a reason; nothing reaches control.jsonl.
    select(&mut h, 1);
    h.keys(&["v", "a", "R", "x"]);
    assert!(h.host.commands.is_empty(), "{:?}", h.host.commands);
    h.key("v");
    assert!(
        h.screen().contains("this window is read-only now"),
        "{}",
        h.screen()
    );
    // Quitting needs no confirmation and is not called a detach.
    h.key("q");
    assert_eq!(h.exit, Some(TuiExit::Quit));
}

#[test]
fn follows_new_candidates_until_the_user_moves() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    let created = |id| Event::CandidateCreated {
        key: String::new(),
        id,
        parent: Some(CandidateId(9)),
        kind: CandidateKind::Manual,
        file: format!("kernels/{id}-manual.py"),
        call: None,
    };
    h.event(created(CandidateId(10)));
    assert_eq!(h.app.selected(), Some(CandidateId(10)));
    h.key("k");
    let here = h.app.selected();
    h.event(created(CandidateId(11)));
    assert_eq!(h.app.selected(), here);
    assert!(h.screen().contains("#11 manual"), "{}", h.screen());
    h.key("f");
    assert_eq!(h.app.selected(), Some(CandidateId(11)));
}

#[test]
fn streaming_text_shows_live_and_redraws_only_when_visible() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(call_started(
        11,
        "",
        CallKind::Repair,
        Some(9),
        "llm/10.prompt.md",
    ));
    // The Code tab is showing: deltas do not redraw.
    let frames = h.frames;
    let delta = |t: &str| Event::LlmDelta {
        call: CallId(11),
        text: t.into(),
        reasoning: String::new(),
    };
    h.event(delta("Here is "));
    assert_eq!(h.frames, frames);
    h.key("4");
    h.key(".");
    h.event(delta("the kernel."));
    let s = h.screen();
    assert!(s.contains("streaming…"), "{s}");
    assert!(s.contains("Here is the kernel."));
    assert!(h.frames > frames);
    // The activity line catches up on the next tick; after that, nothing changed: nothing
    // drawn.
    h.input(Input::Tick);
    let frames = h.frames;
    h.input(Input::Tick);
    assert_eq!(h.frames, frames);
}

#[test]
fn mouse_clicks_select_rows_and_tabs() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let mut h = open(120, 40);
    let click = |column, row| {
        Input::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    h.input(click(5, 1)); // first tree row
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    let (_, r) = h.app.areas().tabs[4];
    h.input(click(r.x + 1, r.y));
    assert_eq!(h.app.tab(), Tab::Eval);
}

#[test]
fn key_release_events_are_ignored() {
    let mut h = open(120, 40);
    let mut k = key_event("g");
    k.kind = crossterm::event::KeyEventKind::Release;
    h.input(Input::Key(k));
    assert_eq!(h.app.selected(), Some(CandidateId(9)));
}

#[test]
fn the_async_loop_runs_to_quit() {
    use kforge::tui::runtime::run_loop;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut h = open(80, 24);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for k in ["g", "j", "2", "q"] {
        tx.send(Input::Key(key_event(k))).unwrap();
    }
    let exit = rt.block_on(run_loop(&mut h.terminal, &mut h.app, &mut rx, &mut h.host));
    assert_eq!(exit.unwrap(), TuiExit::Quit);
    assert_eq!(h.app.selected(), Some(CandidateId(3)));
    assert_eq!(h.app.tab(), Tab::Diff);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn attach_follows_appended_events_and_growing_answers() {
    use kforge::tui::attach;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture(), &dir);
    // Start from the first 20 events, with half a line torn at the end.
    let all = records();
    let mut text: String = all[..20]
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    let next = serde_json::to_string(&all[20]).unwrap();
    text.push_str(&next[..10]);
    std::fs::write(dir.join("events.jsonl"), &text).unwrap();
    let session = SessionDir::open(&dir).unwrap();
    let (initial, offset) = attach::read_initial(&session).unwrap();
    assert_eq!(initial.len(), 20);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = attach::follow(
            session.clone(),
            offset,
            &initial,
            tx,
            Duration::from_millis(10),
        );
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("events.jsonl"))
            .unwrap();
        f.write_all(format!("{}\n", &next[10..]).as_bytes())
            .unwrap();
        let r = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r, all[20]);
        // A call in flight: its response file grows.
        let started = EventRecord {
            seq: 999,
            ts: all[20].ts,
            event: Event::LlmCallStarted {
                key: String::new(),
                call: CallId(77),
                kind: CallKind::Repair,
                candidate: Some(CandidateId(1)),
                provider: "p".into(),
                model: "m".into(),
                prompt_file: "llm/77.prompt.md".into(),
            },
        };
        f.write_all(format!("{}\n", serde_json::to_string(&started).unwrap()).as_bytes())
            .unwrap();
        let r = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.seq, 999);
        std::fs::write(dir.join("llm/77.response.md"), "partial answ").unwrap();
        let r = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        match r.event {
            Event::LlmDelta { call, text, .. } => {
                assert_eq!((call, text.as_str()), (CallId(77), "partial answ"));
            }
            other => panic!("{other:?}"),
        }
        task.abort();
    });
    // Commands from an attached TUI land in control.jsonl.
    rt.block_on(async {
        let (tx, task) = attach::command_writer(session.clone());
        tx.send(Command::Pause).unwrap();
        drop(tx);
        task.await.unwrap();
    });
    let control = std::fs::read_to_string(dir.join("control.jsonl")).unwrap();
    assert_eq!(control, "{\"command\":\"pause\"}\n");
}

#[test]
fn big_sessions_open_and_scroll() {
    let tmp = tempfile::tempdir().unwrap();
    write_big_session(tmp.path(), 60, 2000).unwrap();
    let mut h = Harness::open(tmp.path(), opts(200, 60)).unwrap();
    assert_eq!(h.app.state().candidates.len(), 60);
    assert_eq!(h.app.state().log.len(), 2000);
    h.keys(&["g", "pagedown", "2", "3", "4", "5"]);
    h.keys(&["backtab", "/"]);
    h.type_text("step 7 ");
    h.key("enter");
    assert!(h.app.console_lines().len() < 2000);
    assert!(h.screen().contains("step 7 of the pipeline"));
}

#[test]
fn gate_kinds_are_described() {
    // Every gate kind shows in the dialog with its question.
    for kind in [
        GateKind::LlmCall,
        GateKind::Evaluation,
        GateKind::AlgorithmOptimization,
        GateKind::Stages,
        GateKind::FinalBest,
    ] {
        let mut h = live_until(gate_opened(3), opts(120, 40));
        h.event(Event::GateResolved {
            gate: GateId(3),
            decision: Decision::Approve,
        });
        h.event(Event::GateOpened {
            key: String::new(),
            gate: GateId(9),
            kind,
            candidate: Some(CandidateId(9)),
            call: None,
            question: "go on?".into(),
            file: Some("llm/10.prompt.md".into()),
        });
        h.key("a");
        let s = h.screen();
        assert!(s.contains("gate 9") && s.contains("go on?"), "{s}");
    }
}

#[test]
fn a_waiting_gate_takes_no_key_until_the_person_opens_it() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    // The keys a gate dialog answers with, pressed while browsing: none answers it.
    h.keys(&["n", "y", "e", "i", "r", "esc", "N", "2"]);
    assert!(
        !h.host
            .commands
            .iter()
            .any(|c| matches!(c, Command::Resolve { .. })),
        "{:?}",
        h.host.commands
    );
    assert!(h.screen().contains("1 waiting for you"));
}

#[test]
fn waiting_gates_queue_oldest_first_and_preview_what_they_send() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(Event::GateOpened {
        key: "call/seed2".into(),
        gate: GateId(4),
        kind: GateKind::LlmCall,
        candidate: None,
        call: Some(CallId(10)),
        question: "Send the seed prompt (seed 2)?".into(),
        file: Some("llm/10.prompt.md".into()),
    });
    assert!(h.screen().contains("2 waiting for you"), "{}", h.screen());
    h.key("a");
    let s = h.screen();
    assert!(s.contains("gate 3 (1 of 2 waiting, oldest first)"), "{s}");
    // Gate 3 declares #9 final: its code is shown, with line numbers, and there is nothing
    // to rewrite.
    assert!(
        s.contains("kernels/9-stage.py (the candidate's code)"),
        "{s}"
    );
    assert!(!s.contains("rewrite in $EDITOR"), "{s}");
    let first_code_line = code_of(9).lines().next().unwrap().to_string();
    assert!(s.contains(&format!("1 {first_code_line}")), "{s}");
    h.key("y");
    // The next one waits until asked for.
    assert!(!h.screen().contains("Waiting for you"));
    h.event(Event::GateResolved {
        gate: GateId(3),
        decision: Decision::Approve,
    });
    h.key("a");
    let s = h.screen();
    assert!(s.contains("gate 4 (1 of 1 waiting"), "{s}");
    assert!(s.contains("llm/10.prompt.md (what is sent)"), "{s}");
    assert!(
        s.contains("rewrite in $EDITOR"),
        "a prompt can be rewritten"
    );
    h.key("y");
    h.event(Event::GateResolved {
        gate: GateId(4),
        decision: Decision::Approve,
    });
    // A stages gate has nothing to rewrite: no such button, and `e` says so.
    h.event(Event::GateOpened {
        key: "stages".into(),
        gate: GateId(5),
        kind: GateKind::Stages,
        candidate: Some(CandidateId(9)),
        call: None,
        question: "Run the 3 tuning stages on candidate 9?".into(),
        file: None,
    });
    h.keys(&["a", "e"]);
    let s = h.screen();
    assert!(!s.contains("rewrite in $EDITOR"), "{s}");
    assert!(s.contains("nothing to rewrite"), "{s}");
    assert_eq!(h.host.edits.len(), 0);
}

#[test]
fn shown_files_reload_when_they_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture(), &dir);
    let mut h = Harness::open(&dir, opts(120, 40)).unwrap();
    h.key("4");
    assert!(h.screen().contains("# stage prompt"));
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(dir.join("llm/10.prompt.md"), "# edited prompt template\n").unwrap();
    h.input(Input::Tick);
    assert!(
        h.screen().contains("# edited prompt template"),
        "{}",
        h.screen()
    );
}

#[test]
fn open_refuses_what_it_cannot_show() {
    let bin = env!("CARGO_BIN_EXE_kforge");
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(bin)
            .args(args)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join(".config"))
            .output()
            .unwrap()
    };
    let out = run(&["open", home.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a kforge session"));
    let missing = home.path().join("sessions/nope");
    let out = run(&["open", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sessions/nope does not exist"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["open", fixture().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
}

#[test]
fn a_cpu_session_shows_correctness_not_a_speedup_chart() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sessions/v1_review_budget");
    let h = Harness::open(&golden, opts(120, 40)).unwrap();
    let s = h.screen();
    assert!(
        s.contains("Correctness per candidate (CPU interpreter: speed not measured)"),
        "{s}"
    );
    assert!(s.contains("6 candidates: 4 correct, 1 failed"), "{s}");
    // No axes, no 1.0x line, no points at 0.0x.
    assert!(!s.contains("1.0x") && !s.contains("0.0x"), "{s}");
}

#[test]
fn the_llm_tab_follows_new_calls_shows_seed_calls_and_keeps_a_finished_stream_in_view() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.key("4");
    // A seed's call has no candidate yet: it is in the list anyway, and with follow on
    // the tab moves to it.
    h.event(call_started(
        40,
        "seed3",
        CallKind::Seed,
        None,
        "llm/2.prompt.md",
    ));
    let s = h.screen();
    assert!(
        s.contains("call #40 seed") && s.contains("streaming…"),
        "{s}"
    );
    // A long answer streams; its end stays in view, also once the call finishes.
    let answer = std::fs::read_to_string(fixture().join("llm/2.response.md")).unwrap();
    // Its launch line: nothing else on the screen says that.
    let last = answer
        .lines()
        .rev()
        .find(|l| l.contains("softmax_kernel[("))
        .unwrap()
        .trim()
        .to_string();
    h.event(Event::LlmDelta {
        call: CallId(40),
        text: answer.clone(),
        reasoning: String::new(),
    });
    assert!(h.screen().contains(&last), "{}", h.screen());
    h.event(call_finished(40, Some("llm/2.response.md".into())));
    let s = h.screen();
    assert!(s.contains("✓ done") && s.contains(&last), "{s}");
}

#[test]
fn the_activity_line_says_what_runs_now() {
    let mut h = live_until(gate_opened(3), opts(150, 40));
    h.event(call_started(
        11,
        "seed2/repair1",
        CallKind::Repair,
        Some(2),
        "llm/10.prompt.md",
    ));
    let s = h.screen();
    assert!(
        s.contains("call 11 repair 1 of seed 2 0s") && s.contains("waiting for the first token"),
        "{s}"
    );
    assert!(
        s.contains("1 gate waiting for you (a opens the oldest)"),
        "{s}"
    );
    h.event(Event::LlmDelta {
        call: CallId(11),
        text: "x".repeat(400),
        reasoning: String::new(),
    });
    // Streaming progress is refreshed on the next tick, not redrawn per delta.
    h.input(Input::Tick);
    assert!(
        h.screen().contains("streaming ~100 tokens"),
        "{}",
        h.screen()
    );
    h.event(Event::EvalStarted {
        candidate: CandidateId(8),
    });
    h.event(Event::EvalPhase {
        candidate: CandidateId(8),
        phase: "timing kernel: 100 runs".into(),
    });
    assert!(
        h.screen()
            .contains("evaluating #8: timing kernel: 100 runs"),
        "{}",
        h.screen()
    );
}

#[test]
fn jumps_to_the_best_and_to_the_next_failure() {
    let mut h = open(120, 40);
    h.key("g");
    assert_eq!(h.app.selected(), Some(CandidateId(1)));
    h.key("b");
    assert_eq!(h.app.selected(), h.app.state().best);
    let failed: Vec<CandidateId> = h
        .app
        .state()
        .candidates
        .values()
        .filter(|c| c.status == kforge::session::state::CandidateStatus::Failed)
        .map(|c| c.id)
        .collect();
    assert!(failed.len() >= 2);
    h.key("g");
    h.key("!");
    assert_eq!(
        h.app.selected(),
        Some(failed[1]),
        "the next failure after #1"
    );
    for _ in 0..failed.len() - 1 {
        h.key("!");
    }
    assert_eq!(h.app.selected(), Some(failed[0]), "wraps around");
}

#[test]
fn the_inline_editor_opens_at_the_top_with_line_numbers_and_pages() {
    let mut h = at_evaluation_gate();
    h.keys(&["a", "i"]);
    let s = h.screen();
    let first = code_of(9).lines().next().unwrap().to_string();
    assert!(s.contains(&format!(" 1 {first}")), "{s}");
    let lines = code_of(9).lines().count();
    let last = format!("{lines} ");
    h.keys(&["pagedown", "pagedown", "pagedown"]);
    let s = h.screen();
    assert!(
        s.lines().any(|l| l.contains(&last)),
        "paged down to the last line {lines}:\n{s}"
    );
    assert!(!s.contains(&format!(" 1 {first}")), "{s}");
}

#[test]
fn panes_grow_with_a_large_terminal() {
    let small = open(120, 40);
    let big = open(300, 80);
    let (s, b) = (&small.app.areas(), &big.app.areas());
    assert!(
        b.console.height > s.console.height,
        "{:?} vs {:?}",
        b.console,
        s.console
    );
    assert!(b.tree.width > s.tree.width, "{:?} vs {:?}", b.tree, s.tree);
    assert!(b.console.height <= 24 && b.tree.width <= 75);
}

#[test]
fn an_evaluation_gate_shows_the_kernel_or_its_diff_against_the_parent() {
    let mut h = at_evaluation_gate();
    h.key("a");
    let s = h.screen();
    assert!(s.contains("d shows the diff against its parent"), "{s}");
    h.key("d");
    let s = h.screen();
    assert!(
        s.contains("kernels/9-stage.py against its parent #7"),
        "{s}"
    );
    assert!(
        s.lines().any(|l| l.contains("│+") || l.contains("│-")),
        "{s}"
    );
    h.key("d");
    assert!(h.screen().contains("(what is evaluated"), "{}", h.screen());
    assert!(h.host.commands.is_empty(), "d only changes the view");
}

#[test]
fn slash_in_the_detail_pane_searches_what_it_shows() {
    let mut h = open(120, 40);
    select(&mut h, 9);
    h.keys(&["tab", "tab"]); // tree -> chart -> detail
    assert_eq!(h.app.focus(), kforge::tui::app::Focus::Detail);
    h.key("/");
    assert!(h.screen().contains("search the Code tab"), "{}", h.screen());
    h.type_text("class ModelNew");
    h.key("enter");
    let line = code_of(9)
        .lines()
        .position(|l| l.contains("class ModelNew"))
        .unwrap();
    let s = h.screen();
    assert!(s.contains("\"class ModelNew\": match 1 of 1"), "{s}");
    assert!(
        h.app.detail_scroll() > 0 && h.app.detail_scroll() <= line,
        "{}",
        h.app.detail_scroll()
    );
    // n/N go through the matches while the search is on; esc clears it.
    h.key("n");
    assert!(h.screen().contains("match 1 of 1"));
    h.key("esc");
    assert!(h.app.search().is_none());
    // Somewhere else `/` still filters the console.
    h.key("tab");
    h.key("/");
    assert!(h.screen().contains("filter the console"), "{}", h.screen());
}

#[test]
fn candidates_being_written_show_as_placeholders_in_the_tree() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(call_started(
        50,
        "stage/block_tiling/repair1",
        CallKind::Repair,
        Some(8),
        "llm/10.prompt.md",
    ));
    // An analysis in flight writes no kernel: no placeholder for it.
    h.event(call_started(
        51,
        "analysis/8",
        CallKind::Analysis,
        Some(8),
        "llm/11.prompt.md",
    ));
    assert!(
        h.screen().contains("◌ repair of #8: being written"),
        "{}",
        h.screen()
    );
    assert!(!h.screen().contains("analysis of #8"), "{}", h.screen());
    h.event(call_finished(50, None));
    assert!(!h.screen().contains("being written"));
}

#[test]
fn a_gate_answered_in_another_window_closes_here_and_says_so() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("a");
    assert!(
        h.screen().contains("Waiting for you — gate 3"),
        "{}",
        h.screen()
    );
    // Another window approves it: this one's dialog closes and says who won.
    h.event(Event::GateResolved {
        gate: GateId(3),
        decision: Decision::Reject,
    });
    let s = h.screen();
    assert!(!s.contains("Waiting for you — gate 3"), "{s}");
    assert!(
        s.contains("gate 3 was answered in another window (reject)"),
        "{s}"
    );
    // This window's own answer is not announced as someone else's.
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.keys(&["a", "y"]);
    h.event(Event::GateResolved {
        gate: GateId(3),
        decision: Decision::Approve,
    });
    assert!(!h.screen().contains("another window"), "{}", h.screen());
}

#[test]
fn an_attached_window_of_an_ended_run_refuses_actions_before_asking_for_input() {
    let mut o = opts(120, 40);
    o.attached = true;
    let mut h = Harness::open(
        &fixture(),
        HarnessOptions {
            read_only: false,
            ..o
        },
    )
    .unwrap();
    for key in ["r", "o", "E", "v", "F", "A"] {
        h.key(key);
        assert!(h.app.overlay().is_none(), "{key} opened a dialog");
        assert!(
            h.screen().contains("this window is read-only now"),
            "{key}: {}",
            h.screen()
        );
    }
    assert!(h.host.commands.is_empty());
}

#[test]
fn the_sample_session_in_the_repository_opens() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sessions/softmax_h100_scripted");
    let h = Harness::open(&dir, opts(120, 40)).unwrap();
    let s = h.screen();
    assert!(s.contains("softmax"), "{s}");
    assert!(s.contains("best #4 1.54x"), "{s}");
    assert_eq!(h.app.state().state, EngineState::Finished);
    assert_eq!(h.app.state().candidates.len(), 8);
    // Every file an event names is there.
    for c in h.app.state().candidates.values() {
        assert!(dir.join(&c.file).is_file(), "{}", c.file);
        assert!(dir.join(c.eval_file.as_ref().unwrap()).is_file());
    }
}

#[test]
fn a_search_in_a_streaming_llm_tab_is_not_pulled_back_to_the_end() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("esc");
    h.event(call_started(
        50,
        "stage/block_tiling/repair1",
        CallKind::Repair,
        Some(9),
        "llm/10.prompt.md",
    ));
    select(&mut h, 9);
    h.key("4");
    // The calls of #9: the one that wrote it, then the repair streaming now.
    h.key(".");
    assert!(h.screen().contains("call #50"), "{}", h.screen());
    h.keys(&["tab", "tab"]); // tree -> chart -> detail
    h.key("/");
    h.type_text("You are an expert");
    h.key("enter");
    let at = h.app.detail_scroll();
    assert!(h.screen().contains("match 1 of"), "{}", h.screen());
    // Back to the streaming end, then `n`: the view goes to the match and stays there.
    h.key("G");
    assert!(h.app.detail_scroll() > at, "G follows the end");
    h.key("n");
    assert_eq!(h.app.detail_scroll(), at, "{}", h.screen());
    h.event(Event::LlmDelta {
        call: CallId(50),
        text: "more text\n".repeat(40),
        reasoning: String::new(),
    });
    assert_eq!(
        h.app.detail_scroll(),
        at,
        "a new delta does not pull it back"
    );
}

// ------------------------------------------------------------------ issue 39, item 5

/// The unseen-shapes re-check takes a minute: the activity line says so while it runs,
/// not "idle", and stops saying so once it is recorded.
#[test]
fn the_activity_line_names_the_unseen_shapes_check_while_it_runs() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.event(Event::GateResolved {
        gate: GateId(3),
        decision: Decision::Approve,
    });
    h.event(Event::ShapesCheckStarted {
        candidate: CandidateId(9),
    });
    h.event(Event::StateChanged {
        state: EngineState::Running,
    });
    let activity = |h: &Harness| h.screen().lines().rev().nth(2).unwrap().to_string();
    assert!(
        activity(&h).contains("checking #9 on unseen shapes and seeds (1s)"),
        "{}",
        h.screen()
    );
    assert!(!activity(&h).contains("idle"));
    h.event(Event::ShapesChecked {
        candidate: CandidateId(9),
        result_file: "shapes/9.json".into(),
        verdict: kforge::protocol::shapes::ShapeVerdict::Generalizes {
            passed: 5,
            checked: 5,
        },
        line: "correct on 5 of 5 unseen shapes".into(),
    });
    assert!(activity(&h).contains("idle"), "{}", h.screen());
}

/// A person's own rewrites carry a mark: the kernel rewritten at its evaluation gate in the
/// tree (`✎`, and `edited` for the filter), the prompt rewritten at its call's gate in the
/// LLM tab.
#[test]
fn rewrites_by_the_person_are_marked_in_the_tree_and_the_llm_tab() {
    let mut h = at_evaluation_gate();
    assert!(!h.screen().contains(Glyph::Edited.text()));
    h.keys(&["a", "i"]);
    h.type_text("# mine");
    h.key("ctrl-s");
    let decision = match &h.host.commands[..] {
        [Command::Resolve { decision, .. }] => decision.clone(),
        other => panic!("{other:?}"),
    };
    h.event(Event::GateResolved {
        gate: GateId(4),
        decision,
    });
    assert!(
        h.screen()
            .lines()
            .any(|l| l.contains("#9 stage 3") && l.contains(Glyph::Edited.text())),
        "{}",
        h.screen()
    );
    h.keys(&["/"]);
    h.type_text("edited");
    assert_eq!(h.app.tree_filter(), "edited");
    assert!(
        h.screen().contains("Candidates 1/9 /edited"),
        "{}",
        h.screen()
    );
    h.key("esc");

    // A prompt rewritten at its gate, then sent as call 11.
    h.event(Event::GateOpened {
        key: "call/seed3".into(),
        gate: GateId(5),
        kind: GateKind::LlmCall,
        candidate: Some(CandidateId(9)),
        call: Some(CallId(11)),
        question: "Send the repair prompt?".into(),
        file: Some("llm/10.prompt.md".into()),
    });
    h.event(Event::GateResolved {
        gate: GateId(5),
        decision: Decision::Rewrite {
            text: "my prompt".into(),
        },
    });
    h.event(call_started(
        11,
        "seed3",
        CallKind::Seed,
        Some(9),
        "llm/10.prompt.md",
    ));
    select(&mut h, 9);
    h.key("4");
    h.keys(&[".", "tab", "tab", "g"]);
    let s = h.screen();
    assert!(
        s.contains("✎ rewritten by you at gate 5: this is the prompt that was sent"),
        "{s}"
    );
    assert!(s.contains("call #11 seed 3"), "{s}");
}

/// Opened from the batch view, the hint says `q` goes back to the batch, and so does the
/// quit confirmation.
#[test]
fn inside_a_batch_q_says_it_goes_back() {
    let mut h = live_until(
        gate_opened(3),
        HarnessOptions {
            in_batch: true,
            ..opts(120, 40)
        },
    );
    h.key("1");
    assert!(h.screen().contains("q back to the batch"), "{}", h.screen());
    h.key("q");
    assert!(
        h.screen().contains("[y] back to the batch"),
        "{}",
        h.screen()
    );
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.key("1");
    assert!(h.screen().contains("q quit"), "{}", h.screen());
}

/// The manual provider's editor shows what the model would get: the system prompt above
/// the prompt.
#[test]
fn the_manual_providers_editor_shows_the_system_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture(), &dir);
    std::fs::write(dir.join("llm/10.system.md"), "You write Triton kernels.\n").unwrap();
    let all = SessionDir::open(&dir)
        .unwrap()
        .read_events()
        .unwrap()
        .records;
    let end = all.iter().position(|r| gate_opened(3)(&r.event)).unwrap() + 1;
    let mut h = Harness::with_records(
        SessionDir::open(&dir).unwrap(),
        &all[..end],
        HarnessOptions {
            read_only: false,
            ..opts(120, 40)
        },
    )
    .unwrap();
    h.event(manual_call_started());
    h.key("A");
    let shown = &h.host.edits[0];
    let system = shown.find("You write Triton kernels.").expect(shown);
    let prompt = shown.find("# stage prompt").expect(shown);
    let marker = shown.find(kforge::tui::app::ANSWER_MARKER).unwrap();
    assert!(system < prompt && prompt < marker, "{shown}");
    assert!(shown.starts_with("===== system prompt (llm/10.system.md) ====="));
}

/// `/` works alike in the tree, the console and the detail pane: its box over the pane it
/// acts on, wide enough for its whole title, and the panes' titles give the filter alike.
#[test]
fn slash_opens_the_same_box_in_every_pane() {
    let mut h = open(120, 40);
    h.key("/");
    h.type_text("rep");
    let s = h.screen();
    assert!(
        s.contains("┌ filter the candidates (enter keeps, esc clears) ─"),
        "{s}"
    );
    assert!(s.contains("Candidates 3/9 /rep"), "{s}");
    h.keys(&["esc", "backtab", "/"]);
    h.type_text("stage");
    let s = h.screen();
    assert!(
        s.contains("┌ filter the console (enter keeps, esc clears) ─"),
        "{s}"
    );
    assert!(s.contains("Console 12/33 /stage"), "{s}");
    h.keys(&["esc", "backtab", "/"]);
    let s = h.screen();
    assert!(
        s.contains("┌ search the Code tab (enter finds, esc cancels; n/N next/previous) "),
        "{s}"
    );
    // Each box sits on the last lines of its own pane.
    let areas = h.app.areas();
    let row = s
        .lines()
        .position(|l| l.contains("┌ search the Code tab"))
        .unwrap() as u16;
    assert_eq!(row, areas.detail.y + areas.detail.height - 3);
}

/// Ctrl-C is its own action: confirmed on a live run, the TUI ends `Interrupted` (then
/// `kforge run` exits 130, as after Ctrl-C without the TUI); `q` ends `QuitWhileActive`.
#[test]
fn ctrl_c_then_y_ends_as_an_interrupt_and_q_as_a_quit() {
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.keys(&["esc", "ctrl-c"]);
    assert!(h.screen().contains("code 130, as Ctrl-C"), "{}", h.screen());
    h.key("y");
    assert_eq!(h.exit, Some(TuiExit::Interrupted));
    assert!(TuiExit::Interrupted.stop_engine());
    let mut h = live_until(gate_opened(3), opts(120, 40));
    h.keys(&["esc", "q", "y"]);
    assert_eq!(h.exit, Some(TuiExit::QuitWhileActive));
    // A finished run quits at once either way.
    let mut h = open(120, 40);
    h.key("ctrl-c");
    assert_eq!(h.exit, Some(TuiExit::Quit));
}
