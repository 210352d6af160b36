//! Agent definition files in the Claude Code format (`agents/*.md`): YAML front matter
//! between `---` lines, then the system prompt.
//!
//! The front matter is read with a real YAML parser (`serde-saphyr`: pure Rust, no
//! unsafe C, and with budgets on nesting and aliases, so a hostile file cannot make it
//! explode). Many published files are not valid YAML, most often a description with
//! `: ` or `<example>` text on the lines below it; Claude Code loads them, so when the
//! strict parse fails the file is read again with each known key's text taken as
//! written (quoted), and a note says so. Only keys are interpreted here; what they mean
//! (tool names, models) is resolved by the loader.

use serde_json::Value;

use crate::config::limits::MAX_TURNS;
use crate::config::output_schema::OutputSchema;

/// Keys agent files use that warren gives no meaning to. With [`MEANINGFUL_KEYS`]
/// they are the known keys: in a lenient read, only a known key ends a plain-text
/// field, so `Context:` lines inside a description stay in it.
const IGNORED_KEYS: &[&str] = &[
    "color",
    "hooks",
    "skills",
    "mcpServers",
    "memory",
    "version",
    "author",
    "tags",
    "category",
    "type",
];

/// One parsed agent file, as written (names are resolved by the loader).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct AgentFile {
    /// `name`, if present.
    pub(crate) name: Option<String>,
    /// `description`.
    pub(crate) description: Option<String>,
    /// `tools`; `None` means every tool.
    pub(crate) tools: Option<Vec<String>>,
    /// `disallowedTools`: subtracted after `tools`.
    pub(crate) disallowed_tools: Vec<String>,
    /// `model`: a `[models]` name, a `[model_aliases]` name or `inherit`.
    pub(crate) model: Option<String>,
    /// `maxTurns`.
    pub(crate) max_turns: Option<u32>,
    /// `permissionMode` (`plan` makes the agent read-only).
    pub(crate) permission_mode: Option<String>,
    /// `output_schema`: a YAML mapping, or a string of JSON.
    pub(crate) output_schema: Option<OutputSchema>,
    /// Keys warren gives no meaning to (`color`, `hooks`, …), in file order.
    pub(crate) ignored_keys: Vec<String>,
    /// Why the strict YAML parse failed, when the file was read leniently.
    pub(crate) lenient: Option<String>,
    /// The body.
    pub(crate) prompt: String,
}

/// Why a file did not parse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// No `---` on the first line: not an agent file (a README, notes).
    NoFrontMatter,
    /// An agent file that cannot be used: 1-based line of the file, and why.
    Invalid(usize, String),
}

/// Parses one file.
pub(crate) fn parse(text: &str) -> Result<AgentFile, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(ParseError::NoFrontMatter);
    }
    let Some(close) = lines
        .iter()
        .skip(1)
        .position(|l| is_fence(l))
        .map(|i| i + 1)
    else {
        return Err(ParseError::Invalid(
            1,
            "the front matter opened on line 1 is not closed by a `---` line".into(),
        ));
    };
    let front = lines[1..close].join("\n");
    let prompt = lines[close + 1..].join("\n").trim().to_string();
    let mut dropped = Vec::new();
    let (fields, lenient) = match yaml_mapping(&front) {
        Ok(fields) => (fields, None),
        Err((line, message)) => {
            let (text, keys) = lenient_front(&lines[1..close]);
            dropped = keys;
            match yaml_mapping(&text) {
                Ok(fields) if !fields.is_empty() => {
                    (fields, Some(format!("line {}: {message}", line + 1)))
                }
                _ => return Err(ParseError::Invalid(line + 1, message)),
            }
        }
    };
    let mut file = AgentFile {
        lenient,
        prompt,
        ignored_keys: dropped,
        ..AgentFile::default()
    };
    let line_of = |key: &str| {
        lines[1..close]
            .iter()
            .position(|l| l.starts_with(key) && l[key.len()..].trim_start().starts_with(':'))
            .map_or(1, |i| i + 2)
    };
    for (key, value) in fields {
        read_field(&mut file, key, value, &line_of)?;
    }
    Ok(file)
}

