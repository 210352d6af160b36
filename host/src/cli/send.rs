//! `warren send RUN AGENT MESSAGE`: a person's message to an agent of a live run,
//! through the run's control socket, and its receipt.

use std::io::Read as _;
use std::path::Path;

use super::control_args::SendArgs;
use super::failure::Failure;
use super::runs::journal_dir;
use crate::config::Config;
use crate::events::MessageMode;
use crate::host::control::{self, ControlRequest, SendRequest};
use crate::term::outln;

/// Sends the message and prints its receipt; a rejection or a run that cannot be
/// reached is a failure that says why.
pub(super) async fn send(config_path: &Path, args: SendArgs) -> Result<(), Failure> {
    MessageMode::parse(args.mode.as_deref())
        .map_err(|why| Failure::Usage(format!("--mode: {why}")))?;
    let config = Config::load(config_path)?;
    let journal = crate::journal::read::find(&journal_dir(&config)?, &args.run)?;
    let message = match args.message.as_str() {
        "-" => {
            let mut text = String::new();
            std::io::stdin()
                .take((config.run_limits.max_message_kb * 1024 + 1) as u64)
                .read_to_string(&mut text)
                .map_err(|e| {
                    Failure::Usage(format!("reading the message from standard input: {e}"))
                })?;
            text
        }
        text => text.to_string(),
    };
    let from = sender(args.from);
    let request = SendRequest {
        agent: args.agent,
        message,
        mode: args.mode,
        from,
    };
    let request = ControlRequest::Send(request);
    let reply = match control::request(&control::socket_path(&journal), &request).await {
        Ok(reply) => reply,
        Err(error) => return Err(unreachable(&journal, &error).into()),
    };
    if reply.receipt == "rejected" {
        return Err(anyhow::anyhow!("{}", reply.text).into());
    }
    outln!("{}", reply.text).map_err(Failure::Run)?;
    Ok(())
}

/// Who sends a person's message: `--from`, else `$USER`, else "someone".
pub(super) fn sender(from: Option<String>) -> String {
    from.or_else(|| std::env::var("USER").ok())
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "someone".into())
}

/// Why the run at `journal` could not be reached, and what to do.
pub(super) fn unreachable(journal: &Path, error: &std::io::Error) -> anyhow::Error {
    let run = crate::journal::read::run(journal);
    match run {
        Ok(run) if run.finished => anyhow::anyhow!(
            "run {} has ended ({}): its agents take no more messages; a follow-up resumes it: `warren resume {} --follow-up AGENT TEXT`",
            run.id,
            run.state,
            run.id
        ),
        Ok(run) => anyhow::anyhow!(
            "run {} is not running (its process is gone: {error}): continue it with `warren resume {}`, then send again",
            run.id,
            run.id
        ),
        Err(read) => anyhow::anyhow!("cannot reach the run ({error}), nor read its journal: {read:#}"),
    }
}
