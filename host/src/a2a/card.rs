//! A profile's A2A agent card: its name and description, where it is reached (the
//! JSON-RPC binding of A2A 1.0), that it streams, how to authenticate, and one skill
//! naming its tools.

use serde_json::{json, Value};

use crate::config::Profile;
use crate::host::Host;
use crate::listener::auth::HttpAuth;

/// The card of `profile`, served at `url`.
pub(super) fn card(host: &Host, profile: &Profile, url: &str, auth: &HttpAuth) -> Value {
    let description = profile.description.clone().unwrap_or_else(|| {
        format!(
            "warren profile `{}`: an agent that works in a sandbox and may spawn sub-agents",
            profile.name
        )
    });
    let tools: Vec<&str> = host.registry().names_for(profile);
    let mut card = json!({
        "name": profile.name,
        "description": description,
        "supportedInterfaces": [{
            "url": url,
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }],
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": profile.name,
            "name": profile.name,
            "description": format!("{description} Tools: {}.", if tools.is_empty() { "none".to_string() } else { tools.join(", ") }),
            "tags": tools,
        }],
    });
    if let HttpAuth::Bearer(_) = auth {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {}}}]);
    }
    card
}
