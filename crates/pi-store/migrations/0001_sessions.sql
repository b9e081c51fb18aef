-- One row per session: its version (optimistic concurrency), message count and lifetime usage.
CREATE TABLE pi_sessions (
    id TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    messages BIGINT NOT NULL,
    usage TEXT NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- One row per message, in the reference's wire JSON (text, so the bytes stay as written).
CREATE TABLE pi_messages (
    session_id TEXT NOT NULL REFERENCES pi_sessions (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
