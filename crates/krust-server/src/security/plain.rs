//! SASL/PLAIN (RFC 4616): one message, `authzid NUL authcid NUL passwd`, checked against the
//! users of the listener's PlainLoginModule JAAS config (`user_<name>="<password>"`).

use std::collections::HashMap;

use super::authentication::{constant_time_eq, AuthenticationFailed};

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

/// The username and password of a PLAIN message; an authorization id other than the
/// username is refused, as Kafka's PlainSaslServer does.
pub fn parse(token: &[u8]) -> Result<(String, String), AuthenticationFailed> {
    let text = std::str::from_utf8(token)
        .map_err(|_| AuthenticationFailed("Invalid SASL/PLAIN request: not UTF-8".into()))?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, username, password] = parts[..] else {
        return Err(AuthenticationFailed(
            "Invalid SASL/PLAIN request: expected 3 tokens".into(),
        ));
    };
    if username.is_empty() {
        return Err(AuthenticationFailed(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(AuthenticationFailed(
            "Authentication failed: password not specified".into(),
        ));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok((username.to_string(), password.to_string()))
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
