//! Which tasks a batch runs: task files, directories of them, or a KernelBench checkout
//! (`KernelBench/level1/19_ReLU.py`), narrowed by `--level 1,2` and `--tasks 1-20,42`
//! (KernelBench problem ids, the number a file's name starts with).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::protocol::TaskKey;

/// One task found for a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundTask {
    pub key: TaskKey,
    /// The file's name without `.py` (`19_ReLU`).
    pub name: String,
    pub level: Option<u32>,
    pub problem: Option<u32>,
    pub file: PathBuf,
}

/// A set of numbers written as `1-20,42`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumberSet(BTreeSet<u32>);

impl NumberSet {
    pub fn parse(text: &str) -> Result<NumberSet> {
        let mut set = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .with_context(|| format!("`{part}` is not a number or a range like 1-20"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        bail!("`{part}`: a range goes from low to high");
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(number(part)?);
                }
            }
        }
        if set.is_empty() {
            bail!("`{text}` selects nothing");
        }
        Ok(NumberSet(set))
    }

    pub fn contains(&self, n: u32) -> bool {
        self.0.contains(&n)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
}

/// A file-name-safe key part: letters, digits, `_`, `.`, `-`; the rest becomes `_`.
fn key_part(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    let trimmed = cleaned.trim_matches(|c| c == '_' || c == '.');
    if trimmed.is_empty() {
        "task".into()
    } else {
        trimmed.into()
    }
}

/// `levelN` → N.
fn level_of_dir(dir: &Path) -> Option<u32> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("level")?
        .parse()
        .ok()
}

/// `19_ReLU` → 19.
fn problem_of(name: &str) -> Option<u32> {
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || !name[digits.len()..].starts_with('_') {
        return None;
    }
    digits.parse().ok()
}

/// The `levelN` directories of a KernelBench checkout (`KB/KernelBench/levelN`) or of its
/// dataset directory (`KB/KernelBench`), by level.
fn kernelbench_levels(dir: &Path) -> Vec<(u32, PathBuf)> {
    let root = if dir.join("KernelBench").is_dir() {
        dir.join("KernelBench")
    } else {
        dir.to_path_buf()
    };
    let mut levels: Vec<(u32, PathBuf)> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter_map(|p| level_of_dir(&p).map(|l| (l, p)))
        .collect();
    levels.sort();
    levels
}

/// The `.py` files directly in `dir`, by name.
fn python_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    Ok(files)
}

fn found(file: PathBuf, level: Option<u32>) -> FoundTask {
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "task".into());
    let level = level.or_else(|| file.parent().and_then(level_of_dir));
    let problem = problem_of(&name);
    let key = match (level, problem) {
        (Some(l), Some(p)) => {
            let rest = &name[name.find('_').map_or(name.len(), |i| i + 1)..];
            format!("L{l}_{p:03}_{}", key_part(rest))
        }
        _ => key_part(&name),
    };
    FoundTask {
        key: TaskKey(key),
        name,
        level,
        problem,
        file,
    }
}

