//! The persistent-kernel check (docs/architecture.md, Pipeline, step 7): does the kernel keep its time
//! loop *inside* a `@triton.jit` body, carrying state from one step to the next? Such a
//! kernel is skipped by the tuning stages once it scores >= 1.0 (re-tiling it breaks it).
//!
//! The check reads Python source as text (no Python needed): it splits the source into
//! logical lines (brackets, continuations and triple-quoted strings joined; comments cut),
//! finds the functions decorated with `@triton.jit` / `@jit` (also under stacked
//! `@triton.autotune(...)` / `@triton.heuristics(...)`), and looks at their loops only.
//!
//! The heuristic, per `for`/`while` loop inside a jit body:
//! 1. **Tile loops do not count.** A loop whose header names a `BLOCK`/`TILE` constant or
//!    `tl.cdiv` (`for k in range(0, K, BLOCK_K)`), or whose body scales the loop variable by
//!    such a constant (`k * BLOCK_K`), walks tiles of one reduction (a matmul K loop, an
//!    online softmax over column blocks), not time.
//! 2. **Loop-carried state.** Some variable `v` is assigned in the jit body before the loop
//!    and re-assigned inside the loop from its own previous value, directly (`h = f(h)`) or
//!    through values computed from it in the same iteration (`pre = dot(h, W); h = g(pre)`).
//! 3. **Not a plain accumulator.** If every update of `v` from its previous value is a pure
//!    accumulation (`v += e`, `v = v + e`, `v = tl.maximum(v, e)`, with `e` not computed
//!    from `v`), `v` is a reduction (a sum, a running max, a pointer advanced by a stride),
//!    not recurrent state. `h = z * h + (1 - z) * n` with `z` computed from `h` is state.
//! 4. **State through memory also counts.** A (non-tile) loop that stores through a pointer
//!    and loads through the same pointer at addresses that do not move with the loop
//!    variable (or only as `t % 2`, double buffering) passes state from one iteration to
//!    the next in global memory: the layout of a persistent RNN whose grid covers hidden
//!    tiles. A grid-stride loop over rows (`x_ptr + i * n_cols`) moves with its variable.
//!
//! Each match gives a reason naming the kernel, the loop and its line, and the carried
//! variable or pointer with the lines where it is updated.
//!
//! A Python loop in `forward` that launches a kernel per time step never matches: only jit
//! bodies are read. Known blind spots: a jit function made by `k = triton.jit(f)` without a
//! decorator, and a loop body written on the same line as its header.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::pysource::{
    Assignment, IDENT, LogicalLine, assignment, block, jit_functions, logical_lines, names_read,
    split_top,
};

/// The result of the check, with a human-readable reason per matching loop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentCheck {
    pub persistent: bool,
    /// Why it matched (kernel, loop line, carried variable); empty when it did not.
    pub reasons: Vec<String>,
}

static LOOP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:for\s+(.+?)\s+in\s+(.+):|while\s+(.+):)\s*$").expect("valid regex")
});
static TILE_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)block|tile|tl\s*\.\s*cdiv").expect("valid regex"));

/// Whether `a` updates `v` as a pure accumulation: `v += e`, `v = v + e`, `v = e + v`,
/// `v = tl.maximum(v, e)` / `tl.minimum` / `max` / `min`, with `e` not reading anything in
/// `tainted`.
fn pure_accumulation(a: &Assignment, v: &str, tainted: &BTreeSet<String>) -> bool {
    let independent = |e: &str| names_read(e).is_disjoint(tainted);
    if a.augmented.is_some() {
        return independent(&a.value);
    }
    let value = a.value.as_str();
    for op in ['+', '-'] {
        let parts = split_top(value, op);
        if parts.len() == 2 {
            if parts[0].trim() == v && independent(parts[1]) {
                return true;
            }
            if op == '+' && parts[1].trim() == v && independent(parts[0]) {
                return true;
            }
        }
    }
    static REDUCE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:tl\s*\.\s*)?(?:maximum|minimum|max|min)\s*\((.*)\)$").expect("valid regex")
    });
    if let Some(m) = REDUCE.captures(value) {
        let args = split_top(&m[1], ',');
        if args.len() == 2 {
            let (a0, a1) = (args[0].trim(), args[1].trim());
            return (a0 == v && independent(a1)) || (a1 == v && independent(a0));
        }
    }
    false
}

