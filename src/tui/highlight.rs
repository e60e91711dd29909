//! Syntax highlighting with syntect, off the UI thread and cached per (content hash,
//! syntect theme). Only foreground colours and bold are taken from syntect: its
//! backgrounds would paint over the terminal's and the diff colours.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, ThemeSet};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

use super::job::{self, BackgroundJob};

pub type Lines = Arc<Vec<Line<'static>>>;

type Key = (u64, String);

/// Highlighted files kept (a kernel is a few kB highlighted).
const CACHE_ENTRIES: usize = 1024;

/// A finished highlight job.
pub type Done = job::Done<Key, Lines>;

fn assets() -> &'static (SyntaxSet, ThemeSet) {
    static ASSETS: OnceLock<(SyntaxSet, ThemeSet)> = OnceLock::new();
    ASSETS.get_or_init(|| {
        (
            SyntaxSet::load_defaults_newlines(),
            ThemeSet::load_defaults(),
        )
    })
}

pub fn hash_text(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// Expands tabs and drops the line end.
pub fn clean_line(line: &str) -> String {
    line.trim_end_matches(['\n', '\r']).replace('\t', "    ")
}

/// Highlights Python source with a syntect theme (an unknown theme: plain lines).
pub fn highlight_python(text: &str, theme: &str) -> Vec<Line<'static>> {
    let (ss, ts) = assets();
    let Some(th) = ts.themes.get(theme) else {
        return text.lines().map(|l| Line::raw(clean_line(l))).collect();
    };
    let syntax = ss
        .find_syntax_by_extension("py")
        .unwrap_or_else(|| ss.find_syntax_plain_text());
    let mut h = HighlightLines::new(syntax, th);
    let mut out = Vec::new();
    for line in LinesWithEndings::from(text) {
        let spans = match h.highlight_line(line, ss) {
            Ok(regions) => regions
                .into_iter()
                .filter_map(|(style, piece)| {
                    let piece = clean_line(piece);
                    if piece.is_empty() {
                        return None;
                    }
                    let mut s = Style::default().fg(Color::Rgb(
                        style.foreground.r,
                        style.foreground.g,
                        style.foreground.b,
                    ));
                    if style.font_style.contains(FontStyle::BOLD) {
                        s = s.add_modifier(Modifier::BOLD);
                    }
                    Some(Span::styled(piece, s))
                })
                .collect(),
            Err(_) => vec![Span::raw(clean_line(line))],
        };
        out.push(Line::from(spans));
    }
    out
}

/// Highlight cache and worker.
pub struct Highlighter {
    job: BackgroundJob<Key, Arc<str>, Lines>,
    max_lines: usize,
}

/// Highlights a text with the key's theme.
fn highlight(key: &Key, text: Arc<str>) -> Option<Lines> {
    Some(Arc::new(highlight_python(&text, &key.1)))
}

impl Highlighter {
    /// Highlights inline, on the calling thread (tests, benchmarks).
    pub fn sync(max_lines: usize) -> Highlighter {
        Highlighter {
            job: BackgroundJob::inline(CACHE_ENTRIES, highlight),
            max_lines,
        }
    }

    /// Highlights on a worker thread; `notify` gets each result (it feeds the app loop).
    pub fn threaded(max_lines: usize, notify: impl Fn(Done) + Send + 'static) -> Highlighter {
        let notify = move |done| {
            notify(done);
            true
        };
        Highlighter {
            job: BackgroundJob::spawn("kforge-highlight", CACHE_ENTRIES, highlight, notify),
            max_lines,
        }
    }

    /// The highlighted lines if ready; otherwise starts the job and returns `None` (show
    /// plain text meanwhile). `None` also for no theme or too long a text.
    pub fn get(&self, text: &Arc<str>, theme: Option<&str>) -> Option<Lines> {
        let theme = theme?;
        if text.lines().count() > self.max_lines {
            return None;
        }
        let key = (hash_text(text), theme.to_string());
        self.job.get(&key, || text.clone())
    }

    pub fn done(&self, done: Done) {
        self.job.done(done);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn colours_foreground_only_and_caches() {
        let lines = highlight_python("def f(x):\n\treturn x + 1\n", "base16-ocean.dark");
        assert_eq!(lines.len(), 2);
        assert!(lines[1].spans.iter().all(|s| s.style.bg.is_none()));
        assert!(lines[0].spans.iter().any(|s| s.style.fg.is_some()));
        let text: String = lines[1].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "    return x + 1");
        let h = Highlighter::sync(100);
        let t: Arc<str> = Arc::from("x = 1\n");
        assert!(h.get(&t, Some("base16-ocean.dark")).is_some());
        assert!(h.get(&t, None).is_none());
        assert_eq!(h.job.cached_count(), 1);
    }

    #[test]
    fn worker_reports_results() {
        let (tx, rx) = mpsc::channel();
        let h = Highlighter::threaded(100, move |d| {
            let _ = tx.send(d);
        });
        let t: Arc<str> = Arc::from("import triton\n");
        assert!(h.get(&t, Some("InspiredGitHub")).is_none());
        let done = rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap();
        h.done(done);
        assert!(h.get(&t, Some("InspiredGitHub")).is_some());
    }
}
