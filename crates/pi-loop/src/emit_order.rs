//! The order of a run's emits: a first-come, first-served async lock.
//!
//! # Protocol
//! Every emit holds the lock while its event is delivered, so concurrently running tools (and
//! their progress updates) never deliver two events at once, and emits are delivered in the
//! order they first asked for the lock.
//!
//! Almost every emit finds the lock free (only tool updates and parallel tool calls contend),
//! so the free path is one compare-and-swap to take it and one to give it back. Only when
//! somebody waits does the lock use its queue: releasing it then hands it straight to the
//! first waiter instead of freeing it, so a newcomer can never pass the queue (`FREE` implies an
//! empty queue).
//!
//! A waiter that is dropped while queued leaves the queue; one dropped after the lock was
//! handed to it passes the lock on.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Nobody holds the lock and nobody waits.
const FREE: u8 = 0;
/// Held, nobody waits: the holder frees it with one compare-and-swap.
const HELD: u8 = 1;
/// Held with waiters: the holder hands it to the first one.
const HELD_WAITED: u8 = 2;

/// A FIFO async lock with a lock-free uncontended path; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct EmitOrder {
    state: AtomicU8,
    /// Made when somebody first waits (most runs never do): every run holds an `EmitOrder`,
    /// and an empty queue inline would take 56 bytes of it.
    queue: Mutex<Option<Box<Queue>>>,
}

#[derive(Debug, Default)]
struct Queue {
    next_ticket: u64,
    waiting: VecDeque<(u64, Option<Waker>)>,
    /// The waiter the lock was handed to, until it notices.
    granted: Option<u64>,
}

impl EmitOrder {
    /// Waits for the lock; it is held until the returned guard drops.
    pub(crate) fn lock(&self) -> Acquire<'_> {
        Acquire { order: self, ticket: None, done: false }
    }

    /// Whether nobody holds the lock (a snapshot: it may be taken right after).
    pub(crate) fn is_free(&self) -> bool {
        self.state.load(Ordering::Acquire) == FREE
    }

    fn queue(&self) -> QueueGuard<'_> {
        // Every critical section leaves the queue consistent, so a poisoned lock is usable.
        QueueGuard(self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn try_take(&self) -> bool {
        self.state.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    fn release(&self) {
        if self.state.compare_exchange(HELD, FREE, Ordering::Release, Ordering::Relaxed).is_ok() {
            return;
        }
        let mut queue = self.queue();
        self.hand_on(&mut queue);
    }

    /// Passes the held lock to the first waiter, or frees it when nobody waits.
    fn hand_on(&self, queue: &mut Queue) {
        match queue.waiting.pop_front() {
            Some((ticket, waker)) => {
                queue.granted = Some(ticket);
                let state = if queue.waiting.is_empty() { HELD } else { HELD_WAITED };
                self.state.store(state, Ordering::Release);
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            None => self.state.store(FREE, Ordering::Release),
        }
    }
}

/// The locked queue; an unmade queue reads as empty and is made when first changed.
struct QueueGuard<'a>(MutexGuard<'a, Option<Box<Queue>>>);

static NO_QUEUE: Queue = Queue { next_ticket: 0, waiting: VecDeque::new(), granted: None };

impl std::ops::Deref for QueueGuard<'_> {
    type Target = Queue;

    fn deref(&self) -> &Queue {
        self.0.as_deref().unwrap_or(&NO_QUEUE)
    }
}

impl std::ops::DerefMut for QueueGuard<'_> {
    fn deref_mut(&mut self) -> &mut Queue {
        self.0.get_or_insert_with(Box::default)
    }
}

/// Holds the [`EmitOrder`] lock; releases it on drop.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    order: &'a EmitOrder,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.order.release();
    }
}

/// What [`EmitOrder::lock`] returns.
#[derive(Debug)]
#[must_use = "the lock is taken when the future is awaited"]
pub(crate) struct Acquire<'a> {
    order: &'a EmitOrder,
    /// The place in the queue, once queued.
    ticket: Option<u64>,
    done: bool,
}

