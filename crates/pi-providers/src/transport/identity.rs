//! Request identity: the `User-Agent` header and provider attribution headers.
//!
//! Applied below model, provider and request headers, so configured headers override them
//! and a `None` request header removes them (as the reference does).

use pi_types::{ClientIdentity, Model, UserAgentMode};

/// Version in the detailed `User-Agent` when the identity names none.
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `User-Agent` value of an identity.
pub fn user_agent(identity: Option<&ClientIdentity>) -> String {
    match identity.and_then(|i| i.user_agent.as_ref()).unwrap_or(&UserAgentMode::Detailed) {
        UserAgentMode::Custom { custom } => custom.clone(),
        UserAgentMode::Short => "pi".into(),
        UserAgentMode::Detailed => {
            let version = identity.and_then(|i| i.version.as_deref()).unwrap_or(CLIENT_VERSION);
            format!("pi/{version} ({}; rust; {})", std::env::consts::OS, std::env::consts::ARCH)
        }
    }
}

fn host_of(base_url: &str) -> Option<&str> {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    Some(host.split(':').next().unwrap_or(host))
}

/// Attribution headers for a request target; empty when attribution is off.
pub fn attribution_headers(model: &Model, identity: Option<&ClientIdentity>) -> Vec<(String, String)> {
    let Some(Some(attribution)) = identity.and_then(|i| i.attribution.as_ref()) else {
        return Vec::new();
    };
    let host = host_of(&model.base_url);
    if model.provider == "openrouter" || model.base_url.contains("openrouter.ai") {
        let mut headers = vec![
            ("HTTP-Referer".to_owned(), attribution.url.to_string()),
            ("X-OpenRouter-Title".to_owned(), attribution.name.to_string()),
        ];
        if let Some(categories) = attribution.categories.as_ref().filter(|c| !c.is_empty()) {
            headers.push(("X-OpenRouter-Categories".to_owned(), categories.join(",")));
        }
        return headers;
    }
    if model.provider == "nvidia" || host == Some("integrate.api.nvidia.com") {
        // NVIDIA expects a capitalized origin, such as `Pi`.
        let mut chars = attribution.name.chars();
        let origin: String = chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default();
        return vec![("X-BILLING-INVOKE-ORIGIN".to_owned(), origin)];
    }
    if matches!(model.provider.as_str(), "opencode" | "opencode-go") || host == Some("opencode.ai") {
        return vec![("x-opencode-client".to_owned(), attribution.name.to_string())];
    }
    Vec::new()
}

/// `User-Agent` plus attribution, as the lowest-priority header source of a request.
pub fn identity_headers(model: &Model, identity: Option<&ClientIdentity>) -> Vec<(String, Option<String>)> {
    std::iter::once(("User-Agent".to_owned(), user_agent(identity)))
        .chain(attribution_headers(model, identity))
        .map(|(name, value)| (name, Some(value)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::ClientAttribution;

    #[test]
    fn user_agent_modes() {
        assert!(user_agent(None).starts_with(&format!("pi/{CLIENT_VERSION} (")));
        let short = ClientIdentity { user_agent: Some(UserAgentMode::Short), ..Default::default() };
        assert_eq!(user_agent(Some(&short)), "pi");
        let custom =
            ClientIdentity { user_agent: Some(UserAgentMode::Custom { custom: "app/2".into() }), ..Default::default() };
        assert_eq!(user_agent(Some(&custom)), "app/2");
    }

    #[test]
    fn attribution_per_target() {
        let identity = ClientIdentity::agent_default();
        let mut model = Model::new("m").with_api("openai-completions").with_provider("openrouter");
        model.base_url = "https://openrouter.ai/api/v1".into();
        let headers = attribution_headers(&model, Some(&identity));
        assert_eq!(headers[1], ("X-OpenRouter-Title".to_owned(), "pi".to_owned()));
        assert_eq!(headers[2], ("X-OpenRouter-Categories".to_owned(), "cli-agent".to_owned()));
        let nvidia = Model {
            provider: "custom".into(),
            base_url: "https://integrate.api.nvidia.com/v1".into(),
            ..model.clone()
        };
        assert_eq!(
            attribution_headers(&nvidia, Some(&identity)),
            [("X-BILLING-INVOKE-ORIGIN".to_owned(), "Pi".to_owned())]
        );
        let other = Model { provider: "openai".into(), base_url: "https://api.openai.com/v1".into(), ..model.clone() };
        assert!(attribution_headers(&other, Some(&identity)).is_empty());
        let off = ClientIdentity { attribution: Some(None), ..identity.clone() };
        assert!(attribution_headers(&model, Some(&off)).is_empty());
        let named = ClientIdentity {
            attribution: Some(Some(ClientAttribution { name: "app".into(), url: "u".into(), categories: None })),
            ..Default::default()
        };
        assert_eq!(attribution_headers(&model, Some(&named)).len(), 2);
    }
}
