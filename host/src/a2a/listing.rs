//! `ListTasks`: a credential's tasks, newest first: those this server holds and
//! those only their runs' journals keep (at most [`MAX_LISTED`] of those looked
//! at), filtered by `contextId`, `status` and `statusTimestampAfter`, in pages of
//! `pageSize` (at most [`MAX_PAGE`], 50 when not given) that `pageToken` (the
//! `nextPageToken` of the page before) continues. Each task comes without
//! artifacts unless `includeArtifacts`, and with the last `historyLength`
//! messages of its history (none when not given).

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{json, Value};

use super::task::Tasks;
use crate::listener::auth::Owner;

/// The most tasks one page holds.
const MAX_PAGE: usize = 100;
/// The page size when none is asked.
const DEFAULT_PAGE: usize = 50;
/// The most journaled tasks one listing looks at (the newest).
const MAX_LISTED: usize = 1000;

/// One task to list: held by this server, or journaled.
enum Entry {
    Held(std::sync::Arc<super::task::Task>),
    Journaled,
}

/// What a `ListTasks` request asks for.
struct Query<'a> {
    page_size: usize,
    offset: usize,
    history: usize,
    artifacts: bool,
    context: Option<&'a str>,
    status: Option<&'a str>,
    /// `statusTimestampAfter`, to the second.
    after: Option<String>,
}

/// The query `params` make, or why they are wrong.
fn query(params: &Value) -> Result<Query<'_>, String> {
    let page_size = match params.get("pageSize").and_then(Value::as_u64) {
        None | Some(0) => DEFAULT_PAGE,
        Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
    };
    let offset = match params.get("pageToken").and_then(Value::as_str) {
        None | Some("") => 0,
        Some(token) => token
            .parse::<usize>()
            .map_err(|_| "`pageToken` is not one this server gave (a nextPageToken)".to_string())?,
    };
    let history = params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let artifacts = params.get("includeArtifacts") == Some(&json!(true));
    let context = params
        .get("contextId")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let status = params
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && *s != "TASK_STATE_UNSPECIFIED");
    let after = params
        .get("statusTimestampAfter")
        .and_then(Value::as_str)
        .map(second_of);
    Ok(Query {
        page_size,
        offset,
        history,
        artifacts,
        context,
        status,
        after,
    })
}

/// The page of `owner`'s tasks `params` asks for, or why the request is wrong.
pub(super) async fn list(tasks: &Tasks, owner: &Owner, params: &Value) -> Result<Value, String> {
    let asked = query(params)?;
    let (page_size, offset, context) = (asked.page_size, asked.offset, asked.context);
    // Newest first, each task once; filtered by context before anything is read.
    let mut entries: BTreeMap<String, (SystemTime, Entry)> = BTreeMap::new();
    for (started, id, task_context) in tasks.journaled(owner, MAX_LISTED).await {
        if context.is_none_or(|c| c == task_context) {
            entries.insert(id, (started, Entry::Journaled));
        }
    }
    for task in tasks.held(owner) {
        if context.is_none_or(|c| c == task.context_id) {
            entries.insert(task.id.clone(), (task.started(), Entry::Held(task)));
        }
    }
    let mut ordered: Vec<(String, (SystemTime, Entry))> = entries.into_iter().collect();
    ordered.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));

    let mut matching = Vec::new();
    for (id, (_, entry)) in ordered {
        let wire = match entry {
            Entry::Held(task) => task.wire(Some(asked.history)).await,
            Entry::Journaled => match tasks.stored(owner, &id, Some(asked.history)).await {
                Some(Ok(wire)) => wire,
                Some(Err(why)) => {
                    tracing::warn!(task = %id, why, "A2A: a journaled task is left out of ListTasks");
                    continue;
                }
                None => continue,
            },
        };
        let state = wire.pointer("/status/state").and_then(Value::as_str);
        if asked.status.is_some_and(|s| state != Some(s)) {
            continue;
        }
        let stamp = wire.pointer("/status/timestamp").and_then(Value::as_str);
        if asked
            .after
            .as_deref()
            .is_some_and(|a| stamp.map(second_of).as_deref() <= Some(a))
        {
            continue;
        }
        matching.push(wire);
    }
    let total = matching.len();
    let mut page: Vec<Value> = matching.into_iter().skip(offset).take(page_size).collect();
    if !asked.artifacts {
        for task in &mut page {
            task["artifacts"] = json!([]);
        }
    }
    let next = offset + page.len();
    Ok(json!({
        "tasks": page,
        "nextPageToken": if next < total { next.to_string() } else { String::new() },
        "pageSize": page_size,
        "totalSize": total,
    }))
}

/// An RFC 3339 time to the second (`2026-12-03T06:39:04`): what times compare by.
fn second_of(time: &str) -> String {
    time.chars().take(19).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_compare_to_the_second_whatever_their_precision() {
        assert_eq!(second_of("2026-12-03T06:39:04.123Z"), "2026-12-03T06:39:04");
        assert_eq!(second_of("2026-12-03T06:39:04Z"), "2026-12-03T06:39:04");
        assert!(second_of("2026-12-03T06:39:05Z") > second_of("2026-12-03T06:39:04.999Z"));
    }
}
