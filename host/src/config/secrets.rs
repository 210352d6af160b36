//! Every secret the configuration names, gathered for [`crate::llm::Secrets`]: each
//! model's API key (read from its variable) and header values, the password in
//! `[queue] redis`, and the values of `OTEL_EXPORTER_OTLP_HEADERS`. Whatever text a
//! remote server sends back has these removed before it reaches any output.

use std::collections::BTreeMap;

use super::queue::QueueConfig;
use crate::llm::{ModelConfig, Secrets};

/// The secrets of `models` and `queue`, and of the OTLP exporter's headers.
pub(super) fn configured(models: &BTreeMap<String, ModelConfig>, queue: &QueueConfig) -> Secrets {
    let keys = models
        .values()
        .filter_map(ModelConfig::key_variable)
        .filter_map(|variable| std::env::var(variable).ok());
    let headers = models
        .values()
        .flat_map(|model| model.headers.values().cloned());
    let otlp = std::env::var("OTEL_EXPORTER_OTLP_HEADERS")
        .map(|text| crate::telemetry::parse_headers(&text))
        .unwrap_or_default()
        .into_iter()
        .map(|(_, value)| value);
    Secrets::new(
        keys.chain(headers)
            .chain(redis_password(queue.redis.as_deref()))
            .chain(otlp),
    )
}

/// The password of `redis://[user:]password@host…`, as written and percent-decoded.
fn redis_password(url: Option<&str>) -> Vec<String> {
    let Some(url) = url else {
        return Vec::new();
    };
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let Some(at) = url.rfind('@').filter(|&at| at > after_scheme) else {
        return Vec::new();
    };
    let user_info = &url[after_scheme..at];
    let password = user_info.split_once(':').map_or(user_info, |(_, p)| p);
    vec![
        password.to_string(),
        crate::telemetry::percent_decode(password),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redis_password_is_found_in_each_spelling() {
        assert_eq!(
            redis_password(Some("redis://user:pa%40ss@host:6379/0")),
            ["pa%40ss", "pa@ss"]
        );
        assert_eq!(
            redis_password(Some("rediss://:hunter22@host")),
            ["hunter22"; 2]
        );
        assert!(redis_password(Some("redis://host:6379")).is_empty());
        assert!(redis_password(None).is_empty());
    }

    #[test]
    fn every_configured_secret_is_gathered() {
        let model: ModelConfig = toml::from_str(
            "provider = \"openai\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nheaders = { x-gateway-token = \"gw-0123456789\" }\n",
        )
        .unwrap();
        let models = BTreeMap::from([("m".to_string(), model)]);
        let queue = QueueConfig {
            redis: Some("redis://u:redis-pass-42@h:1".into()),
            ..QueueConfig::default()
        };
        let secrets = configured(&models, &queue);
        let text = "warren gw-0123456789 redis-pass-42";
        assert_eq!(
            secrets.redact(text),
            "[redacted] [redacted] [redacted]",
            "the key (CARGO_PKG_NAME = warren), the header and the password"
        );
    }
}
