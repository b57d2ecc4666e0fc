//! SASL/PLAIN (RFC 4616, KIP-43): one message, `authzid NUL authcid NUL passwd`.

use thiserror::Error;

/// Why a PLAIN message is refused; the texts are Kafka's PlainSaslServer's.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlainError {
    #[error("Invalid SASL/PLAIN request: not UTF-8")]
    NotUtf8,
    #[error("Invalid SASL/PLAIN request: expected 3 tokens")]
    Tokens,
    #[error("Authentication failed: username not specified")]
    NoUsername,
    #[error("Authentication failed: password not specified")]
    NoPassword,
    #[error(
        "Authentication failed: Client requested an authorization id that is different from username"
    )]
    ForeignAuthorizationId,
}

/// The client's message: no authorization id, then the user and the password.
pub fn client_message(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// The username and password of a PLAIN message; an authorization id other than the
/// username is refused, as Kafka's PlainSaslServer does.
pub fn parse(token: &[u8]) -> Result<(String, String), PlainError> {
    let text = std::str::from_utf8(token).map_err(|_| PlainError::NotUtf8)?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, username, password] = parts[..] else {
        return Err(PlainError::Tokens);
    };
    if username.is_empty() {
        return Err(PlainError::NoUsername);
    }
    if password.is_empty() {
        return Err(PlainError::NoPassword);
    }
    if !authzid.is_empty() && authzid != username {
        return Err(PlainError::ForeignAuthorizationId);
    }
    Ok((username.to_string(), password.to_string()))
}

/// Compares without stopping at the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_message_parses_back() {
        assert_eq!(
            parse(&client_message("alice", "s3cret")),
            Ok(("alice".to_string(), "s3cret".to_string()))
        );
        assert_eq!(
            parse(b"alice\0alice\0pw"),
            Ok(("alice".to_string(), "pw".to_string()))
        );
    }

    #[test]
    fn malformed_or_impersonating_messages_are_refused() {
        assert_eq!(parse(b"\0alice"), Err(PlainError::Tokens));
        assert_eq!(parse(b"\0\0pw"), Err(PlainError::NoUsername));
        assert_eq!(parse(b"\0alice\0"), Err(PlainError::NoPassword));
        assert_eq!(
            parse(b"bob\0alice\0pw"),
            Err(PlainError::ForeignAuthorizationId)
        );
        assert_eq!(parse(b"\xff\0a\0b"), Err(PlainError::NotUtf8));
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac"));
    }
}
