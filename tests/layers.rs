//! The module graph is a DAG, laid out in the layers docs/architecture.md draws (Layers).
//!
//! The source is read as text, not compiled: every file under `src/` becomes a node (its
//! module path: `src/a/b.rs` is `a::b`, `src/a/mod.rs` is `a`, `src/main.rs` is the binary
//! `main`), and every path that names another module of the crate becomes an edge: `use
//! crate::...` statements, grouped ones (`use crate::{a::b, c::{d, e}}`) included, inline
//! paths in code (`crate::x::y(..)`), `super::`/`self::` paths and paths that start with a
//! child module's name. A path is resolved to the longest prefix that is a file's module,
//! then through that file's `pub use` re-exports, so `crate::llm::LlmConfig` counts as an
//! edge to the file that defines it when `llm/mod.rs` only re-exports it.
//!
//! Test code is not part of the layering and is skipped: comments and string literals are
//! blanked first (so a doc link or a message that spells `crate::x` is no edge), then every
//! item under a `#[cfg(test)]` attribute (up to its `;` or its balanced `{ .. }` block) and
//! every `mod tests { .. }` block is blanked, and a file declared `#[cfg(test)] mod x;` is
//! left out with its children. Blanking keeps the newlines, so line numbers stay true.
//!
//! `KFORGE_LAYERS_SRC=/path/to/src cargo test --test layers` checks another tree (main's,
//! to see what this test finds there).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The top-level modules, bottom layer first. A module may import only from its own layer
/// or a lower one; imports within a layer must not form a cycle (checked separately).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &["paths", "pysource", "charts", "external_editor", "logging"],
    ),
    ("vocabulary", &["protocol"]),
    ("settings", &["config"]),
    ("foundations", &["task", "llm", "shapes", "eval"]),
    ("session and shape checks", &["session", "shape_check"]),
    ("prompts and report", &["prompts", "report"]),
    ("engine", &["engine"]),
    ("front-end library", &["launch"]),
    ("front ends", &["batch", "mcp", "tui"]),
    ("command line", &["commands", "main"]),
];

/// File cycles allowed to remain (none now), each one strongly connected component of the
/// file graph, its files sorted. The test fails when a cycle not listed here appears and when
/// a listed one is gone, so the list is kept exact: whoever breaks one removes its entry.
const KNOWN_FILE_CYCLES: &[&[&str]] = &[];

/// One reference from a file to a module of the crate.
#[derive(Debug, Clone)]
struct Reference {
    /// Absolute module path segments (`["tui", "app", "Focus"]`), `crate` removed.
    path: Vec<String>,
    line: usize,
}

/// A parsed source file.
#[derive(Debug)]
struct SourceFile {
    /// `src/tui/app.rs`, relative to the crate root, for messages.
    display: String,
    /// Module path segments; empty for the crate root.
    module: Vec<String>,
    references: Vec<Reference>,
    /// `pub use` re-exports: the name as seen from outside -> the absolute path it names.
    reexports: BTreeMap<String, Vec<String>>,
    /// Children declared `#[cfg(test)] mod x;`, whose files are test code.
    test_children: Vec<String>,
}

/// Where an edge was seen: `src/batch/runner.rs:21`.
type Witness = String;

/// `from -> to`, with the first place that makes it.
type Graph = BTreeMap<String, BTreeMap<String, Witness>>;

