//! What a kernel's design is, in one line read from its source: its `@triton.jit` kernels
//! with what each uses (`tl.dot`, loops, atomics, reductions), autotuning and the launches
//! in `forward`. The optimize prompt lists the session's other designs with it, so that the
//! model does not write one of them again.

use serde::{Deserialize, Serialize};

use crate::pysource;

/// A design already in the session, for a prompt that must differ from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SiblingDesign {
    /// `candidate 3 (seed 2, direction online-tiled)`.
    pub label: String,
    /// `design_summary` of its source.
    pub design: String,
}

/// One line: `kernels `softmax_fwd` (a loop `for start in range(0, n, BLOCK)`, tl.max, tl.sum);
/// 1 launch in forward`.
pub fn design_summary(source: &str) -> String {
    let lines = pysource::logical_lines(source);
    let jit = pysource::jit_functions(&lines);
    if jit.is_empty() {
        return "no @triton.jit kernel".into();
    }
    let mut kernels = Vec::new();
    for f in &jit {
        let mut uses: Vec<String> = Vec::new();
        let body: Vec<&str> = f.body.iter().map(|l| l.code.as_str()).collect();
        let has = |needle: &str| body.iter().any(|c| c.contains(needle));
        for l in f.body {
            let code = l.code.trim();
            if (code.starts_with("for ") || code.starts_with("while ")) && uses.len() < 6 {
                uses.push(format!("a loop `{}`", code.trim_end_matches(':')));
            }
        }
        for (needle, word) in [
            ("tl.dot(", "tl.dot"),
            ("tl.atomic_", "atomics"),
            ("tl.sum(", "tl.sum"),
            ("tl.max(", "tl.max"),
            ("tl.cumsum(", "tl.cumsum"),
            ("tl.program_id(1", "a 2-D grid"),
            ("tl.num_programs(", "tl.num_programs"),
        ] {
            if has(needle) {
                uses.push(word.into());
            }
        }
        kernels.push(if uses.is_empty() {
            format!("`{}`", f.name)
        } else {
            format!("`{}` ({})", f.name, uses.join(", "))
        });
    }
    let mut parts = vec![format!(
        "{} {}",
        if jit.len() == 1 { "kernel" } else { "kernels" },
        kernels.join("; ")
    )];
    let configs = source.matches("triton.Config(").count();
    if source.contains("triton.autotune") {
        parts.push(format!("@triton.autotune over {configs} configs"));
    }
    // Launches: `name[` of a jit kernel outside the jit bodies.
    let jit_lines: std::collections::BTreeSet<usize> = jit
        .iter()
        .flat_map(|f| f.body.iter().map(|l| l.line))
        .collect();
    let launches = lines
        .iter()
        .filter(|l| !jit_lines.contains(&l.line))
        .map(|l| {
            jit.iter()
                .filter(|f| l.code.contains(&format!("{}[", f.name)))
                .count()
        })
        .sum::<usize>();
    parts.push(format!(
        "{launches} launch{} in the file",
        if launches == 1 { "" } else { "es" }
    ));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_design_names_its_kernels_their_loops_and_launches() {
        let source = include_str!("../../examples/kernels/softmax_triton.py");
        let d = design_summary(source);
        assert!(d.starts_with("kernel `"), "{d}");
        assert!(d.contains("tl.max") && d.contains("tl.sum"), "{d}");
        assert!(d.ends_with("1 launch in the file"), "{d}");
        let gemm = "import triton\nimport triton.language as tl\n\n@triton.autotune(configs=[triton.Config({'B': 32}), triton.Config({'B': 64})], key=['K'])\n@triton.jit\ndef mm(a, b, c, K, B: tl.constexpr):\n    acc = tl.zeros((B, B), dtype=tl.float32)\n    for k in range(0, K, B):\n        acc += tl.dot(tl.load(a), tl.load(b))\n    tl.store(c, acc)\n\nclass ModelNew:\n    def forward(self, a, b):\n        mm[lambda META: (1,)](a, b, c, 4)\n        return c\n";
        assert_eq!(
            design_summary(gemm),
            "kernel `mm` (a loop `for k in range(0, K, B)`, tl.dot); @triton.autotune over 2 configs; 1 launch in the file"
        );
        assert_eq!(design_summary("x = 1"), "no @triton.jit kernel");
    }
}
