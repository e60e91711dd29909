//! A line-level reader of Python source, without Python: logical lines (brackets,
//! continuations and triple-quoted strings joined; comments cut), indented blocks,
//! functions with their decorators, and assignment statements. The persistent-kernel check
//! reads jit bodies with it, and the prompts describe what a task's `forward` returns.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

pub mod task_reader;
pub mod traceback;

/// One logical line of Python source: physical lines joined across brackets, backslash
/// continuations and triple-quoted strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogicalLine {
    /// 1-based number of its first physical line.
    pub line: usize,
    /// Indentation of its first physical line (tabs count to the next multiple of 8).
    pub indent: usize,
    /// The code with comments removed; strings kept.
    pub text: String,
    /// The code with comments removed and the contents of strings blanked (for matching
    /// names without being fooled by strings).
    pub code: String,
    /// The comments of the line, joined (`# ...` markers removed).
    pub comment: String,
}

/// Splits Python source into logical lines, skipping blank and comment-only ones.
pub fn logical_lines(source: &str) -> Vec<LogicalLine> {
    let mut out = Vec::new();
    // The logical line being read; its `line` and `indent` are set where it starts.
    let mut cur = LogicalLine::default();
    let mut depth = 0usize;
    let mut line_no = 1usize;
    let mut at_line_start = true;
    let chars: Vec<char> = source.chars().collect();
    let mut i = 0;
    let finish = |cur: &mut LogicalLine, out: &mut Vec<LogicalLine>| {
        let done = std::mem::take(cur);
        if !done.code.trim().is_empty() {
            out.push(LogicalLine {
                text: done.text.trim().to_string(),
                code: done.code.trim().to_string(),
                comment: done.comment.trim().to_string(),
                ..done
            });
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if at_line_start {
            // Measure the indentation of a fresh logical line.
            let mut col = 0;
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                col = if chars[i] == '\t' {
                    (col / 8 + 1) * 8
                } else {
                    col + 1
                };
                i += 1;
            }
            cur.indent = col;
            cur.line = line_no;
            at_line_start = false;
            continue;
        }
        match c {
            '#' => {
                let end = chars[i..]
                    .iter()
                    .position(|&ch| ch == '\n')
                    .map_or(chars.len(), |p| i + p);
                let body: String = chars[i + 1..end].iter().collect();
                if !cur.comment.is_empty() {
                    cur.comment.push(' ');
                }
                cur.comment.push_str(body.trim());
                i = end;
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                cur.text.push(' ');
                cur.code.push(' ');
                line_no += 1;
                i += 2;
            }
            '\n' => {
                line_no += 1;
                i += 1;
                if depth == 0 {
                    finish(&mut cur, &mut out);
                    at_line_start = true;
                } else {
                    cur.text.push(' ');
                    cur.code.push(' ');
                }
            }
            '\'' | '"' => {
                let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                let quote_len = if triple { 3 } else { 1 };
                let mut j = i + quote_len;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if !triple && chars[j] == '\n' {
                        break;
                    }
                    if chars[j] == c
                        && (!triple
                            || (chars.get(j + 1) == Some(&c) && chars.get(j + 2) == Some(&c)))
                    {
                        j += quote_len;
                        break;
                    }
                    j += 1;
                }
                let j = j.min(chars.len());
                let literal: String = chars[i..j].iter().collect();
                line_no += literal.matches('\n').count();
                cur.text.push_str(&literal);
                cur.code.push_str(&c.to_string().repeat(quote_len * 2));
                i = j;
            }
            _ => {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                cur.text.push(c);
                cur.code.push(c);
                i += 1;
            }
        }
    }
    finish(&mut cur, &mut out);
    out
}

/// The lines of the block opened by `lines[header]` (those indented deeper than it).
pub fn block(lines: &[LogicalLine], header: usize) -> &[LogicalLine] {
    let base = lines[header].indent;
    let end = lines[header + 1..]
        .iter()
        .position(|l| l.indent <= base)
        .map_or(lines.len(), |p| header + 1 + p);
    &lines[header + 1..end]
}

/// A `def` and its body.
#[derive(Debug, Clone)]
pub struct Function<'a> {
    pub name: String,
    /// Line of the `def`.
    pub line: usize,
    pub decorators: Vec<&'a LogicalLine>,
    pub body: &'a [LogicalLine],
}

static DEF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(").expect("valid regex"));
static JIT_DECORATOR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^@\s*(?:triton\s*\.\s*)?jit\b").expect("valid regex"));

/// Every function definition (at any depth), with its stacked decorators.
pub fn functions(lines: &[LogicalLine]) -> Vec<Function<'_>> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(m) = DEF.captures(&l.code) else {
            continue;
        };
        let mut decorators = Vec::new();
        let mut j = i;
        while j > 0 && lines[j - 1].code.starts_with('@') && lines[j - 1].indent == l.indent {
            j -= 1;
            decorators.push(&lines[j]);
        }
        decorators.reverse();
        out.push(Function {
            name: m[1].to_string(),
            line: l.line,
            decorators,
            body: block(lines, i),
        });
    }
    out
}