/// How `v`'s previous value flows through one iteration of a loop body: the first line
/// where `v` is re-assigned from it (directly or through values computed from it in the
/// same iteration), and whether every such update is a pure accumulation.
fn carried_update(body: &[LogicalLine], v: &str) -> Option<(usize, bool)> {
    let mut tainted: BTreeSet<String> = [v.to_string()].into();
    let mut update_line = None;
    let mut accumulation_only = true;
    for l in body {
        let Some(a) = assignment(&l.code) else {
            continue;
        };
        let mut reads = names_read(&a.value);
        if a.augmented.is_some() {
            reads.extend(a.targets.iter().cloned());
        }
        if reads.is_disjoint(&tainted) {
            // Assigned from fresh values: whatever these names held is dead from here on.
            for t in &a.targets {
                tainted.remove(t);
            }
            continue;
        }
        if a.targets.iter().any(|t| t == v) {
            update_line.get_or_insert(l.line);
            if !(a.targets == [v] && pure_accumulation(&a, v, &tainted)) {
                accumulation_only = false;
            }
        }
        tainted.extend(a.targets.iter().cloned());
    }
    update_line.map(|line| (line, accumulation_only))
}

/// The pointer arguments (first arguments) of the `tl.<function>(...)` calls of a line.
fn pointer_args<'a>(code: &'a str, function: &str) -> Vec<&'a str> {
    let call = Regex::new(&format!(r"\btl\s*\.\s*{function}\s*\(")).expect("valid regex");
    call.find_iter(code)
        .filter_map(|m| {
            let args = &code[m.end()..];
            let mut depth = 0i32;
            let end = args.char_indices().find_map(|(i, c)| match c {
                '(' | '[' | '{' => {
                    depth += 1;
                    None
                }
                ')' | ']' | '}' if depth == 0 => Some(i),
                ')' | ']' | '}' => {
                    depth -= 1;
                    None
                }
                ',' if depth == 0 => Some(i),
                _ => None,
            })?;
            Some(args[..end].trim())
        })
        .collect()
}

/// The first name of a pointer expression (`h_buf + b * H + cols` -> `h_buf`).
fn pointer_base(expr: &str) -> Option<String> {
    IDENT
        .find(expr.trim_start_matches(|c: char| c == '(' || c.is_whitespace()))
        .map(|m| m.as_str().to_string())
}

/// State carried through global memory: the loop stores through a pointer base and loads
/// from the same base at addresses that do not move with the loop variable (or only
/// through `t % n`, double buffering). Returns the base and the store and load lines.
fn carried_through_memory(
    body: &[LogicalLine],
    loop_var: Option<&str>,
) -> Option<(String, usize, usize)> {
    let moves_with_loop = |expr: &str| -> bool {
        let Some(var) = loop_var else {
            return false;
        };
        let modulo = Regex::new(&format!(
            r"\(?\s*\b{0}\b\s*(?:[+-]\s*\w+\s*)?\)?\s*%\s*\w+",
            regex::escape(var)
        ))
        .expect("valid regex");
        let word = Regex::new(&format!(r"\b{}\b", regex::escape(var))).expect("valid regex");
        word.is_match(&modulo.replace_all(expr, " "))
    };
    let mut stores: Vec<(String, usize)> = Vec::new();
    let mut loads: Vec<(String, usize)> = Vec::new();
    for l in body {
        for arg in pointer_args(&l.code, "store") {
            if let Some(base) = pointer_base(arg) {
                stores.push((base, l.line));
            }
        }
        for arg in pointer_args(&l.code, "load") {
            if let Some(base) = pointer_base(arg).filter(|_| !moves_with_loop(arg)) {
                loads.push((base, l.line));
            }
        }
    }
    stores.iter().find_map(|(base, store)| {
        loads
            .iter()
            .find(|(b, _)| b == base)
            .map(|(_, load)| (base.clone(), *store, *load))
    })
}

/// Why a loop header walks tiles of a reduction rather than time, if it does.
fn tile_loop(header: &str, loop_var: Option<&str>, body: &[LogicalLine]) -> bool {
    if TILE_NAME.is_match(header) {
        return true;
    }
    let Some(var) = loop_var else {
        return false;
    };
    let scaled = Regex::new(&format!(
        r"(?i)\b{0}\s*\*\s*\w*(block|tile)\w*|\b\w*(block|tile)\w*\s*\*\s*{0}\b",
        regex::escape(var)
    ))
    .expect("valid regex");
    body.iter().any(|l| scaled.is_match(&l.code))
}

