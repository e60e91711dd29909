//! Each TUI component drawn on its own from the recorded softmax session (text, then
//! styles, in insta snapshots), and what a component does with its own keys: the panes,
//! every detail tab, every dialog and the bars. Whole screens are in `tui_app.rs`.

mod tui_common;

use std::time::Duration;

use chrono::Duration as Span;
use kforge::protocol::{CandidateId, Decision, Event, EventRecord, GateId, GateKind};
use kforge::tui::app::{EditPurpose, Focus, Tab};
use kforge::tui::bars;
use kforge::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use kforge::tui::detail::DetailPane;
use kforge::tui::docs::Docs;
use kforge::tui::editor::TextBuf;
use kforge::tui::keymap::Action;
use kforge::tui::overlays::{ConfirmKind, ConfirmView, GateView, HelpView, InputView};
use kforge::tui::panes::{ChartPane, ConsolePane, TreePane};
use kforge::tui::testing::{HarnessOptions, context_for, draw_alone, key_event};
use tui_common::{compiled_fixture, fixture, records, timed_fixture};

/// The finished session, #9 selected.
fn finished() -> Ctx {
    let mut cx = context_for(&fixture(), None, &HarnessOptions::default()).unwrap();
    cx.selected = Some(CandidateId(9));
    cx
}

/// The session as a live run, cut after `upto` events, plus `more` events after them.
fn live(upto: impl Fn(&Event) -> bool, more: Vec<Event>) -> Ctx {
    let mut all = records();
    let end = all.iter().position(|r| upto(&r.event)).unwrap() + 1;
    all.truncate(end);
    for event in more {
        let last = all.last().unwrap();
        all.push(EventRecord {
            seq: last.seq + 1,
            ts: last.ts + Span::seconds(1),
            event,
        });
    }
    let options = HarnessOptions {
        read_only: false,
        ..Default::default()
    };
    context_for(&fixture(), Some(&all), &options).unwrap()
}

fn gate_opened(n: u32) -> impl Fn(&Event) -> bool {
    move |e| matches!(e, Event::GateOpened { gate, .. } if gate.0 == n)
}

fn detail(cx: &Ctx, tab: Tab) -> String {
    let mut d = DetailPane::default();
    d.set_tab(tab);
    draw_alone(80, 24, |f| d.draw(cx, f, f.area()))
}

fn hints(c: &dyn Component, cx: &Ctx) -> Vec<Hint> {
    let mut v = Vec::new();
    c.hints(cx, &mut v);
    v
}

fn events(out: &mut AppEvents) -> Vec<AppEvent> {
    std::iter::from_fn(|| out.pop()).collect()
}

// ------------------------------------------------------------------ panes

#[test]
fn tree_pane() {
    let mut cx = finished();
    cx.marked = Some(CandidateId(4));
    let mut tree = TreePane::default();
    insta::assert_snapshot!("tree", draw_alone(40, 14, |f| tree.draw(&cx, f, f.area())));
    // Its keys: move the selection (through the app), fold.
    let mut out = AppEvents::default();
    assert_eq!(tree.on_action(Action::Up, &cx, &mut out), Handled::Consumed);
    assert_eq!(
        events(&mut out),
        [AppEvent::Select {
            id: Some(CandidateId(8)),
            by_user: true
        }]
    );
    assert_eq!(
        tree.on_action(Action::Reevaluate, &cx, &mut out),
        Handled::Ignored,
        "not a tree key: it goes on to the app"
    );
}

#[test]
fn chart_pane_with_timing_and_on_the_cpu() {
    let cx = finished();
    let mut chart = ChartPane::default();
    insta::assert_snapshot!(
        "chart",
        draw_alone(60, 10, |f| chart.draw(&cx, f, f.area()))
    );
    // The same session as if run on the CPU interpreter: no speedup axis at all.
    let mut all = records();
    for r in &mut all {
        if let Event::SessionStarted {
            timing_meaningful, ..
        } = &mut r.event
        {
            *timing_meaningful = false;
        }
    }
    let mut cpu = context_for(&fixture(), Some(&all), &HarnessOptions::default()).unwrap();
    cpu.selected = Some(CandidateId(9));
    let s = draw_alone(60, 6, |f| chart.draw(&cpu, f, f.area()));
    insta::assert_snapshot!("chart_cpu", s);
}

