//! Scripted loopback HTTP servers on raw sockets: every byte and every pause of an answer is
//! chosen by the test. Shared by the adapters' fault suite (`tests/faults.rs`), the transport tests
//! (`tests/http_behaviour.rs`) and the proxy
//! client's (`pi-proxy/tests/proxy/client_faults.rs`, which includes this file by path).
//! [`ForwardProxy`] is an HTTP forward proxy for the client-configuration tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a server does on one connection, in order.
#[derive(Clone)]
pub enum Step {
    /// One write.
    Bytes(Vec<u8>),
    /// One write per byte.
    Trickle(Vec<u8>),
    /// A pause.
    Pause(Duration),
    /// Close with a TCP reset.
    Reset,
    /// Keep the connection open until the client closes it.
    Hold,
}

/// A 200 event-stream head; the body runs to the close.
pub fn sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec()
}

/// A response head with `status` and `content_type`; `extra` is more header lines.
pub fn head(status: u16, content_type: &str, extra: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\nconnection: close\r\n{extra}\r\n").into_bytes()
}

/// A whole response with a `content-length`.
pub fn with_length(status: u16, content_type: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut out = head(status, content_type, &format!("{extra}content-length: {}\r\n", body.len()));
    out.extend_from_slice(body);
    out
}

/// A scripted loopback server.
pub struct Server {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Requests received.
    pub requests: Arc<AtomicUsize>,
    /// Raw request heads, lower-cased.
    pub heads: Arc<Mutex<Vec<String>>>,
    /// Connections in `Hold` that the client closed.
    pub released: Arc<AtomicUsize>,
}

impl Server {
    /// Listen on a free loopback port; every connection plays `steps`.
    pub async fn start(steps: Vec<Step>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = Self { url, requests: Arc::default(), heads: Arc::default(), released: Arc::default() };
        let (requests, heads, released) =
            (Arc::clone(&server.requests), Arc::clone(&server.heads), Arc::clone(&server.released));
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let (steps, requests, heads, released) =
                    (steps.clone(), Arc::clone(&requests), Arc::clone(&heads), Arc::clone(&released));
                tokio::spawn(async move {
                    let mut socket = socket;
                    let _ = socket.set_nodelay(true);
                    let Some(head) = read_request(&mut socket).await else { return };
                    requests.fetch_add(1, Ordering::SeqCst);
                    heads.lock().unwrap().push(head);
                    play(socket, &steps, &released).await;
                });
            }
        });
        server
    }

    /// Wait (bounded) until `n` held connections were closed by the client.
    pub async fn released(&self, n: usize) -> bool {
        for _ in 0..500 {
            if self.released.load(Ordering::SeqCst) >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

/// Read one request (head and `content-length` body); its lowercased head, `None` at EOF.
pub async fn read_request(socket: &mut TcpStream) -> Option<String> {
    read_request_with_body(socket).await.map(|(head, _)| head)
}

/// Read one request; its lowercased head and its `content-length` body, `None` at EOF.
pub async fn read_request_with_body(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buffer.len() < end + 4 + length {
                let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
                buffer.extend_from_slice(&chunk[..n]);
            }
            return Some((head, buffer[end + 4..end + 4 + length].to_vec()));
        }
        let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
}

async fn play(mut socket: TcpStream, steps: &[Step], released: &AtomicUsize) {
    for step in steps {
        match step {
            Step::Bytes(bytes) => {
                if socket.write_all(bytes).await.is_err() {
                    return;
                }
            }
            Step::Trickle(bytes) => {
                for byte in bytes {
                    if socket.write_all(std::slice::from_ref(byte)).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    tokio::task::yield_now().await;
                }
            }
            Step::Pause(duration) => tokio::time::sleep(*duration).await,
            Step::Reset => {
                let _ = socket.set_zero_linger();
                return;
            }
            Step::Hold => {
                let mut sink = [0u8; 1024];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                released.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
    }
    let _ = socket.shutdown().await;
}

/// A loopback HTTP forward proxy (absolute-form requests to `http://` targets) that counts the
/// requests it forwards. It reads one request head per connection, forwards it in origin form
/// and then relays bytes both ways until either side closes (the scripted servers close after
/// each answer, so every request gets its own connection).
pub struct ForwardProxy {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Requests forwarded.
    pub forwarded: Arc<AtomicUsize>,
    /// The request lines received (`POST http://127.0.0.1:<port>/path HTTP/1.1`).
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl ForwardProxy {
    /// Listen on a free loopback port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Self {
            url: format!("http://{}", listener.local_addr().unwrap()),
            forwarded: Arc::default(),
            lines: Arc::default(),
        };
        let (forwarded, lines) = (Arc::clone(&proxy.forwarded), Arc::clone(&proxy.lines));
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                let (forwarded, lines) = (Arc::clone(&forwarded), Arc::clone(&lines));
                tokio::spawn(async move {
                    let _ = forward(client, &forwarded, &lines).await;
                });
            }
        });
        proxy
    }
}

async fn forward(mut client: TcpStream, forwarded: &AtomicUsize, lines: &Mutex<Vec<String>>) -> Option<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let line_end = loop {
        if let Some(end) = buffer.windows(2).position(|w| w == b"\r\n") {
            break end;
        }
        let n = client.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let line = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
    lines.lock().unwrap().push(line.clone());
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut upstream = TcpStream::connect(authority).await.ok()?;
    let _ = upstream.set_nodelay(true);
    upstream.write_all(format!("{method} {path} {version}").as_bytes()).await.ok()?;
    upstream.write_all(&buffer[line_end..]).await.ok()?;
    forwarded.fetch_add(1, Ordering::SeqCst);
    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    // Whichever side ends first ends both, so a client that lets go releases the server too.
    tokio::select! {
        _ = tokio::io::copy(&mut client_read, &mut upstream_write) => {}
        _ = tokio::io::copy(&mut upstream_read, &mut client_write) => {}
    }
    Some(())
}
