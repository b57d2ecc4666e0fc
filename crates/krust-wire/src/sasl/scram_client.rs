//! The client half of a SCRAM exchange (RFC 5802, RFC 7677) as Kafka's ScramSaslClient runs
//! it: no channel binding, no authorization id, and the server's signature checked before the
//! exchange counts as done.

use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::hmac;
use ring::rand::SecureRandom;

use super::scram::{self, ScramKeys, ScramMechanism};

/// Kafka's clients refuse fewer iterations than this (ScramMechanism.minIterations): a broker
/// that asks for fewer may be trying to weaken the password's protection.
const MIN_ITERATIONS: u32 = 4096;

/// Why an exchange stopped on the client's side.
#[derive(Debug, thiserror::Error)]
pub enum ScramClientError {
    #[error("the server's first message is malformed: {0:?}")]
    MalformedServerFirst(String),
    #[error("the server's nonce does not extend the client's")]
    NonceMismatch,
    #[error("the server asks for {0} iterations, fewer than the minimum {MIN_ITERATIONS}")]
    TooFewIterations(u32),
    #[error("the server's final message is malformed: {0:?}")]
    MalformedServerFinal(String),
    #[error("the server answered with an error: {0}")]
    ServerError(String),
    #[error("the server's signature is wrong: it does not know this user's credentials")]
    BadServerSignature,
    #[error("no random nonce could be made")]
    Random,
}

/// A client exchange: [`ScramClient::first`], then [`ScramClient::answer`] to the server's
/// first message, then [`ScramClient::verify`] of its final one.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// The AuthMessage and ServerKey once the client's final message is made.
    expected: Option<(String, Vec<u8>)>,
}

impl ScramClient {
    /// An exchange for `user` with a fresh random nonce.
    pub fn new(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<Self, ScramClientError> {
        let mut random = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut random)
            .map_err(|_| ScramClientError::Random)?;
        Ok(Self::with_nonce(
            mechanism,
            user,
            password,
            &BASE64.encode(random),
        ))
    }

    fn with_nonce(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> Self {
        Self {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={},r={nonce}", scram::escape_name(user)),
            nonce: nonce.to_string(),
            expected: None,
        }
    }

    /// client-first-message (gs2 header "n,,": no channel binding, no authorization id).
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// client-final-message for the server-first-message `server_first`.
    pub fn answer(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramClientError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| ScramClientError::MalformedServerFirst(format!("{server_first:?}")))?;
        let malformed = || ScramClientError::MalformedServerFirst(text.to_string());
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramClientError::ServerError(error.to_string()));
        }
        let field = |name: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(malformed)
        };
        let nonce = field("r=")?;
        let salt = BASE64.decode(field("s=")?).map_err(|_| malformed())?;
        let iterations: u32 = field("i=")?.parse().map_err(|_| malformed())?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramClientError::NonceMismatch);
        }
        let iterations = NonZeroU32::new(iterations)
            .filter(|i| i.get() >= MIN_ITERATIONS)
            .ok_or(ScramClientError::TooFewIterations(iterations))?;
        let keys = ScramKeys::derive(self.mechanism, &self.password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = scram::auth_message(&self.client_first_bare, text, &without_proof);
        let signature = scram::client_signature(self.mechanism, &keys.stored_key, &auth);
        let proof = scram::xor(&keys.client_key, signature.as_ref());
        self.expected = Some((auth, keys.server_key));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final-message: the server proves it holds this user's server key.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramClientError> {
        let text = String::from_utf8_lossy(server_final);
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramClientError::ServerError(error.to_string()));
        }
        let (Some(signature), Some((auth, server_key))) = (
            text.split(',')
                .find_map(|f| f.strip_prefix("v="))
                .and_then(|v| BASE64.decode(v).ok()),
            &self.expected,
        ) else {
            return Err(ScramClientError::MalformedServerFinal(text.into_owned()));
        };
        hmac::verify(
            &hmac::Key::new(self.mechanism.hmac(), server_key),
            auth.as_bytes(),
            &signature,
        )
        .map_err(|_| ScramClientError::BadServerSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: the SCRAM-SHA-256 example exchange (user "user", password
    /// "pencil"), with the client nonce the RFC uses.
    #[test]
    fn the_rfc_7677_example_exchange() {
        let mut client = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(client.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_message = client.answer(server_first).unwrap();
        assert_eq!(
            String::from_utf8(final_message).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(matches!(
            client.verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramClientError::BadServerSignature)
        ));
    }

    #[test]
    fn a_weakened_or_foreign_server_first_message_is_refused() {
        let mut client = ScramClient::new(ScramMechanism::Sha512, "a,b=c", "pw").unwrap();
        assert!(String::from_utf8(client.first())
            .unwrap()
            .starts_with("n,,n=a=2Cb=3Dc,r="));
        let nonce = client.nonce.clone();
        let few = format!("r={nonce}x,s=c2FsdA==,i=1000");
        assert!(matches!(
            client.answer(few.as_bytes()),
            Err(ScramClientError::TooFewIterations(1000))
        ));
        assert!(matches!(
            client.answer(b"r=other,s=c2FsdA==,i=4096"),
            Err(ScramClientError::NonceMismatch)
        ));
        assert!(matches!(
            client.answer(b"e=unknown-user"),
            Err(ScramClientError::ServerError(_))
        ));
        // No final message is trusted before the client sent its proof.
        assert!(client.verify(b"v=AAAA").is_err());
    }
}
