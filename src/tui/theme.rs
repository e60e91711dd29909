//! Themes: TOML files of semantic roles (`ok`, `diff_add`, `log_warn`, ...) mapped to
//! styles. `dark`, `light` and `high-contrast` are embedded; a file of the same name in
//! the user's themes dir (`~/.config/kforge/themes/NAME.toml`) or `./themes/` overrides
//! them, and is reloaded when it changes. No role paints a background unless its style
//! says `on <colour>`, so the terminal's background shows through. `NO_COLOR` keeps the
//! modifiers (bold, reversed, ...) and drops every colour.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

pub const BUILTIN: [(&str, &str); 3] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// A semantic role of the theme: what the TUI draws, never a colour. Theme files name
/// them in snake case (`diff_add`, `log_warn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Text,
    Muted,
    Accent,
    Border,
    BorderFocus,
    Title,
    TitleFocus,
    Selection,
    Tab,
    TabActive,
    Ok,
    Fail,
    Warn,
    Running,
    Pending,
    Dropped,
    Best,
    Marked,
    DiffAdd,
    DiffDel,
    DiffAddEmph,
    DiffDelEmph,
    DiffHunk,
    LineNumber,
    LogInfo,
    LogWarn,
    LogError,
    LogTime,
    LogTag,
    ChartAxis,
    ChartScore,
    ChartBaseline,
    ChartBest,
    ChartFail,
    ChartSelected,
    Status,
    StatusKey,
    DialogBorder,
    Input,
    SearchMatch,
}

impl Role {
    /// Every role; a theme file may leave some out (they fall back to `dark`).
    pub const ALL: [Role; 40] = [
        Role::Text,
        Role::Muted,
        Role::Accent,
        Role::Border,
        Role::BorderFocus,
        Role::Title,
        Role::TitleFocus,
        Role::Selection,
        Role::Tab,
        Role::TabActive,
        Role::Ok,
        Role::Fail,
        Role::Warn,
        Role::Running,
        Role::Pending,
        Role::Dropped,
        Role::Best,
        Role::Marked,
        Role::DiffAdd,
        Role::DiffDel,
        Role::DiffAddEmph,
        Role::DiffDelEmph,
        Role::DiffHunk,
        Role::LineNumber,
        Role::LogInfo,
        Role::LogWarn,
        Role::LogError,
        Role::LogTime,
        Role::LogTag,
        Role::ChartAxis,
        Role::ChartScore,
        Role::ChartBaseline,
        Role::ChartBest,
        Role::ChartFail,
        Role::ChartSelected,
        Role::Status,
        Role::StatusKey,
        Role::DialogBorder,
        Role::Input,
        Role::SearchMatch,
    ];

    /// The role's name in theme files.
    pub fn name(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::Muted => "muted",
            Role::Accent => "accent",
            Role::Border => "border",
            Role::BorderFocus => "border_focus",
            Role::Title => "title",
            Role::TitleFocus => "title_focus",
            Role::Selection => "selection",
            Role::Tab => "tab",
            Role::TabActive => "tab_active",
            Role::Ok => "ok",
            Role::Fail => "fail",
            Role::Warn => "warn",
            Role::Running => "running",
            Role::Pending => "pending",
            Role::Dropped => "dropped",
            Role::Best => "best",
            Role::Marked => "marked",
            Role::DiffAdd => "diff_add",
            Role::DiffDel => "diff_del",
            Role::DiffAddEmph => "diff_add_emph",
            Role::DiffDelEmph => "diff_del_emph",
            Role::DiffHunk => "diff_hunk",
            Role::LineNumber => "line_number",
            Role::LogInfo => "log_info",
            Role::LogWarn => "log_warn",
            Role::LogError => "log_error",
            Role::LogTime => "log_time",
            Role::LogTag => "log_tag",
            Role::ChartAxis => "chart_axis",
            Role::ChartScore => "chart_score",
            Role::ChartBaseline => "chart_baseline",
            Role::ChartBest => "chart_best",
            Role::ChartFail => "chart_fail",
            Role::ChartSelected => "chart_selected",
            Role::Status => "status",
            Role::StatusKey => "status_key",
            Role::DialogBorder => "dialog_border",
            Role::Input => "input",
            Role::SearchMatch => "search_match",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    syntax: Option<String>,
    #[serde(default)]
    styles: BTreeMap<String, String>,
}

/// A resolved theme.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    /// The syntect theme for code; `None` turns syntax colours off (NO_COLOR).
    pub syntax: Option<String>,
    styles: BTreeMap<Role, Style>,
    pub no_color: bool,
    /// The file it was read from (for hot reload), `None` when embedded.
    pub source: Option<(PathBuf, Option<SystemTime>)>,
}