/// Reads one front-matter key into `file`: a key warren does not interpret goes to
/// `ignored_keys`; a value that cannot be used is an error at the key's line.
fn read_field(
    file: &mut AgentFile,
    key: String,
    value: Value,
    line_of: &impl Fn(&str) -> usize,
) -> Result<(), ParseError> {
    let invalid = |message: String| ParseError::Invalid(line_of(&key), format!("{key}: {message}"));
    match key.as_str() {
        "name" => file.name = scalar(&value).filter(|n| !n.trim().is_empty()),
        "description" => file.description = scalar(&value).map(|d| d.trim().to_string()),
        // `allowed-tools` is the key of Claude Code's commands and skills; agent
        // files that use it mean a restriction, so it is honoured as `tools`.
        "tools" | "allowed-tools" | "allowed_tools" => {
            let listed = names(&value).map_err(invalid)?;
            file.tools = match (file.tools.take(), listed) {
                (Some(mut a), Some(b)) => {
                    a.retain(|t| b.contains(t));
                    Some(a)
                }
                (a, b) => a.or(b),
            };
        }
        "disallowedTools" | "disallowed_tools" => {
            file.disallowed_tools
                .extend(names(&value).map_err(invalid)?.unwrap_or_default());
        }
        "model" => file.model = scalar(&value).filter(|m| !m.trim().is_empty()),
        "maxTurns" | "max_turns" => {
            let written = scalar(&value).unwrap_or_default();
            let turns = written
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|t| (1..=MAX_TURNS).contains(&u64::from(*t)))
                .ok_or_else(|| {
                    invalid(format!(
                        "must be between 1 and {MAX_TURNS}, got `{written}`"
                    ))
                })?;
            file.max_turns = Some(turns);
        }
        "permissionMode" | "permission_mode" => file.permission_mode = scalar(&value),
        "output_schema" => {
            let schema = match value {
                Value::String(text) => OutputSchema::from_json(&text),
                value => OutputSchema::new(value),
            };
            file.output_schema = Some(schema.map_err(invalid)?);
        }
        _ => file.ignored_keys.push(key),
    }
    Ok(())
}

/// A line of three or more dashes closes the front matter (some files close it with a
/// long rule, which Claude Code accepts).
fn is_fence(line: &str) -> bool {
    let line = line.trim_end();
    line.len() >= 3 && line.bytes().all(|b| b == b'-')
}

/// The front matter as a mapping of keys to values, in file order; an error carries
/// the 1-based line within the front matter.
fn yaml_mapping(front: &str) -> Result<Vec<(String, Value)>, (usize, String)> {
    if front.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_saphyr::from_str(front).map_err(|e| {
        let message = e.to_string();
        (error_line(&message).unwrap_or(1), first_line(&message))
    })?;
    match value {
        Value::Object(map) => Ok(map.into_iter().collect()),
        Value::Null => Ok(Vec::new()),
        other => Err((
            1,
            format!(
                "the front matter must be `key: value` lines, not {}",
                kind(&other)
            ),
        )),
    }
}

