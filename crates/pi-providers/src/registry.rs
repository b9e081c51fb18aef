//! placeholder
/// stub
pub struct Models;
/// stub
pub struct Provider;
/// stub
pub struct Auth;
/// stub
pub struct ProviderError;
/// stub
pub fn env_api_key() {}
