//! Pulling the kernel code and the analysis JSON out of an answer's text.
//!
//! Pass the answer text only, never the reasoning: reasoning is full of drafts. Inline
//! `<think>...</think>` sections (local models without a reasoning parser) are removed.

use std::sync::LazyLock;

use regex::Regex;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("the answer contains no code: no ``` fenced block and no `class ModelNew`")]
    NoCode,
    #[error("the answer has {blocks} code block(s) but none defines `class ModelNew`")]
    NoModelNew { blocks: usize },
    #[error("the answer contains no JSON object (expected a ```json block or a bare {{...}})")]
    NoJson,
    #[error("the answer's JSON does not parse: {error} (near: {excerpt})")]
    InvalidJson { error: String, excerpt: String },
}

/// A fenced block: its info string's first word (lowercase) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub lang: String,
    pub body: String,
    /// False when the answer ended inside the block.
    pub closed: bool,
}

static THINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<think>.*?</think>").expect("valid regex"));
static MODEL_NEW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*class\s+ModelNew\b").expect("valid regex"));

fn strip_think(answer: &str) -> String {
    THINK.replace_all(answer, "").into_owned()
}

/// All fenced blocks (``` or ~~~, any length >= 3), in order. An unclosed last block runs
/// to the end of the text.
pub fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(char, usize, String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                let Some(ch) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') else {
                    continue;
                };
                let n = trimmed.chars().take_while(|c| *c == ch).count();
                let info = trimmed[n..].trim();
                if n >= 3 && !(ch == '`' && info.contains('`')) {
                    let lang = info
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_ascii_lowercase();
                    open = Some((ch, n, lang, Vec::new()));
                }
            }
            Some((ch, n, lang, lines)) => {
                let run = trimmed.chars().take_while(|c| c == ch).count();
                if run >= *n && trimmed[run..].trim().is_empty() {
                    blocks.push(Block {
                        lang: std::mem::take(lang),
                        body: join(lines),
                        closed: true,
                    });
                    open = None;
                } else {
                    lines.push(line);
                }
            }
        }
    }
    if let Some((_, _, lang, lines)) = open {
        blocks.push(Block {
            lang,
            body: join(&lines),
            closed: false,
        });
    }
    blocks
}

fn join(lines: &[&str]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

fn is_python(lang: &str) -> bool {
    lang.is_empty() || lang == "py" || lang.starts_with("python")
}

/// The kernel code: the last fenced Python block that defines `class ModelNew`, else the
/// last block of any language that does, else (no fences at all) the text from its first
/// code-looking line when it defines `ModelNew`.
pub fn extract_code(answer: &str) -> Result<String, ExtractError> {
    let answer = strip_think(answer);
    let blocks = fenced_blocks(&answer);
    let defines = |b: &&Block| MODEL_NEW.is_match(&b.body);
    let chosen = blocks
        .iter()
        .rfind(|b| defines(b) && is_python(&b.lang))
        .or_else(|| blocks.iter().rfind(defines));
    if let Some(block) = chosen {
        return Ok(block.body.clone());
    }
    if !blocks.is_empty() {
        return Err(ExtractError::NoModelNew {
            blocks: blocks.len(),
        });
    }
    if !MODEL_NEW.is_match(&answer) {
        return Err(ExtractError::NoCode);
    }
    let starts = ["import ", "from ", "@", "class ", "def ", "#"];
    let lines: Vec<&str> = answer.lines().collect();
    let first = lines
        .iter()
        .position(|l| starts.iter().any(|s| l.starts_with(s)))
        .unwrap_or(0);
    Ok(join(&lines[first..]))
}

pub use crate::protocol::Analysis;

/// Parses `text` as a JSON object, forgiving trailing commas.
fn parse_object(text: &str) -> Result<Value, String> {
    static TRAILING_COMMA: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r",(\s*[}\]])").expect("valid regex"));
    let strict = serde_json::from_str::<Value>(text.trim());
    let value = match strict {
        Ok(v) => v,
        Err(e) => serde_json::from_str::<Value>(&TRAILING_COMMA.replace_all(text.trim(), "$1"))
            .map_err(|_| e.to_string())?,
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err("not a JSON object".into())
    }
}

