//! The proxy client against the proxy server over loopback.

mod client_faults;
mod refusals;
mod round_trip;
mod support;
mod tracing_fields;
