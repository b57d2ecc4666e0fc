//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer does
//! it, against credentials from the metadata log (Kafka's UserScramCredentialRecord: salt,
//! stored key, server key and iterations; never the password).

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use parking_lot::RwLock;
use ring::rand::SecureRandom;
use ring::{digest, hmac};

use super::authentication::{constant_time_eq, AuthenticationFailed};

pub use krust_sasl::ScramMechanism;

/// One user's credential for one mechanism (Kafka's `ScramCredential`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// The SCRAM credentials of every user, as the metadata image holds them.
#[derive(Debug, Default)]
pub struct ScramCredentials {
    by_user: RwLock<HashMap<(String, ScramMechanism), ScramCredential>>,
}

impl ScramCredentials {
    /// Replaces every credential (the controller passes the image's whole set).
    pub fn replace_all(&self, credentials: HashMap<(String, ScramMechanism), ScramCredential>) {
        *self.by_user.write() = credentials;
    }

    fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.by_user
            .read()
            .get(&(user.to_string(), mechanism))
            .cloned()
    }
}

/// Kafka's message for every SCRAM failure: it does not tell a guesser which part was wrong.
fn failed(mechanism: ScramMechanism) -> AuthenticationFailed {
    AuthenticationFailed(format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        mechanism.name()
    ))
}

/// Where a SCRAM exchange is.
#[derive(Debug)]
pub enum ScramServer {
    /// Waiting for client-first-message.
    Started(ScramMechanism),
    /// Sent server-first-message; waiting for client-final-message.
    Challenged {
        mechanism: ScramMechanism,
        user: String,
        credential: Box<ScramCredential>,
        nonce: String,
        client_first_bare: String,
        server_first: String,
    },
}

/// The answer to one client message.
pub enum ScramStep {
    Challenge(Vec<u8>),
    /// Authenticated `user`; the final server message.
    Done {
        user: String,
        server_final: Vec<u8>,
    },
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer::Started(mechanism)
    }

    pub fn evaluate(
        &mut self,
        message: &[u8],
        credentials: &ScramCredentials,
    ) -> Result<ScramStep, AuthenticationFailed> {
        match self {
            ScramServer::Started(mechanism) => {
                let mechanism = *mechanism;
                let (user, client_nonce, client_first_bare) =
                    client_first(message).ok_or_else(|| failed(mechanism))?;
                let credential = credentials
                    .get(&user, mechanism)
                    .ok_or_else(|| failed(mechanism))?;
                let mut random = [0u8; 24];
                ring::rand::SystemRandom::new()
                    .fill(&mut random)
                    .map_err(|_| failed(mechanism))?;
                let nonce = format!("{client_nonce}{}", BASE64.encode(random));
                let server_first = format!(
                    "r={nonce},s={},i={}",
                    BASE64.encode(&credential.salt),
                    credential.iterations
                );
                let challenge = server_first.clone().into_bytes();
                *self = ScramServer::Challenged {
                    mechanism,
                    user,
                    credential: Box::new(credential),
                    nonce,
                    client_first_bare,
                    server_first,
                };
                Ok(ScramStep::Challenge(challenge))
            }
            ScramServer::Challenged {
                mechanism,
                user,
                credential,
                nonce,
                client_first_bare,
                server_first,
            } => {
                let mechanism = *mechanism;
                let text = std::str::from_utf8(message).map_err(|_| failed(mechanism))?;
                let (without_proof, proof) =
                    text.rsplit_once(",p=").ok_or_else(|| failed(mechanism))?;
                let mut fields = without_proof.split(',');
                let channel_binding = fields.next().and_then(|f| f.strip_prefix("c="));
                let final_nonce = fields.next().and_then(|f| f.strip_prefix("r="));
                // gs2 header "n,," (no channel binding, no authzid) is what Kafka clients send.
                if channel_binding != Some("biws") || final_nonce != Some(nonce.as_str()) {
                    return Err(failed(mechanism));
                }
                let proof = BASE64.decode(proof).map_err(|_| failed(mechanism))?;
                let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
                let client_signature = hmac::sign(
                    &hmac::Key::new(mechanism.hmac(), &credential.stored_key),
                    auth_message.as_bytes(),
                );
                if proof.len() != client_signature.as_ref().len() {
                    return Err(failed(mechanism));
                }
                let client_key: Vec<u8> = proof
                    .iter()
                    .zip(client_signature.as_ref())
                    .map(|(p, s)| p ^ s)
                    .collect();
                let stored = digest::digest(mechanism.digest(), &client_key);
                if !constant_time_eq(stored.as_ref(), &credential.stored_key) {
                    return Err(failed(mechanism));
                }
                let server_signature = hmac::sign(
                    &hmac::Key::new(mechanism.hmac(), &credential.server_key),
                    auth_message.as_bytes(),
                );
                Ok(ScramStep::Done {
                    user: std::mem::take(user),
                    server_final: format!("v={}", BASE64.encode(server_signature.as_ref()))
                        .into_bytes(),
                })
            }
        }
    }
}

