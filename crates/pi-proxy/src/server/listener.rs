//! Accepting connections: HTTP/1.1 with a header read timeout, caps on open and on idle
//! connections (in total and per peer address), a shorter idle timeout under pressure, and
//! graceful shutdown (stop accepting, close connections without a request in progress at once,
//! let running streams finish until the grace period ends, then end them with an `error`
//! event).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::idle::{Connection, IdleConnections};
use super::{Limits, ServerConfig};
use crate::ProxyError;

/// How long connections may take to close after running streams were ended.
const CLOSE_AFTER_DRAIN: Duration = Duration::from_secs(5);

/// Serve the proxy on `listener` until `shutdown` resolves, then shut down gracefully.
///
/// After `shutdown` the listener is closed, connections without a request in progress
/// (including those still sending a request head) are closed at once, and running streams may
/// finish for [`super::Limits::shutdown_grace`]; streams still running then end with an
/// `error` event (`Proxy server is shutting down`). Returns when every connection is closed
/// (at most a few seconds after the grace period).
///
/// ```no_run
/// use std::sync::Arc;
/// use pi_proxy::server::{serve, ProxyToken, ServerConfig};
/// # async fn run() -> Result<(), pi_proxy::ProxyError> {
/// let models = Arc::new(pi_providers::Models::with_builtins());
/// let config = ServerConfig::new(models, vec![ProxyToken::new("web", "a-long-random-secret")]);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
/// // Resolve this future (e.g. on SIGTERM) to shut down gracefully.
/// let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// serve(config, listener, async { let _ = stopped.await; }).await
/// # }
/// ```
pub async fn serve(
    config: ServerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    if config.tokens.is_empty() {
        return Err(ProxyError::Config("no bearer tokens configured".into()));
    }
    let limits = config.limits.clone();
    let drain = CancellationToken::new();
    let closing = CancellationToken::new();
    let router = super::handler::router(config, drain.clone());
    // Every connection holds one permit: all of them back means every connection is closed.
    let max_connections = limits.max_connections.clamp(1, u32::MAX as usize);
    let connections = Arc::new(Semaphore::new(max_connections));
    let idle = IdleConnections::new(limits.max_idle_connections, limits.max_idle_connections_per_peer);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else { continue };
        // Over a limit: the connection is closed here, before it costs anything more.
        let Some(connection) = idle.admit(peer.ip()) else { continue };
        let run =
            serve_connection(stream, connection, router.clone(), limits.clone(), Arc::clone(&idle), closing.clone());
        tokio::spawn(async move {
            run.await;
            drop(permit);
        });
    }
    drop(listener);
    closing.cancel();
    let all_closed = |connections: Arc<Semaphore>| async move {
        let _ = connections.acquire_many(max_connections as u32).await;
    };
    if tokio::time::timeout(limits.shutdown_grace, all_closed(Arc::clone(&connections))).await.is_ok() {
        return Ok(());
    }
    drain.cancel();
    let _ = tokio::time::timeout(CLOSE_AFTER_DRAIN, all_closed(connections)).await;
    Ok(())
}

/// Serve one connection until it ends, is closed for idling, or shutdown closes it.
async fn serve_connection(
    stream: TcpStream,
    connection: Arc<Connection>,
    router: axum::Router,
    limits: Limits,
    idle: Arc<IdleConnections>,
    closing: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let service = TowerToHyperService::new(router);
    let tracked = Arc::clone(&connection);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        // A request head is complete: busy until its response body is dropped.
        let busy = tracked.busy();
        let answer = hyper::service::Service::call(&service, request);
        async move {
            let response = answer.await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                Body::new(body.map_err(move |error| {
                    let _ = &busy;
                    error
                }))
            }))
        }
    });
    let mut http = Box::pin(
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(TokioIo::new(stream), service),
    );
    let mut pressure = idle.pressure();
    let mut shutting_down = false;
    loop {
        let limit = if *pressure.borrow_and_update() || connection.short {
            limits.idle_timeout_under_pressure.min(limits.header_read_timeout)
        } else {
            limits.header_read_timeout
        };
        let deadline = connection.idle_deadline(limit);
        tokio::select! {
            _ = http.as_mut() => break,
            () = closing.cancelled(), if !shutting_down => {
                shutting_down = true;
                http.as_mut().graceful_shutdown();
            }
            changed = pressure.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            () = connection.became_idle.notified() => {}
            // Checked again: the connection may have become busy meanwhile.
            () = tokio::time::sleep_until(deadline), if connection.is_idle() => {
                if connection.is_idle() {
                    break;
                }
            }
        }
        // Shutting down: a connection without a request in progress has nothing to finish
        // (a half-sent head is not waited for).
        if shutting_down && connection.is_idle() {
            break;
        }
    }
    // Closing drops a response body in progress first, so the count below is final.
    drop(http);
    connection.closed();
}
