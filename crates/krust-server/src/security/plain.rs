//! SASL/PLAIN (RFC 4616): one message, `authzid NUL authcid NUL passwd` (parsed by
//! krust-wire's mechanism), checked against the users of the listener's PlainLoginModule JAAS
//! config (`user_<name>="<password>"`).

use std::collections::HashMap;

use krust_wire::sasl::plain::{self, constant_time_eq};

use super::authentication::AuthenticationFailed;

/// Kafka's answer to any bad PLAIN credentials; it does not say which part was wrong.
const INVALID: &str = "Authentication failed: Invalid username or password";

/// The user a PLAIN message authenticates, or why it does not.
pub fn authenticate(
    token: &[u8],
    users: &HashMap<String, String>,
) -> Result<String, AuthenticationFailed> {
    let (username, password) = parse(token)?;
    match users.get(&username) {
        Some(expected) if constant_time_eq(expected.as_bytes(), password.as_bytes()) => {
            Ok(username)
        }
        _ => Err(AuthenticationFailed(INVALID.into())),
    }
}

/// The username and password of a PLAIN message (krust-wire's parser, the one copy the
/// client side uses too), with Kafka's message when it is malformed.
pub fn parse(token: &[u8]) -> Result<(String, String), AuthenticationFailed> {
    plain::parse(token).map_err(|e| AuthenticationFailed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> HashMap<String, String> {
        HashMap::from([("alice".to_string(), "alice-secret".to_string())])
    }

    #[test]
    fn the_right_password_authenticates_the_user() {
        assert_eq!(
            authenticate(b"\0alice\0alice-secret", &users()).unwrap(),
            "alice"
        );
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", &users()).unwrap(),
            "alice"
        );
    }

    #[test]
    fn wrong_unknown_malformed_or_impersonating_messages_fail() {
        for token in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0alice-secret",
            b"\0alice",
            b"\0alice\0alice-secret\0x",
            b"bob\0alice\0alice-secret",
            b"\0\0alice-secret",
            b"\xff\0alice\0alice-secret",
        ] {
            assert!(authenticate(token, &users()).is_err(), "{token:?}");
        }
    }
}
