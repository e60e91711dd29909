//! What a KernelBench task's `Model.forward` returns, read from its Python source with
//! regular expressions over logical lines (no interpreter): the prompts state it so the
//! kernel returns the same thing.

use std::sync::LazyLock;

use regex::Regex;

use super::{LogicalLine, block, functions, logical_lines};

static CLASS_MODEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^class\s+Model\s*[(:]").expect("valid regex"));
static SELF_ATTR_CALL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^self\.(\w+)\s*\(").expect("valid regex"));
static INDEXED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.+?)((?:\[\s*-?\d+\s*\])+)$").expect("valid regex"));
static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("valid regex"));
static MODULE_CLASS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:nn\.)?([A-Z]\w*)\s*\(").expect("valid regex"));
static BATCH_FIRST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"batch_first\s*=\s*(True|False)\b").expect("valid regex"));
static RECURRENT_MODULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:nn\.)?(GRU|LSTM|RNN)\s*\(").expect("valid regex"));

/// Splits `s` at top-level commas (outside brackets), trimmed, empty parts dropped.
fn top_level_items(s: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut current) = (0i32, String::new());
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

/// `(a, b)` -> `a, b` when the parentheses wrap the whole expression.
fn strip_outer_parens(s: &str) -> &str {
    let s = s.trim();
    if !(s.starts_with('(') && s.ends_with(')')) {
        return s;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 && i + 1 < s.len() {
                    return s;
                }
            }
            _ => {}
        }
    }
    &s[1..s.len() - 1]
}

/// What a recurrent module's output element means (`GRU`, `[1]`).
/// `batch_first` is `None` when the constructor sets it from a variable (unknown here).
fn recurrent_element(module: &str, path: &[usize], batch_first: Option<bool>) -> Option<String> {
    let seq = match batch_first {
        Some(true) => "(batch, seq_len, num_directions * hidden_size)",
        Some(false) => "(seq_len, batch, num_directions * hidden_size)",
        None => {
            "(seq_len, batch, num_directions * hidden_size), or (batch, seq_len, ...) if the \
             module is batch_first"
        }
    };
    let output = format!(
        "the output sequence: the last layer's hidden state at every time step, shape {seq}"
    );
    let h_n = "the final hidden state h_n: the last time step of every layer (and direction), \
               shape (num_layers * num_directions, batch, hidden_size)";
    let c_n = "the final cell state c_n, shape (num_layers * num_directions, batch, hidden_size)";
    Some(match (module, path) {
        (_, [0]) => output,
        ("LSTM", [1]) => format!("the tuple (h_n, c_n): {h_n}; and {c_n}"),
        ("LSTM", [1, 0]) => h_n.to_string(),
        ("LSTM", [1, 1]) => c_n.to_string(),
        (_, [1]) => h_n.to_string(),
        _ => return None,
    })
}

/// The module class of `self.<attr> = nn.X(...)` in `__init__`, and whether it is
/// `batch_first` (`None`: set from a variable, so unknown here).
fn module_of(model_body: &[LogicalLine], attr: &str) -> Option<(String, Option<bool>)> {
    let assign = Regex::new(&format!(r"^self\.{}\s*=\s*(.+)$", regex::escape(attr))).ok()?;
    model_body.iter().find_map(|l| {
        let value = assign.captures(&l.code)?.get(1)?.as_str().to_string();
        let class = RECURRENT_MODULE
            .captures(&value)
            .map(|c| c[1].to_string())
            .or_else(|| MODULE_CLASS.captures(&value).map(|c| c[1].to_string()))?;
        let batch_first = match BATCH_FIRST.captures(&value) {
            Some(m) => Some(&m[1] == "True"),
            None if value.contains("batch_first") => None,
            None => Some(false),
        };
        Some((class, batch_first))
    })
}

/// A name bound by an unpacking assignment and its index path in the unpacked value.
type Unpacked = (String, Vec<usize>);

/// Targets of an unpacking assignment with their index paths: `out, (h, c) = e` gives
/// `out -> [0]`, `h -> [1, 0]`, `c -> [1, 1]`.
fn unpack_targets(lhs: &str, prefix: &[usize], out: &mut Vec<Unpacked>) {
    let items = top_level_items(strip_outer_parens(lhs));
    if items.len() == 1 && prefix.is_empty() && !lhs.trim().starts_with('(') {
        out.push((items[0].clone(), Vec::new()));
        return;
    }
    for (i, item) in items.iter().enumerate() {
        let mut path = prefix.to_vec();
        path.push(i);
        if item.starts_with('(') || item.starts_with('[') {
            let inner = item.trim_start_matches('[').trim_end_matches(']');
            unpack_targets(inner, &path, out);
        } else {
            out.push((item.clone(), path));
        }
    }
}

/// At most `max` characters of an expression, for quoting it.
fn shorten(expr: &str, max: usize) -> String {
    if expr.chars().count() <= max {
        return expr.to_string();
    }
    let mut s: String = expr.chars().take(max).collect();
    s.push_str(" ...");
    s
}

