//! A rendered prompt and its markdown form (`llm/<call>.prompt.md`), read back after the
//! person edits it.

use serde::{Deserialize, Serialize};

use crate::protocol::TemplateName;

/// A rendered prompt: the system text and the user text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedPrompt {
    pub template: TemplateName,
    pub system: String,
    pub user: String,
}

const SYSTEM_MARK: &str = "<!-- kforge:system -->";
const USER_MARK: &str = "<!-- kforge:user -->";

impl RenderedPrompt {
    /// The form written to `llm/<call>.prompt.md` (and edited by a rewrite at a gate).
    pub fn to_markdown(&self) -> String {
        format!(
            "<!-- kforge prompt: {} -->\n{SYSTEM_MARK}\n{}\n{USER_MARK}\n{}\n",
            self.template,
            self.system.trim_end(),
            self.user.trim_end()
        )
    }

    /// Reads back `to_markdown`'s form, e.g. after the person edited it. Text without the
    /// markers is taken as the user text with no system text.
    pub fn from_markdown(template: TemplateName, text: &str) -> RenderedPrompt {
        match (text.find(SYSTEM_MARK), text.find(USER_MARK)) {
            (Some(s), Some(u)) if s < u => RenderedPrompt {
                template,
                system: text[s + SYSTEM_MARK.len()..u].trim().to_string(),
                user: text[u + USER_MARK.len()..].trim().to_string(),
            },
            _ => RenderedPrompt {
                template,
                system: String::new(),
                user: text.trim().to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_round_trips() {
        let p = RenderedPrompt {
            template: TemplateName::Repair,
            system: "sys".into(),
            user: "# user\nfix it".into(),
        };
        let back = RenderedPrompt::from_markdown(TemplateName::Repair, &p.to_markdown());
        assert_eq!(back, p);
        let plain = RenderedPrompt::from_markdown(TemplateName::Seed, "just text\n");
        assert_eq!(
            (plain.system.as_str(), plain.user.as_str()),
            ("", "just text")
        );
    }
}