/// Finds the tasks named by `inputs` (files, directories, KernelBench checkouts), keeps
/// those of `levels` and `problems`, and gives each a unique key. Order: KernelBench
/// tasks by level and problem, then the others in the order given.
pub fn find_tasks(
    inputs: &[PathBuf],
    levels: Option<&NumberSet>,
    problems: Option<&NumberSet>,
) -> Result<Vec<FoundTask>> {
    if inputs.is_empty() {
        bail!("name task files, directories of them, or a KernelBench checkout");
    }
    let mut tasks = Vec::new();
    for input in inputs {
        if input.is_file() {
            tasks.push(found(input.clone(), None));
            continue;
        }
        if !input.is_dir() {
            bail!("{}: no such file or directory", input.display());
        }
        let kb_levels = kernelbench_levels(input);
        if !kb_levels.is_empty() && level_of_dir(input).is_none() {
            let Some(wanted) = levels else {
                let present: Vec<String> = kb_levels.iter().map(|(l, _)| l.to_string()).collect();
                bail!(
                    "{} is a KernelBench checkout: choose levels with --level (present: {})",
                    input.display(),
                    present.join(",")
                );
            };
            for level in wanted.iter() {
                let Some((_, dir)) = kb_levels.iter().find(|(l, _)| *l == level) else {
                    bail!("{} has no level{level} directory", input.display());
                };
                tasks.extend(
                    python_files(dir)?
                        .into_iter()
                        .map(|f| found(f, Some(level))),
                );
            }
        } else {
            let files = python_files(input)?;
            if files.is_empty() {
                bail!("{} holds no .py task files", input.display());
            }
            tasks.extend(files.into_iter().map(|f| found(f, None)));
        }
    }
    if let Some(levels) = levels {
        tasks.retain(|t| t.level.is_none_or(|l| levels.contains(l)));
    }
    if let Some(problems) = problems {
        if let Some(t) = tasks.iter().find(|t| t.problem.is_none()) {
            bail!(
                "--tasks selects KernelBench problem numbers, and {} has none (its name does not start with `N_`)",
                t.file.display()
            );
        }
        tasks.retain(|t| t.problem.is_some_and(|p| problems.contains(p)));
    }
    // KernelBench order: by level, then problem number (not by file name: 10 after 9).
    tasks.sort_by_key(|t| (t.level.is_none(), t.level, t.problem));
    let mut seen = BTreeSet::new();
    let mut unique = Vec::with_capacity(tasks.len());
    for mut t in tasks {
        let canonical = std::fs::canonicalize(&t.file).unwrap_or(t.file.clone());
        if !seen.insert(canonical) {
            continue; // the same file named twice
        }
        let base = t.key.0.clone();
        let mut n = 2;
        while unique.iter().any(|u: &FoundTask| u.key == t.key) {
            t.key = TaskKey(format!("{base}-{n}"));
            n += 1;
        }
        unique.push(t);
    }
    if unique.is_empty() {
        bail!("the selection holds no task");
    }
    Ok(unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "# task\n").unwrap();
    }

    #[test]
    fn number_sets_take_lists_and_ranges() {
        let set = NumberSet::parse("1-3, 7,10-10").unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![1, 2, 3, 7, 10]);
        assert!(NumberSet::parse("3-1").is_err());
        assert!(NumberSet::parse("a").is_err());
        assert!(NumberSet::parse(" , ").is_err());
    }

    #[test]
    fn a_kernelbench_checkout_needs_levels_and_sorts_by_problem_number() {
        let dir = tempfile::tempdir().unwrap();
        let kb = dir.path().join("kb");
        for f in [
            "level1/1_Square.py",
            "level1/10_Matmul.py",
            "level1/9_Tall.py",
            "level2/1_Conv_ReLU.py",
        ] {
            touch(&kb.join("KernelBench").join(f));
        }
        let err = find_tasks(std::slice::from_ref(&kb), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("choose levels with --level (present: 1,2)"),
            "{err}"
        );

        let levels = NumberSet::parse("1,2").unwrap();
        let tasks = find_tasks(std::slice::from_ref(&kb), Some(&levels), None).unwrap();
        let keys: Vec<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "L1_001_Square",
                "L1_009_Tall",
                "L1_010_Matmul",
                "L2_001_Conv_ReLU"
            ]
        );
        assert_eq!((tasks[2].level, tasks[2].problem), (Some(1), Some(10)));

        let problems = NumberSet::parse("9-10").unwrap();
        let one = NumberSet::parse("1").unwrap();
        let tasks = find_tasks(std::slice::from_ref(&kb), Some(&one), Some(&problems)).unwrap();
        assert_eq!(tasks.len(), 2);
        // A level directory itself needs no --level.
        let tasks = find_tasks(&[kb.join("KernelBench/level2")], None, None).unwrap();
        assert_eq!(tasks[0].key.as_str(), "L2_001_Conv_ReLU");
        assert!(find_tasks(&[kb], Some(&NumberSet::parse("3").unwrap()), None).is_err());
    }

    #[test]
    fn plain_files_keep_their_names_and_duplicates_get_a_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a/relu.py");
        let b = dir.path().join("b/relu.py");
        touch(&a);
        touch(&b);
        let tasks = find_tasks(&[a.clone(), b, a.clone()], None, None).unwrap();
        let keys: Vec<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["relu", "relu-2"], "the same file twice is one task");
        let err = find_tasks(&[a], None, Some(&NumberSet::parse("1").unwrap()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("has none"), "{err}");
        assert!(find_tasks(&[dir.path().join("missing.py")], None, None).is_err());
    }
}
