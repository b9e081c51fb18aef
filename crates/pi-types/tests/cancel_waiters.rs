//! A `cancelled()` future dropped before the cancellation leaves the token's list of waiters,
//! so a loop that makes a new one per streamed chunk does not grow it.
//!
//! The list is a `Vec`: were dropped waiters kept, a thousand of them would make it reallocate
//! about ten times. The counting allocator sees the one allocation the first waiter makes.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::future::Future;
use std::task::{Context, Waker};

use pi_types::CancellationToken;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn dropped_waiters_leave_the_list() {
    let token = CancellationToken::new();
    let mut cx = Context::from_waker(Waker::noop());
    let region = Region::new(GLOBAL);
    for _ in 0..1_000 {
        let mut wait = std::pin::pin!(token.cancelled());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }
    let change = region.change();
    assert_eq!((change.allocations, change.reallocations), (1, 0), "{change:?}");

    let mut wait = std::pin::pin!(token.cancelled());
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    token.cancel();
    assert!(wait.as_mut().poll(&mut cx).is_ready());
}
