//! One `[profiles.NAME]` table: as written, and resolved (prompt files read, model
//! and tool names looked up, capabilities over `[defaults.capabilities]`) into a
//! [`Profile`].

use serde::Deserialize;
use toml::Spanned;

use super::approval::{Approval, ApprovalRule, Entry, DEFAULT_APPROVAL_TIMEOUT_S};
use super::capabilities::{self, RawCapabilities};
use super::defaults::{Inherited, Written};
use super::error::ConfigError;
use super::limits::{AgentSeconds, Turns};
use super::models::model_name;
use super::output_schema::{OutputSchema, MAX_OUTPUT_SCHEMA_BYTES};
use super::profile::{
    description_too_long, join_prompt, Profile, ProfileNote, ProfileSource, INHERIT_MODEL,
};
use super::source::Source;
use super::tool_selection::{resolve, ListKind, ToolSelection};
use super::values::{Dollars, Parsed, ToolPattern};

/// A `[profiles.NAME]` table as written.
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    /// What the profile is for, shown to a parent.
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    description: Option<Spanned<String>>,
    /// Inline prompt, last of the prompt's parts.
    system_prompt: Option<String>,
    /// A prompt file, before the inline prompt.
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    system_prompt_file: Option<Spanned<String>>,
    /// Files first in the prompt (default: `AGENTS.md` and `ENVIRONMENT.md`).
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    bootstrap_files: Option<Vec<Spanned<String>>>,
    /// A `[models]` or `[model_aliases]` name.
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    model: Option<Spanned<String>>,
    /// Turns of one agent.
    max_turns: Option<Turns>,
    /// The most turns a spawn may give it.
    max_turns_ceiling: Option<Turns>,
    /// Wall time of one agent.
    timeout_s: Option<AgentSeconds>,
    /// Cost cap of one agent.
    max_cost_usd: Option<Dollars>,
    /// The tools it may call (names, patterns or aliases; default all).
    tools: Option<Vec<ToolPattern>>,
    /// Tools subtracted after `tools`.
    disallowed_tools: Option<Vec<ToolPattern>>,
    /// The JSON Schema its answer must match, as an inline table.
    #[cfg_attr(test, schemars(with = "Option<serde_json::Value>"))]
    output_schema: Option<Spanned<toml::Value>>,
    /// The same, from a JSON file (relative to the config).
    #[cfg_attr(test, schemars(with = "Option<String>"))]
    output_schema_file: Option<Spanned<String>>,
    /// Calls that wait for a person's yes: tool names or patterns, `@writes`,
    /// `@network`, `@spawn`, `@code`, or `*`.
    #[cfg_attr(test, schemars(with = "Option<Vec<String>>"))]
    approval: Option<Vec<Parsed<Entry>>>,
    /// How long such a call waits for an answer before it is denied.
    approval_timeout_s: Option<AgentSeconds>,
    /// Its own capabilities, over `[defaults.capabilities]`.
    #[serde(default)]
    capabilities: RawCapabilities,
    /// The remote A2A agent it runs as.
    #[cfg_attr(test, schemars(with = "Option<super::remote::RawRemote>"))]
    a2a: Option<Spanned<super::remote::RawRemote>>,
}

/// `approval` and `approval_timeout_s` as written, the deadline's default filled in.
fn approval(raw: &RawProfile) -> Approval {
    Approval {
        rule: ApprovalRule::of(raw.approval.iter().flatten().map(|e| e.0.clone())),
        timeout_s: raw
            .approval_timeout_s
            .map_or(DEFAULT_APPROVAL_TIMEOUT_S, |v| v.0),
    }
}

/// One `[profiles.NAME]` table.
pub(super) fn profile(
    src: &Source<'_>,
    name: &str,
    raw: &RawProfile,
    defaults: &Inherited<'_>,
) -> Result<Profile, ConfigError> {
    let key = format!("profiles.{name}");
    if let Some(description) = &raw.description {
        if let Some(message) = description_too_long(description.get_ref()) {
            return src.invalid(description.span(), &format!("{key}.description"), message);
        }
    }
    if let Some(remote) = &raw.a2a {
        return remote_profile(src, name, raw, defaults, remote);
    }
    let capabilities = capabilities::resolve(
        src,
        &raw.capabilities,
        Some(defaults.raw_capabilities),
        &format!("{key}.capabilities"),
    )?;
    let mut notes = Vec::new();
    let patterns = |list: &Option<Vec<ToolPattern>>| -> Vec<String> {
        list.iter().flatten().map(|t| t.0.clone()).collect()
    };
    let allow = match &raw.tools {
        Some(_) => {
            let resolved = resolve(
                &patterns(&raw.tools),
                &defaults.tool_aliases,
                ListKind::Allow,
            );
            if !resolved.unavailable.is_empty() {
                notes.push(ProfileNote::UnavailableTools(resolved.unavailable));
            }
            resolved.patterns
        }
        None => vec!["*".to_string()],
    };
    let deny = resolve(
        &patterns(&raw.disallowed_tools),
        &defaults.tool_aliases,
        ListKind::Deny,
    )
    .patterns;
    let prompt = prompt_parts(src, &key, raw, defaults)?;
    // `inherit`, as agent files write it: a sub-agent runs on its parent's model (a
    // root, on the default one).
    let inherit_model = raw
        .model
        .as_ref()
        .is_some_and(|m| m.get_ref() == INHERIT_MODEL);
    let model = match raw.model.as_ref().filter(|_| !inherit_model) {
        Some(model) => Some(model_name(
            src,
            model,
            defaults.models,
            defaults.model_aliases,
            &format!("{key}.model"),
        )?),
        None => None,
    };
    Ok(defaults.profile(Written {
        name: name.to_string(),
        description: raw.description.as_ref().map(|d| d.get_ref().clone()),
        tools: ToolSelection::new(allow, deny, true),
        capabilities,
        prompt: join_prompt(&prompt),
        model,
        inherit_model,
        max_turns: raw.max_turns.map(|v| v.0 as u32),
        max_turns_ceiling: raw.max_turns_ceiling.map(|v| v.0 as u32),
        timeout_s: raw.timeout_s.map(|v| v.0),
        max_cost_usd: raw.max_cost_usd.map(|v| v.0),
        output_schema: output_schema(src, &key, raw)?,
        approval: approval(raw),
        source: ProfileSource::Config,
        notes,
    }))
}

