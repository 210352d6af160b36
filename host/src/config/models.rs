//! `[models]` and `[model_aliases]`, and the one lookup of a model name written
//! anywhere in the file (`[defaults] model`, a profile's `model`, an alias's target).

use std::collections::BTreeMap;

use toml::Spanned;

use super::error::ConfigError;
use super::source::Source;
use super::values::ProfileName;
use crate::llm::{ModelConfig, ProviderKind};

/// `[models]`, each checked for what its provider needs, script paths resolved.
pub(super) fn models(
    src: &Source<'_>,
    raw: &BTreeMap<ProfileName, Spanned<ModelConfig>>,
) -> Result<BTreeMap<String, ModelConfig>, ConfigError> {
    let mut models = BTreeMap::new();
    for (name, model) in raw {
        let key = format!("models.{}", name.0);
        let mut config = model.get_ref().clone();
        let named_by_caller = matches!(
            config.provider,
            ProviderKind::Scripted | ProviderKind::Custom
        );
        if !named_by_caller && config.model.is_empty() {
            return src.invalid(
                model.span(),
                &key,
                "`model` is required (the name the API expects)".into(),
            );
        }
        if config.provider == ProviderKind::Scripted {
            let Some(script) = &config.script else {
                return src.invalid(
                    model.span(),
                    &key,
                    "a scripted model needs `script = \"file.toml\"`".into(),
                );
            };
            config.script = Some(src.base.join(script));
        }
        models.insert(name.0.clone(), config);
    }
    Ok(models)
}

/// `[model_aliases]`: each value must name a `[models]` entry.
pub(super) fn model_aliases(
    src: &Source<'_>,
    raw: &BTreeMap<String, Spanned<String>>,
    models: &BTreeMap<String, ModelConfig>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut aliases = BTreeMap::new();
    for (alias, target) in raw {
        let name = model_name(
            src,
            target,
            models,
            &BTreeMap::new(),
            &format!("model_aliases.{alias}"),
        )?;
        aliases.insert(alias.clone(), name);
    }
    Ok(aliases)
}

/// A `[models]` name, or a `[model_aliases]` name for one.
pub(super) fn model_name(
    src: &Source<'_>,
    name: &Spanned<String>,
    models: &BTreeMap<String, ModelConfig>,
    aliases: &BTreeMap<String, String>,
    key: &str,
) -> Result<String, ConfigError> {
    if models.contains_key(name.get_ref()) {
        return Ok(name.get_ref().clone());
    }
    if let Some(target) = aliases.get(name.get_ref()) {
        return Ok(target.clone());
    }
    let known = models.keys().cloned().collect::<Vec<_>>().join(", ");
    src.invalid(
        name.span(),
        key,
        format!(
            "no model `{}` under [models] or [model_aliases] (models: {known})",
            name.get_ref()
        ),
    )
}

#[cfg(test)]
mod tests {
    use crate::config::tests::parse;

    #[test]
    fn models_parse_with_defaults_and_resolved_scripts() {
        let config = parse(
            r#"
[models.default]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "gpt-4o-mini"
price = { input_per_mtok = 0.15, output_per_mtok = 0.60 }
[models.offline]
provider = "scripted"
script = "demo.toml"
"#,
        )
        .unwrap();
        let default = &config.models["default"];
        assert!(default.stream && default.max_retries == 3);
        assert_eq!(default.price.output_per_mtok, 0.60);
        assert!(config.models["offline"]
            .script
            .as_ref()
            .unwrap()
            .ends_with("demo.toml"));
        assert!(config.models["offline"]
            .script
            .as_ref()
            .unwrap()
            .is_absolute());
        let error = parse("[models.x]\nprovider = \"anthropic\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(":1: models.x: `model` is required"),
            "{error}"
        );
        let error = parse("[models.x]\nprovider = \"gemini\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 2") && error.contains("unknown variant `gemini`"),
            "{error}"
        );
    }
}