fn first_line(message: &str) -> String {
    message
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The line a saphyr error names (`… at line 3 column 5`).
fn error_line(message: &str) -> Option<usize> {
    let rest = &message[message.find("line ")? + 5..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A string, number or boolean as text; `None` for null or a collection.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A tool list: `Read, Grep`, `[Read, Grep]` or `- Read` lines (items may themselves
/// hold commas). `None` when the key has no value.
fn names(value: &Value) -> Result<Option<Vec<String>>, String> {
    let items: Vec<String> = match value {
        Value::Null => return Ok(None),
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| {
                scalar(item).ok_or_else(|| format!("expected tool names, got {}", kind(item)))
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(format!(
                "expected a list of tool names, got {}",
                kind(other)
            ))
        }
    };
    Ok(Some(
        items.iter().flat_map(|item| split_names(item)).collect(),
    ))
}

/// Splits `Read, Grep Glob, Bash(git add:*, git diff:*)` at commas and spaces outside
/// parentheses.
fn split_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c == ',' || c.is_whitespace()) {
            if !current.trim().is_empty() {
                out.push(current.trim().to_string());
            }
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    // `Read, "Write"`: quotes inside a plain string are the author's, not YAML's.
    out.iter()
        .map(|name| name.trim_matches(['"', '\'']).to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Keys the loader gives a meaning to; in a lenient read every other key is only
/// recorded by name.
const MEANINGFUL_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "allowed-tools",
    "disallowedTools",
    "disallowed_tools",
    "model",
    "maxTurns",
    "max_turns",
    "permissionMode",
    "permission_mode",
    "output_schema",
];

/// The front matter rewritten for a second, lenient parse, and the keys it dropped.
///
/// A line `key:` at the start of a line begins a field; inside a plain description
/// (with `Context:` and `user:` lines under it) only the keys agent files use begin
/// one. Each meaningful field's plain text becomes one quoted string;
/// values that open a YAML structure (`[`, `{`, `|`, `>`, quotes, or a list below) are
/// kept as written. Fields of other keys are dropped: their names are returned.
fn lenient_front(lines: &[&str]) -> (String, Vec<String>) {
    let mut out: Vec<String> = Vec::new();
    let mut dropped = Vec::new();
    // The field being read: its key, whether it is plain text, and its lines.
    let mut field: Option<(String, bool, Vec<String>)> = None;
    let flush = |out: &mut Vec<String>, field: Option<(String, bool, Vec<String>)>| {
        let Some((key, plain, parts)) = field else {
            return;
        };
        if !MEANINGFUL_KEYS.contains(&key.as_str()) {
            return;
        }
        if plain {
            let text = parts.join("\n").trim().to_string();
            let escaped = text
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\t', "\\t")
                .replace('\n', "\\n");
            out.push(format!("{key}: \"{escaped}\""));
        } else {
            out.extend(parts);
        }
    };
    for line in lines {
        let in_text = field
            .as_ref()
            .is_some_and(|(key, plain, _)| *plain && key == "description");
        let key = line_key(line)
            .filter(|k| !in_text || (MEANINGFUL_KEYS.contains(k) || IGNORED_KEYS.contains(k)));
        if let Some(key) = key {
            flush(&mut out, field.take());
            if !MEANINGFUL_KEYS.contains(&key) && !dropped.iter().any(|d| d == key) {
                dropped.push(key.to_string());
            }
            let value = line[key.len()..].trim_start()[1..].trim();
            let structured = value.is_empty()
                || value.starts_with(['[', '{', '|', '>', '"', '\'', '&', '*', '!']);
            field = Some(if structured {
                (key.to_string(), false, vec![(*line).to_string()])
            } else {
                (key.to_string(), true, vec![value.to_string()])
            });
        } else if let Some((_, plain, parts)) = field.as_mut() {
            parts.push(if *plain {
                line.trim().to_string()
            } else {
                (*line).to_string()
            });
        }
    }
    flush(&mut out, field.take());
    (out.join("\n"), dropped)
}

/// `key` when `line` starts with `key:` (a letter, then letters, digits, `_`, `-`).
fn line_key(line: &str) -> Option<&str> {
    let end = line.find(':')?;
    let key = &line[..end];
    let rest = &line[end + 1..];
    let valid = key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (valid && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_agent_files_parse() {
        let text = "---\nname: reviewer\ndescription: \"Reviews code\"\ntools: Read, Grep, Bash(git diff:*)\nmodel: inherit\nmaxTurns: 5\ncolor: blue\n---\n\nYou review code.\nBe brief.\n";
        let file = parse(text).unwrap();
        assert_eq!(
            file,
            AgentFile {
                name: Some("reviewer".into()),
                description: Some("Reviews code".into()),
                tools: Some(vec![
                    "Read".into(),
                    "Grep".into(),
                    "Bash(git diff:*)".into()
                ]),
                model: Some("inherit".into()),
                max_turns: Some(5),
                ignored_keys: vec!["color".into()],
                prompt: "You review code.\nBe brief.".into(),
                ..AgentFile::default()
            }
        );
        let list = parse("---\nname: a\ntools:\n  - read_file\n  - list_dir\n---\nx").unwrap();
        assert_eq!(list.tools.unwrap(), ["read_file", "list_dir"]);
        let inline = parse("---\nname: a\ntools: [read_file, 'list_dir']\n---\n").unwrap();
        assert_eq!(inline.tools.unwrap(), ["read_file", "list_dir"]);
    }

    #[test]
    fn yaml_as_people_write_it() {
        let block = parse(
            "---\n# a comment\nname: writer\ndescription: |\n  Writes things.\n  Two lines.\ntools: >\n  Read,\n  Write\ndisallowedTools:\n  - Bash\n  - \"Write(*.env)\"\npermissionMode: plan\n---\nbody",
        )
        .unwrap();
        assert_eq!(
            block.description.as_deref(),
            Some("Writes things.\nTwo lines.")
        );
        assert_eq!(block.tools.unwrap(), ["Read", "Write"]);
        assert_eq!(block.disallowed_tools, ["Bash", "Write(*.env)"]);
        assert_eq!(block.permission_mode.as_deref(), Some("plan"));
        assert!(block.lenient.is_none());
        let multi = parse("---\nname: a\ndescription: one\n  two\n  three\n---\n").unwrap();
        assert_eq!(multi.description.as_deref(), Some("one two three"));
        let no_name = parse("---\ndescription: x\n---\n").unwrap();
        assert_eq!(no_name.name, None);
    }

    #[test]
    fn invalid_yaml_is_read_as_claude_code_reads_it() {
        let text = "---\nname: helper\ndescription: Use this agent when: the user asks. Examples:\n\n<example>\nContext: a user\nuser: \"help\"\n</example>\ntools: Read, Grep\n---\nPrompt";
        let file = parse(text).unwrap();
        assert!(file.lenient.is_some(), "{file:?}");
        let description = file.description.unwrap();
        assert!(description.starts_with("Use this agent when: the user asks. Examples:"));
        assert!(description.contains("<example>\nContext: a user\nuser: \"help\"\n</example>"));
        assert_eq!(file.tools.unwrap(), ["Read", "Grep"]);
    }

    #[test]
    fn bad_agent_files_name_the_line() {
        assert_eq!(parse("name: a\n").unwrap_err(), ParseError::NoFrontMatter);
        assert!(
            matches!(parse("---\nname: a\n").unwrap_err(), ParseError::Invalid(1, m) if m.contains("not closed"))
        );
        assert!(matches!(
            parse("---\nname: a\nmaxTurns: lots\n---\n").unwrap_err(),
            ParseError::Invalid(3, m) if m.contains("between 1 and 1000")
        ));
        assert!(matches!(
            parse("---\nname: a\ntools: {a: 1}\n---\n").unwrap_err(),
            ParseError::Invalid(3, _)
        ));
        assert!(
            matches!(parse("---\n- a\n- b\n---\n").unwrap_err(), ParseError::Invalid(_, m) if m.contains("key: value"))
        );
    }
}
