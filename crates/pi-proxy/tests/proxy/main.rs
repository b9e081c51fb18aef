//! The proxy client against the proxy server over loopback.

mod client_faults;
mod load;
/// The adapters' scripted raw-socket servers.
#[path = "../../../pi-providers/tests/loopback/mod.rs"]
mod loopback;
mod never_upstream;
mod refusals;
mod round_trip;
mod support;