impl Theme {
    /// The style of a role.
    pub fn get(&self, role: Role) -> Style {
        self.styles.get(&role).copied().unwrap_or_default()
    }

    /// Parses a theme file's text on top of the embedded dark theme.
    pub fn parse(text: &str, no_color: bool) -> Result<Theme> {
        let file: ThemeFile = toml::from_str(text).context("invalid theme file")?;
        let mut styles = BTreeMap::new();
        let base: ThemeFile = toml::from_str(BUILTIN[0].1).expect("embedded theme parses");
        for (name, spec) in base.styles.iter().chain(file.styles.iter()) {
            let Some(role) = Role::from_name(name) else {
                let known: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
                bail!("unknown theme role `{name}` (known: {})", known.join(", "));
            };
            let style = parse_style(spec).with_context(|| format!("theme role `{name}`"))?;
            styles.insert(role, if no_color { strip(style) } else { style });
        }
        Ok(Theme {
            name: file.name.unwrap_or_else(|| "custom".into()),
            syntax: if no_color {
                None
            } else {
                Some(file.syntax.unwrap_or_else(|| "base16-ocean.dark".into()))
            },
            styles,
            no_color,
            source: None,
        })
    }

    pub fn builtin(name: &str, no_color: bool) -> Option<Theme> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| Theme::parse(text, no_color).expect("embedded theme parses"))
    }

    /// Loads a theme by name: a user file first (user themes dir, then `./themes/`), then
    /// the embedded one. An unknown name or a broken file is an error naming it.
    pub fn load(name: &str, no_color: bool) -> Result<Theme> {
        for dir in theme_dirs() {
            let path = dir.join(format!("{name}.toml"));
            if path.is_file() {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let mut theme = Theme::parse(&text, no_color)
                    .with_context(|| format!("theme file {}", path.display()))?;
                theme.name = name.to_string();
                theme.source = Some((path.clone(), mtime(&path)));
                return Ok(theme);
            }
        }
        Theme::builtin(name, no_color).with_context(|| {
            format!(
                "unknown theme `{name}` (built in: {}; or put {name}.toml in a themes dir)",
                BUILTIN.map(|(n, _)| n).join(", ")
            )
        })
    }

    /// Whether the file this theme came from changed since it was read.
    pub fn changed_on_disk(&self) -> bool {
        match &self.source {
            Some((path, stamp)) => mtime(path) != *stamp,
            None => false,
        }
    }
}

/// Whether `NO_COLOR` asks for no colours (set and not empty).
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

pub fn theme_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = crate::paths::config_dir() {
        dirs.push(d.join("themes"));
    }
    dirs.push(PathBuf::from("themes"));
    dirs
}

fn mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn strip(style: Style) -> Style {
    Style {
        fg: None,
        bg: None,
        underline_color: None,
        ..style
    }
}

/// `"cyan bold"`, `"#ff8800 on darkgray underline"`, `"reversed"`.
pub fn parse_style(spec: &str) -> Result<Style> {
    let mut style = Style::default();
    let mut words = spec.split_whitespace().peekable();
    let mut fg_set = false;
    while let Some(word) = words.next() {
        let modifier = match word.to_ascii_lowercase().as_str() {
            "bold" => Some(Modifier::BOLD),
            "dim" => Some(Modifier::DIM),
            "italic" => Some(Modifier::ITALIC),
            "underline" | "underlined" => Some(Modifier::UNDERLINED),
            "reversed" | "reverse" => Some(Modifier::REVERSED),
            "strike" | "crossed_out" => Some(Modifier::CROSSED_OUT),
            _ => None,
        };
        if let Some(m) = modifier {
            style = style.add_modifier(m);
        } else if word == "on" {
            let Some(c) = words.next() else {
                bail!("`on` needs a colour in `{spec}`")
            };
            style = style.bg(parse_color(c)?);
        } else if !fg_set {
            let c = parse_color(word)?;
            if c != Color::Reset {
                style = style.fg(c);
            }
            fg_set = true;
        } else {
            bail!("unexpected `{word}` in style `{spec}`");
        }
    }
    Ok(style)
}

