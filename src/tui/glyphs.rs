//! The glyph vocabulary: every glyph and short mark the screens draw, each with the one
//! thing it means wherever it shows (the tree, the timeline, titles, the bars, the tabs,
//! the batch view). Components draw these, never their own literals, and the help's legend
//! is generated from this table, so the legend cannot drift from the screens
//! (`tests/tui_app.rs` checks every glyph on every view's screen is in it).

/// A glyph or mark, as drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glyph {
    Pending,
    Evaluating,
    /// Correct, or done: a candidate, a call, the run, a stage's kernel that replaced its base.
    Correct,
    /// The session's best (or final) candidate; selected, it stays `★`, highlighted.
    Best,
    /// Failed: a candidate, a call, the run, an error line of the console.
    Failed,
    Dropped,
    /// The candidate marked for diff / compare (`m`).
    Marked,
    /// The selected point of the timeline when it is not the best (the tree highlights
    /// the selected row instead).
    Selected,
    /// A kernel an LLM call is writing now (below the tree).
    Writing,
    /// After a score: the measurements cannot tell it from the best's.
    Indistinguishable,
    /// After a score: its timing stayed noisy.
    Noisy,
    /// Rewritten by the person at its gate: a candidate's kernel, a call's prompt.
    Edited,
    /// After the label: the candidate the person made the final answer.
    Final,
    /// After the label: the kernel is wrong on an unseen shape.
    ShapesWrong,
    /// After a score: its share of the speed of light.
    SolShare,
    /// After a score: measured faster than the speed of light (suspect).
    FasterThanLight,
    /// A subtree shown / folded.
    Unfolded,
    Folded,
    /// In a title: follows new candidates, or the log's tail.
    Following,
    /// Gates wait for the person (the status bar).
    Waiting,
    /// The engine states of the status bar.
    Running,
    Paused,
    Stopped,
    /// A warning: a console line, a result's flags and warnings.
    Warning,
    /// No value: not measured, no result, not compared.
    Nothing,
    /// From -> to: a stage's base and its kernel, a diff's two sides.
    Becomes,
    /// The end of an answer still streaming (the LLM tab).
    Streaming,
    /// Text cut to fit; after a word (`loading…`), still under way.
    Cut,
    /// A lower bound: a cost with calls of unknown price (the batch view).
    AtLeast,
}

impl Glyph {
    /// In the order the help's legend lists them.
    pub const ALL: [Glyph; 29] = [
        Glyph::Pending,
        Glyph::Evaluating,
        Glyph::Correct,
        Glyph::Best,
        Glyph::Failed,
        Glyph::Dropped,
        Glyph::Marked,
        Glyph::Selected,
        Glyph::Writing,
        Glyph::Indistinguishable,
        Glyph::Noisy,
        Glyph::Edited,
        Glyph::Final,
        Glyph::ShapesWrong,
        Glyph::SolShare,
        Glyph::FasterThanLight,
        Glyph::Unfolded,
        Glyph::Folded,
        Glyph::Following,
        Glyph::Waiting,
        Glyph::Running,
        Glyph::Paused,
        Glyph::Stopped,
        Glyph::Warning,
        Glyph::Nothing,
        Glyph::Becomes,
        Glyph::Streaming,
        Glyph::Cut,
        Glyph::AtLeast,
    ];

    /// The glyphs the batch view draws (its help's legend).
    pub const BATCH: [Glyph; 2] = [Glyph::AtLeast, Glyph::Cut];

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
            Glyph::Writing => "◌",
            Glyph::Indistinguishable => "≈",
            Glyph::Noisy => "~",
            Glyph::Edited => "✎",
            Glyph::Final => "final",
            Glyph::ShapesWrong => "shapes✗",
            Glyph::SolShare => "%SoL",
            Glyph::FasterThanLight => "FTL",
            Glyph::Unfolded => "▾",
            Glyph::Folded => "▸",
            Glyph::Following => "⇣",
            Glyph::Waiting => "⚑",
            Glyph::Running => "●",
            Glyph::Paused => "‖",
            Glyph::Stopped => "■",
            Glyph::Warning => "!",
            Glyph::Nothing => "–",
            Glyph::Becomes => "→",
            Glyph::Streaming => "▌",
            Glyph::Cut => "…",
            Glyph::AtLeast => "≥",
        }
    }

    /// The glyph as one character (the timeline's points).
    pub fn ch(self) -> char {
        self.text().chars().next().unwrap_or(' ')
    }

    /// What it means, for the legend.
    pub const fn meaning(self) -> &'static str {
        match self {
            Glyph::Pending => "pending: not evaluated yet",
            Glyph::Evaluating => "being evaluated",
            Glyph::Correct => "correct; done (a call, the run, a stage that replaced its base)",
            Glyph::Best => "the best candidate (highlighted when selected)",
            Glyph::Failed => "failed (a candidate, a call, the run, an error line)",
            Glyph::Dropped => "dropped (rejected at a gate, or its call failed)",
            Glyph::Marked => "marked for diff / compare (m)",
            Glyph::Selected => "the selected point of the timeline",
            Glyph::Writing => "below the tree: a kernel an LLM call is writing now",
            Glyph::Indistinguishable => {
                "after a score: cannot be told from the best's (the 95% intervals overlap)"
            }
            Glyph::Noisy => "after a score: its timing stayed noisy (an interval wider than ±5%)",
            Glyph::Edited => {
                "rewritten by you at its gate (a kernel in the tree, a prompt in the LLM tab)"
            }
            Glyph::Final => "after the label: the candidate you made the final answer (F)",
            Glyph::ShapesWrong => {
                "after the label: wrong on an unseen shape (the Eval tab says which)"
            }
            Glyph::SolShare => "after a score (40%SoL): its share of the speed of light",
            Glyph::FasterThanLight => "after a score: faster than the speed of light (suspect)",
            Glyph::Unfolded => "a subtree shown (space folds it)",
            Glyph::Folded => "a subtree folded (space shows it)",
            Glyph::Following => "in a title: follows new candidates / the log's tail",
            Glyph::Waiting => "gates wait for you (a opens the oldest)",
            Glyph::Running => "the engine runs",
            Glyph::Paused => "the engine is paused (P resumes)",
            Glyph::Stopped => "the run stopped (kforge resume continues it)",
            Glyph::Warning => "a warning (a console line, a result's flag)",
            Glyph::Nothing => "no value: not measured, no result, not compared",
            Glyph::Becomes => "from -> to (a stage's base and its kernel, a diff's sides)",
            Glyph::Streaming => "the end of an answer still streaming",
            Glyph::Cut => "cut to fit; after a word (loading…), still under way",
            Glyph::AtLeast => "at least: a cost with calls of unknown price",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_glyph_means_one_thing() {
        let mut seen = std::collections::HashSet::new();
        for g in Glyph::ALL {
            assert!(seen.insert(g.text()), "{g:?} shares its text");
            assert!(!g.meaning().is_empty());
        }
        // A single glyph is one character wide (the timeline draws it as a point).
        for g in [Glyph::Best, Glyph::Failed, Glyph::Marked, Glyph::Selected] {
            assert_eq!(g.text().chars().count(), 1, "{g:?}");
        }
    }

    /// The marks the session's own types write are the ones the legend explains.
    #[test]
    fn the_marks_other_modules_write_are_in_the_table() {
        assert!(
            crate::protocol::sol::pct_suffix(Some(40.0), false).ends_with(Glyph::SolShare.text())
        );
        assert!(
            crate::protocol::sol::pct_suffix(Some(140.0), true)
                .contains(Glyph::FasterThanLight.text())
        );
    }
}