/// Replaces comments, string and character literals with spaces, keeping newlines.
fn blank_comments_and_strings(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(chars.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.extend([' ', ' ']);
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.extend([' ', ' ']);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && starts_raw_or_byte_string(&chars, i)) {
            let word_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
            if c != '"' && word_before {
                out.push(c);
                i += 1;
                continue;
            }
            // Prefix letters (`b`, `r`, `br`), then hashes, then the quote.
            while chars[i] != '"' && chars[i] != '#' {
                out.push(' ');
                i += 1;
            }
            let mut hashes = 0;
            while chars[i] == '#' {
                hashes += 1;
                out.push(' ');
                i += 1;
            }
            let raw = hashes > 0 || (i > 0 && chars[i - 1] == 'r');
            out.push(' ');
            i += 1;
            while i < chars.len() {
                if !raw && chars[i] == '\\' {
                    out.push(' ');
                    out.push(blank(chars.get(i + 1).copied().unwrap_or(' ')));
                    i += 2;
                    continue;
                }
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', 1 + hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a): only the
            // literal is blanked.
            if next == Some('\\') {
                out.push(' ');
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    out.push(' ');
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                out.push(' ');
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.extend([' ', ' ', ' ']);
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Escapes skip two characters at once; pad so the lengths agree.
    out.truncate(chars.len());
    out.into_iter().collect()
}

/// `r"`, `r#"`, `b"`, `br"`, `br#"` start at `i`.
fn starts_raw_or_byte_string(chars: &[char], i: usize) -> bool {
    let mut j = i;
    if chars[j] == 'b' {
        j += 1;
    }
    if chars.get(j) == Some(&'r') {
        j += 1;
        while chars.get(j) == Some(&'#') {
            j += 1;
        }
    }
    j > i && chars.get(j) == Some(&'"')
}

/// Blanks test-only code (see the module comment) and returns the names of children
/// declared `#[cfg(test)] mod name;`.
fn blank_test_code(code: &str) -> (String, Vec<String>) {
    let mut chars: Vec<char> = code.chars().collect();
    let mut test_children = Vec::new();
    let text: String = chars.iter().collect();
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for marker in ["#[cfg(test)]", "mod tests {"] {
        let mut from = 0;
        while let Some(found) = text[from..].find(marker) {
            let byte = from + found;
            starts.push((text[..byte].chars().count(), marker.chars().count()));
            from = byte + marker.len();
        }
    }
    starts.sort();
    let mut blanked_to = 0;
    for (start, marker_len) in starts {
        if start < blanked_to {
            continue;
        }
        // The item ends at its first `;` or with the block its first `{` opens.
        let mut i = start + marker_len;
        if chars[start] == 'm' {
            i -= 1; // `mod tests {`: the marker ends on the block's brace.
        }
        while i < chars.len() && chars[i] != ';' && chars[i] != '{' {
            i += 1;
        }
        let item_end = if i < chars.len() && chars[i] == '{' {
            let mut depth = 0;
            loop {
                match chars[i] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let item: String = chars[start + marker_len..i].iter().collect();
            let words: Vec<&str> = item.split_whitespace().collect();
            if let Some(at) = words.iter().position(|w| *w == "mod") {
                test_children.push(words[at + 1].to_string());
            }
            (i + 1).min(chars.len())
        };
        for c in &mut chars[start..item_end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        blanked_to = item_end;
    }
    (chars.into_iter().collect(), test_children)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

fn tokenize(code: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push((Token::Ident(word), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push((Token::PathSep, line));
            i += 2;
        } else {
            let token = match c {
                '{' => Token::Open,
                '}' => Token::Close,
                ',' => Token::Comma,
                ';' => Token::Semi,
                '*' => Token::Star,
                other => Token::Other(other),
            };
            tokens.push((token, line));
            i += 1;
        }
    }
    tokens
}

/// The paths a use tree names, each with its alias (`as name`) if any. `i` is just past
/// the `use` keyword; returns the index past the closing `;`.
fn parse_use_tree(
    tokens: &[(Token, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) -> usize {
    let mut path = prefix.to_vec();
    let mut line = tokens.get(i).map_or(0, |t| t.1);
    while i < tokens.len() {
        match &tokens[i].0 {
            Token::Ident(word) if word == "as" => {
                let alias = match tokens.get(i + 1) {
                    Some((Token::Ident(alias), _)) => Some(alias.clone()),
                    _ => None,
                };
                out.push((std::mem::take(&mut path), alias, line));
                i += 2;
            }
            Token::Ident(word) => {
                if path.len() == prefix.len() {
                    line = tokens[i].1;
                }
                path.push(word.clone());
                i += 1;
            }
            Token::PathSep => i += 1,
            Token::Star => {
                path.push("*".to_string());
                i += 1;
            }
            Token::Open => {
                i += 1;
                loop {
                    i = parse_use_tree(tokens, i, &path, out);
                    match tokens.get(i.saturating_sub(1)).map(|t| &t.0) {
                        Some(Token::Comma) => continue,
                        _ => break,
                    }
                }
                path.clear();
            }
            Token::Comma | Token::Close | Token::Semi => {
                if path.len() > prefix.len() {
                    out.push((std::mem::take(&mut path), None, line));
                }
                return i + 1;
            }
            Token::Other(_) => i += 1,
        }
    }
    i
}

/// The module of a file: `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut segments: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = segments.pop().expect("a file name");
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        segments.push(stem.to_string());
    }
    segments
}

fn parse_file(
    display: String,
    module: Vec<String>,
    source: &str,
    children: &[String],
) -> SourceFile {
    let (code, test_children) = blank_test_code(&blank_comments_and_strings(source));
    let tokens = tokenize(&code);
    let is_binary = module == ["main"];
    // Makes a written path absolute, or None when it names no module of this crate.
    let absolute = |path: &[String]| -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "kforge" if is_binary => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut base = module.clone();
                let mut rest = rest;
                base.pop();
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                return Some(base.into_iter().chain(rest.iter().cloned()).collect());
            }
            child if children.iter().any(|c| c == child) => {
                return Some(module.iter().chain(path).cloned().collect());
            }
            _ => return None,
        };
        Some(base.into_iter().chain(rest.iter().cloned()).collect())
    };
    let mut references = Vec::new();
    let mut reexports = BTreeMap::new();
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = &tokens[i];
        let after_separator = i > 0 && tokens[i - 1].0 == Token::PathSep;
        match token {
            Token::Ident(word) if word == "use" && !after_separator => {
                // `pub use` or `pub(crate) use`.
                let public = i > 0
                    && (matches!(&tokens[i - 1].0, Token::Ident(w) if w == "pub")
                        || tokens[i - 1].0 == Token::Other(')'));
                let mut trees = Vec::new();
                i = parse_use_tree(&tokens, i + 1, &[], &mut trees);
                for (path, alias, line) in trees {
                    let Some(target) = absolute(&path) else {
                        continue;
                    };
                    if public && let Some(last) = path.last() {
                        let name = alias.unwrap_or_else(|| last.clone());
                        if name != "*" && name != "self" {
                            reexports.insert(name, target.clone());
                        }
                    }
                    references.push(Reference { path: target, line });
                }
                continue;
            }
            Token::Ident(word)
                if !after_separator && tokens.get(i + 1).map(|t| &t.0) == Some(&Token::PathSep) =>
            {
                let mut path = vec![word.clone()];
                let mut j = i + 1;
                while tokens.get(j).map(|t| &t.0) == Some(&Token::PathSep) {
                    match tokens.get(j + 1) {
                        Some((Token::Ident(next), _)) => path.push(next.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                if let Some(target) = absolute(&path) {
                    references.push(Reference {
                        path: target,
                        line: *line,
                    });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    SourceFile {
        display,
        module,
        references,
        reexports,
        test_children,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Every non-test file under `src`, keyed by its module path.
fn parse_tree(src: &Path) -> BTreeMap<Vec<String>, SourceFile> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let modules: Vec<(PathBuf, Vec<String>)> = paths
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(src).expect("under src").to_path_buf();
            let module = module_of(&relative);
            (path, module)
        })
        .collect();
    let mut files = BTreeMap::new();
    for (path, module) in &modules {
        // A file's children are the modules one level below it (a `main.rs` has none).
        let children: Vec<String> = modules
            .iter()
            .filter(|(_, other)| other.len() == module.len() + 1 && other.starts_with(module))
            .filter(|_| module.as_slice() != ["main"])
            .map(|(_, other)| other.last().expect("a child").clone())
            .filter(|child| !module.is_empty() || child != "main")
            .collect();
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let display = format!(
            "src/{}",
            path.strip_prefix(src).expect("under src").display()
        );
        files.insert(
            module.clone(),
            parse_file(display, module.clone(), &source, &children),
        );
    }
    let test_modules: Vec<Vec<String>> = files
        .values()
        .flat_map(|file| {
            file.test_children
                .iter()
                .map(|child| file.module.iter().chain([child]).cloned().collect())
        })
        .collect();
    files.retain(|module, _| !test_modules.iter().any(|test| module.starts_with(test)));
    files
}

/// The file a path lands in: the longest prefix that is a file's module, followed through
/// that file's re-exports.
fn resolve<'a>(
    files: &'a BTreeMap<Vec<String>, SourceFile>,
    path: &[String],
) -> Option<&'a SourceFile> {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let (length, file) = (0..=path.len())
            .rev()
            .find_map(|length| files.get(&path[..length]).map(|file| (length, file)))?;
        match path.get(length).and_then(|name| file.reexports.get(name)) {
            Some(target) if target.as_slice() != path.as_slice() => {
                path = target.iter().chain(&path[length + 1..]).cloned().collect();
            }
            _ => return Some(file),
        }
    }
    None
}

/// The file graph and the top-level module graph (a file's top-level module is its
/// module's first segment; the crate root is left out of the latter).
fn graphs(files: &BTreeMap<Vec<String>, SourceFile>) -> (Graph, Graph) {
    let mut file_graph = Graph::new();
    let mut top_graph = Graph::new();
    for file in files.values() {
        file_graph.entry(file.display.clone()).or_default();
        let Some(from_top) = file.module.first() else {
            continue;
        };
        top_graph.entry(from_top.clone()).or_default();
        for reference in &file.references {
            let witness = format!("{}:{}", file.display, reference.line);
            if let Some(to_top) = reference.path.first()
                && to_top != from_top
                && files.contains_key(&reference.path[..1])
            {
                top_graph
                    .entry(from_top.clone())
                    .or_default()
                    .entry(to_top.clone())
                    .or_insert_with(|| witness.clone());
            }
            if let Some(target) = resolve(files, &reference.path)
                && target.display != file.display
                && !target.module.is_empty()
            {
                file_graph
                    .entry(file.display.clone())
                    .or_default()
                    .entry(target.display.clone())
                    .or_insert(witness);
            }
        }
    }
    (file_graph, top_graph)
}

/// The strongly connected components with more than one node, each sorted (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        components: Vec<Vec<String>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for to in state
            .graph
            .get(node)
            .into_iter()
            .flat_map(|edges| edges.keys())
        {
            if !state.index.contains_key(to.as_str()) {
                visit(state, to);
                let low = state.low[node].min(state.low[to.as_str()]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(to.as_str()) {
                let low = state.low[node].min(state.index[to.as_str()]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.components.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.components.sort();
    state.components
}

/// One cycle through a component's first node, its edges named with their witnesses.
fn describe_cycle(graph: &Graph, component: &[String]) -> String {
    let members: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component[0].as_str();
    // Breadth first from the start, inside the component, until an edge leads back to it.
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut last = start;
    'search: while let Some(node) = queue.pop_front() {
        for to in graph[node].keys() {
            if to == start {
                last = node;
                break 'search;
            }
            if members.contains(to.as_str()) && !came_from.contains_key(to.as_str()) {
                came_from.insert(to, node);
                queue.push_back(to);
            }
        }
    }
    let mut path = vec![last];
    while let Some(previous) = came_from.get(path[path.len() - 1]) {
        path.push(previous);
    }
    path.reverse();
    path.push(start);
    let mut text = format!("cycle among {}:", component.join(", "));
    for pair in path.windows(2) {
        let _ = write!(
            text,
            "\n    {} -> {} ({})",
            pair[0], pair[1], graph[pair[0]][pair[1]]
        );
    }
    text
}

fn source_dir() -> PathBuf {
    std::env::var_os("KFORGE_LAYERS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn top_level_modules_form_no_cycle() {
    let (_, top_graph) = graphs(&parse_tree(&source_dir()));
    let found: Vec<String> = cycles(&top_graph)
        .iter()
        .map(|component| describe_cycle(&top_graph, component))
        .collect();
    assert!(
        found.is_empty(),
        "top-level module cycles:\n{}",
        found.join("\n")
    );
}

#[test]
fn top_level_modules_import_only_their_layer_or_lower() {
    let (_, top_graph) = graphs(&parse_tree(&source_dir()));
    let layer_of: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, (_, modules))| modules.iter().map(move |module| (*module, layer)))
        .collect();
    let mut problems = Vec::new();
    for (from, edges) in &top_graph {
        let Some(&from_layer) = layer_of.get(from.as_str()) else {
            problems.push(format!("`{from}` is in no layer: add it to LAYERS"));
            continue;
        };
        for (to, witness) in edges {
            let to_layer = layer_of.get(to.as_str()).copied().unwrap_or(usize::MAX);
            if to_layer > from_layer {
                problems.push(format!(
                    "{from} ({}) -> {to} ({}) at {witness}: imports a higher layer",
                    LAYERS[from_layer].0,
                    LAYERS.get(to_layer).map_or("no layer", |layer| layer.0),
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layer violations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn files_form_no_cycle_beyond_the_known_ones() {
    let (file_graph, _) = graphs(&parse_tree(&source_dir()));
    let found = cycles(&file_graph);
    let known: Vec<Vec<String>> = KNOWN_FILE_CYCLES
        .iter()
        .map(|files| files.iter().map(|file| file.to_string()).collect())
        .collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|component| !known.contains(component))
        .map(|component| describe_cycle(&file_graph, component))
        .collect();
    problems.extend(
        known
            .iter()
            .filter(|component| !found.contains(component))
            .map(|component| {
                format!(
                    "KNOWN_FILE_CYCLES lists [{}], which is no longer a cycle: remove it",
                    component.join(", ")
                )
            }),
    );
    assert!(problems.is_empty(), "file cycles:\n{}", problems.join("\n"));
}

#[test]
fn the_reader_finds_grouped_inline_relative_and_reexported_paths_outside_tests() {
    let source = r#"
//! Mentions crate::ignored::in_comment.
use crate::{alpha::One, beta::{Two, gamma::Three as Four}};
pub use child::Exported;
fn f() {
    let _ = crate::delta::make("crate::ignored::in_string");
    let _ = super::epsilon::Five;
    let _ = '"'; let _ = crate::zeta::Six;
}
#[cfg(test)]
mod tests {
    use crate::ignored::in_tests;
}
#[cfg(test)]
use crate::ignored::test_import;
#[cfg(test)]
mod fixtures;
"#;
    let file = parse_file(
        "src/here/mod.rs".to_string(),
        vec!["here".to_string()],
        source,
        &["child".to_string(), "fixtures".to_string()],
    );
    let found: Vec<(String, usize)> = file
        .references
        .iter()
        .map(|reference| (reference.path.join("::"), reference.line))
        .collect();
    let expected = [
        ("alpha::One", 3),
        ("beta::Two", 3),
        ("beta::gamma::Three", 3),
        ("here::child::Exported", 4),
        ("delta::make", 6),
        ("epsilon::Five", 7),
        ("zeta::Six", 8),
    ];
    let expected: Vec<(String, usize)> = expected
        .iter()
        .map(|(path, line)| (path.to_string(), *line))
        .collect();
    assert_eq!(found, expected);
    assert_eq!(
        file.reexports.get("Exported").map(|path| path.join("::")),
        Some("here::child::Exported".to_string())
    );
    assert_eq!(file.test_children, ["fixtures"]);
}