pub fn parse_color(word: &str) -> Result<Color> {
    let lower = word.to_ascii_lowercase().replace(['_', '-'], "");
    Ok(match lower.as_str() {
        "reset" | "default" | "none" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "darkgray" | "darkgrey" => Color::DarkGray,
        "lightred" => Color::LightRed,
        "lightgreen" => Color::LightGreen,
        "lightyellow" => Color::LightYellow,
        "lightblue" => Color::LightBlue,
        "lightmagenta" => Color::LightMagenta,
        "lightcyan" => Color::LightCyan,
        "white" => Color::White,
        hex if hex.starts_with('#') && hex.len() == 7 => {
            let v = u32::from_str_radix(&hex[1..], 16)
                .with_context(|| format!("bad colour `{word}`"))?;
            Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8)
        }
        n => Color::Indexed(
            n.parse::<u8>()
                .with_context(|| format!("unknown colour `{word}`"))?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_themes_set_every_role_and_paint_no_background() {
        for (name, text) in BUILTIN {
            let file: ThemeFile = toml::from_str(text).unwrap();
            for role in Role::ALL {
                assert!(
                    file.styles.contains_key(role.name()),
                    "{name} lacks {}",
                    role.name()
                );
            }
            let theme = Theme::builtin(name, false).unwrap();
            for role in Role::ALL {
                assert_eq!(
                    theme.get(role).bg,
                    None,
                    "{name}.{} paints a background",
                    role.name()
                );
            }
        }
    }

    #[test]
    fn the_light_theme_draws_nothing_in_near_white() {
        // Palette 7 ("gray") and white vanish on a light background: a light theme never
        // uses them, including for the roles it inherits from the dark one.
        let t = Theme::builtin("light", false).unwrap();
        for role in Role::ALL {
            let fg = t.get(role).fg;
            assert!(
                !matches!(
                    fg,
                    Some(Color::Gray | Color::White | Color::Indexed(7 | 15))
                ),
                "light theme role `{}` is drawn in {fg:?}",
                role.name()
            );
        }
    }

    #[test]
    fn styles_parse() {
        let s = parse_style("#ff8800 on darkgray bold underline").unwrap();
        assert_eq!(s.fg, Some(Color::Rgb(255, 136, 0)));
        assert_eq!(s.bg, Some(Color::DarkGray));
        assert!(
            s.add_modifier
                .contains(Modifier::BOLD | Modifier::UNDERLINED)
        );
        assert_eq!(parse_style("reset").unwrap(), Style::default());
        assert_eq!(parse_style("12").unwrap().fg, Some(Color::Indexed(12)));
        assert!(parse_style("cyan magenta").is_err());
        assert!(parse_style("chartreuse").is_err());
    }

    #[test]
    fn no_color_keeps_modifiers_only() {
        let t = Theme::builtin("dark", true).unwrap();
        assert_eq!(t.get(Role::Ok).fg, None);
        assert!(
            t.get(Role::Selection)
                .add_modifier
                .contains(Modifier::REVERSED)
        );
        assert!(t.syntax.is_none());
    }

    #[test]
    fn a_changed_file_is_noticed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("mine.toml");
        std::fs::write(&p, "[styles]\nok = \"blue\"\n").unwrap();
        let mut t = Theme::parse(&std::fs::read_to_string(&p).unwrap(), false).unwrap();
        t.source = Some((p.clone(), mtime(&p)));
        assert!(!t.changed_on_disk());
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(t.changed_on_disk());
    }

    #[test]
    fn unknown_roles_and_names_are_errors() {
        let err = Theme::parse("[styles]\nnope = \"red\"\n", false).unwrap_err();
        assert!(format!("{err:#}").contains("nope"));
        assert!(Theme::load("no-such-theme", false).is_err());
        let partial = Theme::parse("name = \"mine\"\n[styles]\nok = \"blue\"\n", false).unwrap();
        assert_eq!(partial.get(Role::Ok).fg, Some(Color::Blue));
        assert_eq!(partial.get(Role::Fail).fg, Some(Color::Red));
    }
}
