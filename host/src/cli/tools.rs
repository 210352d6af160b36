//! `warren tools`, `warren call` and `warren plugin`: listing a profile's tools,
//! calling one, and making and inspecting plugin components.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;

use super::args::{CallArgs, PluginCommand, ToolsArgs};
use super::failure::Failure;
use crate::config::{Config, ProfileSource};
use crate::plugin::{ToolAccess, ToolRegistry};
use crate::sandbox::Sandbox;
use crate::term::outln;

/// `warren tools`: the tools a profile gets, with their schemas.
pub(super) async fn tools(config_path: &Path, args: ToolsArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let profile = config.profile(&args.profile)?;
    let registry = load_registry(&config).await?;
    registry.check_profile(&profile, &config.plugin_limits)?;
    print_tools(&registry, &profile, args.json)?;
    Ok(())
}

/// `warren call TOOL [ARGUMENTS]`: one tool call under a profile's capabilities.
pub(super) async fn call(config_path: &Path, args: CallArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let profile = config.profile(&args.profile)?;
    let arguments = if args.arguments == "-" {
        let mut buffer = String::new();
        std::io::stdin()
            .read_to_string(&mut buffer)
            .context("reading arguments from stdin")?;
        buffer
    } else {
        args.arguments
    };
    let registry = load_registry(&config).await?;
    registry.check_profile(&profile, &config.plugin_limits)?;
    let access = ToolAccess::new(profile)?;
    let output = registry
        .call(&access, &args.tool, &arguments)
        .await
        .map_err(anyhow::Error::from)?;
    outln!("{output}")?;
    Ok(())
}

/// `warren plugin new|componentize|inspect`; none reads the configuration.
pub(super) async fn plugin(command: PluginCommand) -> Result<(), Failure> {
    match command {
        PluginCommand::Inspect { file, wit } => Ok(inspect(&file, wit.as_deref()).await?),
        PluginCommand::Componentize { module, output } => {
            let size = crate::plugin::componentize::componentize(&module, &output)?;
            outln!("wrote {} ({size} bytes)", output.display())?;
            Ok(())
        }
        PluginCommand::New {
            name,
            lang,
            typed,
            dir,
        } => {
            let lang = lang.unwrap_or(crate::cli::scaffold::Language::Rust);
            let files = crate::cli::scaffold::new_plugin(&dir, &name, lang, typed)?;
            let root = dir.join(&name);
            let tool = crate::cli::scaffold::example_tool(&name);
            outln!("created {} ({} files)", root.display(), files.len())?;
            outln!(
                "next: cd {} && ./test.sh   (builds it and calls its `{tool}` tool through warren)",
                root.display()
            )?;
            Ok(())
        }
    }
}

pub(super) async fn load_registry(config: &Config) -> anyhow::Result<ToolRegistry> {
    let sandbox = Arc::new(Sandbox::new().context("creating the sandbox")?);
    ToolRegistry::for_config(sandbox, config).await
}

fn print_tools(
    registry: &ToolRegistry,
    profile: &crate::config::Profile,
    json: bool,
) -> anyhow::Result<()> {
    let tools: Vec<_> = registry.tools_for(profile).collect();
    if json {
        let list: Vec<serde_json::Value> = tools
            .iter()
            .map(|(spec, plugin)| {
                serde_json::json!({
                    "name": spec.name,
                    "plugin": plugin.name,
                    "builtin": plugin.builtin,
                    "typed": plugin.is_typed(),
                    "description": spec.description,
                    "input_schema": serde_json::from_str::<serde_json::Value>(&spec.input_schema).unwrap_or_default(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&list)?)?;
        return Ok(());
    }
    if tools.is_empty() {
        outln!(
            "profile `{}` has no tools (plugins loaded: {})",
            profile.name,
            registry.plugins().len()
        )?;
    }
    for (spec, plugin) in tools {
        let origin = if plugin.builtin {
            format!("{}, built-in", plugin.name)
        } else if plugin.is_typed() {
            format!("{}, typed component", plugin.name)
        } else {
            plugin.name.clone()
        };
        outln!(
            "{}  [{origin}]\n  {}\n  arguments: {}\n",
            spec.name,
            spec.description,
            spec.input_schema
        )?;
    }
    // A tool that is loaded but missing above is most often a selection the user
    // forgot, so the listing names it and where the selection is written.
    let (by_name, left_out): (Vec<&str>, Vec<&str>) = registry
        .tool_names()
        .filter(|name| !profile.tools.allows(name))
        .partition(|name| crate::config::NAMED_ONLY.contains(name));
    if !by_name.is_empty() {
        outln!(
            "not for profile `{}`: {} (they run code the model writes: a profile gets them only by naming them in `tools`)",
            profile.name,
            by_name.join(", ")
        )?;
    }
    if !left_out.is_empty() {
        let selection = match &profile.source {
            ProfileSource::Config => "`tools` and `disallowed_tools`".to_string(),
            ProfileSource::AgentFile { path, .. } => format!(
                "`tools`, `disallowedTools` and `permissionMode` in {}",
                path.display()
            ),
        };
        outln!(
            "not for profile `{}`: {} (left out by its {selection})",
            profile.name,
            left_out.join(", ")
        )?;
    }
    Ok(())
}

/// `warren plugin inspect FILE [--wit PATH]`.
async fn inspect(file: &std::path::Path, wit: Option<&std::path::Path>) -> anyhow::Result<()> {
    let sandbox = Sandbox::new().context("creating the sandbox")?;
    let cache = crate::plugin::CompileCache::at(crate::config::default_cache_dir());
    let (component, _) = cache.load(sandbox.engine(), file)?;
    let ty = component.component_type();
    outln!("{}", file.display())?;
    outln!("imports:")?;
    for (name, _) in ty.imports(sandbox.engine()) {
        outln!("  {name}")?;
    }
    outln!("exports:")?;
    for (name, _) in ty.exports(sandbox.engine()) {
        outln!("  {name}")?;
    }
    let name = file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    if !crate::plugin::typed::is_plugin(&component, &sandbox) {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let options = crate::plugin::typed::TypedOptions {
            wit,
            hidden: &[],
            limits: &crate::config::PluginLimits::default(),
        };
        let (typed, tools) =
            crate::plugin::typed::TypedComponent::load(&sandbox, &component, &bytes, &options)
                .with_context(|| {
                    format!(
                        "{} is a typed component (it does not export warren:plugin/tool) that warren cannot offer",
                        file.display()
                    )
                })?;
        outln!("kind: typed component (each exported function is a tool)")?;
        outln!("tools:")?;
        for (tool, function) in tools.iter().zip(typed.functions()) {
            outln!(
                "  {} ({}): {}\n    arguments: {}",
                tool.name,
                function.wit_name,
                tool.description,
                tool.input_schema
            )?;
        }
        return Ok(());
    }
    outln!("kind: warren:plugin/plugin component (it lists its tools)")?;
    let pre = sandbox.prepare(&component).map_err(|error| {
        anyhow::anyhow!(
            "{} does not implement the warren:plugin/plugin world (see wit/plugin.wit): {error:#}",
            file.display()
        )
    })?;
    let tools = sandbox.list_tools(&pre, &name).await?;
    outln!("tools:")?;
    for tool in tools {
        outln!(
            "  {}: {}\n    arguments: {}",
            tool.name,
            tool.description,
            tool.input_schema
        )?;
    }
    Ok(())
}
