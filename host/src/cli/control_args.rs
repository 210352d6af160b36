//! The arguments of the commands that reach a live run through its control socket:
//! `warren send` and `warren approve`.

use clap::Args;

#[derive(Debug, Args)]
pub(super) struct SendArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    pub(super) run: String,
    /// The agent: its job id, or `root`.
    pub(super) agent: String,
    /// The message; `-` reads it from standard input.
    pub(super) message: String,
    /// queue (default: read at the agent's next turn boundary), interrupt (its current
    /// model request or tool wait is cut) or follow_up (keeps it going; resumes an
    /// agent that finished ok, with its history).
    #[arg(long, value_name = "MODE")]
    pub(super) mode: Option<String>,
    /// Who the agent is told sent it (default: your user name).
    #[arg(long, value_name = "NAME")]
    pub(super) from: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct ApproveArgs {
    /// The run: its id, a unique prefix of it, or `last`.
    pub(super) run: String,
    /// The request's id, as the listing shows it; leave out to list them.
    pub(super) request: Option<String>,
    /// Deny the call, telling the model REASON.
    #[arg(long, value_name = "REASON", conflicts_with_all = ["always", "answer"])]
    pub(super) deny: Option<String>,
    /// Approve the call and every later call of the same tool in the run.
    #[arg(long)]
    pub(super) always: bool,
    /// Answer a question (`ask_person`) with TEXT.
    #[arg(long, value_name = "TEXT", conflicts_with = "always")]
    pub(super) answer: Option<String>,
    /// Who the journal records as answering (default: your user name).
    #[arg(long, value_name = "NAME")]
    pub(super) from: Option<String>,
    /// Print the listing as JSON.
    #[arg(long)]
    pub(super) json: bool,
}