/// A profile that runs as the remote A2A agent `remote`: it keeps its description
/// and limits (time, turns, cost); what a remote agent would not obey is refused.
fn remote_profile(
    src: &Source<'_>,
    name: &str,
    raw: &RawProfile,
    defaults: &Inherited<'_>,
    remote: &Spanned<super::remote::RawRemote>,
) -> Result<Profile, ConfigError> {
    let key = format!("profiles.{name}");
    let span = remote.span();
    let written = [
        ("tools", raw.tools.is_some()),
        ("disallowed_tools", raw.disallowed_tools.is_some()),
        ("model", raw.model.is_some()),
        ("system_prompt", raw.system_prompt.is_some()),
        ("system_prompt_file", raw.system_prompt_file.is_some()),
        ("approval", raw.approval.is_some()),
        (
            "output_schema",
            raw.output_schema.is_some() || raw.output_schema_file.is_some(),
        ),
        ("capabilities", !raw.capabilities.is_empty()),
    ];
    if let Some((field, _)) = written.iter().find(|(_, given)| *given) {
        return src.invalid(
            span,
            &format!("{key}.{field}"),
            format!(
                "a profile with `a2a` runs a remote agent, whose {field} are its own: warren cannot enforce `{field}` there, so it is refused rather than ignored (remove it)"
            ),
        );
    }
    let remote = match remote.get_ref().resolve(&format!("{key}.a2a")) {
        Ok(remote) => remote,
        Err(message) => return src.invalid(span, &format!("{key}.a2a"), message),
    };
    let mut profile = defaults.profile(Written {
        name: name.to_string(),
        description: raw.description.as_ref().map(|d| d.get_ref().clone()),
        tools: ToolSelection::new(Vec::new(), Vec::new(), true),
        capabilities: crate::policy::CapabilitySet::default(),
        prompt: String::new(),
        model: None,
        inherit_model: false,
        max_turns: raw.max_turns.map(|v| v.0 as u32),
        max_turns_ceiling: raw.max_turns_ceiling.map(|v| v.0 as u32),
        timeout_s: raw.timeout_s.map(|v| v.0),
        max_cost_usd: raw.max_cost_usd.map(|v| v.0),
        output_schema: None,
        approval: approval(raw),
        source: ProfileSource::Config,
        notes: Vec::new(),
    });
    profile.model = None;
    profile.remote = Some(remote);
    Ok(profile)
}

/// The parts of a profile's prompt, in order: its bootstrap files (else the default
/// ones), its prompt file, its inline prompt.
fn prompt_parts(
    src: &Source<'_>,
    key: &str,
    raw: &RawProfile,
    defaults: &Inherited<'_>,
) -> Result<Vec<String>, ConfigError> {
    let mut prompt = Vec::new();
    match &raw.bootstrap_files {
        Some(files) => {
            for file in files {
                prompt.push(src.read_file(file, &format!("{key}.bootstrap_files"))?);
            }
        }
        None => prompt.extend(defaults.bootstrap.iter().cloned()),
    }
    if let Some(file) = &raw.system_prompt_file {
        prompt.push(src.read_file(file, &format!("{key}.system_prompt_file"))?);
    }
    prompt.extend(raw.system_prompt.clone());
    Ok(prompt)
}

/// `output_schema` (an inline table) or `output_schema_file` (a JSON file), checked;
/// an error at the line of the one written, naming it.
fn output_schema(
    src: &Source<'_>,
    key: &str,
    raw: &RawProfile,
) -> Result<Option<OutputSchema>, ConfigError> {
    match (&raw.output_schema, &raw.output_schema_file) {
        (None, None) => Ok(None),
        (Some(_), Some(file)) => src.invalid(
            file.span(),
            &format!("{key}.output_schema_file"),
            "give `output_schema` or `output_schema_file`, not both".into(),
        ),
        (Some(table), None) => {
            let schema = serde_json::to_value(table.get_ref())
                .map_err(|e| e.to_string())
                .and_then(OutputSchema::new);
            schema.map(Some).or_else(|message| {
                src.invalid(table.span(), &format!("{key}.output_schema"), message)
            })
        }
        (None, Some(file)) => {
            let field = format!("{key}.output_schema_file");
            let path = src.base.join(file.get_ref());
            // Pretty-printed JSON is larger than its compact form, which is what is bounded.
            super::text_file::read_text(&path, MAX_OUTPUT_SCHEMA_BYTES * 4, None)
                .and_then(|text| OutputSchema::from_json(&text))
                .map(Some)
                .or_else(|message| {
                    src.invalid(
                        file.span(),
                        &field,
                        format!("cannot use {}: {message}", path.display()),
                    )
                })
        }
    }
}
