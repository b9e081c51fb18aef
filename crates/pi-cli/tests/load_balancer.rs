//! Two `pi proxy serve` replicas behind a real nginx serving one client's streams; one replica
//! is killed mid-load (docs/scale-out.md, "Proxy replicas behind a load balancer").
//!
//! nginx is the Debian package's binary (`PI_TEST_NGINX_BIN`, default `/usr/sbin/nginx`;
//! `.ci/run` installs it). Without it the test skips, except in CI (`CI=true`), where it fails.
//! Everything listens on loopback; the upstream model is a scripted OpenAI-compatible server
//! in this process that streams each answer over about two seconds.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use pi_proxy::ProxyStreamFn;
use pi_types::{
    AssistantMessageEvent, Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext, UserMessage,
};

const TOKEN: &str = "test-token-0123456789";
/// Text deltas per answer, and the pause before each.
const DELTAS: usize = 20;
const PACE: Duration = Duration::from_millis(100);
/// Streams started before the kill, and after it.
const BEFORE: usize = 12;
const AFTER: usize = 6;

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An OpenAI-compatible chat-completions server answering every request with `DELTAS` paced
/// text deltas; a write that fails (the replica died) ends that answer.
fn slow_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || answer(stream));
        }
    });
    url
}

fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let chunk = |delta: &str, finish: &str| {
        format!("data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"slow-model\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
    };
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    for i in 0..DELTAS {
        std::thread::sleep(PACE);
        let delta = chunk(&format!("{{\"content\":\"t{i} \"}}"), "null");
        if stream.write_all(delta.as_bytes()).and_then(|()| stream.flush()).is_err() {
            return;
        }
    }
    let _ = stream.write_all(format!("{}data: [DONE]\n\n", chunk("{}", "\"stop\"")).as_bytes());
}