/// Describes one returned expression of `forward`.
fn describe_value(expr: &str, forward: &[LogicalLine], model_body: &[LogicalLine]) -> String {
    let shortened = shorten(expr.trim(), 160);
    let expr = shortened.as_str();
    // The call whose result this is, and the element path taken from it.
    let mut source: Option<(String, Vec<usize>, Vec<Unpacked>)> = None;
    if let Some(m) = INDEXED.captures(expr) {
        let path: Vec<usize> = DIGITS
            .find_iter(&m[2])
            .filter_map(|d| d.as_str().parse().ok())
            .collect();
        if !m[2].contains('-') {
            source = Some((m[1].trim().to_string(), path, Vec::new()));
        }
    } else if expr.chars().all(|c| c.is_alphanumeric() || c == '_') {
        // The last assignment to this name in forward.
        for l in forward.iter().rev() {
            let Some((lhs, rhs)) = split_assignment(&l.text) else {
                continue;
            };
            let mut targets: Vec<Unpacked> = Vec::new();
            unpack_targets(&lhs, &[], &mut targets);
            if let Some((_, path)) = targets.iter().find(|(n, _)| n == expr) {
                if path.is_empty() {
                    return format!("`{expr}`, computed as `{rhs}`");
                }
                let others: Vec<(String, Vec<usize>)> =
                    targets.iter().filter(|(n, _)| n != expr).cloned().collect();
                source = Some((rhs, path.clone(), others));
                break;
            }
        }
    }
    let Some((call, path, others)) = source else {
        return format!("`{expr}`");
    };
    let index: String = path.iter().map(|i| format!("[{i}]")).collect();
    let mut text = format!("`{expr}`: element {index} of what `{call}` returns");
    let module = SELF_ATTR_CALL
        .captures(&call)
        .and_then(|m| module_of(model_body, &m[1]));
    if let Some((class, batch_first)) = &module {
        text.push_str(&format!(" (an nn.{class})"));
        if let Some(meaning) = recurrent_element(class, &path, *batch_first) {
            text.push_str(&format!(", i.e. {meaning}"));
        }
        let dropped: Vec<String> = others
            .iter()
            .map(|(name, p)| {
                let meaning = recurrent_element(class, p, *batch_first)
                    .map(|m| format!(" ({})", m.split(':').next().unwrap_or(&m)))
                    .unwrap_or_default();
                format!("`{name}`{meaning}")
            })
            .collect();
        if !dropped.is_empty() {
            text.push_str(&format!(
                ". The other element(s), {}, are not returned: do not spend time producing \
                 them beyond what the returned value needs",
                dropped.join(", ")
            ));
        } else if RECURRENT_MODULE.is_match(&format!("{class}(")) {
            text.push_str(". Nothing else of the module's output is returned");
        }
    }
    text
}

/// `lhs = rhs` of a plain assignment line (not `==`, not augmented), if it is one.
fn split_assignment(text: &str) -> Option<(String, String)> {
    let a = super::assignment(text)?;
    if a.augmented.is_some() {
        return None;
    }
    let cut = text.len() - a.value.len();
    let lhs = text[..cut].trim_end().strip_suffix('=')?.trim().to_string();
    Some((lhs, a.value))
}

/// Describes what `Model.forward` returns, for the prompts: its `return` expression(s),
/// whether it is one tensor or a tuple, which element of a recurrent module's output it
/// is, and the comment on the return line (often the shape).
pub fn forward_returns(task_source: &str) -> String {
    let lines = logical_lines(task_source);
    let Some(class_at) = lines
        .iter()
        .position(|l| l.indent == 0 && CLASS_MODEL.is_match(&l.code))
    else {
        return "could not be determined (no `class Model` found): read the reference".into();
    };
    let model_body = block(&lines, class_at);
    let Some(forward) = functions(model_body)
        .into_iter()
        .find(|f| f.name == "forward")
    else {
        return "could not be determined (`Model` has no `forward`): read the reference".into();
    };
    let returns: Vec<&LogicalLine> = forward
        .body
        .iter()
        .filter(|l| {
            l.code == "return" || l.code.starts_with("return ") || l.code.starts_with("return(")
        })
        .collect();
    if returns.is_empty() {
        return "nothing (`forward` has no return statement): it returns None".into();
    }
    let described: Vec<String> = returns
        .iter()
        .map(|l| {
            let expr = l.text["return".len()..].trim();
            let mut text = if expr.is_empty() || expr == "None" {
                "None".to_string()
            } else {
                let items = top_level_items(strip_outer_parens(expr));
                let is_tuple = items.len() > 1 || expr.trim_end().ends_with(",)");
                if is_tuple {
                    let parts: Vec<String> = items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            format!("[{i}] {}", describe_value(item, forward.body, model_body))
                        })
                        .collect();
                    format!(
                        "a tuple of {} values, in this order: {}",
                        items.len(),
                        parts.join("; ")
                    )
                } else {
                    format!(
                        "a single value (one tensor): {}",
                        describe_value(expr, forward.body, model_body)
                    )
                }
            };
            text.push('.');
            if !l.comment.is_empty() {
                text.push_str(&format!(" The task's comment on that line: {}", l.comment));
            }
            text
        })
        .collect();
    if described.len() == 1 {
        described.into_iter().next().unwrap_or_default()
    } else {
        let lines: Vec<String> = returns
            .iter()
            .zip(&described)
            .map(|(l, d)| format!("line {}: {d}", l.line))
            .collect();
        format!(
            "one of {} return statements, depending on the path taken: {}",
            lines.len(),
            lines.join(" | ")
        )
    }
}

