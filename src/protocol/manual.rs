//! The manual-answer format (the `manual` provider: the person writes the answer). The
//! prompt goes into a file above a marker line; whatever is written below the marker is the
//! answer. The engine's manual backend, the TUI (`A`) and `kforge ask --provider manual`
//! all read and write this format.

use super::CallId;

/// The provider's name, as sessions and their calls record it.
pub const PROVIDER: &str = "manual";
/// Its model: the person.
pub const MODEL: &str = "you";

/// Where the person may write the answer to `call` (the TUI's `A` sends it directly).
pub fn answer_file(call: CallId) -> String {
    format!("llm/{call}.answer.md")
}

/// The line that separates the prompt (dropped) from the answer.
pub const ANSWER_MARKER: &str =
    "----- kforge: write the answer below this line; everything above it is dropped -----";

/// The file the person edits: the prompt, then the marker.
pub fn answer_template(prompt: &str) -> String {
    format!("{prompt}\n{ANSWER_MARKER}\n")
}

/// The answer in an edited file: the text below the marker (the whole text when the marker
/// was deleted); `None` when that is blank.
pub fn answer_from(edited: &str) -> Option<String> {
    let answer = match edited.split_once(ANSWER_MARKER) {
        Some((_, after)) => after.trim_start_matches(['\r', '\n']).to_string(),
        None => edited.to_string(),
    };
    (!answer.trim().is_empty()).then_some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_what_follows_the_marker() {
        let t = answer_template("write a kernel");
        assert_eq!(answer_from(&t), None, "nothing written");
        assert_eq!(
            answer_from(&format!("{t}```python\nx = 1\n```\n")).as_deref(),
            Some("```python\nx = 1\n```\n")
        );
        assert_eq!(
            answer_from("no marker left").as_deref(),
            Some("no marker left")
        );
    }
}