#[test]
fn console_pane_and_its_filter() {
    let mut cx = finished();
    cx.focus = Focus::Console;
    let mut console = ConsolePane::new(&cx);
    insta::assert_snapshot!(
        "console",
        draw_alone(100, 10, |f| console.draw(&cx, f, f.area()))
    );
    console.set_filter(&cx, "stage".into());
    let s = draw_alone(100, 8, |f| console.draw(&cx, f, f.area()));
    assert!(s.contains("Console 12/33 /stage"), "{s}");
    assert!(console.lines().len() < cx.state.log.len());
    let mut out = AppEvents::default();
    let _ = console.on_action(Action::ClearFilter, &cx, &mut out);
    assert_eq!(console.filter(), "");
}

// ------------------------------------------------------------------ 95% intervals

/// The session as the judge-window harness writes it (`timed_fixture`), `selected` chosen.
fn timed(dir: &std::path::Path, selected: u32) -> Ctx {
    let mut cx = context_for(dir, None, &HarnessOptions::default()).unwrap();
    cx.selected = Some(CandidateId(selected));
    cx
}

/// Scores with intervals: the tree marks #7 `≈` (its interval overlaps the best's), #4 `~`
/// (noisy) and nothing else; the chart draws the selected point's interval as a bar and
/// names it in the title beside the best's (the status bar keeps the bare score: no room).
#[test]
fn intervals_in_the_tree_and_the_chart() {
    let dir = timed_fixture();
    let cx = timed(dir.path(), 7);
    assert_eq!(cx.state.best, Some(CandidateId(9)));
    let mut tree = TreePane::default();
    let t = draw_alone(40, 14, |f| tree.draw(&cx, f, f.area()));
    insta::assert_snapshot!("tree_intervals", t);
    assert!(t.contains("1.71x≈") && t.contains("1.21x~"), "{t}");
    assert!(t.contains("1.64x│") && t.contains("1.83x│"), "{t}");
    let mut chart = ChartPane::default();
    let c = draw_alone(80, 12, |f| chart.draw(&cx, f, f.area()));
    insta::assert_snapshot!("chart_intervals", c);
    assert!(
        c.contains("best #9 1.83x [1.79-1.87]  ◉ #7 1.71x [1.60-1.80]≈"),
        "{c}"
    );
    // Without an interval on the selection (the best itself), the title names the best only.
    let best = timed(dir.path(), 9);
    let c = draw_alone(80, 12, |f| chart.draw(&best, f, f.area()));
    assert!(c.contains("best #9 1.83x [1.79-1.87] ─"), "{c}");
}

/// The Eval tab of a candidate whose reference was timed under torch.compile too: both
/// scores with their intervals, the headline marked, the compiled reference's figures.
#[test]
fn the_eval_tab_shows_both_baselines() {
    let dir = compiled_fixture();
    let best = timed(dir.path(), 9);
    let mut d = DetailPane::default();
    d.set_tab(Tab::Eval);
    let e = draw_alone(110, 44, |f| d.draw(&best, f, f.area()));
    insta::assert_snapshot!("detail_Eval_baselines", e);
    for needle in [
        "score       1.220x [1.180-1.260]",
        "baselines   vs eager 1.83x [1.79-1.87]   vs compile 1.22x [1.18-1.26] (headline)   (torch.compile",
        "vs eager    1.83x [1.79-1.87]  (95% interval: bootstrap",
        "compiled    torch.compile (default) 0.0275 ms, 1.50x [1.47-1.53] eager, compiled in 18.2 s (cached)",
        "vs compile  1.22x [1.18-1.26]",
        "headline    vs torch.compile (baseline = best: torch.compile is 1.50x as fast as eager)",
    ] {
        assert!(e.contains(needle), "{needle:?} in\n{e}");
    }
}

