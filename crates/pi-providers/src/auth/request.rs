//! The run path's auth: what [`Models`](crate::Models) sends a request with when it holds an
//! [`Authenticator`], and the one retry after a 401.
//!
//! The precedence is the reference's `resolveProviderAuth`:
//!
//! 1. a key given in the request options (handled by the registry before this module);
//! 2. the stored credential, which owns the provider: an OAuth sign-in (refreshed first when
//!    less than [`MIN_OAUTH_VALIDITY_MS`] is left, under the store's lock) through its flow's
//!    `to_auth`; an API key with its provider-scoped `env`. A stored API-key entry without a key
//!    keeps its `env` and takes the key from the provider's own source. An OAuth sign-in for a
//!    provider without a flow leaves the provider unconfigured: there is no environment
//!    fallback, as there is none after a failed refresh;
//! 3. nothing stored: the provider's own source (its environment variables, its resolver).
//!
//! The request's own `env` and headers win over the credential's, field by field, as in the
//! reference's `applyAuth`; a per-credential base URL (Copilot's per-account endpoint) replaces
//! the model's.
//!
//! Beyond the reference: a request sent with a stored OAuth token that the provider answers 401
//! is sent once more after [`Authenticator::refresh_rejected`] (a token revoked or rotated before
//! its stated expiry). The retry is decided before anything but the response's `start` reached
//! the caller, so the caller sees one response: the retried one, or the first one's error when
//! the refresh fails.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use indexmap::IndexMap;
use pi_types::{AssistantMessageEvent, AssistantMessageEventStream, Model, StreamFn, StreamOptions, TranscriptContext};

use super::{Authenticator, Credential, ModelAuth, Secret, MIN_OAUTH_VALIDITY_MS};

/// HTTP status of a rejected credential.
const UNAUTHORIZED: u16 = 401;

/// What the store decided for a request.
pub(crate) enum Stored {
    /// Nothing stored: the provider's own source applies.
    Absent,
    /// Auth from the stored credential was applied to the request; `Some` with the OAuth token
    /// sent, which a 401 may refresh.
    Applied(Option<Secret>),
    /// A stored API-key entry without a key: its `env` was applied, the key comes from the
    /// provider's own source.
    EnvOnly,
}

/// Apply the stored credential of `provider_id` to the request. `Err`: the store failed, the
/// refresh failed, or the stored credential has no usable form (the provider is not configured).
pub(crate) async fn apply_stored(
    authenticator: &Authenticator,
    provider_id: &str,
    model: &mut Model,
    options: &mut StreamOptions,
) -> Result<Stored, String> {
    let not_configured = || format!("Provider is not configured: {provider_id}");
    match authenticator.store().read(provider_id).map_err(|e| e.to_string())? {
        None => Ok(Stored::Absent),
        Some(Credential::ApiKey(stored)) => {
            if let Some(env) = stored.env {
                merge_env(options, env);
            }
            match stored.key.filter(|key| !key.is_empty()) {
                Some(key) => {
                    options.api_key = Some(key.expose().to_owned());
                    Ok(Stored::Applied(None))
                }
                None => Ok(Stored::EnvOnly),
            }
        }
        Some(Credential::OAuth(stored)) => {
            let Some(flow) = authenticator.flow(provider_id).cloned() else { return Err(not_configured()) };
            let credential = if stored.expires_within(pi_types::now_ms(), MIN_OAUTH_VALIDITY_MS) {
                authenticator
                    .refresh(provider_id, &flow)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(not_configured)?
            } else {
                stored
            };
            apply(flow.to_auth(&credential), model, options);
            Ok(Stored::Applied(Some(credential.access)))
        }
    }
}

/// Put `auth` on the request: the key unless the request has one, headers the request does not
/// set (names compared without case), the credential's base URL.
pub(crate) fn apply(auth: ModelAuth, model: &mut Model, options: &mut StreamOptions) {
    if options.api_key.is_none() {
        options.api_key = auth.api_key.map(|key| key.expose().to_owned());
    }
    for (name, value) in auth.headers {
        if !options.headers.names().any(|set| set.eq_ignore_ascii_case(&name)) {
            options.headers.insert(name, Some(value));
        }
    }
    if let Some(base_url) = auth.base_url {
        model.base_url = base_url;
    }
}

