//! The `<available_spawn_profiles>` block of a spawning agent's system prompt: every
//! profile's name, description and tools, within [`MAX_SPAWN_PROFILES_BYTES`], since
//! it goes into every request of every agent that may spawn.

use crate::config::Profile;

/// Most bytes of profile lines in one `<available_spawn_profiles>` block. Each
/// description is at most `MAX_PROFILE_DESCRIPTION_BYTES` (checked at load); this
/// bounds the sum however many profiles there are (agent files can add thousands).
pub(crate) const MAX_SPAWN_PROFILES_BYTES: usize = 32 * 1024;

/// The block listing `profiles`, in order, until the next line would pass
/// [`MAX_SPAWN_PROFILES_BYTES`]; the rest are counted, not listed.
pub(crate) fn spawn_profiles_block<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> String {
    let mut lines = Vec::new();
    let (mut used, mut unlisted) = (0, 0);
    for profile in profiles {
        let tools = match &profile.remote {
            Some(_) => "a remote A2A agent, its tools its own".to_string(),
            None => format!("tools: {}", profile.tools.describe()),
        };
        let line = format!(
            "- {}: {} ({tools})",
            profile.name,
            profile.description.as_deref().unwrap_or("no description"),
        );
        if unlisted == 0 && used + line.len() < MAX_SPAWN_PROFILES_BYTES {
            used += line.len() + 1;
            lines.push(line);
        } else {
            unlisted += 1;
        }
    }
    if unlisted > 0 {
        lines.push(format!(
            "({unlisted} more profiles are not listed: the list is capped at {} KiB)",
            MAX_SPAWN_PROFILES_BYTES / 1024
        ));
    }
    format!(
        "<available_spawn_profiles>\nYou can hand scoped tasks to sub-agents with spawn_agent. Profiles:\n{}\n</available_spawn_profiles>",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two thousand profiles with descriptions of the largest size allowed: the block
    /// stays within its cap and says how many it left out.
    #[test]
    fn the_block_stays_within_its_cap_however_many_profiles() {
        let description = "d".repeat(crate::config::MAX_PROFILE_DESCRIPTION_BYTES);
        let config = crate::config::Config::parse(
            std::path::Path::new("/nonexistent/warren.toml"),
            "[profiles.main]\n",
        )
        .unwrap();
        let base = config.profile("main").unwrap();
        let profiles: Vec<Profile> = (0..2000)
            .map(|i| Profile {
                name: format!("p{i}"),
                description: Some(description.clone()),
                ..base.clone()
            })
            .collect();
        let block = spawn_profiles_block(&profiles);
        assert!(
            block.len() < MAX_SPAWN_PROFILES_BYTES + 512,
            "{} bytes",
            block.len()
        );
        let listed = block.matches("\n- p").count();
        assert_eq!(listed, 7, "{listed} listed");
        assert!(block.contains("(1993 more profiles are not listed: the list is capped at 32 KiB)"));
    }
}
