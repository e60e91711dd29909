//! Speed of light in the TUI (issue 25): `%SoL` beside the score in the tree, `FTL` for a
//! kernel flagged faster than light, and the `SoL` line of the Eval tab; on the recorded
//! softmax session as the judge-window harness would have written it, with figures added.

mod tui_common;

use kforge::protocol::{CandidateId, Event, GateId};
use kforge::tui::app::Tab;
use kforge::tui::component::{Component, Ctx};
use kforge::tui::detail::DetailPane;
use kforge::tui::overlays::GateView;
use kforge::tui::panes::TreePane;
use kforge::tui::testing::{HarnessOptions, context_for, draw_alone};
use tui_common::timed_fixture;

/// The timed session with #9 (the best) at 38% of the speed of light and #7 flagged
/// faster than light; #9's result carries the whole record.
fn with_speed_of_light() -> tempfile::TempDir {
    let dir = timed_fixture();
    let events = dir.path().join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let edited: Vec<String> = text
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let finished = v["type"] == "eval_finished";
            match v["candidate"].as_u64().filter(|_| finished) {
                Some(9) => v["sol_pct"] = 38.2.into(),
                Some(7) => {
                    v["sol_pct"] = 210.0.into();
                    v["flags"] = serde_json::json!(["faster_than_light"]);
                }
                _ => {}
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&events, edited.join("\n") + "\n").unwrap();
    let result = dir.path().join("eval/9.json");
    let mut r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    r["speed_of_light"] = serde_json::json!({
        "counts": {"flops": [{"dtype": "float32", "family": "elementwise", "flops": 1048576}],
                   "total_flops": 1048576,
                   "bytes": {"inputs": 4194304, "parameters": 0, "outputs": 4194304},
                   "total_bytes": 8388608},
        "peaks": {"dram_bytes_per_s": 3.9e12, "matmul_flops_per_s":
                  {"fp32": 5.1e13, "tf32": 3.8e14, "fp16": 7.0e14, "bf16": 7.1e14}, "cached": true},
        "bound_ms": 0.00860, "compute_ms": 0.0, "memory_ms": 0.00860, "strict_bound_ms": 0.00108,
        "limit": "memory", "reference_pct": 20.9, "kernel_pct": 38.2, "faster_than_light": false
    });
    std::fs::write(&result, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    dir
}

fn selected(dir: &std::path::Path, id: u32) -> Ctx {
    let mut cx = context_for(dir, None, &HarnessOptions::default()).unwrap();
    cx.selected = Some(CandidateId(id));
    cx
}

#[test]
fn the_tree_shows_the_share_of_the_speed_of_light_and_flags_a_faster_than_light_kernel() {
    let dir = with_speed_of_light();
    let cx = selected(dir.path(), 9);
    // #7 has the better-looking figure, but a flagged kernel is not the best.
    assert_eq!(cx.state.best, Some(CandidateId(9)));
    let mut tree = TreePane::default();
    let t = draw_alone(48, 14, |f| tree.draw(&cx, f, f.area()));
    insta::assert_snapshot!("tree_speed_of_light", t);
    assert!(t.contains("1.83x 38%SoL"), "{t}");
    assert!(t.contains("1.71x≈ FTL"), "{t}");
}

#[test]
fn the_eval_tab_has_the_speed_of_light_line() {
    let dir = with_speed_of_light();
    let cx = selected(dir.path(), 9);
    let mut d = DetailPane::default();
    d.set_tab(Tab::Eval);
    let e = draw_alone(100, 16, |f| d.draw(&cx, f, f.area()));
    insta::assert_snapshot!("detail_Eval_speed_of_light", e);
    assert!(
        e.contains(
            "SoL         speed of light 0.0086 ms (memory-bound): the reference at 21%, this kernel at 38%"
        ),
        "{e}"
    );
}

/// The final-best gate of the live run says how close the kernel it declares runs to the
/// speed of light.
#[test]
fn the_final_best_gate_has_the_speed_of_light_line() {
    let dir = with_speed_of_light();
    let session = kforge::session::store::SessionDir::open(dir.path()).unwrap();
    let mut records = session.read_events().unwrap().records;
    let end = records
        .iter()
        .position(|r| matches!(r.event, Event::GateOpened { gate, .. } if gate == GateId(3)))
        .unwrap();
    records.truncate(end + 1);
    let options = HarnessOptions {
        read_only: false,
        ..Default::default()
    };
    let cx = context_for(dir.path(), Some(&records), &options).unwrap();
    let mut gate = GateView::new(GateId(3));
    let g = draw_alone(100, 24, |f| gate.draw(&cx, f, f.area()));
    insta::assert_snapshot!("gate_final_best_speed_of_light", g);
    // In the gate's evidence, above the kernel.
    assert!(
        g.contains(
            "SoL         speed of light 0.0086 ms (memory-bound): the reference at 21%, this kernel at"
        ),
        "{g}"
    );
}

/// Issue 35: the Eval tab shows each output's margin under the oracle rule (its error as a
/// multiple of the honest error, against the limit) and, under a policy whose settings
/// differ from PyTorch's defaults, the score against the reference under the defaults.
#[test]
fn the_eval_tab_shows_the_oracle_margin_and_the_score_against_pytorchs_defaults() {
    let dir = with_speed_of_light();
    let result = dir.path().join("eval/9.json");
    let mut r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    let output = &mut r["trials"][0]["outputs"][0];
    output["rule"] = "oracle".into();
    output["error_ratio"] = 4.62.into();
    output["limit"] = 128.0.into();
    r["timing"]["defaults"] = serde_json::json!({
        "error": null, "differs": "float32 convolutions: TF32 cuDNN convolutions off (PyTorch's default: on)",
        "median_ms": 0.0171, "reference_median_ms": 0.0412, "speedup_over_reference": 2.41,
        "speedup_low": 2.38, "speedup_high": 2.44, "noisy": false, "cached": false, "used_for": "u"
    });
    r["timing"]["score_vs_defaults"] = 0.76.into();
    std::fs::write(&result, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let cx = selected(dir.path(), 9);
    let mut d = DetailPane::default();
    d.set_tab(Tab::Eval);
    let e = draw_alone(140, 60, |f| d.draw(&cx, f, f.area()));
    assert!(e.contains("4.62x/128x"), "{e}");
    assert!(
        e.contains("vs defaults 0.76x (float32 convolutions: TF32 cuDNN convolutions off"),
        "{e}"
    );
}
