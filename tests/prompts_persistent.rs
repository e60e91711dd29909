//! The persistent-kernel check on the repository's real kernels (tests/fixtures/kernels,
//! examples/kernels): only the RNN whose time loop runs inside its jit kernel matches, and
//! the side-stream hack's spin loop, which does carry state across iterations.

use std::path::Path;

use kforge::engine::persistent::check;

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)).unwrap()
}

#[test]
fn rnn_kernel_with_its_time_loop_inside_the_jit_body_is_persistent() {
    let r = check(&read("tests/fixtures/kernels/rnn_hidden_ok.py"));
    assert!(r.persistent, "{r:?}");
    assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
    let why = &r.reasons[0];
    assert!(why.contains("kernel `rnn_kernel`"), "{why}");
    assert!(
        why.contains("`for t in range(0, seq_len):` at line 33"),
        "{why}"
    );
    assert!(why.contains("carries `h`"), "{why}");
}

#[test]
fn a_spin_loop_carrying_its_accumulator_is_persistent_too() {
    let r = check(&read("tests/fixtures/kernels/relu_side_stream.py"));
    assert!(r.persistent, "{r:?}");
    assert!(
        r.reasons[0].contains("kernel `spin_kernel`"),
        "{:?}",
        r.reasons
    );
    assert!(r.reasons[0].contains("carries `acc`"), "{:?}", r.reasons);
}

#[test]
fn other_fixture_and_example_kernels_are_not_persistent() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for sub in ["tests/fixtures/kernels", "examples/kernels"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "py")
                || path.file_name().is_some_and(|n| {
                    n == "rnn_hidden_ok.py"
                        || n == "relu_side_stream.py"
                        || n == "hack_early_end.py"
                })
            {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            let r = check(&source);
            assert!(!r.persistent, "{}: {:?}", path.display(), r.reasons);
            checked += 1;
        }
    }
    // matmul K loops, softmax, an infinite `while True` in forward, ReLU variants...
    assert!(checked >= 30, "{checked}");
}