/// The persistent-kernel check: see the module documentation for the heuristic.
pub fn check(source: &str) -> PersistentCheck {
    let lines = logical_lines(source);
    let mut reasons = Vec::new();
    for f in jit_functions(&lines) {
        let body = f.body;
        for (i, l) in body.iter().enumerate() {
            let Some(m) = LOOP.captures(&l.code) else {
                continue;
            };
            let loop_var = m.get(1).map(|v| v.as_str().trim());
            let header = m.get(2).or(m.get(3)).map_or("", |h| h.as_str());
            let loop_body = block(body, i);
            if tile_loop(header, loop_var, loop_body) {
                continue;
            }
            // Variables assigned in the jit body before the loop.
            let mut before: BTreeSet<String> = BTreeSet::new();
            for earlier in &body[..i] {
                if let Some(a) = assignment(&earlier.code) {
                    before.extend(a.targets);
                }
            }
            for v in &before {
                if let Some((update, false)) = carried_update(loop_body, v) {
                    reasons.push(format!(
                        "kernel `{}` (line {}): loop `{}` at line {} carries `{}` across iterations \
                         (assigned before the loop, re-assigned from its previous value at line {})",
                        f.name, f.line, l.text, l.line, v, update
                    ));
                }
            }
            if let Some((base, store, load)) = carried_through_memory(loop_body, loop_var) {
                reasons.push(format!(
                    "kernel `{}` (line {}): loop `{}` at line {} carries state through memory: \
                     it stores through `{base}` (line {store}) and loads from `{base}` at addresses \
                     that do not move with the loop variable (line {load})",
                    f.name, f.line, l.text, l.line
                ));
            }
        }
    }
    PersistentCheck {
        persistent: !reasons.is_empty(),
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRU_PERSISTENT: &str = r#"
import triton
import triton.language as tl

@triton.autotune(
    configs=[triton.Config({"BLOCK_H": 64}, num_warps=4)],
    key=["hidden"],
)
@triton.jit
def gru_seq_kernel(gi_ptr, w_hh_ptr, h_ptr, seq_len, hidden,
                   BLOCK_H: tl.constexpr):
    """h_t = (1 - z) * n + z * h_{t-1}; the 'for' in this docstring is no loop"""
    b = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    h = tl.zeros((BLOCK_H,), dtype=tl.float32)  # the state
    for t in range(0, seq_len):
        gi = tl.load(gi_ptr + t * hidden + cols)
        gh = tl.sum(tl.load(w_hh_ptr + cols[:, None]) * h[None, :], axis=1)
        z = 1.0 / (1.0 + tl.exp(-(gi + gh)))
        n = gi * 2.0
        h = (1.0 - z) * n + z * h
    tl.store(h_ptr + b * hidden + cols, h)
"#;

    const PER_STEP_LAUNCH: &str = r#"
@triton.jit
def cell_kernel(x_ptr, h_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(h_ptr + offs, mask=mask)
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + h, 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        h = torch.zeros_like(x[:, 0])
        for t in range(x.shape[1]):
            out = torch.empty_like(h)
            cell_kernel[(triton.cdiv(h.numel(), 1024),)](x[:, t], h, out, h.numel(), BLOCK=1024)
            h = out
        return h
"#;

    const MATMUL: &str = r#"
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_ak, stride_bk,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr, acc)
"#;

    const SOFTMAX_ONLINE: &str = r#"
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    mx = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - mx), 0)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        tl.store(y_ptr + row * n_cols + cols, tl.exp(x - mx) / total, mask=cols < n_cols)
"#;

    #[test]
    fn persistent_gru_kernel_matches_and_says_why() {
        let r = check(GRU_PERSISTENT);
        assert!(r.persistent, "{r:?}");
        assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
        let why = &r.reasons[0];
        assert!(why.contains("gru_seq_kernel"), "{why}");
        assert!(why.contains("for t in range(0, seq_len):"), "{why}");
        assert!(why.contains("at line 16"), "{why}");
        assert!(why.contains("carries `h`"), "{why}");
        assert!(why.contains("line 21"), "{why}");
    }

    #[test]
    fn per_step_launch_loop_in_forward_does_not_match() {
        assert_eq!(check(PER_STEP_LAUNCH), PersistentCheck::default());
    }

    #[test]
    fn matmul_k_loop_and_tiled_softmax_do_not_match() {
        assert!(!check(MATMUL).persistent, "{:?}", check(MATMUL));
        assert!(
            !check(SOFTMAX_ONLINE).persistent,
            "{:?}",
            check(SOFTMAX_ONLINE)
        );
    }

    #[test]
    fn step_one_reduction_loop_is_an_accumulator_not_state() {
        // A K loop counted in tiles but without BLOCK in its header: still an accumulation.
        let src = r#"
@triton.jit
def dot_kernel(x_ptr, y_ptr, out_ptr, n_tiles, T: tl.constexpr):
    acc = tl.zeros((T,), dtype=tl.float32)
    best = tl.zeros((T,), dtype=tl.float32)
    p = x_ptr
    for i in range(n_tiles):
        x = tl.load(p + tl.arange(0, T))
        acc += x * x
        best = tl.maximum(best, x)
        p += T
    tl.store(out_ptr, tl.sum(acc, 0) + tl.max(best, 0))
"#;
        assert!(!check(src).persistent, "{:?}", check(src));
    }

    #[test]
    fn state_through_an_intermediate_and_a_while_loop_match() {
        let src = r#"
@jit
def rnn(x_ptr, w_ptr, out_ptr, steps, H: tl.constexpr):
    h = tl.load(out_ptr + tl.arange(0, H))
    t = 0
    while t < steps:
        pre = tl.sum(tl.load(w_ptr + tl.arange(0, H)) * h, 0) + tl.load(x_ptr + t)
        h_next = pre * 0.5
        h = h_next
        t += 1
    tl.store(out_ptr + tl.arange(0, H), h)
"#;
        let r = check(src);
        assert!(r.persistent, "{r:?}");
        assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
        assert!(r.reasons[0].contains("`rnn`") && r.reasons[0].contains("carries `h`"));
        assert!(r.reasons[0].contains("while t < steps:"));
    }

    #[test]
    fn state_overwritten_from_fresh_values_is_not_carried() {
        let src = r#"
@triton.jit
def k(x_ptr, out_ptr, T, H: tl.constexpr):
    h = tl.zeros((H,), dtype=tl.float32)
    for t in range(T):
        h = tl.load(x_ptr + t * H + tl.arange(0, H))
        h = h * 2.0
        tl.store(out_ptr + t * H + tl.arange(0, H), h)
"#;
        assert!(!check(src).persistent, "{:?}", check(src));
    }

    #[test]
    fn state_exchanged_through_a_global_buffer_matches_but_row_loops_do_not() {
        // Grid over batch and hidden tiles: each step reads the whole previous state from a
        // buffer and writes its own tile back.
        let gru_tiles = r#"
@triton.jit
def gru_tile_kernel(gi_ptr, w_ptr, hbuf_ptr, sync_ptr, T, H: tl.constexpr, BLOCK_H: tl.constexpr):
    b = tl.program_id(0)
    j = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    k = tl.arange(0, H)
    for t in range(T):
        h_prev = tl.load(hbuf_ptr + b * H + k)
        gh = tl.sum(tl.load(w_ptr + j[:, None] * H + k[None, :]) * h_prev[None, :], axis=1)
        gi = tl.load(gi_ptr + (b * T + t) * H + j)
        h_new = gi + gh
        tl.store(hbuf_ptr + b * H + j, h_new)
        tl.atomic_add(sync_ptr + t, 1)
"#;
        let r = check(gru_tiles);
        assert!(r.persistent, "{r:?}");
        assert!(
            r.reasons[0].contains("stores through `hbuf_ptr` (line 12)")
                && r.reasons[0].contains("(line 8)"),
            "{:?}",
            r.reasons
        );
        let double_buffered = gru_tiles
            .replace("hbuf_ptr + b * H + k", "hbuf_ptr + (t % 2) * H + k")
            .replace("hbuf_ptr + b * H + j", "hbuf_ptr + ((t + 1) % 2) * H + j");
        assert!(check(&double_buffered).persistent);

        // A grid-stride loop over rows, in place: the addresses move with the loop variable.
        let rows = r#"
@triton.jit
def scale_rows(x_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for i in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + i * n_cols + cols, mask=cols < n_cols)
        tl.store(x_ptr + i * n_cols + cols, x * 2.0, mask=cols < n_cols)
"#;
        assert!(!check(rows).persistent, "{:?}", check(rows));
    }
}
