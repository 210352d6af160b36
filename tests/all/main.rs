//! warren's integration tests: one binary, a module per topic.
//!
//! Guest plugins (the bundled ones and the hostile fixtures) are built from source for
//! `wasm32-wasip2` on first use; see [`support::guests`].

mod a2a;
mod a2a_children;
mod agent_files;
mod agents;
mod approvals;
mod bounds;
mod browser;
mod cli;
mod code_tools;
mod docs;
mod events;
#[allow(dead_code)]
// shared with the providers' unit tests (host/src/llm/tests), which use the rest
mod fake_llm;
mod guests;
mod hostile;
mod journal;
mod journal_data;
mod journal_files;
mod languages;
mod layers;
mod library;
mod mcp;
mod mcp_bounds;
mod mcp_clients;
mod mcp_http;
mod mcp_modern;
mod mcp_tasks;
mod messages;
mod newcomer;
mod otlp;
mod plugins;
mod producers;
mod providers;
mod queue;
mod queue_scale;
mod replay;
mod resume;
mod sandbox;
mod shape;
mod support;
mod surface;
mod tools;
mod tree_script;
mod typed;
mod typed_bounds;
mod typed_results;
mod web;
mod web_bounds;
