//! Speed of light on the CPU (issue 25): the judge records the reference's work (FLOPs by
//! dtype, least bytes moved) in `kforge eval --json`; without a GPU there is no bound, and
//! the result says why.

mod eval_common;

use eval_common::{eval_fixture, text};
use kforge::protocol::EvalResult;

fn eval_json(task: &str, kernel: &str) -> EvalResult {
    let out = eval_fixture(task, kernel, &["--json", "--trials", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one EvalResult")
}

#[test]
fn the_judge_counts_a_gemms_flops_and_bytes_on_the_cpu() {
    let r = eval_json("matmul.py", "matmul_ok.py");
    let sol = r.speed_of_light.expect("speed_of_light");
    let counts = sol.counts.expect("counts");
    let (m, k, n) = (96u64, 80u64, 112u64);
    assert_eq!(counts.flops.len(), 1, "{counts:?}");
    assert_eq!(counts.flops[0].dtype, "float32");
    assert_eq!(counts.flops[0].family, "matmul");
    assert_eq!(counts.flops[0].flops, 2 * m * n * k);
    assert_eq!(counts.bytes.inputs, (m * k + k * n) * 4);
    assert_eq!(counts.bytes.parameters, 0);
    assert_eq!(counts.bytes.outputs, m * n * 4);
    assert_eq!(sol.bound_ms, None);
    assert_eq!(sol.kernel_pct, None);
    assert!(!sol.faster_than_light);
    assert!(sol.reason.unwrap().starts_with("no GPU"));
}

#[test]
fn the_judge_counts_a_convolutions_flops_and_its_parameters_on_the_cpu() {
    let r = eval_json("conv_hardtanh.py", "conv_hardtanh_hybrid_ok.py");
    let counts = r.speed_of_light.and_then(|s| s.counts).expect("counts");
    // N=4, Cin=3, Cout=8, 16x16 -> 14x14, 3x3 kernel.
    let (n, cin, cout, out_hw, k) = (4u64, 3u64, 8u64, 14 * 14u64, 9u64);
    // The convolution, then Hardtanh's one elementwise FLOP per output element (issue 35:
    // the non-GEMM work is counted too).
    assert_eq!(counts.flops.len(), 2, "{counts:?}");
    assert_eq!(counts.flops[0].family, "convolution");
    assert_eq!(counts.flops[0].flops, 2 * n * cout * out_hw * cin * k);
    assert_eq!(counts.flops[1].family, "elementwise");
    assert_eq!(counts.flops[1].flops, n * cout * out_hw);
    assert_eq!(counts.bytes.inputs, n * cin * 16 * 16 * 4);
    assert_eq!(counts.bytes.parameters, (cout * cin * k + cout) * 4);
    // The convolution's own output is an intermediate: only Hardtanh's is written.
    assert_eq!(counts.bytes.outputs, n * cout * out_hw * 4);
}
