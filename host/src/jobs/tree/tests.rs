//! The job tree's own tests.

use super::*;
use crate::outcome::AgentOutcome;
use serde_json::json;

#[test]
fn a_run_keeps_at_most_max_resting_conversations_for_follow_ups() {
    let tree = Tree::new(RunLimits::default());
    for _ in 0..MAX_RESTING {
        assert!(tree.take_rest());
    }
    assert!(!tree.take_rest(), "one more than MAX_RESTING");
    tree.give_back_rest();
    assert!(tree.take_rest());
    assert!(!tree.take_rest());
}

#[test]
fn job_ids_are_a_list_a_comma_string_or_a_star() {
    let ids =
        |names: &[&str]| JobSelection::Ids(names.iter().map(|n| JobId(n.to_string())).collect());
    assert_eq!(JobSelection::parse(&json!(" * ")), JobSelection::All);
    assert_eq!(JobSelection::parse(&json!("a1, b2,,")), ids(&["a1", "b2"]));
    assert_eq!(
        JobSelection::parse(&json!([" a1", "", 7, "b2"])),
        ids(&["a1", "b2"])
    );
    assert_eq!(JobSelection::parse(&json!(null)), ids(&[]));
}

#[test]
fn children_and_active_counts_follow_the_jobs() {
    let tree = Tree::new(RunLimits::default());
    let root = tree.add_for_tests();
    let a = tree
        .insert(Some(&root), "p", "a", None, None, CancellationToken::new())
        .0;
    let b = tree
        .insert(Some(&root), "p", "b", None, None, CancellationToken::new())
        .0;
    let c = tree
        .insert(Some(&a), "p", "c", None, None, CancellationToken::new())
        .0;
    let ids = |jobs: Vec<Job>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(tree.children(&root)), [a.clone(), b.clone()]);
    assert_eq!(ids(tree.children(&a)), [c]);
    assert_eq!(tree.active_subagents(), 3);
    let done = || Phase::Done(AgentOutcome::cancelled_before_start());
    tree.set_phase(&b, Phase::Running(Instant::now()));
    tree.set_phase(&b, done());
    tree.set_phase(&b, done());
    tree.set_phase(&root, done());
    assert_eq!(tree.active_subagents(), 2);
}

#[test]
fn finished_children_are_taken_once_in_spawn_order() {
    let tree = Tree::new(RunLimits::default());
    let root = tree.add_for_tests();
    let child = |task| {
        tree.insert(Some(&root), "p", task, None, None, CancellationToken::new())
            .0
    };
    let (a, b, c, d) = (child("a"), child("b"), child("c"), child("d"));
    let done = || Phase::Done(AgentOutcome::cancelled_before_start());
    tree.set_phase(&c, done());
    tree.set_phase(&b, Phase::Running(Instant::now()));
    tree.set_phase(&a, done());
    tree.set_phase(&d, done());
    assert!(tree.mark_delivered(&d), "d is reported through await");
    let taken = |tree: &Tree| {
        let jobs = tree.take_finished_undelivered(&root);
        jobs.into_iter().map(|j| j.id).collect::<Vec<_>>()
    };
    assert_eq!(taken(&tree), [a.clone(), c.clone()]);
    assert_eq!(
        taken(&tree),
        Vec::<JobId>::new(),
        "each result is taken once"
    );
    tree.set_phase(&b, done());
    assert_eq!(taken(&tree), [b]);
    assert!(tree.job(&a).is_some_and(|job| job.delivered));
    assert!(
        tree.take_finished_undelivered(&a).is_empty(),
        "a has no children"
    );
}

#[test]
fn job_ids_differ_between_runs_and_repeat_for_the_same_run_id() {
    let first = |tree: Arc<Tree>| tree.add_for_tests();
    let a = first(Tree::new(RunLimits::default()));
    let b = first(Tree::new(RunLimits::default()));
    assert_ne!(a, b, "two runs start with different ids");
    let fixed = || first(Tree::with_run_id(RunLimits::default(), "run-1"));
    assert_eq!(fixed(), fixed());
    let run = Tree::new(RunLimits::default()).run_id.clone();
    assert_eq!(run.len(), 16);
    assert_ne!(run, Tree::new(RunLimits::default()).run_id);
}

#[test]
fn ids_are_short_and_unique() {
    let tree = Tree::new(RunLimits::default());
    let ids: std::collections::BTreeSet<JobId> = (0..1000)
        .map(|_| {
            tree.insert(None, "p", "t", None, None, CancellationToken::new())
                .0
        })
        .collect();
    assert_eq!(ids.len(), 1000);
    assert!(ids.iter().all(|id| id.0.len() == 6));
}
