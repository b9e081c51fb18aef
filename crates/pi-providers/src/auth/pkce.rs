//! PKCE (RFC 7636, S256) as the reference makes it: a verifier of 32 random bytes in
//! unpadded base64url (43 characters) and the base64url SHA-256 of the verifier as challenge.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::Secret;

/// A verifier and its challenge.
#[derive(Clone)]
pub struct Pkce {
    /// The verifier, sent with the code exchange (also the Anthropic flow's `state`).
    pub verifier: Secret,
    /// The challenge, sent with the authorization URL.
    pub challenge: String,
}

impl fmt::Debug for Pkce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkce").field("verifier", &self.verifier).field("challenge", &self.challenge).finish()
    }
}

impl Pkce {
    /// A fresh pair from the system's secure random source.
    pub fn generate() -> Result<Self, String> {
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .map_err(|_| "no secure random source for the PKCE verifier".to_owned())?;
        Ok(Self::from_verifier(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The pair for a given verifier.
    pub fn from_verifier(verifier: String) -> Self {
        let challenge = challenge_of(&verifier);
        Self { verifier: Secret::new(verifier), challenge }
    }
}

/// The S256 challenge of `verifier`.
pub fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()))
}

/// `N` bytes from the system's secure random source.
fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| "no secure random source".to_owned())?;
    Ok(bytes)
}

/// 16 random bytes in hex (the Codex browser sign-in's `state`).
pub(crate) fn random_hex16() -> Result<String, String> {
    Ok(random_bytes::<16>()?.iter().map(|x| format!("{x:02x}")).collect())
}

/// 32 random bytes in unpadded base64url (the ChatGPT sign-in's `state` and `nonce`).
pub(crate) fn random_base64url32() -> Result<String, String> {
    Ok(URL_SAFE_NO_PAD.encode(random_bytes::<32>()?))
}

/// 16 random bytes as a UUID v4 text (OpenRouter's callback path, Radius' `state`).
pub(crate) fn random_uuid() -> Result<String, String> {
    let mut b = random_bytes::<16>()?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_is_rfc7636_s256() {
        // As node computes it: createHash("sha256").update(verifier).digest("base64url").
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r2wW1gFWFzWgIk"),
            "QUL-2bcy_5op3muZc7vSB-11IrChr4GsEbTbbPLN0pw"
        );
        let pkce = Pkce::generate().expect("random");
        assert_eq!(pkce.verifier.expose().len(), 43);
        assert_eq!(pkce.challenge, challenge_of(pkce.verifier.expose()));
        assert_eq!(random_uuid().expect("random").len(), 36);
    }
}