/// Balanced `{...}` spans of `text`, outermost only, strings respected.
fn bare_objects(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find('{') {
        let start = i + off;
        let (mut depth, mut in_str, mut escaped, mut end) = (0usize, false, false, None);
        for (j, &b) in bytes.iter().enumerate().skip(start) {
            if in_str {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_str = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(j) => {
                spans.push(&text[start..=j]);
                i = j + 1;
            }
            None => i = start + 1,
        }
    }
    spans
}

/// The analysis JSON: a ```json block, else any fenced block holding an object, else a
/// bare `{...}` in the text. An object with known keys wins over one without.
pub fn extract_analysis(answer: &str) -> Result<Analysis, ExtractError> {
    let answer = strip_think(answer);
    let blocks = fenced_blocks(&answer);
    let mut candidates: Vec<String> = blocks
        .iter()
        .filter(|b| b.lang == "json")
        .map(|b| b.body.clone())
        .collect();
    candidates.extend(
        blocks
            .iter()
            .filter(|b| b.lang != "json")
            .map(|b| b.body.clone()),
    );
    candidates.extend(bare_objects(&answer).into_iter().map(String::from));
    let mut first_error = None;
    let mut fallback = None;
    for text in &candidates {
        let inner = bare_objects(text).into_iter().next().unwrap_or(text);
        match parse_object(inner) {
            Ok(value) => {
                let known = value
                    .as_object()
                    .is_some_and(|m| m.keys().any(|k| Analysis::is_known_key(k)));
                if known {
                    return Ok(Analysis::from_object(value));
                }
                fallback.get_or_insert(value);
            }
            Err(error) if inner.trim_start().starts_with('{') => {
                first_error.get_or_insert(ExtractError::InvalidJson {
                    error,
                    excerpt: inner
                        .chars()
                        .take(120)
                        .collect::<String>()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                });
            }
            Err(_) => {}
        }
    }
    match (fallback, first_error) {
        (Some(v), _) => Ok(Analysis::from_object(v)),
        (None, Some(e)) => Err(e),
        (None, None) => Err(ExtractError::NoJson),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "import triton\n\nclass ModelNew(nn.Module):\n    pass\n";

    #[test]
    fn prefers_the_python_block_defining_model_new() {
        let answer = format!(
            "Here is a helper:\n```python\ndef helper():\n    pass\n```\nAnd the kernel:\n```python\n{KERNEL}```\nDone. Usage:\n```bash\npython run.py\n```\n"
        );
        assert_eq!(extract_code(&answer).unwrap(), KERNEL);
    }

    #[test]
    fn takes_the_last_of_several_versions_and_tolerates_tags_and_tildes() {
        let answer =
            format!("```py\nclass ModelNew: old\n```\nfixed:\n~~~~ python title=x\n{KERNEL}~~~~\n");
        assert_eq!(extract_code(&answer).unwrap(), KERNEL);
    }

    #[test]
    fn survives_an_unclosed_fence() {
        let answer =
            format!("Sure.\n```python\n{KERNEL}    def forward(self, x):\n        return x");
        let code = extract_code(&answer).unwrap();
        assert!(
            code.starts_with("import triton") && code.ends_with("return x\n"),
            "{code}"
        );
    }

    #[test]
    fn ignores_inline_think_sections_and_unfenced_answers_work() {
        let answer = format!(
            "<think>\n```python\nclass ModelNew: draft\n```\n</think>\n```python\n{KERNEL}```"
        );
        assert_eq!(extract_code(&answer).unwrap(), KERNEL);
        let bare = format!("Here you go:\n{KERNEL}");
        assert_eq!(extract_code(&bare).unwrap(), KERNEL);
    }

    #[test]
    fn clear_errors_when_nothing_is_found() {
        assert_eq!(extract_code("I cannot do that."), Err(ExtractError::NoCode));
        assert_eq!(
            extract_code("```python\nx = 1\n```"),
            Err(ExtractError::NoModelNew { blocks: 1 })
        );
        assert!(
            extract_code("no code")
                .unwrap_err()
                .to_string()
                .contains("ModelNew")
        );
        assert_eq!(extract_analysis("no json here"), Err(ExtractError::NoJson));
        let e =
            extract_analysis("```json\n{\"reason\": \"x\" \"bottleneck\": 1}\n```").unwrap_err();
        assert!(matches!(e, ExtractError::InvalidJson { .. }), "{e:?}");
    }

    #[test]
    fn analysis_fenced_with_british_keys() {
        let answer = "Analysis:\n```json\n{\n  \"Worth Optimising\": \"Yes\",\n  \"optimisation method\": \"fuse\",\n  \"modification-plan\": [\"a\", \"b\"],\n  \"expected_speedup\": \"~1.5x\",\n  \"output_requirement\": \"only h_n\",\n}\n```";
        let a = extract_analysis(answer).unwrap();
        assert_eq!(a.worth_optimizing, Some(true));
        assert_eq!(a.optimization_method.as_deref(), Some("fuse"));
        assert_eq!(a.modification_plan.as_deref(), Some("a\nb"));
        assert_eq!(a.expected_speedup_factor(), Some(1.5));
        assert_eq!(a.output_requirement.as_deref(), Some("only h_n"));
    }

    #[test]
    fn analysis_bare_object_with_braces_in_strings() {
        let answer = "I think {this} matters. {\"worth_optimizing\": false, \"reason\": \"already {fast}\", \"optimization_method\": null}";
        let a = extract_analysis(answer).unwrap();
        assert_eq!(a.worth_optimizing, Some(false));
        assert_eq!(a.reason.as_deref(), Some("already {fast}"));
        assert_eq!(a.optimization_method, None);
    }

    #[test]
    fn key_normalization() {
        for key in [
            "Optimisation Method",
            "optimization_method",
            " worth-optimizing ",
            "Expected Speedup",
        ] {
            assert!(Analysis::is_known_key(key), "{key}");
        }
    }
}
