//! `warren init`, `warren doctor` and `warren agents`: starting a project, checking
//! it, and listing its profiles.

use std::path::Path;

use super::args::{AgentsArgs, InitArgs};
use super::failure::Failure;
use super::tools::load_registry;
use crate::config::Config;
use crate::term::outln;

/// `warren init [DIR]`: writes the starter files and says what to run next.
pub(super) async fn init(args: InitArgs) -> Result<(), Failure> {
    let done = crate::cli::init::init(&args.dir, args.provider).await?;
    let (provider, why) = &done.provider;
    outln!("model: {provider:?} ({why})")?;
    for path in &done.written {
        outln!("wrote {}", path.display())?;
    }
    for path in &done.kept {
        outln!("kept  {} (already there)", path.display())?;
    }
    let cd = if args.dir == Path::new(".") {
        String::new()
    } else {
        format!("cd {} && ", args.dir.display())
    };
    outln!("\nnext:")?;
    outln!("  {cd}warren doctor                       # checks the config, tools and model")?;
    outln!("  {cd}warren agents                       # the profiles and the tools each gets")?;
    outln!("  {cd}warren run \"What is in this project?\"")?;
    Ok(())
}

/// `warren doctor`: one line per check; a failure when any check failed.
pub(super) async fn doctor(config_path: &Path) -> Result<(), Failure> {
    let failed = crate::cli::doctor::run(config_path).await?;
    if failed > 0 {
        return Err(Failure::Run(anyhow::anyhow!("{failed} check(s) failed")));
    }
    Ok(())
}

/// `warren agents`: every profile and skipped agent file; `--check` fails on a skip.
pub(super) async fn agents(config_path: &Path, args: AgentsArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let registry = load_registry(&config).await?;
    crate::cli::agents_report::print(&config, &registry, args.json)?;
    if args.check && !config.agent_files.skipped.is_empty() {
        return Err(Failure::Run(anyhow::anyhow!(
            "{} agent file(s) skipped",
            config.agent_files.skipped.len()
        )));
    }
    Ok(())
}
