//! What krust's broker (`krust-server`) and client (`krust-client`) both know about SASL: the
//! mechanisms by Kafka's names, and SCRAM's hash functions and key derivation (RFC 5802,
//! RFC 7677). Each side's exchange stays with it.

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

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

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

/// A SASL mechanism krust speaks, by the name `sasl.enabled.mechanisms` and `sasl.mechanism`
/// use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Some(SaslMechanism::Scram(ScramMechanism::Sha256)),
            "SCRAM-SHA-512" => Some(SaslMechanism::Scram(ScramMechanism::Sha512)),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(scram) => scram.name(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_record_types_are_kafkas() {
        for name in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            assert_eq!(
                SaslMechanism::from_name(name).map(SaslMechanism::name),
                Some(name)
            );
        }
        assert_eq!(SaslMechanism::from_name("GSSAPI"), None);
        assert_eq!(ScramMechanism::from_type(1), Some(ScramMechanism::Sha256));
        assert_eq!(ScramMechanism::from_type(2), Some(ScramMechanism::Sha512));
        assert_eq!(ScramMechanism::from_type(0), None);
    }

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
}