/// Whether the task uses a recurrent module (nn.GRU, nn.LSTM, nn.RNN, or their cells).
pub fn is_recurrent(task_source: &str) -> bool {
    static RECURRENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\bnn\.(GRU|LSTM|RNN)(Cell)?\s*\(").expect("valid regex"));
    RECURRENT.is_match(task_source)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRU_HIDDEN: &str = include_str!("../../examples/tasks/gru_hidden.py");
    const RELU: &str = include_str!("../../examples/tasks/relu.py");

    #[test]
    fn forward_returns_describes_single_values() {
        let text = forward_returns(RELU);
        assert!(text.starts_with("a single value (one tensor): `"), "{text}");
    }

    #[test]
    fn forward_returns_names_the_recurrent_element_and_what_is_dropped() {
        let text = forward_returns(GRU_HIDDEN);
        assert!(
            text.contains("`h_n`: element [1] of what `self.gru(x)` returns"),
            "{text}"
        );
        assert!(text.contains("nn.GRU"), "{text}");
        assert!(text.contains("final hidden state h_n"), "{text}");
        assert!(text.contains("`_` (the output sequence)"), "{text}");
        assert!(
            text.ends_with(
                ". The task's comment on that line: (num_layers, batch_size, hidden_size)"
            ),
            "{text}"
        );
    }

    #[test]
    fn forward_returns_tuples_indexing_lstm_and_branches() {
        let lstm = r#"
class Model(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.lstm = nn.LSTM(i, h, batch_first=True)
        self.fc = nn.Linear(h, 10)

    def forward(self, x):
        out, (h_n, c_n) = self.lstm(x)
        return c_n
"#;
        let text = forward_returns(lstm);
        assert!(text.contains("element [1][1]"), "{text}");
        assert!(text.contains("final cell state c_n"), "{text}");
        assert!(text.contains("`out` (the output sequence)"), "{text}");

        let tuple = "class Model(nn.Module):\n    def forward(self, a, b):\n        return (a + b, a * b)\n";
        let text = forward_returns(tuple);
        assert!(text.starts_with("a tuple of 2 values"), "{text}");
        assert!(text.contains("[0] `a + b`; [1] `a * b`"), "{text}");

        let indexed = "class Model(nn.Module):\n    def __init__(self):\n        self.rnn = nn.RNN(4, 8, batch_first=True)\n    def forward(self, x):\n        return self.rnn(x)[0]\n";
        let text = forward_returns(indexed);
        assert!(
            text.contains("element [0] of what `self.rnn(x)` returns"),
            "{text}"
        );
        assert!(text.contains("shape (batch, seq_len,"), "{text}");

        // KernelBench level 3: batch_first passed positionally from a variable.
        let kb = "class Model(nn.Module):\n    def __init__(self, i, h, n=3, bias=True, batch_first=False):\n        super(Model, self).__init__()\n        self.gru = nn.GRU(i, h, n, bias, batch_first, dropout=0, bidirectional=True)\n        self.h0 = torch.randn((n * 2, 10, h))\n\n    def forward(self, x):\n        self.h0 = self.h0.to(x.device)\n        output, h_n = self.gru(x, self.h0)\n        return output\n";
        let text = forward_returns(kb);
        assert!(
            text.contains(
                "`output`: element [0] of what `self.gru(x, self.h0)` returns (an nn.GRU)"
            ),
            "{text}"
        );
        assert!(
            text.contains("or (batch, seq_len, ...) if the module is batch_first"),
            "{text}"
        );
        assert!(
            text.contains("`h_n` (the final hidden state h_n), are not returned"),
            "{text}"
        );
        let long = format!(
            "class Model(nn.Module):\n    def forward(self, x):\n        return x + {}\n",
            "x + ".repeat(100)
        );
        assert!(forward_returns(&long).len() < 300);

        let branches = "class Model(nn.Module):\n    def forward(self, x):\n        if x.dim() > 2:\n            return x.sum(0)\n        return x\n";
        let text = forward_returns(branches);
        assert!(text.starts_with("one of 2 return statements"), "{text}");
        assert!(forward_returns("x = 1\n").contains("no `class Model`"));
    }
}
