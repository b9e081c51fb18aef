//! pi-cli: arrives with its issue.
