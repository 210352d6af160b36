//! Sub-agent jobs through Redis, in the BullMQ data layout, so `warren worker`
//! processes on any number of machines run them and Node BullMQ producers and
//! consumers interoperate.
//!
//! Layout: [`wire`] (the protocol both sides speak: keys, payloads, timings),
//! [`client`] (the parent's side: the connection that enqueues, cancels and reads
//! jobs, and routes their events; [`RemoteQueue`](client::RemoteQueue) is the
//! [`Backend`](crate::jobs::Backend) that runs children on workers), `remote_child`
//! (one child's life on a worker: enqueued, its events mirrored into the run
//! (`mirror`), its budget watched, its outcome returned once). The worker's side
//! (`warren worker`: take jobs and run each as the root of a local agent tree) is
//! [`crate::worker`], above the host it drives. The queue itself is the official Rust
//! port of BullMQ (`bullmq-official`): the same Lua scripts and keys as Node BullMQ,
//! with locks, stalled-job recovery, retries and retention.
//!
//! What warren adds on top, all under the queue's own key prefix:
//! - **job data** ([`JobData`]): task, profile, context, constraints, limits, the
//!   parent's capability ceiling and (for `model: inherit`) model, parent id, depth
//!   and a W3C `traceparent`;
//! - **return value** ([`JobOutcome`]): state, text, error, turns, usage, cost,
//!   duration and the worker that ran it;
//! - **events**: a worker batches its agents' events into job progress updates
//!   (`{"warren_events": [...], "warren_run": RUN}`), which BullMQ publishes on the
//!   queue's event stream;
//! - **cancel**: a key `bull:NAME:warren:cancel:ID` that the worker running the job
//!   polls (BullMQ has no cross-process cancel of an active job); a job still waiting
//!   is removed at once.

pub(crate) mod client;
mod mirror;
mod remote_child;
pub(crate) mod wire;