impl<'a> Future for Acquire<'a> {
    type Output = Turn<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Turn<'a>> {
        let order = self.order;
        if self.done {
            // Polled after completion: the turn was already given out.
            return Poll::Pending;
        }
        if self.ticket.is_none() && order.try_take() {
            self.done = true;
            return Poll::Ready(Turn { order });
        }
        let mut queue = order.queue();
        match self.ticket {
            Some(ticket) if queue.granted == Some(ticket) => {
                queue.granted = None;
                self.done = true;
                Poll::Ready(Turn { order })
            }
            Some(ticket) => {
                if let Some(entry) = queue.waiting.iter_mut().find(|(t, _)| *t == ticket) {
                    entry.1 = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            None => {
                // Under the queue lock the holder cannot hand on meanwhile: either the lock
                // is free now (take it) or this waiter is queued before the holder looks.
                loop {
                    match order.state.load(Ordering::Acquire) {
                        FREE if order.try_take() => {
                            self.done = true;
                            return Poll::Ready(Turn { order });
                        }
                        FREE => continue,
                        HELD => {
                            if order
                                .state
                                .compare_exchange(HELD, HELD_WAITED, Ordering::AcqRel, Ordering::Acquire)
                                .is_err()
                            {
                                continue;
                            }
                            break;
                        }
                        _ => break,
                    }
                }
                let ticket = queue.next_ticket;
                queue.next_ticket = queue.next_ticket.wrapping_add(1);
                queue.waiting.push_back((ticket, Some(cx.waker().clone())));
                self.ticket = Some(ticket);
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.filter(|_| !self.done) else { return };
        let mut queue = self.order.queue();
        if queue.granted == Some(ticket) {
            // Handed the lock but gone before taking it: pass it on.
            queue.granted = None;
            self.order.hand_on(&mut queue);
        } else if let Some(position) = queue.waiting.iter().position(|(t, _)| *t == ticket) {
            queue.waiting.remove(position);
            if queue.waiting.is_empty() {
                // Still held by somebody else, who may free it with the fast path again.
                let _ = self.order.state.compare_exchange(HELD_WAITED, HELD, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn noop_cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    fn poll<'a>(acquire: &mut Pin<Box<Acquire<'a>>>) -> Option<Turn<'a>> {
        match acquire.as_mut().poll(&mut noop_cx()) {
            Poll::Ready(turn) => Some(turn),
            Poll::Pending => None,
        }
    }

    #[test]
    fn waiters_get_the_lock_in_arrival_order_and_newcomers_queue_behind_them() {
        let order = EmitOrder::default();
        let first = poll(&mut Box::pin(order.lock())).expect("free lock");
        let mut second = Box::pin(order.lock());
        let mut third = Box::pin(order.lock());
        assert!(poll(&mut second).is_none());
        assert!(poll(&mut third).is_none());
        drop(first);
        // A newcomer must not pass the queue.
        assert!(poll(&mut Box::pin(order.lock())).is_none());
        assert!(poll(&mut third).is_none());
        let second_turn = poll(&mut second).expect("second is next");
        drop(second_turn);
        let third_turn = poll(&mut third).expect("third is next");
        drop(third_turn);
        assert!(poll(&mut Box::pin(order.lock())).is_some());
        assert_eq!(order.state.load(Ordering::Relaxed), FREE);
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue_or_passes_the_lock_on() {
        let order = EmitOrder::default();
        let holder = poll(&mut Box::pin(order.lock())).expect("free lock");
        let mut leaving = Box::pin(order.lock());
        assert!(poll(&mut leaving).is_none());
        drop(leaving);
        drop(holder);
        assert_eq!(order.state.load(Ordering::Relaxed), FREE);

        let holder = poll(&mut Box::pin(order.lock())).expect("free lock");
        let mut granted = Box::pin(order.lock());
        let mut next = Box::pin(order.lock());
        assert!(poll(&mut granted).is_none());
        assert!(poll(&mut next).is_none());
        drop(holder);
        // Handed to `granted`, which goes away without taking it.
        drop(granted);
        let turn = poll(&mut next).expect("passed on");
        drop(turn);
        assert_eq!(order.state.load(Ordering::Relaxed), FREE);
    }

    #[test]
    fn threads_never_hold_the_lock_together() {
        let order = Arc::new(EmitOrder::default());
        let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (order, inside) = (Arc::clone(&order), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        let _turn = futures_executor_block_on(order.lock());
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            assert!(thread.join().is_ok());
        }
        assert_eq!(order.state.load(Ordering::Relaxed), FREE);
    }

    /// A minimal blocking executor: parks the thread until woken.
    fn futures_executor_block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            std::thread::park();
        }
    }
}
