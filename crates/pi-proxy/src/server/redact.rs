//! Keeping the server's credentials out of everything it sends a client: the matcher is
//! pi-providers' ([`pi_providers::transport::redact`]), the one the adapters clean their error
//! texts with. Every line the server sends is checked against each credential it knows (see
//! [`super::Redaction`]) in every spelling and fragment, and `Bearer` tokens in error texts are
//! redacted whatever they are.

pub(crate) use pi_providers::transport::redact::Redactor;
