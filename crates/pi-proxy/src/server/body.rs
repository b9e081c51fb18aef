//! Reading and checking a request body without starving the server.
//!
//! A body is read within [`super::Limits::body_read_timeout`] (408), counted against
//! [`super::Limits::max_body_bytes_in_flight`] as its bytes arrive (a slow body holds only what
//! it sent; a body that cannot get room before its deadline gets 503), and dropped as soon as it
//! is parsed. Parsing a large body is CPU work of up to a second: bodies over
//! [`INLINE_CHECK_BYTES`] are checked on the blocking pool, at most one per core at once, so the
//! async workers keep serving running streams meanwhile.

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::validate::{Checked, Refusal};

/// Bodies up to this size are checked on the async worker (a few hundred microseconds).
pub(crate) const INLINE_CHECK_BYTES: usize = 64 * 1024;

/// The budget counts KiB: a semaphore takes at most `u32::MAX` permits at once.
const UNIT: usize = 1024;

/// First allocation of a body buffer; it grows as bytes arrive (never sized by the client's
/// `content-length`, so a slow client cannot make the server reserve memory it never sends).
const INITIAL_CAPACITY: usize = 16 * 1024;

/// The memory shared by the bodies being read and checked.
pub(crate) struct BodyBudget {
    bytes: Arc<Semaphore>,
    checks: Arc<Semaphore>,
}

impl BodyBudget {
    /// Room for `max_in_flight` bytes (at least one body of `max_body` bytes).
    pub(crate) fn new(max_in_flight: usize, max_body: usize) -> Self {
        let units = max_in_flight.max(max_body).div_ceil(UNIT).min(Semaphore::MAX_PERMITS);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self { bytes: Arc::new(Semaphore::new(units)), checks: Arc::new(Semaphore::new(cores)) }
    }
}

/// A body read whole, with the room it holds in the budget.
pub(crate) struct ReadBody {
    pub bytes: Vec<u8>,
    _room: Option<OwnedSemaphorePermit>,
}

fn busy() -> Refusal {
    Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "Too many request bytes in flight")
}

fn too_slow() -> Refusal {
    Refusal::new(StatusCode::REQUEST_TIMEOUT, "Request body not received in time")
}

/// Read `body` by `deadline`, taking room in the budget for every chunk before keeping it.
pub(crate) async fn read(budget: &BodyBudget, body: Body, deadline: Instant) -> Result<ReadBody, Refusal> {
    let mut body = body;
    let mut bytes = Vec::new();
    let mut room: Option<OwnedSemaphorePermit> = None;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(too_slow()),
            Ok(None) => break,
            Ok(Some(Err(error))) => return Err(read_error(error)),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        let want = (bytes.len() + data.len()).div_ceil(UNIT);
        let held = room.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
        if want > held {
            let more = u32::try_from(want - held).map_err(|_| busy())?;
            let acquire = Arc::clone(&budget.bytes).acquire_many_owned(more);
            let permit = match tokio::time::timeout_at(deadline, acquire).await {
                Ok(Ok(permit)) => permit,
                _ => return Err(busy()),
            };
            match &mut room {
                Some(room) => room.merge(permit),
                None => room = Some(permit),
            }
        }
        if bytes.capacity() == 0 {
            bytes.reserve(INITIAL_CAPACITY.max(data.len()));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(ReadBody { bytes, _room: room })
}

fn read_error(error: axum::Error) -> Refusal {
    let inner = error.into_inner();
    if inner.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
        Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large")
    } else {
        Refusal::new(StatusCode::BAD_REQUEST, "Could not read the request body")
    }
}

/// Run `check` on `body`: inline when small, else on the blocking pool (one per core). The body
/// and its room in the budget are released as soon as the check is over.
pub(crate) async fn check_off_worker<F>(budget: &BodyBudget, body: ReadBody, check: F) -> Result<Checked, Refusal>
where
    F: FnOnce(&[u8]) -> Result<Checked, Refusal> + Send + 'static,
{
    if body.bytes.len() <= INLINE_CHECK_BYTES {
        return check(&body.bytes);
    }
    let _turn = Arc::clone(&budget.checks).acquire_owned().await.map_err(|_| busy())?;
    let checking = tokio::task::spawn_blocking(move || {
        let checked = check(&body.bytes);
        drop(body);
        checked
    });
    match checking.await {
        Ok(checked) => checked,
        Err(_) => Err(Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "Could not check the request body")),
    }
}
