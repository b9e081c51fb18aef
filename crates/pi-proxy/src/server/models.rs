//! What `GET /api/models` answers: the models the server serves, so that a client can name one that only
//! the server defines (a custom provider of its configuration) and send it back with the
//! server's `baseUrl` and `api`: a [`ModelList`]. A client needs no more than that to pick a
//! model and send it back, so each model goes out without what may carry the server's
//! credentials: its `headers`, `compat` and unknown fields are dropped, its `baseUrl` loses
//! its `user:password@` and its query ([`public_base_url`]), and the handler passes the whole
//! list through the same redaction as every other response. The route (authenticated like the
//! streaming routes) is in `handler.rs`; the request check accepts a `baseUrl` in its public
//! form.

use crate::wire::ModelList;

/// What stands for a dropped part of a URL.
const HIDDEN: &str = "<redacted>";

/// The served models of every provider in the server's registry, as a client may see them.
pub(super) fn served_models(config: &super::ServerConfig) -> ModelList {
    let models = config
        .models
        .providers()
        .iter()
        .flat_map(|provider| provider.models().iter().cloned())
        .map(|mut model| {
            model.headers = None;
            model.compat = None;
            model.extra.clear();
            model.base_url = public_base_url(&model.base_url);
            model
        })
        .collect();
    ModelList { models }
}

/// `url` without what may be a credential: the user information before the host (`user:pass@`)
/// and the query and fragment (`?key=...`) become `<redacted>`. Other URLs are unchanged.
pub(super) fn public_base_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let (rest, query) = match rest.find(['?', '#']) {
        Some(at) => (&rest[..at], Some(&rest[at..at + 1])),
        None => (rest, None),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("{HIDDEN}@{}", &authority[at + 1..]),
        None => authority.to_owned(),
    };
    let mut public = format!("{scheme}{authority}{path}");
    if let Some(mark) = query {
        public.push_str(mark);
        public.push_str(HIDDEN);
    }
    public
}

#[cfg(test)]
mod tests {
    use super::public_base_url;

    #[test]
    fn credentials_in_a_url_are_hidden_and_the_rest_kept() {
        assert_eq!(public_base_url("https://api.example.com/v1"), "https://api.example.com/v1");
        assert_eq!(public_base_url("https://bob:hunter22@api.example.com/v1"), "https://<redacted>@api.example.com/v1");
        assert_eq!(
            public_base_url("https://api.example.com/v1?key=sk-123&x=1"),
            "https://api.example.com/v1?<redacted>"
        );
        assert_eq!(public_base_url("http://u:p@h:8000?k=v#f"), "http://<redacted>@h:8000?<redacted>");
    }
}
