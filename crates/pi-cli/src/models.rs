//! `pi models [--provider ID]`: the built-in catalog, one model a line.
//!
//! Columns: `provider/model`, API, context window, output limit, price per million input and
//! output tokens, `reasoning` for reasoning models; a closing line counts the models and
//! providers and names the providers whose credentials the environment holds. `--json` prints
//! the catalog (or one provider's list) as the reference's `getBuiltinModels` returns it.
//! With `--proxy URL` the listing is what that proxy serves (its `GET /api/models`); with
//! `--refresh`, the live catalogs fetched with the stored credentials.

use std::fmt::Write;

use pi_providers::catalog;
use pi_providers::registry::has_env_credentials;
use pi_types::Model;

use crate::error::CliError;

/// The listing of every provider, or of one (an unknown id is an error naming the known ones).
pub fn listing(provider: Option<&str>, json: bool) -> Result<String, CliError> {
    let providers: Vec<&str> = match provider {
        Some(crate::setup::DEMO_PROVIDER) => return Ok(demo_listing(json)),
        Some(id) if catalog::catalog().contains_key(id) => vec![id],
        Some(id) => {
            return Err(CliError::Usage(format!(
                "unknown provider `{id}` (`pi models` lists the {} built-in providers)",
                catalog::catalog().len()
            )))
        }
        None => catalog::provider_ids(),
    };
    let groups: Vec<(&str, &[Model])> = providers.iter().map(|id| (*id, catalog::catalog()[*id].as_slice())).collect();
    if json {
        return Ok(json_listing(&groups));
    }
    let mut out = table(&groups);
    let ready: Vec<&str> = providers.iter().copied().filter(|p| has_env_credentials(p)).collect();
    let _ = writeln!(
        out,
        "{} models from {} provider{}; credentials set for: {}",
        groups.iter().map(|(_, models)| models.len()).sum::<usize>(),
        providers.len(),
        if providers.len() == 1 { "" } else { "s" },
        if ready.is_empty() { "none".to_owned() } else { ready.join(", ") }
    );
    Ok(out)
}

/// One model of a typed listing: `provider/model  api`, its JSON, the rest of its line.
type Row = (String, serde_json::Value, String);

/// `pi models --type classifier|image`: the classifier or image-generation catalog (every
/// provider with one, or one), one model a line: `provider/model`, API, context window (for
/// classifiers) or outputs (for image models), price per million input and output tokens. With
/// `json`, `{provider: [model, ...]}` as the reference's `getBuiltinClassifierModels` /
/// `getBuiltinImageModels` return them.
pub fn typed_listing(kind: &str, provider: Option<&str>, json: bool) -> Result<String, CliError> {
    use pi_providers::{classifier, images};
    let rows: Vec<(String, Vec<Row>)> = match kind {
        "classifier" => classifier::catalog::catalog()
            .iter()
            .map(|(id, models)| {
                let rows = models
                    .iter()
                    .map(|m| {
                        let price = format!("${}/${}", price(m.cost.input), price(m.cost.output));
                        let detail = format!("{:>6} ctx  {price:>14}", tokens(m.context_window));
                        (format!("{id}/{}  {}", m.id, m.api), serde_json::to_value(m).unwrap_or_default(), detail)
                    })
                    .collect();
                (id.clone(), rows)
            })
            .collect(),
        _ => images::catalog::catalog()
            .iter()
            .map(|(id, models)| {
                let rows = models
                    .iter()
                    .map(|m| {
                        let price = format!("${}/${}", price(m.cost.input), price(m.cost.output));
                        let detail = format!("{price:>14}  {}", m.output.join("+"));
                        (format!("{id}/{}  {}", m.id, m.api), serde_json::to_value(m).unwrap_or_default(), detail)
                    })
                    .collect();
                (id.clone(), rows)
            })
            .collect(),
    };
    let rows: Vec<_> = match provider {
        Some(id) => {
            let one: Vec<_> = rows.into_iter().filter(|(p, _)| p == id).collect();
            if one.is_empty() {
                return Err(CliError::Usage(format!("provider `{id}` has no {kind} models")));
            }
            one
        }
        None => rows,
    };
    if json {
        let map: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(id, models)| (id.clone(), models.iter().map(|(_, value, _)| value.clone()).collect()))
            .collect();
        return Ok(format!("{}\n", pi_types::json::stringify(&serde_json::Value::Object(map))));
    }
    let width = rows.iter().flat_map(|(_, models)| models.iter().map(|(name, ..)| name.chars().count())).max();
    let mut out = String::new();
    for (name, _, detail) in rows.iter().flat_map(|(_, models)| models) {
        let _ = writeln!(out, "{name:width$}  {detail}", width = width.unwrap_or(0));
    }
    let count: usize = rows.iter().map(|(_, models)| models.len()).sum();
    let _ =
        writeln!(out, "{count} {kind} models from {} provider{}", rows.len(), if rows.len() == 1 { "" } else { "s" });
    Ok(out)
}