/// The `@triton.jit` functions of a source.
pub fn jit_functions(lines: &[LogicalLine]) -> Vec<Function<'_>> {
    functions(lines)
        .into_iter()
        .filter(|f| f.decorators.iter().any(|d| JIT_DECORATOR.is_match(&d.code)))
        .collect()
}

/// A Python identifier.
pub static IDENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").expect("valid regex"));
static AUG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Za-z_]\w*)\s*(\+|-|\*|/|//|%|@|&|\||\^|>>|<<|\*\*)=\s*(.+)$")
        .expect("valid regex")
});
/// Names read by an expression (attribute names after a `.` and keyword-argument names
/// are not reads).
pub fn names_read(expr: &str) -> BTreeSet<String> {
    let bytes = expr.as_bytes();
    IDENT
        .find_iter(expr)
        .filter(|m| {
            let before = expr[..m.start()].trim_end();
            let after = expr[m.end()..].trim_start();
            let attribute = before.ends_with('.');
            let digit_prefix = m.start() > 0 && bytes[m.start() - 1].is_ascii_digit();
            let kwarg = after.starts_with('=') && !after.starts_with("==");
            !attribute && !digit_prefix && !kwarg
        })
        .map(|m| m.as_str().to_string())
        .collect()
}

/// Splits `s` at `sep` where it stands outside brackets.
pub fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ if c == sep && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// An assignment statement: plain (`a, b = e`), chained or augmented (`a += e`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Plain variable names assigned (subscript and attribute targets are stores to
    /// memory, not variables, and are left out).
    pub targets: Vec<String>,
    /// The right-hand side.
    pub value: String,
    /// The operator of an augmented assignment (`+` for `+=`).
    pub augmented: Option<String>,
}

/// Parses a logical line's code as an assignment, if it is one.
pub fn assignment(code: &str) -> Option<Assignment> {
    if let Some(m) = AUG.captures(code) {
        return Some(Assignment {
            targets: vec![m[1].to_string()],
            value: m[3].trim().to_string(),
            augmented: Some(m[2].to_string()),
        });
    }
    let first = code.split_whitespace().next().unwrap_or("");
    if [
        "if", "elif", "while", "for", "def", "return", "assert", "with", "class", "lambda",
    ]
    .contains(&first)
        || code.starts_with('@')
    {
        return None;
    }
    // Top-level `=` signs that are not parts of `==`, `<=`, `>=`, `!=`.
    let bytes = code.as_bytes();
    let mut cuts = Vec::new();
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'=' if depth == 0 => {
                let prev = if i > 0 { bytes[i - 1] } else { b' ' };
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if next != b'=' && !b"=<>!:".contains(&prev) {
                    cuts.push(i);
                }
            }
            _ => {}
        }
    }
    let last = *cuts.last()?;
    let mut targets = Vec::new();
    let mut start = 0;
    for &cut in &cuts {
        let lhs = &code[start..cut];
        start = cut + 1;
        // `x: tl.constexpr = ...` annotations: the name is before the colon.
        let lhs = lhs.split(':').next().unwrap_or(lhs);
        let lhs = lhs.trim();
        let lhs = match lhs.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
            Some(inner) if split_top(lhs, ',').len() == 1 => inner,
            _ => lhs,
        };
        for part in split_top(lhs, ',') {
            let part = part
                .trim_matches(|c: char| c.is_whitespace() || c == '(' || c == ')')
                .trim_start_matches('*');
            if !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_') {
                targets.push(part.to_string());
            }
        }
    }
    Some(Assignment {
        targets,
        value: code[last + 1..].trim().to_string(),
        augmented: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_lines_join_brackets_and_strip_comments_and_strings() {
        let src = "x = f(1,\n      2)  # two\ns = '''a\nb''' ; y = 'it''s'\n\n    # only a comment\nz = 3 \\\n  + 4\n";
        let lines = logical_lines(src);
        let texts: Vec<_> = lines.iter().map(|l| (l.line, l.text.as_str())).collect();
        assert_eq!(texts[0], (1, "x = f(1,       2)"));
        assert_eq!(lines[0].comment, "two");
        assert_eq!(texts[1].0, 3);
        assert!(
            lines[1].code.starts_with("s = \"\"\"\"\"\"")
                || lines[1].code.starts_with("s = ''''''")
        );
        assert_eq!(texts[2], (7, "z = 3    + 4"));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn assignments_are_parsed() {
        let a = assignment("a, (b) = f(x, k=2)").unwrap();
        assert_eq!(a.targets, vec!["a", "b"]);
        assert_eq!(a.value, "f(x, k=2)");
        assert!(assignment("if a == b:").is_none());
        assert!(assignment("tl.store(p, x, mask=m)").is_none());
        let aug = assignment("acc += tl.dot(a, b)").unwrap();
        assert_eq!(aug.augmented.as_deref(), Some("+"));
        assert_eq!(
            assignment("y[i] = 3").unwrap().targets,
            Vec::<String>::new()
        );
        assert_eq!(
            names_read("tl.load(p + 1, mask=m, other=0.0)"),
            ["m", "p", "tl"].iter().map(|s| s.to_string()).collect()
        );
    }
}
