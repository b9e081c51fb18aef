//! Accepting connections: HTTP/1.1 with a header read timeout, a cap on open connections, and
//! graceful shutdown (stop accepting, let running streams finish until the grace period ends,
//! then end them with an `error` event).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::ServerConfig;
use crate::ProxyError;

/// How long connections may take to close after running streams were ended.
const CLOSE_AFTER_DRAIN: Duration = Duration::from_secs(5);

/// Serve the proxy on `listener` until `shutdown` resolves, then shut down gracefully.
///
/// After `shutdown` the listener is closed, idle connections are closed, and running streams
/// may finish for [`super::Limits::shutdown_grace`]; streams still running then end with an
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
    let router = super::handler::router(config, drain.clone());
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    let closed = graceful.shutdown();
    let mut closed = std::pin::pin!(closed);
    tokio::select! {
        () = &mut closed => return Ok(()),
        () = tokio::time::sleep(limits.shutdown_grace) => {}
    }
    drain.cancel();
    let _ = tokio::time::timeout(CLOSE_AFTER_DRAIN, closed).await;
    Ok(())
}
