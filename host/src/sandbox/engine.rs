//! The wasmtime engine's configuration: the pooling allocator and how its slots are
//! reset between instances, and the process's descriptor limit raised for guests.

use tracing::warn;
use wasmtime::{Config, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::policy::MAX_MEMORY_MB;

/// How much of a linear memory's dirtied pages stay resident between instances.
pub(super) const KEEP_RESIDENT_MEMORY: usize = 32 << 20;
/// How much of a table stays resident between instances.
const KEEP_RESIDENT_TABLE: usize = 1 << 20;
/// Idle slots that keep their resident pages (and their module affinity); beyond
/// them, a freed slot's pages go back to the kernel. This bounds what keeping pages
/// resident costs in memory: a burst of 100 parallel calls leaves 16 warm slots, not
/// 100 (the subagents bench's peak RSS: 38 MiB with 16, 49 MiB with wasmtime's 100).
const WARM_SLOTS: u32 = 16;

/// Concurrent instance slots of the pooling allocator (also its memory slots).
const POOL_SLOTS: u32 = 256;

/// Raises the soft limit on open descriptors to the hard limit (so guests' files
/// cannot starve the host early) and returns it.
pub(super) fn raise_descriptor_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let current = getrlimit(Resource::Nofile);
    let hard = current.maximum.unwrap_or(1 << 20).min(1 << 20);
    if current.current.is_some_and(|soft| soft < hard) {
        let raised = Rlimit {
            current: Some(hard),
            maximum: current.maximum,
        };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            warn!("cannot raise the open-file limit to {hard}: {error}");
            return current.current.unwrap_or(1024);
        }
    }
    current.current.map_or(hard, |soft| soft.max(hard))
}

/// Whether pooled memories and tables may be reset in place (dirty pages copied back,
/// found with PAGEMAP_SCAN) rather than given back to the kernel. Only where no swap
/// is active: the scan reports dirty pages that are present, so a page the kernel
/// swapped out would be neither reset nor given back, and the next instance in the
/// slot would read what the last one wrote (wasmtime 48; see
/// bytecodealliance/wasmtime#14357). Swap turned on after the engine is made is not
/// seen; docs/security.md says so.
pub(super) fn reset_in_place() -> bool {
    let swaps = std::fs::read_to_string("/proc/swaps");
    let in_place = swaps.as_deref().is_ok_and(|swaps| !swap_active(swaps));
    if !in_place {
        tracing::info!(
            "swap is active (or /proc/swaps unreadable): pooled memories are reset by \
             giving their pages back to the kernel, not in place"
        );
    }
    in_place
}

/// Whether `/proc/swaps` lists a swap area (any line after its header).
pub(super) fn swap_active(swaps: &str) -> bool {
    swaps.lines().skip(1).any(|line| !line.trim().is_empty())
}

/// The engine's configuration: with the pooling allocator when `pooling` is given,
/// its slots reset in place when it holds `true`.
pub(super) fn engine_config(pooling: Option<bool>) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true);
    if let Some(in_place) = pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS * 4)
            .total_memories(POOL_SLOTS * 2)
            .total_tables(POOL_SLOTS * 4)
            .total_stacks(POOL_SLOTS)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_core_instances_per_component(64)
            .max_memory_size((MAX_MEMORY_MB << 20) as usize)
            .table_elements(100_000)
            .max_component_instance_size(1 << 20)
            .max_core_instance_size(1 << 20)
            .max_unused_warm_slots(WARM_SLOTS);
        if in_place {
            // A slot's memory is reset for its next instance by copying back only the
            // pages the last one dirtied (found with Linux's PAGEMAP_SCAN, 6.7+), which
            // stay resident: the next instance takes no page faults on them and the
            // slot needs no madvise. Up to this much per memory; where the kernel
            // lacks the ioctl, wasmtime falls back to madvise.
            pool.linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
                .table_keep_resident(KEEP_RESIDENT_TABLE)
                .pagemap_scan(wasmtime::Enabled::Auto);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::swap_active;

    /// A swap area listed in `/proc/swaps` turns the in-place reset off; the header
    /// alone (no swap) leaves it on.
    #[test]
    fn any_listed_swap_area_counts_as_swap() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(!swap_active(header));
        assert!(!swap_active(""));
        assert!(swap_active(&format!(
            "{header}/swapfile                               file\t\t2097148\t\t0\t\t-2\n"
        )));
        assert!(swap_active(&format!(
            "{header}/dev/zram0                              partition\t8388604\t\t1024\t\t100\n"
        )));
    }
}
