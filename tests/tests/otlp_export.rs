//! pi's spans through the OpenTelemetry set-up of docs/tracing.md (`tracing-opentelemetry`, the
//! OTLP/HTTP exporter) to a collector of the test's own that decodes each export request with
//! `opentelemetry-proto`: token counts, ports and status codes arrive as OTLP integers.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use pi_agent::{Agent, AgentOptions};
use pi_providers::api::openai::completions as openai_completions;
use pi_providers::{Auth, Models, Provider};
use pi_types::Model;
use prost::Message;
use tracing_subscriber::layer::SubscriberExt;

/// Read one HTTP/1.1 request: its head (lower-case) and its `content-length` body.
fn read_request(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 16384];
    loop {
        let read = stream.read(&mut buffer).unwrap();
        bytes.extend_from_slice(&buffer[..read]);
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse::<usize>().unwrap());
            while bytes.len() < end + 4 + length {
                let read = stream.read(&mut buffer).unwrap();
                assert!(read > 0, "the request ended early");
                bytes.extend_from_slice(&buffer[..read]);
            }
            return (head, bytes[end + 4..end + 4 + length].to_vec());
        }
        assert!(read > 0, "the request ended before its head");
    }
}

/// An OTLP/HTTP trace collector: the endpoint and the spans it received.
fn collector() -> (String, Arc<Mutex<Vec<Span>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let spans = Arc::new(Mutex::new(Vec::new()));
    let received = Arc::clone(&spans);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let (head, body) = read_request(&mut stream);
            assert!(head.starts_with("post /v1/traces "), "{head}");
            assert!(head.contains("content-type: application/x-protobuf"), "{head}");
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            let mut spans = received.lock().unwrap();
            for resource in request.resource_spans {
                for scope in resource.scope_spans {
                    spans.extend(scope.spans);
                }
            }
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            stream.write_all(answer.as_bytes()).unwrap();
        }
    });
    (endpoint, spans)
}

/// An OpenAI-compatible server answering one streamed completion with usage; its base URL.
fn model_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        read_request(&mut stream);
        let chunk = |json: &str| format!("data: {json}\n\n");
        let body = [
            chunk(r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":null}]}"#),
            chunk(r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
            chunk(r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    });
    base_url
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn span<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name} in {names:?}"))
}

#[test]
fn counts_ports_and_status_codes_arrive_as_integers() {
    let (endpoint, received) = collector();
    let base_url = model_server();
    let port = i64::from(port_of(&base_url));

    // docs/tracing.md's set-up, with the collector's endpoint.
    let exporter =
        opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(endpoint).build().expect("an exporter");
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("my-agent").build())
        .build();
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("pi")));

    let model =
        Model::new("qwen3").with_provider("my-server").with_api(openai_completions::API).with_base_url(base_url);
    let models = Models::new();
    models.set_provider(
        Provider::new("my-server").with_auth(Auth::ApiKey("none".into())).with_model(model.clone()).with_http_apis(),
    );
    let agent = Agent::new(AgentOptions::new(Arc::new(models)).with_model(model));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tracing::subscriber::with_default(subscriber, || runtime.block_on(async { agent.prompt("Hello").await }).unwrap());
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();

    let spans = received.lock().unwrap().clone();
    let run = span(&spans, "invoke_agent");
    let chat = span(&spans, "chat qwen3");
    let post = span(&spans, "POST");
    for (span, key, expected) in [
        (run, "gen_ai.usage.input_tokens", 12),
        (run, "gen_ai.usage.output_tokens", 3),
        (chat, "gen_ai.usage.input_tokens", 12),
        (chat, "gen_ai.usage.output_tokens", 3),
        (chat, "gen_ai.usage.cache_read.input_tokens", 0),
        (post, "server.port", port),
        (post, "http.response.status_code", 200),
    ] {
        assert_eq!(attribute(span, key), Some(&Value::IntValue(expected)), "{} {key}", span.name);
    }
    assert_eq!(attribute(chat, "gen_ai.request.model"), Some(&Value::StringValue("qwen3".into())));
}

fn port_of(base_url: &str) -> u16 {
    let authority = base_url.trim_start_matches("http://").split('/').next().unwrap();
    authority.rsplit(':').next().unwrap().parse().unwrap()
}
