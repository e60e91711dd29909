//! The glyph vocabulary: each glyph means one thing wherever it shows (the tree, the
//! timeline, titles, the status bar, the help's legend). Components draw these, never
//! their own literals. The status bar's engine states (`● running`, `‖ paused`, ...) use
//! none of them for anything else.

/// A candidate's state, the mark and the selection, as drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glyph {
    Pending,
    Evaluating,
    Correct,
    /// The session's best (or final) candidate; selected, it stays `★`, highlighted.
    Best,
    Failed,
    Dropped,
    /// The candidate marked for diff / compare (`m`).
    Marked,
    /// The selected point of the timeline when it is not the best (the tree highlights
    /// the selected row instead).
    Selected,
    /// Gates wait for the person (the status bar).
    Waiting,
}

impl Glyph {
    /// In the order the help's legend lists them.
    pub const ALL: [Glyph; 9] = [
        Glyph::Pending,
        Glyph::Evaluating,
        Glyph::Correct,
        Glyph::Best,
        Glyph::Failed,
        Glyph::Dropped,
        Glyph::Marked,
        Glyph::Selected,
        Glyph::Waiting,
    ];

    pub const fn ch(self) -> char {
        match self {
            Glyph::Pending => '○',
            Glyph::Evaluating => '◐',
            Glyph::Correct => '✓',
            Glyph::Best => '★',
            Glyph::Failed => '✗',
            Glyph::Dropped => '⊘',
            Glyph::Marked => '◆',
            Glyph::Selected => '◉',
            Glyph::Waiting => '⚑',
        }
    }

    pub const fn text(self) -> &'static str {
        match self {
            Glyph::Pending => "○",
            Glyph::Evaluating => "◐",
            Glyph::Correct => "✓",
            Glyph::Best => "★",
            Glyph::Failed => "✗",
            Glyph::Dropped => "⊘",
            Glyph::Marked => "◆",
            Glyph::Selected => "◉",
            Glyph::Waiting => "⚑",
        }
    }

    /// What it means, for the legend.
    pub const fn meaning(self) -> &'static str {
        match self {
            Glyph::Pending => "pending",
            Glyph::Evaluating => "evaluating",
            Glyph::Correct => "correct",
            Glyph::Best => "best (highlighted when selected)",
            Glyph::Failed => "failed",
            Glyph::Dropped => "dropped",
            Glyph::Marked => "marked for diff / compare (m)",
            Glyph::Selected => "the selected point of the timeline",
            Glyph::Waiting => "gates wait for you (a opens the oldest)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_glyph_is_one_character_and_means_one_thing() {
        let mut seen = std::collections::HashSet::new();
        for g in Glyph::ALL {
            assert_eq!(g.text().chars().collect::<Vec<_>>(), [g.ch()], "{g:?}");
            assert!(seen.insert(g.ch()), "{g:?} shares its glyph");
        }
    }
}
