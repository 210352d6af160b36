//! Agent definition files in the Claude Code format (`agents/*.md` beside the config):
//! YAML front matter with `name`, `description`, `tools`, `model` and `maxTurns`; the
//! body is the system prompt. Each file becomes a profile with the `[defaults]`
//! capabilities.
//!
//! Only the flat subset of YAML these files use is read: `key: value` lines, quoted or
//! not, and lists written `[a, b]`, `a, b` or as `- a` lines. Claude-specific keys
//! warren has no use for (`color`, `permissionMode`, …) are ignored with a warning.

use std::path::Path;

/// One parsed agent file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AgentFile {
    /// `name`: the profile name.
    pub(crate) name: String,
    /// `description`.
    pub(crate) description: Option<String>,
    /// `tools`; absent means every tool.
    pub(crate) tools: Option<Vec<String>>,
    /// `model`: a `[models]` name (anything else, like `inherit`, means the default).
    pub(crate) model: Option<String>,
    /// `maxTurns`.
    pub(crate) max_turns: Option<u32>,
    /// The body.
    pub(crate) prompt: String,
}

/// Parses one file; an error carries the 1-based line and a message.
pub(crate) fn parse(path: &Path, text: &str) -> Result<AgentFile, (usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, "---")) => {}
        _ => {
            return Err((
                1,
                "an agent file starts with a `---` line opening its front matter".into(),
            ))
        }
    }
    let mut fields: Vec<(usize, String, Vec<String>)> = Vec::new();
    let mut body_start = None;
    for (index, line) in lines.by_ref() {
        let number = index + 1;
        if line.trim_end() == "---" {
            body_start = Some(index + 1);
            break;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ") {
            let Some(last) = fields.last_mut() else {
                return Err((number, "a list item before any key".into()));
            };
            last.2.push(unquote(item));
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            return Err((number, format!("expected `key: value`, got `{trimmed}`")));
        };
        let value = value.trim();
        let values = if value.is_empty() {
            Vec::new()
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            inner
                .split(',')
                .map(unquote)
                .filter(|v| !v.is_empty())
                .collect()
        } else {
            vec![unquote(value)]
        };
        fields.push((number, key.trim().to_string(), values));
    }
    let Some(body_start) = body_start else {
        return Err((1, "the front matter is not closed by a `---` line".into()));
    };
    let body: Vec<&str> = text.lines().skip(body_start).collect();
    let mut file = AgentFile {
        name: String::new(),
        description: None,
        tools: None,
        model: None,
        max_turns: None,
        prompt: body.join("\n").trim().to_string(),
    };
    for (line, key, values) in fields {
        let single = || values.join(", ");
        match key.as_str() {
            "name" => file.name = single(),
            "description" => file.description = Some(single()),
            "model" => file.model = Some(single()),
            "tools" => {
                let tools: Vec<String> = values
                    .iter()
                    .flat_map(|v| v.split(','))
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect();
                file.tools = Some(tools);
            }
            "maxTurns" | "max_turns" => {
                let turns = single()
                    .parse::<u32>()
                    .ok()
                    .filter(|t| (1..=1000).contains(t));
                file.max_turns = Some(turns.ok_or_else(|| {
                    (
                        line,
                        format!("maxTurns must be between 1 and 1000, got `{}`", single()),
                    )
                })?);
            }
            other => {
                tracing::warn!(file = %path.display(), line, "ignoring agent-file key `{other}`")
            }
        }
    }
    if file.name.is_empty() {
        return Err((1, "the front matter has no `name`".into()));
    }
    Ok(file)
}

fn unquote(value: &str) -> String {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner.to_string();
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_agent_files_parse() {
        let text = "---\nname: reviewer\ndescription: \"Reviews code\"\ntools: read_file, search_text\nmodel: inherit\nmaxTurns: 5\ncolor: blue\n---\n\nYou review code.\nBe brief.\n";
        let file = parse(Path::new("agents/reviewer.md"), text).unwrap();
        assert_eq!(
            file,
            AgentFile {
                name: "reviewer".into(),
                description: Some("Reviews code".into()),
                tools: Some(vec!["read_file".into(), "search_text".into()]),
                model: Some("inherit".into()),
                max_turns: Some(5),
                prompt: "You review code.\nBe brief.".into(),
            }
        );
        let list = parse(
            Path::new("a.md"),
            "---\nname: a\ntools:\n  - read_file\n  - list_dir\n---\nx",
        )
        .unwrap();
        assert_eq!(list.tools.unwrap(), ["read_file", "list_dir"]);
        let inline = parse(
            Path::new("a.md"),
            "---\nname: a\ntools: [read_file, 'list_dir']\n---\n",
        )
        .unwrap();
        assert_eq!(inline.tools.unwrap(), ["read_file", "list_dir"]);
    }

    #[test]
    fn bad_agent_files_name_the_line() {
        assert_eq!(parse(Path::new("a.md"), "name: a\n").unwrap_err().0, 1);
        assert_eq!(
            parse(Path::new("a.md"), "---\nname: a\n").unwrap_err().1,
            "the front matter is not closed by a `---` line"
        );
        assert_eq!(
            parse(Path::new("a.md"), "---\nname: a\nmaxTurns: lots\n---\n")
                .unwrap_err()
                .0,
            3
        );
        assert_eq!(
            parse(Path::new("a.md"), "---\ndescription: x\n---\n")
                .unwrap_err()
                .1,
            "the front matter has no `name`"
        );
    }
}