fn replica(port: u16, config: &Path) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_pi"))
        .env_clear()
        .args(["proxy", "serve", "--listen", &format!("127.0.0.1:{port}"), "--config"])
        .arg(config)
        .env("PI_PROXY_TOKEN", TOKEN)
        .env("SLOW_KEY", "sk-slow-0123")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Process(child)
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port} after 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// nginx in front of the replicas, one process (so that killing it leaves no worker behind):
/// round robin, no response buffering, and a connect failure
/// sends the request to the next replica. Each stream's path names it (`/sN/api/stream`), and
/// the access log says which replica served it.
fn nginx_config(dir: &Path, port: u16, replicas: [u16; 2]) -> String {
    let d = dir.display();
    format!(
        r#"daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    log_format lb '$request_uri $upstream_addr $status';
    access_log {d}/access.log lb;
    upstream pi_proxy {{
        server 127.0.0.1:{a} max_fails=1 fail_timeout=30s;
        server 127.0.0.1:{b} max_fails=1 fail_timeout=30s;
    }}
    server {{
        listen 127.0.0.1:{port};
        location ~ ^/s[0-9]+(/api/.*)$ {{
            rewrite ^/s[0-9]+(/api/.*)$ $1 break;
            proxy_pass http://pi_proxy;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"#,
        a = replicas[0],
        b = replicas[1],
    )
}

/// What one stream saw.
#[derive(Debug, Default)]
struct Seen {
    deltas: usize,
    errors: usize,
    done: bool,
    text: String,
    error_message: Option<String>,
}

async fn stream(base: String, model: Model, started: Arc<AtomicUsize>) -> Seen {
    let client = ProxyStreamFn::new(base, TOKEN);
    let context = TranscriptContext::from_messages(vec![Message::User(Arc::new(UserMessage::text("Stream a while.")))]);
    let mut events = client.stream(&model, context, StreamOptions::default());
    let mut seen = Seen::default();
    while let Some(event) = events.next().await {
        match event {
            AssistantMessageEvent::TextDelta { .. } => {
                seen.deltas += 1;
                if seen.deltas == 1 {
                    started.fetch_add(1, Ordering::SeqCst);
                }
            }
            AssistantMessageEvent::Done { message, .. } => {
                seen.done = true;
                seen.text = message.text();
            }
            AssistantMessageEvent::Error { error, reason } => {
                assert_eq!(reason, StopReason::Error);
                seen.errors += 1;
                seen.error_message = error.error_message.as_deref().map(str::to_owned);
            }
            _ => {}
        }
    }
    seen
}

fn nginx_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("PI_TEST_NGINX_BIN").map(PathBuf::from).unwrap_or_else(|| "/usr/sbin/nginx".into());
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "nginx not found at {}: CI must install it (.ci/run)",
        bin.display()
    );
    eprintln!("load_balancer: skipped, nginx not found at {} (apt-get install nginx)", bin.display());
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_replica_fails_only_its_streams() {
    let Some(nginx) = nginx_bin() else { return };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("load-balancer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // nginx's workers may run as `nobody` when the test runs as root.
    let _ = Command::new("chmod").arg("0777").arg(&dir).status();

    let upstream = slow_upstream();
    let config = dir.join("proxy.json");
    let providers = serde_json::json!({
        "providers": [],
        "customProviders": [{"id": "slow", "apiKeyEnv": "SLOW_KEY", "models": [
            {"id": "slow-model", "api": "openai-completions", "baseUrl": upstream}
        ]}]
    });
    std::fs::write(&config, providers.to_string()).unwrap();
    let ports = [free_port(), free_port()];
    let mut replicas: Vec<Option<Process>> = ports.iter().map(|&port| Some(replica(port, &config))).collect();
    ports.iter().for_each(|&port| wait_listening(port));
    let port = free_port();
    std::fs::write(dir.join("nginx.conf"), nginx_config(&dir, port, ports)).unwrap();
    let _nginx = Process(
        Command::new(&nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(port);

    let model = Model {
        id: "slow-model".into(),
        name: "slow-model".into(),
        api: "openai-completions".into(),
        provider: "slow".into(),
        base_url: upstream.clone(),
        ..Default::default()
    };
    let balancer = format!("http://127.0.0.1:{port}");
    let started = Arc::new(AtomicUsize::new(0));
    let first: Vec<_> = (0..BEFORE)
        .map(|i| tokio::spawn(stream(format!("{balancer}/s{i}"), model.clone(), Arc::clone(&started))))
        .collect();
    // Kill the first replica once every stream is under way.
    let deadline = Instant::now() + Duration::from_secs(30);
    while started.load(Ordering::SeqCst) < BEFORE {
        assert!(Instant::now() < deadline, "only {} streams started", started.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(replicas[0].take());
    let second: Vec<_> = (BEFORE..BEFORE + AFTER)
        .map(|i| tokio::spawn(stream(format!("{balancer}/s{i}"), model.clone(), Arc::clone(&started))))
        .collect();
    let mut seen = BTreeMap::new();
    for (i, task) in first.into_iter().chain(second).enumerate() {
        let outcome = tokio::time::timeout(Duration::from_secs(60), task).await.expect("a stream hung").unwrap();
        seen.insert(i, outcome);
    }
    drop(replicas);

    // Which replica served each stream, from nginx's access log (written as each one ends).
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let served: BTreeMap<usize, String> = log
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let path = fields.next()?;
            let index = path.strip_prefix("/s")?.strip_suffix("/api/stream")?.parse().ok()?;
            // After a refused connect nginx lists every replica it tried: the last one served.
            let upstreams: Vec<&str> = fields.take_while(|f| !f.chars().all(|c| c.is_ascii_digit())).collect();
            let last = upstreams.last()?.trim_end_matches(',').to_owned();
            Some((index, last))
        })
        .collect();
    let killed = format!("127.0.0.1:{}", ports[0]);
    let survivor = format!("127.0.0.1:{}", ports[1]);
    let full_text: String = (0..DELTAS).map(|i| format!("t{i} ")).collect();
    let mut on_killed = 0;
    for (i, outcome) in &seen {
        let replica = served.get(i).unwrap_or_else(|| panic!("stream {i} not in the access log:\n{log}"));
        if *i < BEFORE && *replica == killed {
            on_killed += 1;
            assert!(!outcome.done && outcome.errors == 1, "stream {i} on the killed replica: {outcome:?}");
            assert!(outcome.deltas < DELTAS, "stream {i} ended before the kill: {outcome:?}");
        } else {
            assert_eq!(*replica, survivor, "stream {i}");
            assert!(outcome.done && outcome.errors == 0, "stream {i} on the surviving replica: {outcome:?}");
            assert_eq!(outcome.text, full_text, "stream {i}");
        }
    }
    eprintln!(
        "load_balancer: {on_killed} of {BEFORE} streams failed with their replica, {} completed",
        seen.len() - on_killed
    );
    assert!(on_killed > 0 && on_killed < BEFORE, "{on_killed} of {BEFORE} streams were on the killed replica");
    let _ = std::fs::remove_dir_all(&dir);
}
