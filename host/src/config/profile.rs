//! A profile: a named set of tools, capabilities, prompt, model and limits, however
//! it was defined (a `[profiles]` table, an agent file, the implicit `main`), and the
//! rules every definition shares.

use std::fmt;
use std::path::PathBuf;

use super::approval::Approval;
use super::limits::AgentLimits;
use super::output_schema::OutputSchema;
use super::tool_selection::ToolSelection;
use crate::policy::CapabilitySet;

/// Longest description a profile may have, in bytes (`[profiles.NAME] description`
/// or an agent file's `description`): every agent that may spawn gets every profile's
/// description in its system prompt, on every request.
pub(crate) const MAX_PROFILE_DESCRIPTION_BYTES: usize = 4 * 1024;

/// The model name that means "the parent's model" (`model = "inherit"` in a
/// `[profiles]` table, `model: inherit` in an agent file), as Claude Code writes it.
pub(super) const INHERIT_MODEL: &str = "inherit";

/// A named set of tools, capabilities, prompt, model and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The key under `[profiles]`.
    pub(crate) name: String,
    /// What the profile is for, shown to a parent agent.
    pub description: Option<String>,
    /// The tools it may call.
    pub tools: ToolSelection,
    /// What those tools may touch.
    pub capabilities: CapabilitySet,
    /// Bootstrap files, then `system_prompt_file`, then `system_prompt`, joined.
    pub(crate) system_prompt: String,
    /// The `[models]` entry it uses (`None`: no model configured).
    pub(crate) model: Option<String>,
    /// Turn, time and cost limits.
    pub limits: AgentLimits,
    /// Which calls wait for a person's yes, and how long (`approval`,
    /// `approval_timeout_s`; an agent file's `permissionMode`).
    pub(crate) approval: Approval,
    /// The most turns a spawn may give an agent of this profile: its
    /// `max_turns_ceiling`, else `[defaults] max_turns_ceiling`, else its own
    /// `max_turns`. Spawns may raise `max_turns` up to it.
    pub max_turns_ceiling: u32,
    /// `model: inherit` (agent files): a sub-agent takes its parent's model.
    pub(crate) inherit_model: bool,
    /// The JSON Schema its final answer must match (`output_schema`): its answer is
    /// then data, checked, and delivered as JSON. A spawn may not ask for another.
    pub(crate) output_schema: Option<OutputSchema>,
    /// Where it was defined.
    pub(crate) source: ProfileSource,
    /// The remote A2A agent it runs as (`[profiles.NAME.a2a]`): then no model runs
    /// it here and no sandbox holds it.
    pub(crate) remote: Option<super::remote::RemoteAgent>,
    /// What a user should know about the definition: tools with no sandboxed
    /// equivalent, a model name that means nothing here, keys with no meaning.
    pub notes: Vec<ProfileNote>,
}

/// Why `description` is refused, when it passes [`MAX_PROFILE_DESCRIPTION_BYTES`].
pub(super) fn description_too_long(description: &str) -> Option<String> {
    (description.len() > MAX_PROFILE_DESCRIPTION_BYTES).then(|| {
        format!(
            "the description is {} bytes; a profile's description is at most {MAX_PROFILE_DESCRIPTION_BYTES} (every agent that may spawn gets it in its prompt)",
            description.len()
        )
    })
}

/// The mark that ends a description cut to [`MAX_PROFILE_DESCRIPTION_BYTES`].
const DESCRIPTION_CUT_MARK: &str = " […cut]";

/// An agent file's `description` as other agents' prompts get it: whole when it fits
/// [`MAX_PROFILE_DESCRIPTION_BYTES`], else cut at a character boundary so that with
/// its mark it fits, and the note saying so (Claude Code loads such files whole, so a
/// long description is no reason to skip one).
pub(super) fn cut_description(description: String) -> (String, Option<ProfileNote>) {
    let written = description.len();
    if written <= MAX_PROFILE_DESCRIPTION_BYTES {
        return (description, None);
    }
    let mut end = MAX_PROFILE_DESCRIPTION_BYTES - DESCRIPTION_CUT_MARK.len();
    while !description.is_char_boundary(end) {
        end -= 1;
    }
    let cut = format!("{}{DESCRIPTION_CUT_MARK}", &description[..end]);
    (cut, Some(ProfileNote::DescriptionCut { written }))
}

