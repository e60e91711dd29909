//! Line diffs between two kernels with word-level emphasis, in two layouts: unified and
//! side by side (deleted and inserted runs paired row by row, the shorter side padded).

use similar::{ChangeTag, TextDiff};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    Hunk,
    Context,
    Added,
    Removed,
}

/// Text with emphasized (changed-word) runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segments(pub Vec<(bool, String)>);

impl Segments {
    pub fn plain(text: &str) -> Segments {
        Segments(vec![(false, text.to_string())])
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct UnifiedRow {
    pub kind: RowKind,
    pub old_no: Option<usize>,
    pub new_no: Option<usize>,
    pub text: Segments,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Half {
    pub no: usize,
    pub kind: RowKind,
    pub text: Segments,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SideRow {
    Hunk(String),
    Pair(Option<Half>, Option<Half>),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    pub unified: Vec<UnifiedRow>,
    pub side: Vec<SideRow>,
    /// Row index of each hunk header, per layout.
    pub hunks_unified: Vec<usize>,
    pub hunks_side: Vec<usize>,
    pub added: usize,
    pub removed: usize,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.added == 0 && self.removed == 0
    }
}

fn segments(change: &similar::InlineChange<'_, str>) -> Segments {
    let mut out: Vec<(bool, String)> = Vec::new();
    for (emph, text) in change.iter_strings_lossy() {
        let text = text.trim_end_matches(['\n', '\r']).to_string();
        if text.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((e, t)) if *e == emph => t.push_str(&text),
            _ => out.push((emph, text)),
        }
    }
    Segments(out)
}

/// Diffs `old` against `new` with `context` lines around each change.
pub fn diff(old: &str, new: &str, context: usize) -> Diff {
    let td = TextDiff::configure()
        .algorithm(similar::Algorithm::Patience)
        .timeout(std::time::Duration::from_millis(200))
        .diff_lines(old, new);
    let mut d = Diff::default();
    for group in td.grouped_ops(context) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_start = first.old_range().start;
        let new_start = first.new_range().start;
        let old_len = last.old_range().end - old_start;
        let new_len = last.new_range().end - new_start;
        let header = format!(
            "@@ -{},{} +{},{} @@",
            old_start + 1,
            old_len,
            new_start + 1,
            new_len
        );
        d.hunks_unified.push(d.unified.len());
        d.hunks_side.push(d.side.len());
        d.unified.push(UnifiedRow {
            kind: RowKind::Hunk,
            old_no: None,
            new_no: None,
            text: Segments::plain(&header),
        });
        d.side.push(SideRow::Hunk(header));
        let mut dels: Vec<Half> = Vec::new();
        let mut ins: Vec<Half> = Vec::new();
        let flush = |d: &mut Diff, dels: &mut Vec<Half>, ins: &mut Vec<Half>| {
            let n = dels.len().max(ins.len());
            let mut dl = dels.drain(..);
            let mut il = ins.drain(..);
            for _ in 0..n {
                d.side.push(SideRow::Pair(dl.next(), il.next()));
            }
        };
        for op in &group {
            for change in td.iter_inline_changes(op) {
                let text = segments(&change);
                match change.tag() {
                    ChangeTag::Equal => {
                        flush(&mut d, &mut dels, &mut ins);
                        let (o, n) = (
                            change.old_index().unwrap_or(0) + 1,
                            change.new_index().unwrap_or(0) + 1,
                        );
                        let plain = Segments::plain(
                            &text.0.iter().map(|(_, t)| t.as_str()).collect::<String>(),
                        );
                        d.unified.push(UnifiedRow {
                            kind: RowKind::Context,
                            old_no: Some(o),
                            new_no: Some(n),
                            text: plain.clone(),
                        });
                        d.side.push(SideRow::Pair(
                            Some(Half {
                                no: o,
                                kind: RowKind::Context,
                                text: plain.clone(),
                            }),
                            Some(Half {
                                no: n,
                                kind: RowKind::Context,
                                text: plain,
                            }),
                        ));
                    }
                    ChangeTag::Delete => {
                        d.removed += 1;
                        let o = change.old_index().unwrap_or(0) + 1;
                        d.unified.push(UnifiedRow {
                            kind: RowKind::Removed,
                            old_no: Some(o),
                            new_no: None,
                            text: text.clone(),
                        });
                        dels.push(Half {
                            no: o,
                            kind: RowKind::Removed,
                            text,
                        });
                    }
                    ChangeTag::Insert => {
                        d.added += 1;
                        let n = change.new_index().unwrap_or(0) + 1;
                        d.unified.push(UnifiedRow {
                            kind: RowKind::Added,
                            old_no: None,
                            new_no: Some(n),
                            text: text.clone(),
                        });
                        ins.push(Half {
                            no: n,
                            kind: RowKind::Added,
                            text,
                        });
                    }
                }
            }
        }
        flush(&mut d, &mut dels, &mut ins);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_changed_lines_and_emphasizes_words() {
        let old = "a\nBLOCK = 128\nb\nc\n";
        let new = "a\nBLOCK = 256\nb\nc\nd\n";
        let d = diff(old, new, 3);
        assert_eq!((d.added, d.removed), (2, 1));
        assert_eq!(d.hunks_unified, vec![0]);
        let changed = d.unified.iter().find(|r| r.kind == RowKind::Added).unwrap();
        assert!(changed.text.0.contains(&(true, "256".to_string())));
        // Side by side: the changed line sits next to its replacement, the extra line
        // has an empty left side.
        let pairs: Vec<_> = d
            .side
            .iter()
            .filter_map(|r| match r {
                SideRow::Pair(l, r) => Some((l.as_ref().map(|h| h.no), r.as_ref().map(|h| h.no))),
                _ => None,
            })
            .collect();
        assert!(pairs.contains(&(Some(2), Some(2))));
        assert!(pairs.contains(&(None, Some(5))));
    }

    #[test]
    fn equal_texts_have_no_hunks() {
        let d = diff("x\ny\n", "x\ny\n", 3);
        assert!(d.is_empty());
        assert!(d.unified.is_empty() && d.hunks_side.is_empty());
    }

    #[test]
    fn separate_changes_make_separate_hunks() {
        let old: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replace("line 3\n", "line three\n")
            .replace("line 30\n", "line thirty\n");
        let d = diff(&old, &new, 2);
        assert_eq!(d.hunks_unified.len(), 2);
        assert_eq!(d.hunks_side.len(), 2);
    }
}
