//! A new wire API in under 150 lines (`api.rs`), streamed through the shared driver against a
//! loopback server of its own: `cargo run -p pi-rs-providers --example line_chat`.

mod api;

use futures::StreamExt;
use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StreamFn, StreamOptions, UserMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: &str = concat!(
    "data: {\"type\":\"text\",\"text\":\"Hello from \"}\n\n",
    "data: {\"type\":\"text\",\"text\":\"line-chat.\"}\n\n",
    "data: {\"type\":\"done\",\"reason\":\"stop\",\"usage\":{\"input\":5,\"output\":4}}\n\n",
);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One request, one canned answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut request = vec![0; 64 * 1024];
        let _ = socket.read(&mut request).await;
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n", BODY.len());
        let _ = socket.write_all(format!("{head}{BODY}").as_bytes()).await;
    });

    let model = Model::new("line-1").with_api(api::API).with_provider("line").with_base_url(url);
    let context = normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    });
    let options = StreamOptions { api_key: Some("line-key".into()), ..Default::default() };
    let mut stream = api::LineChat.stream(&model, context, options);
    while let Some(event) = stream.next().await {
        if let Some(message) = event.final_message() {
            println!("{:?}: {} ({} tokens out)", message.stop_reason, message.text(), message.usage.output);
        }
    }
    Ok(())
}
