//! The server half of a SCRAM exchange (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs
//! it, against stored credentials (salt, stored key, server key, iterations; never the
//! password). Where credentials come from is the caller's business.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::digest;
use ring::rand::SecureRandom;

use super::plain::constant_time_eq;
use super::scram::{self, ScramCredential, ScramMechanism};

/// Every SCRAM failure, with Kafka's message: it does not tell a guesser which part was
/// wrong.
#[derive(Debug, thiserror::Error)]
#[error(
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
    .0.name()
)]
pub struct ScramAuthenticationFailed(pub ScramMechanism);

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
    /// An exchange waiting for the client's first message.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer::Started(mechanism)
    }

    /// Answers the client's next message; `credential` finds a user's stored credential.
    pub fn evaluate(
        &mut self,
        message: &[u8],
        credential: impl Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<ScramStep, ScramAuthenticationFailed> {
        match self {
            ScramServer::Started(mechanism) => {
                let mechanism = *mechanism;
                let failed = || ScramAuthenticationFailed(mechanism);
                let (user, client_nonce, client_first_bare) =
                    client_first(message).ok_or_else(failed)?;
                let credential = credential(&user, mechanism).ok_or_else(failed)?;
                let mut random = [0u8; 24];
                ring::rand::SystemRandom::new()
                    .fill(&mut random)
                    .map_err(|_| failed())?;
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
                let failed = || ScramAuthenticationFailed(mechanism);
                let text = std::str::from_utf8(message).map_err(|_| failed())?;
                let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(failed)?;
                let mut fields = without_proof.split(',');
                let channel_binding = fields.next().and_then(|f| f.strip_prefix("c="));
                let final_nonce = fields.next().and_then(|f| f.strip_prefix("r="));
                // gs2 header "n,," (no channel binding, no authzid) is what Kafka clients send.
                if channel_binding != Some("biws") || final_nonce != Some(nonce.as_str()) {
                    return Err(failed());
                }
                let proof = BASE64.decode(proof).map_err(|_| failed())?;
                let auth = scram::auth_message(client_first_bare, server_first, without_proof);
                let signature = scram::client_signature(mechanism, &credential.stored_key, &auth);
                if proof.len() != signature.as_ref().len() {
                    return Err(failed());
                }
                let client_key = scram::xor(&proof, signature.as_ref());
                let stored = digest::digest(mechanism.digest(), &client_key);
                if !constant_time_eq(stored.as_ref(), &credential.stored_key) {
                    return Err(failed());
                }
                let server_signature =
                    scram::server_signature(mechanism, &credential.server_key, &auth);
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
    let user = scram::unescape_name(fields.next()?.strip_prefix("n=")?)?;
    let nonce = fields.next()?.strip_prefix("r=")?;
    if fields.next().is_some() || nonce.is_empty() {
        return None;
    }
    if let Some(authzid) = authzid.strip_prefix("a=") {
        if scram::unescape_name(authzid)? != user {
            return None;
        }
    } else if !authzid.is_empty() {
        return None;
    }
    Some((user, nonce.to_string(), bare.to_string()))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;
    use crate::sasl::ScramClient;

    fn stored(mechanism: ScramMechanism, password: &str) -> ScramCredential {
        let iterations = NonZeroU32::new(4096).unwrap();
        ScramCredential::derive(mechanism, password, b"salt-of-alice", iterations)
    }

    /// The client and server halves of this crate run a whole exchange with each other.
    fn exchange(
        mechanism: ScramMechanism,
        login: &str,
        password: &str,
    ) -> Result<String, ScramAuthenticationFailed> {
        let alice = stored(mechanism, "alice-secret");
        let lookup = |user: &str, m: ScramMechanism| {
            (user == "alice" && m == mechanism).then(|| alice.clone())
        };
        let mut client = ScramClient::new(mechanism, login, password).unwrap();
        let mut server = ScramServer::new(mechanism);
        let ScramStep::Challenge(server_first) = server.evaluate(&client.first(), lookup)? else {
            panic!("expected a challenge");
        };
        let client_final = client.answer(&server_first).unwrap();
        let ScramStep::Done { user, server_final } = server.evaluate(&client_final, lookup)? else {
            panic!("expected the end");
        };
        client.verify(&server_final).unwrap();
        Ok(user)
    }

    #[test]
    fn the_right_password_authenticates_with_both_mechanisms() {
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            assert_eq!(
                exchange(mechanism, "alice", "alice-secret").unwrap(),
                "alice"
            );
        }
    }

    #[test]
    fn a_wrong_password_or_unknown_user_fails_with_kafkas_message() {
        let error = exchange(ScramMechanism::Sha512, "alice", "wrong").unwrap_err();
        assert!(error
            .to_string()
            .contains("invalid credentials with SASL mechanism SCRAM-SHA-512"));
        assert!(exchange(ScramMechanism::Sha256, "bob", "alice-secret").is_err());
    }

    #[test]
    fn malformed_first_messages_fail() {
        for message in [
            "",
            "n,,",
            "p=tls-unique,,n=alice,r=x",
            "n,,n=al=ice,r=x",
            "n,a=bob,n=alice,r=x",
            "n,,n=alice,r=x,tokenauth=true",
        ] {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let stored = stored(ScramMechanism::Sha256, "pw");
            assert!(
                server
                    .evaluate(message.as_bytes(), |_, _| Some(stored.clone()))
                    .is_err(),
                "{message}"
            );
        }
    }
}
