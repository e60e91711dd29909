//! A small text buffer for instructions, the console filter and inline edits of a prompt or
//! a kernel (which can be long: the view scrolls on its own, pages move the cursor).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Debug, Clone, PartialEq)]
pub struct TextBuf {
    pub lines: Vec<String>,
    /// Cursor: line, and position in chars.
    pub row: usize,
    pub col: usize,
    /// First line shown: the view follows the cursor without pinning it to an edge.
    pub top: usize,
    /// Lines a page moves (the view's height, as last drawn).
    pub page: usize,
}

fn byte_at(s: &str, col: usize) -> usize {
    s.char_indices().nth(col).map_or(s.len(), |(i, _)| i)
}

impl TextBuf {
    pub fn new(text: &str) -> TextBuf {
        let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        if lines.is_empty() {
            lines.push(String::new());
        }
        let row = lines.len() - 1;
        let col = lines[row].chars().count();
        TextBuf {
            lines,
            row,
            col,
            top: 0,
            page: 20,
        }
    }

    /// A buffer with the cursor at the start: for editing a whole file.
    pub fn at_start(text: &str) -> TextBuf {
        TextBuf {
            row: 0,
            col: 0,
            ..TextBuf::new(text)
        }
    }

    /// The first line to show in a view `height` lines high so that the cursor is visible,
    /// moving the view as little as possible; remembers it and the page size.
    pub fn scroll_to_cursor(&mut self, height: usize) -> usize {
        let height = height.max(1);
        self.page = height.saturating_sub(1).max(1);
        if self.row < self.top {
            self.top = self.row;
        } else if self.row >= self.top + height {
            self.top = self.row + 1 - height;
        }
        self.top
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    fn len(&self, row: usize) -> usize {
        self.lines[row].chars().count()
    }

    pub fn insert(&mut self, c: char) {
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    pub fn key(&mut self, key: KeyEvent, multiline: bool) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('u') if ctrl => {
                let at = byte_at(&self.lines[self.row], self.col);
                self.lines[self.row].drain(..at);
                self.col = 0;
            }
            KeyCode::Char('a') if ctrl => self.col = 0,
            KeyCode::Char('e') if ctrl => self.col = self.len(self.row),
            KeyCode::Char(c) if !ctrl => self.insert(c),
            KeyCode::Tab if multiline => {
                for _ in 0..4 {
                    self.insert(' ');
                }
            }
            KeyCode::Enter if multiline => {
                let at = byte_at(&self.lines[self.row], self.col);
                let rest = self.lines[self.row].split_off(at);
                self.lines.insert(self.row + 1, rest);
                self.row += 1;
                self.col = 0;
            }
            KeyCode::Backspace => {
                if self.col > 0 {
                    let at = byte_at(&self.lines[self.row], self.col - 1);
                    self.lines[self.row].remove(at);
                    self.col -= 1;
                } else if self.row > 0 {
                    let line = self.lines.remove(self.row);
                    self.row -= 1;
                    self.col = self.len(self.row);
                    self.lines[self.row].push_str(&line);
                }
            }
            KeyCode::Delete => {
                if self.col < self.len(self.row) {
                    let at = byte_at(&self.lines[self.row], self.col);
                    self.lines[self.row].remove(at);
                } else if self.row + 1 < self.lines.len() {
                    let next = self.lines.remove(self.row + 1);
                    self.lines[self.row].push_str(&next);
                }
            }
            KeyCode::Left => {
                if self.col > 0 {
                    self.col -= 1;
                } else if self.row > 0 {
                    self.row -= 1;
                    self.col = self.len(self.row);
                }
            }
            KeyCode::Right => {
                if self.col < self.len(self.row) {
                    self.col += 1;
                } else if self.row + 1 < self.lines.len() {
                    self.row += 1;
                    self.col = 0;
                }
            }
            KeyCode::Up if self.row > 0 => {
                self.row -= 1;
                self.col = self.col.min(self.len(self.row));
            }
            KeyCode::Down if self.row + 1 < self.lines.len() => {
                self.row += 1;
                self.col = self.col.min(self.len(self.row));
            }
            KeyCode::PageUp => {
                self.row = self.row.saturating_sub(self.page);
                self.col = self.col.min(self.len(self.row));
            }
            KeyCode::PageDown => {
                self.row = (self.row + self.page).min(self.lines.len() - 1);
                self.col = self.col.min(self.len(self.row));
            }
            KeyCode::Home if ctrl => {
                self.row = 0;
                self.col = 0;
            }
            KeyCode::End if ctrl => {
                self.row = self.lines.len() - 1;
                self.col = self.len(self.row);
            }
            KeyCode::Home => self.col = 0,
            KeyCode::End => self.col = self.len(self.row),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn edits_lines() {
        let mut b = TextBuf::new("ab");
        b.key(k(KeyCode::Left), true);
        b.key(k(KeyCode::Enter), true);
        b.key(k(KeyCode::Char('é')), true);
        assert_eq!(b.text(), "a\néb");
        b.key(k(KeyCode::Home), true);
        b.key(k(KeyCode::Backspace), true);
        assert_eq!(b.text(), "aéb");
        b.key(k(KeyCode::Enter), false);
        assert_eq!(b.text(), "aéb");
        b.key(
            KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL),
            false,
        );
        assert_eq!(b.text(), "éb");
    }

    #[test]
    fn a_long_text_opens_at_its_start_pages_and_scrolls_only_as_needed() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let mut b = TextBuf::at_start(&text);
        assert_eq!((b.row, b.col), (0, 0));
        assert_eq!(b.scroll_to_cursor(10), 0);
        b.key(k(KeyCode::PageDown), true);
        assert_eq!(b.row, 9);
        assert_eq!(b.scroll_to_cursor(10), 0, "still on screen: the view stays");
        b.key(k(KeyCode::PageDown), true);
        assert_eq!(b.row, 18);
        assert_eq!(b.scroll_to_cursor(10), 9, "the view moves just enough");
        b.key(k(KeyCode::Up), true);
        assert_eq!(
            b.scroll_to_cursor(10),
            9,
            "moving up inside the view: no scroll"
        );
        b.key(KeyEvent::new(KeyCode::End, KeyModifiers::CONTROL), true);
        assert_eq!(b.row, 100);
        b.key(KeyEvent::new(KeyCode::Home, KeyModifiers::CONTROL), true);
        assert_eq!((b.row, b.col), (0, 0));
        b.key(k(KeyCode::PageUp), true);
        assert_eq!(b.row, 0);
    }
}
