//! Idle connections: those without a request in progress (waiting for, or receiving, a request
//! head). They cost the server a socket and nothing else, which is what makes them a cheap
//! flood. Their total is bounded (a new connection over it is closed at once); while more than
//! half of it is taken (pressure), every idle connection is closed sooner. A peer address over
//! its own bound gets new connections only on the short timeout, and none under pressure: a
//! burst of real requests from one client still gets in, a flood from one address cannot hold
//! more than its share.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// The idle connections of the server.
pub(crate) struct IdleConnections {
    max_total: usize,
    max_per_peer: usize,
    counts: Mutex<Counts>,
    /// `true` while more than half of `max_total` are idle.
    pressure: watch::Sender<bool>,
    started: Instant,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

impl IdleConnections {
    pub(crate) fn new(max_total: usize, max_per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_peer,
            counts: Mutex::default(),
            pressure: watch::Sender::new(false),
            started: Instant::now(),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update_pressure(&self, total: usize) {
        let pressure = total.saturating_mul(2) > self.max_total;
        self.pressure.send_if_modified(|current| std::mem::replace(current, pressure) != pressure);
    }

    /// Count a new connection from `peer` as idle, unless that would pass a limit.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Arc<Connection>> {
        let mut counts = self.counts();
        let of_peer = counts.per_peer.get(&peer).copied().unwrap_or(0);
        let over_peer_limit = of_peer >= self.max_per_peer;
        if counts.total >= self.max_total || (over_peer_limit && *self.pressure.borrow()) {
            return None;
        }
        counts.total += 1;
        counts.per_peer.insert(peer, of_peer + 1);
        let total = counts.total;
        drop(counts);
        self.update_pressure(total);
        Some(Arc::new(Connection {
            idle: Arc::clone(self),
            peer,
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            became_idle: Notify::new(),
            short: over_peer_limit,
        }))
    }

    fn add(&self, peer: IpAddr, up: bool) {
        let mut counts = self.counts();
        let entry = counts.per_peer.entry(peer).or_insert(0);
        if up {
            *entry += 1;
        } else {
            *entry = entry.saturating_sub(1);
            if *entry == 0 {
                counts.per_peer.remove(&peer);
            }
        }
        counts.total = if up { counts.total + 1 } else { counts.total.saturating_sub(1) };
        let total = counts.total;
        drop(counts);
        self.update_pressure(total);
    }

    /// Follows the pressure flag.
    pub(crate) fn pressure(&self) -> watch::Receiver<bool> {
        self.pressure.subscribe()
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// One accepted connection.
pub(crate) struct Connection {
    idle: Arc<IdleConnections>,
    peer: IpAddr,
    in_flight: AtomicUsize,
    idle_since_ms: AtomicU64,
    /// Notified when the last request in progress ends.
    pub(crate) became_idle: Notify,
    /// Opened while its peer was over the per-peer bound: always on the short idle timeout.
    pub(crate) short: bool,
}

impl Connection {
    /// Whether no request is in progress.
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// When an idle connection is closed, given its `limit`.
    pub(crate) fn idle_deadline(&self, limit: Duration) -> Instant {
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        self.idle.started + since + limit
    }

    /// A request head arrived: the connection is busy until the guard (held by the response
    /// body) is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.idle.add(self.peer, false);
        }
        Busy(Arc::clone(self))
    }

    /// The connection closed: it no longer counts.
    pub(crate) fn closed(&self) {
        if self.is_idle() {
            self.idle.add(self.peer, false);
        }
    }
}

/// A request in progress on a [`Connection`].
pub(crate) struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        connection.idle_since_ms.store(connection.idle.now_ms(), Ordering::Release);
        if connection.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            connection.idle.add(connection.peer, true);
            connection.became_idle.notify_one();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_peer_and_in_total() {
        let idle = IdleConnections::new(4, 2);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let first = idle.admit(a).map(|c| (c.clone(), c.busy()));
        let second = idle.admit(a).unwrap();
        // `a`'s first connection is busy, so `a` has one idle connection left to open; the
        // next gets the short timeout, and takes the server to pressure.
        assert!(!idle.admit(a).unwrap().short);
        let third = idle.admit(a).unwrap();
        assert!(third.short);
        assert!(*idle.pressure().borrow());
        assert!(idle.admit(a).is_none(), "over its own bound under pressure");
        let _fifth = idle.admit(b);
        assert!(idle.admit(b).is_none(), "four idle in total");
        // `third` closes and the busy one goes idle: four again, so one more must close.
        third.closed();
        let (connection, busy) = first.unwrap();
        drop(busy);
        assert!(connection.is_idle());
        assert!(idle.admit(IpAddr::from([10, 0, 0, 3])).is_none());
        connection.closed();
        assert!(idle.admit(IpAddr::from([10, 0, 0, 3])).is_some());
        second.closed();
    }
}
