//! The proxy client and server over loopback: the client against scripted raw-socket servers
//! (faults), the server against our client and raw requests (refusals, load, round trips).

mod abuse;
mod client_faults;
mod load;
/// The adapters' scripted raw-socket servers.
#[path = "../../../pi-providers/tests/loopback/mod.rs"]
mod loopback;
mod models;
mod never_upstream;
mod pi_messages;
mod refusals;
mod round_trip;
mod support;
