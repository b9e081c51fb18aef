//! pi-proxy: arrives with its issue.
