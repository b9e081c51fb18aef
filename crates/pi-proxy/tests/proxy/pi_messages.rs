//! The server's `POST /messages` route (pi-ai's `pi-messages` API) against our own
//! `pi-messages` adapter: the same upstream streams the same events through either protocol.

use futures::StreamExt;
use pi_providers::api::pi_messages::PiMessages;
use pi_proxy::ProxyStreamFn;
use pi_types::{CancellationToken, Model, StopReason, StreamFn, StreamOptions};
use serde_json::Value;

use crate::round_trip::{context, scripted};
use crate::support::{collect, config_with, faux, faux_provider, Stall, TestServer, OTHER_TOKEN, TOKEN};

/// The client's view of a served model: pi-messages at the server, the model by id.
fn client_model(served: &Model, base_url: &str) -> Model {
    Model { api: pi_providers::api::pi_messages::API.into(), base_url: base_url.into(), ..served.clone() }
}

fn options(token: &str) -> StreamOptions {
    StreamOptions { api_key: Some(token.into()), ..Default::default() }
}

/// Events without the API id (the two clients name their own protocol) and without the id and
/// tool name a pi-messages `toolcall_start` repeats (the proxy protocol's event does not).
fn without_api(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .map(|mut event| {
            if event["type"] == "toolcall_start" {
                if let Some(map) = event.as_object_mut() {
                    map.remove("id");
                    map.remove("toolName");
                }
            }
            for key in ["partial", "message", "error"] {
                if let Some(Value::Object(message)) = event.get_mut(key) {
                    message.remove("api");
                }
            }
            event
        })
        .collect()
}

#[tokio::test]
async fn pi_messages_events_equal_proxy_events() {
    let faux = faux();
    let server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let proxy = ProxyStreamFn::new(&server.url, TOKEN);
    let served = faux.model();
    // pi-ai's catalog points pi-messages models at `.../v1`; a bare origin works too.
    for base_url in [format!("{}/v1", server.url), server.url.clone()] {
        let model = client_model(&served, &base_url);
        for (name, response) in scripted() {
            faux.set_responses([response.clone(), response]);
            let proxied = without_api(collect(proxy.stream(&served, context(), StreamOptions::default())).await);
            let messages = without_api(collect(PiMessages.stream(&model, context(), options(TOKEN))).await);
            assert!(!proxied.is_empty(), "{name}");
            assert_eq!(messages, proxied, "case {name} via {base_url}");
        }
    }
}

#[tokio::test]
async fn refusals_read_as_pi_messages_errors() {
    let faux = faux();
    let server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let served = faux.model();
    let url = format!("{}/v1", server.url);
    let cases = [
        (client_model(&served, &url), "wrong-token-0123456789", "401 Unauthorized: Invalid token"),
        (
            Model { id: "not-served".into(), ..client_model(&served, &url) },
            TOKEN,
            "400 Bad Request: Model not served: not-served",
        ),
    ];
    for (model, token, expected) in cases {
        let events = collect(PiMessages.stream(&model, context(), options(token))).await;
        assert_eq!(events.len(), 1, "{expected}");
        assert_eq!(events[0]["type"], "error");
        assert_eq!(events[0]["error"]["errorMessage"], expected);
        let text = events[0].to_string();
        assert!(!text.contains(token) || token == TOKEN, "the token is not echoed");
    }
    // The other token works as well: tokens, not routes, decide.
    faux.set_responses([pi_providers::faux::faux_assistant_message(
        vec![pi_providers::faux::faux_text("ok")],
        StopReason::Stop,
    )
    .into()]);
    let events = collect(PiMessages.stream(&client_model(&served, &url), context(), options(OTHER_TOKEN))).await;
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(Value::from("done")));
}

#[tokio::test]
async fn a_model_id_served_twice_must_name_its_provider() {
    let faux = faux();
    let stall = Stall::default();
    let twin = Model { id: faux.model().id, ..Stall::model() };
    let server = TestServer::start(config_with(vec![faux_provider(&faux), stall.provider().with_model(twin)])).await;
    let served = faux.model();
    let model = client_model(&served, &server.url);
    let events = collect(PiMessages.stream(&model, context(), options(TOKEN))).await;
    let text = events[0]["error"]["errorMessage"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("400 Bad Request: Model id "), "{text}");
    assert!(text.contains("name one as provider/id"), "{text}");
    faux.set_responses([pi_providers::faux::faux_assistant_message(
        vec![pi_providers::faux::faux_text("ok")],
        StopReason::Stop,
    )
    .into()]);
    let named = Model { id: format!("{}/{}", served.provider, served.id).into(), ..model };
    let events = collect(PiMessages.stream(&named, context(), options(TOKEN))).await;
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(Value::from("done")));
}

#[tokio::test]
async fn cancelling_the_client_cancels_the_upstream() {
    let stall = Stall::default();
    let server = TestServer::start(config_with(vec![stall.provider()])).await;
    let model = client_model(&Stall::model(), &server.url);
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), ..options(TOKEN) };
    let mut stream = PiMessages.stream(&model, context(), options);
    assert_eq!(stream.next().await.map(|e| e.type_name()), Some("start"));
    cancel.cancel();
    let last = stream.next().await.expect("terminal event");
    assert_eq!(last.final_message().map(|m| m.stop_reason), Some(StopReason::Aborted));
    assert!(stream.next().await.is_none());
    for _ in 0..100 {
        if stall.cancelled() == [true] {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("upstream not cancelled: {:?}", stall.cancelled());
}
