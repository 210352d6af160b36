//! `warren approve RUN [REQUEST]`: the approvals and questions a live run's agents
//! wait on, listed or answered through the run's control socket.

use std::path::Path;

use super::control_args::ApproveArgs;
use super::failure::Failure;
use super::runs::journal_dir;
use super::send::unreachable;
use crate::config::Config;
use crate::events::{PersonRequest, RequestKind};
use crate::host::control::{self, AnswerRequest, ControlRequest};
use crate::term::outln;

/// Lists the waiting requests, or answers one and prints what became of it.
pub(super) async fn approve(config_path: &Path, args: ApproveArgs) -> Result<(), Failure> {
    let config = Config::load(config_path)?;
    let journal = crate::journal::read::find(&journal_dir(&config)?, &args.run)?;
    let request = match &args.request {
        None => ControlRequest::Pending,
        Some(id) => {
            let (verdict, text) = match (&args.deny, &args.answer) {
                (Some(reason), _) => ("deny", reason.clone()),
                (None, Some(answer)) => ("answer", answer.clone()),
                (None, None) if args.always => ("approve_tool", String::new()),
                (None, None) => ("approve", String::new()),
            };
            let from = args
                .from
                .clone()
                .or_else(|| std::env::var("USER").ok())
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| "someone".into());
            ControlRequest::Answer(AnswerRequest {
                request: id.clone(),
                verdict: verdict.into(),
                text,
                by: format!("cli:{from}"),
            })
        }
    };
    let reply = match control::request(&control::socket_path(&journal), &request).await {
        Ok(reply) => reply,
        Err(error) => return Err(unreachable(&journal, &error).into()),
    };
    if reply.receipt == "rejected" {
        return Err(anyhow::anyhow!("{}", reply.text).into());
    }
    if args.request.is_some() {
        outln!("{}", reply.text).map_err(Failure::Run)?;
        return Ok(());
    }
    if args.json {
        let listing = serde_json::to_string_pretty(&reply.requests).unwrap_or_default();
        outln!("{listing}").map_err(Failure::Run)?;
        return Ok(());
    }
    if reply.requests.is_empty() {
        outln!("nothing waits for a person in this run").map_err(Failure::Run)?;
    }
    for request in &reply.requests {
        outln!("{}", described(request)).map_err(Failure::Run)?;
    }
    Ok(())
}

/// One request as the listing shows it: what it asks, where, and how to answer.
pub(crate) fn described(request: &PersonRequest) -> String {
    let left_s = request
        .deadline_ms
        .saturating_sub(crate::events::now_ms())
        .div_ceil(1000);
    let mut text = match request.kind {
        RequestKind::Approval => format!(
            "{}  agent {} wants to call {}  (denied in {left_s} s if nobody answers)\n  arguments: {}",
            request.id, request.path, request.tool, request.arguments
        ),
        RequestKind::Question => format!(
            "{}  agent {} asks: {}  (unanswered in {left_s} s)",
            request.id,
            request.path,
            request.question.as_deref().unwrap_or_default()
        ),
    };
    if !request.touches.is_empty() {
        text.push_str(&format!(
            "\n  it could touch: {}",
            request.touches.join("; ")
        ));
    }
    if !request.rule.is_empty() {
        text.push_str(&format!(
            "\n  asked because of: approval = {:?}",
            request.rule
        ));
    }
    // What the model wrote cannot drive the terminal it is shown on.
    crate::term::visible(&text).into_owned()
}