impl Profile {
    /// The model an agent of this profile took from its parent (`model: inherit`),
    /// once narrowed (`jobs::narrow`): what it must run on on another machine too.
    pub(crate) fn inherited_model(&self) -> Option<&str> {
        self.model.as_deref().filter(|_| self.inherit_model)
    }

    /// The limits of an agent of this profile spawned with `asked` limits: turns up to
    /// [`Profile::max_turns_ceiling`], time and cost only ever lower. The one rule for
    /// spawns, in-process and on workers alike.
    pub(crate) fn spawn_limits(&self, asked: &AgentLimits) -> AgentLimits {
        AgentLimits {
            max_turns: asked
                .max_turns
                .min(self.max_turns_ceiling.max(self.limits.max_turns)),
            timeout_s: asked.timeout_s.min(self.limits.timeout_s),
            max_cost_usd: match (asked.max_cost_usd, self.limits.max_cost_usd) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// Where a profile was defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProfileSource {
    /// `[profiles.NAME]` in `warren.toml` (or the implicit `main`).
    Config,
    /// An agent file; `written_name` is its `name` when that had to be changed into a
    /// valid profile name (or was missing).
    AgentFile {
        /// The file.
        path: PathBuf,
        /// The `name` as written, when it differs from the profile name.
        written_name: Option<String>,
    },
}

/// Something about a profile's definition worth telling the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileNote {
    /// Tool names with no sandboxed equivalent (warned once per process when an agent
    /// of the profile starts).
    UnavailableTools(Vec<String>),
    /// A model name that is neither a `[models]` nor a `[model_aliases]` name; the
    /// default model is used instead (warned like unavailable tools).
    UnknownModel {
        /// As written.
        written: String,
        /// What is used instead.
        used: Option<String>,
    },
    /// Agent-file keys warren gives no meaning to (`color`, `hooks`, …).
    IgnoredKeys(Vec<String>),
    /// The front matter was not valid YAML and was read leniently.
    Lenient(String),
    /// `permissionMode: plan`: every file grant read-only, no write tools.
    PlanMode,
    /// The description was longer than [`MAX_PROFILE_DESCRIPTION_BYTES`] and was cut
    /// to it where other agents' prompts list it.
    DescriptionCut {
        /// Its length as written, in bytes.
        written: usize,
    },
}

impl ProfileNote {
    /// Whether an agent starting under the profile should log this as a warning.
    pub fn warns(&self) -> bool {
        matches!(
            self,
            ProfileNote::UnavailableTools(_) | ProfileNote::UnknownModel { .. }
        )
    }
}

impl fmt::Display for ProfileNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileNote::UnavailableTools(names) => write!(
                f,
                "tools with no sandboxed equivalent, not available: {}",
                names.join(", ")
            ),
            ProfileNote::UnknownModel { written, used } => write!(
                f,
                "model `{written}` is not under [models] or [model_aliases]; using {}",
                used.as_deref()
                    .map_or("no model".to_string(), |m| format!("`{m}`"))
            ),
            ProfileNote::IgnoredKeys(keys) => {
                write!(
                    f,
                    "keys with no meaning in warren, ignored: {}",
                    keys.join(", ")
                )
            }
            ProfileNote::Lenient(why) => write!(
                f,
                "front matter is not valid YAML ({why}); read with each key's text taken as written"
            ),
            ProfileNote::PlanMode => {
                f.write_str("permissionMode: plan: every file grant read-only, no write tools")
            }
            ProfileNote::DescriptionCut { written } => write!(
                f,
                "description is {written} bytes; cut to {MAX_PROFILE_DESCRIPTION_BYTES} where other agents' prompts list it"
            ),
        }
    }
}

/// The most turns a spawn may give an agent of a profile: the profile's own
/// `max_turns_ceiling`, else `[defaults] max_turns_ceiling`, else its `max_turns`; never
/// below its `max_turns`. The one rule for `[profiles]`, agent files and the implicit
/// `main`.
pub(super) fn turns_ceiling(own: Option<u32>, defaults: Option<u32>, max_turns: u32) -> u32 {
    own.or(defaults).unwrap_or(max_turns).max(max_turns)
}

/// Prompt parts trimmed, empty ones dropped, joined by blank lines.
pub(super) fn join_prompt(parts: &[String]) -> String {
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}
