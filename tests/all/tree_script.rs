//! The scripted model's turns for a tree of agents: a root (`main`) spawning
//! `lead`s that each spawn `leaf`s; every agent waits for its own and answers.
//! Shared by `queue_scale.rs` and the 10,000-agent bench (`host/benches/tree_10k.rs`).

use std::fmt::Write as _;

/// The script of a root spawning `children` `lead`s, each spawning `grandchildren`
/// `leaf`s; every agent waits for its own and answers.
pub(crate) fn tree_script(children: usize, grandchildren: usize) -> String {
    tree_script_with(children, grandchildren, 1, 0)
}

/// [`tree_script`] with every lead's and leaf's turns `copies` times (for retries),
/// and each leaf answering after `leaf_ms`.
pub(crate) fn tree_script_with(
    children: usize,
    grandchildren: usize,
    copies: usize,
    leaf_ms: u64,
) -> String {
    let spawns = |profile: &str, n: usize, task: &str| {
        (0..n)
            .map(|i| format!("  {{ name = \"spawn_agent\", arguments = {{ profile = \"{profile}\", task = \"{task} {i}\" }} }},\n"))
            .collect::<String>()
    };
    let waits = |profile: &str, answer: &str| {
        format!(
            "[[turns]]\nprofile = \"{profile}\"\nwhen = \"Started job\"\ntool_calls = [{{ name = \"await_agents\", arguments = {{ job_ids = \"*\" }} }}]\n\n\
             [[turns]]\nprofile = \"{profile}\"\nwhen = \"OK]\"\ntext = \"{answer}\"\n\n\
             [[turns]]\nprofile = \"{profile}\"\nwhen = \"still running\"\ntext = \"{answer}\"\n\n"
        )
    };
    let mut script = format!(
        "[[turns]]\nprofile = \"main\"\ntool_calls = [\n{}]\n\n{}",
        spawns("lead", children, "LEAD"),
        waits("main", "all done")
    );
    for _ in 0..children * copies {
        let _ = write!(
            script,
            "[[turns]]\nprofile = \"lead\"\nwhen = \"LEAD\"\ntool_calls = [\n{}]\n\n{}",
            spawns("leaf", grandchildren, "LEAF"),
            waits("lead", "lead done")
        );
    }
    for _ in 0..children * grandchildren * copies {
        let _ = write!(
            script,
            "[[turns]]\nprofile = \"leaf\"\nwhen = \"LEAF\"\ndelay_ms = {leaf_ms}\ntext = \"leaf done\"\n\n"
        );
    }
    script
}

/// [`tree_script`] for a run that may be resumed: the root spawns only when its
/// newest message is its task, `TREE-GO` (the script starts afresh in a resumed
/// process, whose root has its recorded spawns and must not take the turn again).
#[allow(dead_code)] // used by the 10,000-agent bench only
pub(crate) fn resumable_tree_script(children: usize, grandchildren: usize) -> String {
    tree_script(children, grandchildren).replacen(
        "[[turns]]\nprofile = \"main\"\ntool_calls",
        "[[turns]]\nprofile = \"main\"\nwhen = \"TREE-GO\"\ntool_calls",
        1,
    )
}