/// The Eval tab of the best: the score's interval, each side's, the method, the reported
/// ratio and the environment; of #7: that it cannot be told from the best.
#[test]
fn the_eval_tab_shows_the_intervals_and_the_environment() {
    let dir = timed_fixture();
    let best = timed(dir.path(), 9);
    let mut d = DetailPane::default();
    d.set_tab(Tab::Eval);
    let e = draw_alone(100, 40, |f| d.draw(&best, f, f.area()));
    insta::assert_snapshot!("detail_Eval_intervals", e);
    for needle in [
        "score       1.830x [1.790-1.870]   kernel 0.0225 ms   reference 0.0412 ms",
        "method      judge window: the judge's own CUDA events",
        "reference   median in [0.0410-0.0414], precision reached, window 0.3412 less null 0.3000,",
        "score       1.83x [1.79-1.87]  (95% interval: bootstrap, 2000 resamples",
        "reported    1.85x (the processes' own CUDA-event medians: information only)",
        "── environment ──",
        "math        strict, fp32 vs fp32; reference TF32 matmul off, TF32 cuDNN on, float32 matmul",
        "precision   strict (float32 atol=rtol 1e-4)",
        "clocks      SM 1980 MHz (max 1980), memory 2619 MHz (max 2619), not locked, throttle: idle",
        "software    driver 580.159.04, CUDA 13.0, torch 2.9.1, triton 3.5.1",
    ] {
        assert!(e.contains(needle), "{needle:?} in\n{e}");
    }
    let seven = timed(dir.path(), 7);
    let e = draw_alone(100, 12, |f| d.draw(&seven, f, f.area()));
    assert!(e.contains("1.710x [1.600-1.800]  noisy"), "{e}");
    assert!(
        e.contains(
            "≈ indistinguishable from the best, #9 1.83x [1.79-1.87]: the 95% intervals overlap"
        ),
        "{e}"
    );
    d.set_tab(Tab::Compare);
    let e = draw_alone(100, 12, |f| d.draw(&seven, f, f.area()));
    assert!(
        e.contains("1.710x [1.600-1.800]") && e.contains("1.830x [1.790-1.870]"),
        "{e}"
    );
}

// ------------------------------------------------------------------ detail tabs

#[test]
fn detail_tabs() {
    let cx = finished();
    for tab in Tab::ALL {
        insta::assert_snapshot!(format!("detail_{}", tab.title()), detail(&cx, tab));
    }
}

/// A stage kernel that is correct but could not be compared (no timing, the CPU) is not
/// drawn as a failure; one that lost or broke is.
#[test]
fn the_analysis_tab_tells_a_stage_not_compared_from_one_that_lost() {
    use kforge::protocol::StageVerdict;
    use kforge::session::state::StageOutcome;
    let mut cx = finished();
    cx.state.stages.clear();
    for (stage, verdict, reason) in [
        (
            "grid_and_parallel",
            StageVerdict::NotCompared,
            "correct, not compared",
        ),
        (
            "block_tiling",
            StageVerdict::Kept,
            "1.83x -> 1.70x is no improvement",
        ),
    ] {
        cx.state.stages.push(StageOutcome {
            stage: stage.into(),
            base: CandidateId(9),
            result: None,
            accepted: false,
            verdict,
            reason: reason.into(),
        });
    }
    let a = detail(&cx, Tab::Analysis);
    assert!(
        a.contains("– grid_and_parallel  #9 → –  correct, not compared"),
        "{a}"
    );
    assert!(
        a.contains("✗ block_tiling  #9 → –  1.83x -> 1.70x is no improvement"),
        "{a}"
    );
}