/// The stored `env` under the request's own (the request's values win).
fn merge_env(options: &mut StreamOptions, stored: BTreeMap<String, String>) {
    let mut merged: IndexMap<String, String> = stored.into_iter().collect();
    if let Some(own) = options.env.as_deref() {
        merged.extend(own.iter().map(|(name, value)| (name.clone(), value.clone())));
    }
    options.env = Some(Arc::new(merged));
}

/// What a request sent with a stored OAuth token needs to be sent again after a 401.
pub(crate) struct Retry {
    /// Where the token came from.
    pub authenticator: Arc<Authenticator>,
    /// The provider id.
    pub provider_id: String,
    /// The token sent.
    pub rejected: Secret,
    /// The model and options as they were before the stored credential was applied.
    pub unauthorized: (Model, StreamOptions),
}

/// Stream through `adapter`; when the provider answers 401 before anything but `start` was
/// streamed, refresh the token and stream once more with the fresh one.
pub(crate) fn stream_retrying(
    adapter: Arc<dyn StreamFn>,
    model: Model,
    context: TranscriptContext,
    options: StreamOptions,
    retry: Retry,
) -> AssistantMessageEventStream {
    AssistantMessageEventStream::deferred(async move {
        let (status_tx, mut status_rx) = tokio::sync::watch::channel(None::<u16>);
        let status_tx = Arc::new(status_tx);
        let mut first_options = options;
        let user_hook = first_options.on_response.clone();
        first_options.on_response = Some(Arc::new(move |response, model| {
            let user_hook = user_hook.clone();
            let status_tx = Arc::clone(&status_tx);
            let status = response.status;
            let observed = user_hook.map(|hook| hook(response, model));
            Box::pin(async move {
                if let Some(observed) = observed {
                    observed.await;
                }
                status_tx.send_replace(Some(status));
            })
        }));
        let mut first = adapter.stream(&model, context.clone(), first_options);
        let mut held = Vec::new();
        let mut answered = false;
        loop {
            tokio::select! {
                event = first.next() => match event {
                    Some(event @ AssistantMessageEvent::Start { .. }) => held.push(event),
                    Some(event @ AssistantMessageEvent::Error { .. })
                        if *status_rx.borrow() == Some(UNAUTHORIZED) =>
                    {
                        held.push(event);
                        break;
                    }
                    Some(event) => {
                        held.push(event);
                        return replay(held, first);
                    }
                    None => return replay(held, first),
                },
                changed = status_rx.changed(), if !answered => {
                    answered = true;
                    if changed.is_err() || *status_rx.borrow() != Some(UNAUTHORIZED) {
                        return replay(held, first);
                    }
                }
            }
        }
        // Answered 401: the held `start` and `error` are the first response's whole stream.
        let Retry { authenticator, provider_id, rejected, unauthorized: (mut model, mut options) } = retry;
        let fresh = match authenticator.refresh_rejected(&provider_id, &rejected).await {
            Ok(Some(fresh)) if fresh.access != rejected => fresh,
            Ok(_) => return replay(held, first),
            Err(error) => {
                tracing::warn!(provider = %provider_id, %error, "refresh after 401 failed");
                return replay(held, first);
            }
        };
        let Some(flow) = authenticator.flow(&provider_id).cloned() else { return replay(held, first) };
        apply(flow.to_auth(&fresh), &mut model, &mut options);
        adapter.stream(&model, context, options)
    })
}

/// `held` and then the rest of `rest`; `rest` itself when nothing was held back.
fn replay(held: Vec<AssistantMessageEvent>, rest: AssistantMessageEventStream) -> AssistantMessageEventStream {
    if held.is_empty() {
        return rest;
    }
    AssistantMessageEventStream::new(futures::stream::iter(held).chain(rest))
}