/// `pi models --refresh`: refresh the providers with a live catalog (all, or `provider`) with
/// the auth file's credentials, persisting to the models store file, then list their models of
/// every type, one a line (`type provider/model  api`), and a line per provider saying what
/// the refresh did. With `json`, `{"models": {provider: [model, ...]}, "errors": {provider:
/// text}}`. The error, when a provider's refresh failed, is returned beside the listing.
pub async fn refreshed_listing(provider: Option<&str>, json: bool) -> Result<(String, Option<CliError>), CliError> {
    use pi_providers::models_store::{FileModelsStore, RefreshOptions};
    let (authenticator, _) = crate::login::authenticator();
    let registry = pi_providers::Models::with_builtins()
        .with_authenticator(authenticator)
        .with_models_store(std::sync::Arc::new(FileModelsStore::default_location()));
    let refreshable: Vec<String> = registry
        .providers()
        .iter()
        .filter(|p| p.source().is_some() && provider.is_none_or(|id| id == p.id()))
        .map(|p| p.id().to_owned())
        .collect();
    if let (Some(id), true) = (provider, refreshable.is_empty()) {
        return Err(CliError::Usage(format!("provider `{id}` has no live catalog to refresh")));
    }
    let options = RefreshOptions { providers: Some(refreshable.clone()), ..RefreshOptions::default() };
    let result = registry.refresh(options).await;
    let failure = (!result.errors.is_empty()).then(|| {
        let failed: Vec<String> = result.errors.iter().map(|(id, error)| format!("{id}: {error}")).collect();
        CliError::Run(format!("model refresh failed: {}", failed.join("; ")))
    });
    if json {
        let models: serde_json::Map<String, serde_json::Value> = refreshable
            .iter()
            .map(|id| (id.clone(), serde_json::to_value(registry.all_models(Some(id))).unwrap_or_default()))
            .collect();
        let errors: serde_json::Map<String, serde_json::Value> =
            result.errors.iter().map(|(id, error)| (id.clone(), error.to_string().into())).collect();
        let value = serde_json::json!({"models": models, "errors": errors});
        return Ok((format!("{}\n", pi_types::json::stringify(&value)), failure));
    }
    let mut out = String::new();
    let rows: Vec<(String, String)> = refreshable
        .iter()
        .flat_map(|id| registry.all_models(Some(id)))
        .map(|m| (format!("{:10} {}/{}", m.kind(), m.provider(), m.id()), m.api().to_owned()))
        .collect();
    let width = rows.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    for (name, api) in &rows {
        let _ = writeln!(out, "{name:width$}  {api}");
    }
    for id in &refreshable {
        match result.errors.get(id) {
            Some(error) => {
                let _ = writeln!(out, "{id}: refresh failed, kept the last catalog: {error}");
            }
            None => {
                let _ = writeln!(out, "{id}: {} models", registry.all_models(Some(id)).len());
            }
        }
    }
    Ok((out, failure))
}

/// `pi models --provider faux`: the offline demo's one model.
fn demo_listing(json: bool) -> String {
    let models = [crate::demo::DemoProvider::new().model()];
    let groups = [(crate::setup::DEMO_PROVIDER, &models[..])];
    if json {
        return json_listing(&groups);
    }
    let mut out = table(&groups);
    out.push_str("1 model from the offline demo (no key needed)\n");
    out
}

/// The listing of what a proxy serves (`pi models --proxy URL`), of every provider or one.
pub fn served_listing(url: &str, served: &[Model], provider: Option<&str>, json: bool) -> Result<String, CliError> {
    let mut groups: Vec<(&str, &[Model])> = Vec::new();
    // The server lists its models provider by provider: group the runs.
    for chunk in served.chunk_by(|a, b| a.provider == b.provider) {
        if provider.is_none_or(|p| p == chunk[0].provider.as_str()) {
            groups.push((chunk[0].provider.as_str(), chunk));
        }
    }
    if let (Some(id), true) = (provider, groups.is_empty()) {
        return Err(CliError::Usage(format!("the proxy at {url} serves no provider `{id}`")));
    }
    if json {
        return Ok(json_listing(&groups));
    }
    let mut out = table(&groups);
    let count: usize = groups.iter().map(|(_, models)| models.len()).sum();
    let _ = writeln!(
        out,
        "{count} model{} from {} provider{}, served by the proxy at {url}",
        if count == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
    );
    Ok(out)
}