#[test]
fn diff_tab_owns_its_layout_and_hunks() {
    let cx = finished();
    let mut d = DetailPane::default();
    let mut out = AppEvents::default();
    // The diff keys work from another pane and show their tab first.
    assert_eq!(
        d.on_action(Action::DiffLayout, &cx, &mut out),
        Handled::Consumed
    );
    assert_eq!(d.tab(), Tab::Diff);
    insta::assert_snapshot!(
        "detail_diff_side_by_side",
        draw_alone(100, 24, |f| d.draw(&cx, f, f.area()))
    );
    let mut v = Vec::new();
    d.shared_hints(&cx, &mut v);
    assert!(
        v.contains(&Hint::new(Action::DiffLayout, "layout")),
        "{v:?}"
    );
}

#[test]
fn a_search_marks_its_matches_and_lands_on_the_first() {
    let cx = finished();
    let mut d = DetailPane::default();
    d.search("tl.load");
    let s = draw_alone(80, 24, |f| d.draw(&cx, f, f.area()));
    let msg = d.take_message().unwrap();
    assert!(msg.starts_with("\"tl.load\": match 1 of "), "{msg}");
    let (text, styles) = s.split_once("--- styles ---\n").unwrap();
    let row = text.lines().position(|l| l.contains("tl.load")).unwrap();
    let line = text.lines().nth(row).unwrap();
    let col = line[..line.find("tl.load").unwrap()].chars().count();
    // The match is drawn reversed (the search-match role); the code before it is not.
    let (legend, grid) = styles.split_once("---\n").unwrap();
    let style_at = |c: usize| {
        let code = grid.lines().nth(row).unwrap().chars().nth(c).unwrap();
        legend
            .lines()
            .find(|l| l.starts_with(&format!("{code} = ")))
            .unwrap_or("default")
            .to_string()
    };
    let described = style_at(col);
    assert!(
        !style_at(col - 1).contains("REVERSED"),
        "{}",
        style_at(col - 1)
    );
    assert!(described.contains("REVERSED"), "{described}");
}

#[test]
fn files_come_from_a_worker_thread_not_the_draw() {
    let mut cx = finished();
    let (tx, rx) = std::sync::mpsc::channel();
    cx.docs = Docs::threaded(&fixture(), move |l| {
        let _ = tx.send(l);
    });
    let first = detail(&cx, Tab::Code);
    assert!(first.contains("loading kernels/9-"), "{first}");
    let loaded = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    cx.docs.loaded(loaded);
    let second = detail(&cx, Tab::Code);
    assert!(second.contains("@triton.jit"), "{second}");
}

// ------------------------------------------------------------------ dialogs

#[test]
fn help_dialog() {
    let cx = finished();
    let mut help = HelpView::default();
    insta::assert_snapshot!("help", draw_alone(90, 30, |f| help.draw(&cx, f, f.area())));
    let mut out = AppEvents::default();
    let _ = help.on_key(&key_event("j"), &cx, &mut out);
    assert!(events(&mut out).is_empty(), "j scrolls");
    let _ = help.on_key(&key_event("esc"), &cx, &mut out);
    assert_eq!(events(&mut out), [AppEvent::Close]);
}

/// Issue 39, item 4: the help is as wide as the terminal allows (up to 110 columns) and
/// wraps each description at words under its own column: nothing is cut.
#[test]
fn the_help_fits_the_terminal_and_wraps_at_words() {
    let cx = finished();
    let desc = Action::Interrupt.description();
    for width in [200u16, 60] {
        let mut help = HelpView::default();
        let s = draw_alone(width, 40, |f| help.draw(&cx, f, f.area()));
        let text = s.split("--- styles ---").next().unwrap();
        let top = text.lines().find(|l| l.contains("┌ Keys")).unwrap();
        assert_eq!(
            top.trim().chars().count(),
            (width as usize - 4).min(110),
            "{text}"
        );
        // The entry's rows, read back, are the description whole, its words intact.
        let rows: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("ctrl-c "))
            .take_while(|l| !l.contains("? f1"))
            .map(|l| {
                l.trim_matches(|c: char| c == '│' || c == ' ')
                    .trim_start_matches("ctrl-c")
                    .trim()
            })
            .collect();
        assert_eq!(rows.join(" "), desc, "{text}");
        if width == 60 {
            assert!(rows.len() > 2, "it wraps: {rows:?}");
        }
    }
}

