//! pi-agent: arrives with its issue.
