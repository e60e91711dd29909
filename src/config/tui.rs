//! `[tui]` in config.toml.
//!
//! ```toml
//! [tui]
//! theme = "light"          # dark (default), light, high-contrast, or a themes/NAME.toml
//! mouse = true             # capture the mouse (blocks the terminal's own selection)
//! editor = "nvim"          # instead of $VISUAL / $EDITOR
//! highlight_max_lines = 5000
//! [tui.keys]
//! quit = "Q"               # one key or a list
//! down = ["j", "down", "ctrl-n"]
//! theme = []               # unbinds
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    /// Theme name: embedded `dark`, `light`, `high-contrast`, or a file in a themes dir.
    pub theme: String,
    /// Mouse capture: clicks select, the wheel scrolls. Off by default.
    pub mouse: bool,
    /// Editor command for rewrites and edits; default `$VISUAL`, then `$EDITOR`, then `vi`.
    pub editor: Option<String>,
    /// Files longer than this are shown without syntax colours.
    pub highlight_max_lines: usize,
    /// Keymap overrides: action name -> key or keys (an empty list unbinds).
    pub keys: BTreeMap<String, KeyList>,
}

impl Default for TuiConfig {
    fn default() -> Self {
        TuiConfig {
            theme: "dark".into(),
            mouse: false,
            editor: None,
            highlight_max_lines: 5000,
            keys: BTreeMap::new(),
        }
    }
}

/// One key or a list of keys.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum KeyList {
    One(String),
    Many(Vec<String>),
}

impl KeyList {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            KeyList::One(k) => vec![k.clone()],
            KeyList::Many(ks) => ks.clone(),
        }
    }
}

impl TuiConfig {
    pub fn key_overrides(&self) -> BTreeMap<String, Vec<String>> {
        self.keys
            .iter()
            .map(|(a, k)| (a.clone(), k.to_vec()))
            .collect()
    }

    /// The editor command line to run: `[tui] editor`, else `$VISUAL`, `$EDITOR`, `vi`.
    pub fn editor_command(&self) -> String {
        self.editor
            .clone()
            .unwrap_or_else(crate::external_editor::editor_from_env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_as_one_or_many() {
        let c: TuiConfig = toml::from_str(
            "theme = \"light\"\nmouse = true\n[keys]\nquit = \"Q\"\ndown = [\"j\", \"ctrl-n\"]\ntheme = []\n",
        )
        .unwrap();
        assert_eq!(c.theme, "light");
        assert!(c.mouse);
        let o = c.key_overrides();
        assert_eq!(o["quit"], vec!["Q"]);
        assert_eq!(o["down"], vec!["j", "ctrl-n"]);
        assert!(o["theme"].is_empty());
        assert!(toml::from_str::<TuiConfig>("colour = 1\n").is_err());
        assert_eq!(
            toml::from_str::<TuiConfig>("").unwrap(),
            TuiConfig::default()
        );
    }
}