#[test]
fn confirm_dialog_asks_before_rejecting_and_ignores_stray_keys() {
    let cx = live(gate_opened(3), vec![]);
    let mut c = ConfirmView::new(ConfirmKind::RejectGate(GateId(3)));
    insta::assert_snapshot!(
        "confirm_reject",
        draw_alone(70, 8, |f| c.draw(&cx, f, f.area()))
    );
    let mut out = AppEvents::default();
    for stray in ["j", "a", "x", "tab"] {
        let _ = c.on_key(&key_event(stray), &cx, &mut out);
    }
    assert!(events(&mut out).is_empty(), "stray keys do nothing");
    let _ = c.on_key(&key_event("y"), &cx, &mut out);
    assert_eq!(
        events(&mut out),
        [
            AppEvent::Close,
            AppEvent::Resolve {
                gate: GateId(3),
                decision: Decision::Reject
            }
        ]
    );
    assert_eq!(
        hints(&c, &cx),
        [Hint::new(Action::Yes, "yes"), Hint::new(Action::No, "no")]
    );
}

#[test]
fn inline_editor_numbers_and_highlights_a_kernel() {
    let cx = finished();
    let code = std::fs::read_to_string(fixture().join("kernels/9-stage.py")).unwrap();
    let mut input = InputView::new(
        "edit #9 (ctrl-s evaluates, esc cancels)".into(),
        EditPurpose::Manual {
            parent: Some(CandidateId(9)),
        },
        TextBuf::at_start(&code),
        true,
    )
    .python();
    let s = draw_alone(90, 20, |f| input.draw(&cx, f, f.area()));
    insta::assert_snapshot!("inline_editor", s);
    // Typing goes into the text; ctrl-s submits what was typed.
    let mut out = AppEvents::default();
    let _ = input.on_key(&key_event("#"), &cx, &mut out);
    let _ = input.on_key(&key_event("ctrl-s"), &cx, &mut out);
    let got = events(&mut out);
    assert_eq!(got[0], AppEvent::Close);
    match &got[1] {
        AppEvent::Submit { text, .. } => {
            assert!(text.starts_with('#') && text.len() == code.len() + 1)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gate_dialogs_show_what_they_will_do() {
    // The final-best gate: the kernel it declares, highlighted; nothing to rewrite.
    let cx = live(gate_opened(3), vec![]);
    let mut gate = GateView::new(GateId(3));
    insta::assert_snapshot!(
        "gate_final_best",
        draw_alone(100, 24, |f| gate.draw(&cx, f, f.area()))
    );
    assert!(!hints(&gate, &cx).contains(&Hint::new(Action::Rewrite, "rewrite")));
    // An LLM-call gate: the exact prompt; it can be rewritten.
    let cx = live(
        gate_opened(3),
        vec![
            Event::GateResolved {
                gate: GateId(3),
                decision: Decision::Approve,
            },
            Event::GateOpened {
                key: "repair9".into(),
                gate: GateId(4),
                kind: GateKind::LlmCall,
                candidate: Some(CandidateId(9)),
                call: None,
                question: "Send the repair prompt of #9?".into(),
                file: Some("llm/10.prompt.md".into()),
            },
        ],
    );
    let mut gate = GateView::new(GateId(4));
    let s = draw_alone(100, 24, |f| gate.draw(&cx, f, f.area()));
    insta::assert_snapshot!("gate_llm_call", s);
    assert!(s.contains("1 of 1 waiting"), "{s}");
    assert!(hints(&gate, &cx).contains(&Hint::new(Action::Rewrite, "rewrite")));
    // Its keys: n asks first, e opens the prompt in the editor, esc leaves it waiting.
    let mut out = AppEvents::default();
    let _ = gate.on_key(&key_event("n"), &cx, &mut out);
    assert!(matches!(&events(&mut out)[..], [AppEvent::Open(_)]));
    let _ = gate.on_key(&key_event("e"), &cx, &mut out);
    let prompt = std::fs::read_to_string(fixture().join("llm/10.prompt.md")).unwrap();
    assert_eq!(
        events(&mut out),
        [AppEvent::Edit {
            text: prompt,
            suffix: ".md",
            purpose: EditPurpose::GateRewrite(GateId(4))
        }]
    );
    let _ = gate.on_key(&key_event("esc"), &cx, &mut out);
    assert_eq!(events(&mut out)[0], AppEvent::CloseGate);
    // Issue 39, item 5: `d` where there is no kernel to diff says why, not nothing.
    let _ = gate.on_key(&key_event("d"), &cx, &mut out);
    assert_eq!(
        events(&mut out),
        [AppEvent::Flash(
            "d shows a kernel's diff against its parent at an evaluation gate; this gate is before an LLM call".into()
        )]
    );
}

/// Issue 39, item 5: the final gate is asked once per session: no "approve all of this
/// kind" there (button, hint or key); the others keep it.
#[test]
fn the_final_gate_offers_no_standing_approval() {
    let cx = live(gate_opened(3), vec![]);
    let mut gate = GateView::new(GateId(3));
    let s = draw_alone(100, 24, |f| gate.draw(&cx, f, f.area()));
    assert!(!s.contains("[Y]") && !s.contains("approve all"), "{s}");
    assert!(
        !hints(&gate, &cx)
            .iter()
            .any(|h| h.action == Action::ApproveAlways),
        "{:?}",
        hints(&gate, &cx)
    );
    let mut out = AppEvents::default();
    let _ = gate.on_key(&key_event("Y"), &cx, &mut out);
    assert_eq!(
        events(&mut out),
        [AppEvent::Flash(
            "this gate is asked once per session: y approves it".into()
        )]
    );
}

/// Issue 39, item 5: the gate dialog wraps a prompt's prose between words, never inside
/// one, each row under its line number.
#[test]
fn the_gate_dialog_wraps_prose_at_words() {
    let cx = live(
        gate_opened(3),
        vec![
            Event::GateResolved {
                gate: GateId(3),
                decision: Decision::Approve,
            },
            Event::GateOpened {
                key: "call/seed3".into(),
                gate: GateId(4),
                kind: GateKind::LlmCall,
                candidate: None,
                call: None,
                question: "Send the seed prompt?".into(),
                file: Some("llm/1.prompt.md".into()),
            },
        ],
    );
    let prompt = std::fs::read_to_string(fixture().join("llm/1.prompt.md")).unwrap();
    let mut gate = GateView::new(GateId(4));
    let s = draw_alone(60, 40, |f| gate.draw(&cx, f, f.area()));
    let text = s.split("--- styles ---").next().unwrap();
    let words: std::collections::HashSet<&str> = prompt.split_whitespace().collect();
    // Every word on a numbered row (or a row continuing one) is a word of the prompt.
    let mut rows = 0;
    for line in text.lines() {
        let inner = line.trim_matches(|c: char| c == '│' || c == ' ');
        let Some((num, rest)) = inner.split_once(' ') else {
            continue;
        };
        if num.parse::<usize>().is_err() || rest.trim().is_empty() {
            continue;
        }
        for w in rest.split_whitespace() {
            assert!(words.contains(w), "{w:?} is cut from a word: {text}");
        }
        rows += 1;
    }
    assert!(rows > 3, "{text}");
}

/// The final-best gate of a kernel scored against both baselines: the evidence (both
/// scores with intervals, which is the headline, the runner-up it cannot be told from, the
/// flags, the compiled reference) above its code.
#[test]
fn the_final_best_gate_shows_the_evidence() {
    let dir = compiled_fixture();
    let mut all = kforge::session::store::SessionDir::open(dir.path())
        .unwrap()
        .read_events()
        .unwrap()
        .records;
    let end = all.iter().position(|r| gate_opened(3)(&r.event)).unwrap() + 1;
    all.truncate(end);
    let options = HarnessOptions {
        read_only: false,
        ..Default::default()
    };
    let cx = context_for(dir.path(), Some(&all), &options).unwrap();
    let mut gate = GateView::new(GateId(3));
    let s = draw_alone(120, 30, |f| gate.draw(&cx, f, f.area()));
    insta::assert_snapshot!("gate_final_best_evidence", s);
    for needle in [
        "── evidence for #9 ──",
        "vs eager    1.83x [1.79-1.87]",
        "vs compile  1.22x [1.18-1.26] (headline)   torch.compile runs 1.50x as fast as eager",
        "flags       none",
        "precision   strict (float32 atol=rtol 1e-4)",
        "compiled    torch.compile (default) 0.0275 ms, 1.50x [1.47-1.53] eager, compiled in 18.2 s (cached)",
    ] {
        assert!(s.contains(needle), "{needle:?} in\n{s}");
    }
}

// ------------------------------------------------------------------ bars

#[test]
fn the_bars() {
    let cx = live(gate_opened(3), vec![]);
    let hints = [
        Hint::new(Action::OpenGate, "answer the waiting gate"),
        Hint::new(Action::Help, "help"),
    ];
    let s = draw_alone(120, 3, |f| {
        let a = f.area();
        let row = |y| ratatui::layout::Rect::new(a.x, a.y + y, a.width, 1);
        bars::draw_activity(&cx, f, row(0));
        bars::draw_status(&cx, f, row(1));
        bars::draw_hints(&cx, f, row(2), None, &hints);
    });
    insta::assert_snapshot!("bars", s);
    assert!(
        s.contains("1 gate waiting for you (a opens the oldest)"),
        "{s}"
    );
}

#[test]
fn a_best_wrong_on_an_unseen_shape_is_shown_in_the_gate_the_tree_and_the_eval_tab() {
    use kforge::protocol::shapes::ShapeVerdict;
    let line = "wrong on batch_size=13, dim=12289: mismatch: max abs err 0.41 (wrong on 1 of 5 unseen shapes)";
    let mut cx = live(
        gate_opened(3),
        vec![Event::ShapesChecked {
            candidate: CandidateId(9),
            result_file: "shapes/9.json".into(),
            verdict: ShapeVerdict::FailsOn {
                failed: 1,
                checked: 5,
            },
            line: line.into(),
        }],
    );
    let mut gate = GateView::new(GateId(3));
    let s = draw_alone(100, 24, |f| gate.draw(&cx, f, f.area()));
    assert!(
        s.contains("shapes      wrong on batch_size=13, dim=12289: mismatch"),
        "{s}"
    );
    let mut tree = TreePane::default();
    let s = draw_alone(60, 14, |f| tree.draw(&cx, f, f.area()));
    let row = s.lines().find(|l| l.contains("#9 ")).unwrap();
    assert!(row.contains("shapes✗"), "{s}");
    assert_eq!(
        s.matches("shapes✗").count(),
        1,
        "only the checked kernel: {s}"
    );
    cx.selected = Some(CandidateId(9));
    let s = detail(&cx, Tab::Eval);
    assert!(s.contains("shapes      wrong on batch_size=13"), "{s}");
}

/// Issue 39, item 4: `⚑` means gates waiting (the status bar) and nothing else: a result's
/// flags are warnings in the Eval tab (`!`), as the legend says.
#[test]
fn the_eval_tab_draws_flags_as_warnings_not_as_waiting_gates() {
    let mut cx = finished();
    let best = cx.state.candidates.get_mut(&CandidateId(9)).unwrap();
    best.eval
        .as_mut()
        .unwrap()
        .flags
        .push("faster_than_light".into());
    let e = detail(&cx, Tab::Eval);
    assert!(e.contains("! flag: faster_than_light"), "{e}");
    assert!(!e.contains('⚑'), "{e}");
}
