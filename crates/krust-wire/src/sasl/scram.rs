//! What both sides of a SCRAM exchange compute (RFC 5802, RFC 7677; Kafka's KIP-84): the
//! hash functions of a mechanism, the keys derived from a password, the signatures over the
//! AuthMessage and the escaping of user names.

use std::num::NonZeroU32;

use ring::{digest, hmac, pbkdf2};

/// A SCRAM mechanism, numbered as Kafka's `ScramMechanism` types in metadata records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The mechanism of a UserScramCredentialRecord's `mechanism` byte.
    pub fn from_type(mechanism: i8) -> Option<Self> {
        match mechanism {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's name of the mechanism.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The HMAC of the mechanism's hash.
    pub fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    /// The mechanism's hash.
    pub fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }
}

/// The keys RFC 5802 derives from a password: what a client proves it knows, and what a
/// broker stores (stored key and server key; never the password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramKeys {
    pub client_key: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    /// SaltedPassword = PBKDF2(password, salt, iterations); ClientKey = HMAC(SaltedPassword,
    /// "Client Key"); StoredKey = H(ClientKey); ServerKey = HMAC(SaltedPassword, "Server Key").
    pub fn derive(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: NonZeroU32,
    ) -> Self {
        let mut salted = vec![0u8; mechanism.digest().output_len()];
        pbkdf2::derive(
            mechanism.pbkdf2(),
            iterations,
            salt,
            password.as_bytes(),
            &mut salted,
        );
        let key = hmac::Key::new(mechanism.hmac(), &salted);
        let client_key = hmac::sign(&key, b"Client Key").as_ref().to_vec();
        let stored_key = digest::digest(mechanism.digest(), &client_key)
            .as_ref()
            .to_vec();
        let server_key = hmac::sign(&key, b"Server Key").as_ref().to_vec();
        ScramKeys {
            client_key,
            stored_key,
            server_key,
        }
    }
}

/// One user's credential for one mechanism, as a broker stores it (Kafka's
/// `ScramCredential`, from a UserScramCredentialRecord).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// What a broker stores for `password` with `salt` and `iterations`.
    pub fn derive(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: NonZeroU32,
    ) -> Self {
        let keys = ScramKeys::derive(mechanism, password, salt, iterations);
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: keys.stored_key,
            server_key: keys.server_key,
            iterations: i32::try_from(iterations.get()).unwrap_or(i32::MAX),
        }
    }
}

/// AuthMessage = client-first-message-bare "," server-first-message ","
/// client-final-message-without-proof.
pub fn auth_message(client_first_bare: &str, server_first: &str, without_proof: &str) -> String {
    format!("{client_first_bare},{server_first},{without_proof}")
}

/// ClientSignature = HMAC(StoredKey, AuthMessage).
pub fn client_signature(mechanism: ScramMechanism, stored_key: &[u8], auth: &str) -> hmac::Tag {
    hmac::sign(
        &hmac::Key::new(mechanism.hmac(), stored_key),
        auth.as_bytes(),
    )
}

/// ServerSignature = HMAC(ServerKey, AuthMessage).
pub fn server_signature(mechanism: ScramMechanism, server_key: &[u8], auth: &str) -> hmac::Tag {
    hmac::sign(
        &hmac::Key::new(mechanism.hmac(), server_key),
        auth.as_bytes(),
    )
}

/// XOR of two equally long byte strings (ClientProof from ClientKey and back).
pub fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// RFC 5802 saslname: ',' is sent as `=2C` and '=' as `=3D`.
pub fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The inverse of [`escape_name`]; any other '=' (or an empty name) is malformed.
pub fn unescape_name(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(index) = rest.find('=') {
        out.push_str(&rest[..index]);
        match rest.get(index..index + 3)? {
            "=2C" => out.push(','),
            "=3D" => out.push('='),
            _ => return None,
        }
        rest = &rest[index + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sized_by_the_mechanisms_hash() {
        let iterations = NonZeroU32::new(4096).unwrap();
        let short = ScramKeys::derive(ScramMechanism::Sha256, "pw", b"salt", iterations);
        let long = ScramKeys::derive(ScramMechanism::Sha512, "pw", b"salt", iterations);
        assert_eq!(short.stored_key.len(), 32);
        assert_eq!(long.server_key.len(), 64);
        assert_ne!(
            short,
            ScramKeys::derive(ScramMechanism::Sha256, "other", b"salt", iterations)
        );
    }

    #[test]
    fn names_escape_and_unescape() {
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(unescape_name("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(unescape_name("al=ice"), None);
        assert_eq!(unescape_name(""), None);
    }
}