/// `{provider: [model, ...]}` as the reference's `getBuiltinModels` returns it.
fn json_listing(groups: &[(&str, &[Model])]) -> String {
    let map: serde_json::Map<String, serde_json::Value> =
        groups.iter().map(|(id, models)| (id.to_string(), serde_json::to_value(models).unwrap_or_default())).collect();
    format!("{}\n", pi_types::json::stringify(&serde_json::Value::Object(map)))
}

/// One line a model, columns aligned.
fn table(groups: &[(&str, &[Model])]) -> String {
    let rows: Vec<(String, &Model)> =
        groups.iter().flat_map(|(id, models)| models.iter().map(move |m| (format!("{id}/{}", m.id), m))).collect();
    let width = rows.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    let api_width = rows.iter().map(|(_, m)| m.api.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, model) in &rows {
        let price = format!("${}/${}", price(model.cost.input), price(model.cost.output));
        let _ = writeln!(
            out,
            "{name:width$}  {api:api_width$}  {ctx:>6} ctx  {max:>6} out  {price:>14}{reasoning}",
            api = model.api,
            ctx = tokens(model.context_window),
            max = tokens(model.max_tokens),
            reasoning = if model.reasoning { "  reasoning" } else { "" },
        );
    }
    out
}

/// A token count as `128k`, `1M`, `1.05M`, or the plain number below 1000.
fn tokens(n: u64) -> String {
    if n >= 1_000_000 {
        trim(format!("{:.2}", n as f64 / 1e6)) + "M"
    } else if n >= 1000 {
        trim(format!("{:.1}", n as f64 / 1e3)) + "k"
    } else {
        n.to_string()
    }
}

/// A price per million tokens with at most four decimals and no trailing zeros.
fn price(dollars: f64) -> String {
    trim(format!("{dollars:.4}"))
}

fn trim(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_provider_lists_each_model_once() {
        let text = listing(Some("mistral"), false).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), catalog::models("mistral").len() + 1);
        assert!(lines.iter().take(lines.len() - 1).all(|l| l.starts_with("mistral/")), "{text}");
        assert!(lines.iter().any(|l| l.contains("mistral-conversations")), "{text}");
        assert!(lines[lines.len() - 1].starts_with(&format!("{} models from 1 provider;", lines.len() - 1)));
    }

    #[test]
    fn unknown_provider_points_to_the_listing() {
        let Err(CliError::Usage(message)) = listing(Some("nope"), false) else { panic!("expected an error") };
        assert_eq!(message, "unknown provider `nope` (`pi models` lists the 43 built-in providers)");
    }

    #[test]
    fn json_is_the_catalog() {
        let text = listing(None, true).unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let map = value.as_object().cloned().unwrap_or_default();
        assert_eq!(map.len(), 43);
        assert_eq!(map.values().filter_map(|v| v.as_array()).map(Vec::len).sum::<usize>(), 1696);
    }

    #[test]
    fn the_classifier_and_image_catalogs_are_listed_as_the_reference_counts_them() {
        let text = typed_listing("classifier", None, false).unwrap_or_default();
        assert!(text.ends_with("81 classifier models from 7 providers\n"), "{text}");
        assert!(text.starts_with("cloudflare-workers-ai/@cf/cloudflare/clef "), "{text}");
        let text = typed_listing("image", None, false).unwrap_or_default();
        assert!(text.ends_with("74 image models from 1 provider\n"), "{text}");
        // --json is the reference's catalog, field for field (the vendored catalogs are its output).
        for (kind, reference) in [
            ("classifier", include_str!("../../pi-providers/src/classifier/catalog.json")),
            ("image", include_str!("../../pi-providers/src/images/catalog.json")),
        ] {
            let json = typed_listing(kind, None, true).unwrap_or_default();
            let listed: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
            let reference: serde_json::Value = serde_json::from_str(reference).unwrap_or_default();
            assert_eq!(listed, reference, "{kind}");
        }
        let Err(CliError::Usage(message)) = typed_listing("image", Some("mistral"), false) else {
            panic!("expected an error")
        };
        assert_eq!(message, "provider `mistral` has no image models");
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(tokens(1_048_576), "1.05M");
        assert_eq!(tokens(200_000), "200k");
        assert_eq!(tokens(8192), "8.2k");
        assert_eq!(tokens(512), "512");
        assert_eq!(price(0.0825), "0.0825");
        assert_eq!(price(15.0), "15");
    }
}
