//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the broker: the exchange is
//! krust-wire's `ScramServer` (the one copy of the mechanism), run against the credentials
//! from the metadata log (Kafka's UserScramCredentialRecord: salt, stored key, server key and
//! iterations; never the password) kept here.

use std::collections::HashMap;

use parking_lot::RwLock;

pub use krust_wire::sasl::{ScramCredential, ScramMechanism, ScramServer, ScramStep};

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

    /// `user`'s credential for `mechanism`, if it has one.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.by_user
            .read()
            .get(&(user.to_string(), mechanism))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use krust_wire::sasl::ScramClient;

    use super::*;

    /// A whole exchange of krust-wire's client with the broker's credentials.
    fn authenticate(credentials: &ScramCredentials, password: &str) -> bool {
        let mechanism = ScramMechanism::Sha256;
        let mut client = ScramClient::new(mechanism, "alice", password).unwrap();
        let mut server = ScramServer::new(mechanism);
        let lookup = |user: &str, m| credentials.get(user, m);
        let Ok(ScramStep::Challenge(first)) = server.evaluate(&client.first(), lookup) else {
            return false;
        };
        let last = client.answer(&first).unwrap();
        matches!(server.evaluate(&last, lookup), Ok(ScramStep::Done { user, .. }) if user == "alice")
    }

    #[test]
    fn replaced_credentials_take_effect_at_once() {
        let iterations = NonZeroU32::new(4096).unwrap();
        let credentials = ScramCredentials::default();
        assert!(!authenticate(&credentials, "one"));
        for password in ["one", "two"] {
            let credential =
                ScramCredential::derive(ScramMechanism::Sha256, password, b"salt", iterations);
            credentials.replace_all(HashMap::from([(
                ("alice".to_string(), ScramMechanism::Sha256),
                credential,
            )]));
            assert!(authenticate(&credentials, password));
        }
        assert!(!authenticate(&credentials, "one"));
    }
}