/// The user, client nonce and client-first-message-bare of a client-first-message. Channel
/// binding, an authorization id other than the user and extensions (delegation tokens) are
/// not supported.
fn client_first(message: &[u8]) -> Option<(String, String, String)> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text
        .strip_prefix("n,")
        .or_else(|| text.strip_prefix("y,"))?;
    let (authzid, bare) = rest.split_once(',')?;
    let mut fields = bare.split(',');
    let user = unescape_name(fields.next()?.strip_prefix("n=")?)?;
    let nonce = fields.next()?.strip_prefix("r=")?;
    if fields.next().is_some() || nonce.is_empty() {
        return None;
    }
    if let Some(authzid) = authzid.strip_prefix("a=") {
        if unescape_name(authzid)? != user {
            return None;
        }
    } else if !authzid.is_empty() {
        return None;
    }
    Some((user, nonce.to_string(), bare.to_string()))
}

/// RFC 5802 saslname: `=2C` is ',' and `=3D` is '='; any other '=' is malformed.
fn unescape_name(name: &str) -> Option<String> {
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

    /// What the controller stores for `password` (RFC 5802 key derivation, 4096 iterations).
    fn credential(mechanism: ScramMechanism, password: &str) -> (ScramCredential, Vec<u8>) {
        let salt = b"salt-of-alice".to_vec();
        let iterations = std::num::NonZeroU32::new(4096).unwrap();
        let keys = krust_sasl::ScramKeys::derive(mechanism, password, &salt, iterations);
        let (client_key, stored_key, server_key) =
            (keys.client_key, keys.stored_key, keys.server_key);
        let credential = ScramCredential {
            salt,
            stored_key,
            server_key,
            iterations: 4096,
        };
        (credential, client_key)
    }

    /// Runs a full exchange as a client with `client_key` would, answering the final message.
    fn exchange(
        mechanism: ScramMechanism,
        login: &str,
        client_key: &[u8],
    ) -> Result<ScramStep, AuthenticationFailed> {
        let (stored, _) = credential(mechanism, "alice-secret");
        let credentials = ScramCredentials::default();
        credentials.replace_all(HashMap::from([(
            ("alice".to_string(), mechanism),
            stored.clone(),
        )]));
        let mut server = ScramServer::new(mechanism);
        let first_bare = format!("n={login},r=clientnonce");
        let ScramStep::Challenge(server_first) =
            server.evaluate(format!("n,,{first_bare}").as_bytes(), &credentials)?
        else {
            panic!("expected a challenge");
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = server_first
            .split(',')
            .next()
            .unwrap()
            .strip_prefix("r=")
            .unwrap();
        assert!(nonce.starts_with("clientnonce"));
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{first_bare},{server_first},{without_proof}");
        let stored_key = digest::digest(mechanism.digest(), client_key);
        let signature = hmac::sign(
            &hmac::Key::new(mechanism.hmac(), stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        server.evaluate(
            format!("{without_proof},p={}", BASE64.encode(proof)).as_bytes(),
            &credentials,
        )
    }

    #[test]
    fn the_right_password_authenticates_with_both_mechanisms() {
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let (stored, client_key) = credential(mechanism, "alice-secret");
            let Ok(ScramStep::Done { user, server_final }) =
                exchange(mechanism, "alice", &client_key)
            else {
                panic!("{mechanism:?} did not authenticate");
            };
            assert_eq!(user, "alice");
            assert!(String::from_utf8(server_final).unwrap().starts_with("v="));
            assert_eq!(stored.iterations, 4096);
        }
    }

    #[test]
    fn a_wrong_password_or_unknown_user_fails() {
        let (_, wrong) = credential(ScramMechanism::Sha512, "not-the-password");
        let error = exchange(ScramMechanism::Sha512, "alice", &wrong)
            .err()
            .unwrap();
        assert!(error
            .0
            .contains("invalid credentials with SASL mechanism SCRAM-SHA-512"));
        let (_, right) = credential(ScramMechanism::Sha512, "alice-secret");
        assert!(exchange(ScramMechanism::Sha512, "bob", &right).is_err());
    }

    #[test]
    fn malformed_first_messages_fail() {
        let credentials = ScramCredentials::default();
        for message in [
            "",
            "n,,",
            "p=tls-unique,,n=alice,r=x",
            "n,,n=al=ice,r=x",
            "n,a=bob,n=alice,r=x",
            "n,,n=alice,r=x,tokenauth=true",
        ] {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            assert!(
                server.evaluate(message.as_bytes(), &credentials).is_err(),
                "{message}"
            );
        }
        assert_eq!(unescape_name("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    }
}
