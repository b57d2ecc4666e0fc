//! SASL as Kafka's clients run it (KIP-43, KIP-152): SaslHandshake names the mechanism, then
//! SaslAuthenticate requests carry its messages. Credentials come from `sasl.jaas.config`.

use super::SecurityConfigError;

pub use krust_sasl::SaslMechanism;

/// `sasl.mechanism`.
fn parse_mechanism(name: &str) -> Result<SaslMechanism, SecurityConfigError> {
    SaslMechanism::from_name(name.trim()).ok_or_else(|| {
        SecurityConfigError::new(
            "sasl.mechanism",
            format!(
                "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not {:?}",
                name.trim()
            ),
        )
    })
}

/// The mechanism and the user's name and password.
#[derive(Clone)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub(crate) password: String,
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

impl SaslCredentials {
    pub(super) fn from_properties<'a>(
        get: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, SecurityConfigError> {
        let mechanism = match get("sasl.mechanism") {
            Some(name) => parse_mechanism(name)?,
            None => {
                return Err(SecurityConfigError::new(
                    "sasl.mechanism",
                    "SASL needs PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 here (Kafka's default, \
                     GSSAPI, is not supported)",
                ))
            }
        };
        let jaas = get("sasl.jaas.config").ok_or_else(|| {
            SecurityConfigError::new(
                "sasl.jaas.config",
                format!(
                    "SASL needs the credentials, as in `{} required username=\"...\" \
                     password=\"...\";`",
                    match mechanism {
                        SaslMechanism::Plain => PLAIN_MODULE,
                        SaslMechanism::Scram(_) => SCRAM_MODULE,
                    }
                ),
            )
        })?;
        let invalid = |problem: String| SecurityConfigError::new("sasl.jaas.config", problem);
        let (module, options) = parse_jaas(jaas).map_err(invalid)?;
        if module != PLAIN_MODULE && module != SCRAM_MODULE {
            return Err(invalid(format!(
                "login module {module} is not supported (only {PLAIN_MODULE} and {SCRAM_MODULE})"
            )));
        }
        let option = |name: &str| {
            options
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
                .ok_or_else(|| invalid(format!("{module} needs the option {name}=\"...\"")))
        };
        Ok(Self {
            mechanism,
            username: option("username")?,
            password: option("password")?,
        })
    }
}

/// Parses a JAAS configuration entry with one login module, as Kafka's JaasConfig reads it:
/// `<module class> <control flag> key=value ... ;` with values in double quotes (backslash
/// escapes) or bare words.
fn parse_jaas(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let mut tokens = Vec::new();
    let mut chars = text.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '=' || c == ';' {
            tokens.push(c.to_string());
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut value = String::from("\"");
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => value.push(chars.next().ok_or("an unterminated quoted value")?),
                    Some(c) => value.push(c),
                    None => return Err("an unterminated quoted value".to_string()),
                }
            }
            tokens.push(value);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            tokens.push(word);
        }
    }
    let unquoted = |t: &str| t.strip_prefix('"').unwrap_or(t).to_string();
    let [module, flag, rest @ ..] = tokens.as_slice() else {
        return Err("expected `<login module> required key=\"value\" ... ;`".to_string());
    };
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!(
            "expected a control flag (required, requisite, sufficient, optional) after \
             {module}, not {flag:?}"
        ));
    }
    let Some((_, options)) = rest.split_last().filter(|(last, _)| *last == ";") else {
        return Err("the entry must end with ';'".to_string());
    };
    if options.len() % 3 != 0 || options.chunks(3).any(|o| o[1] != "=" || o[0] == ";") {
        return Err(
            "expected options as key=\"value\", and one login module (one ';')".to_string(),
        );
    }
    let options = options
        .chunks(3)
        .map(|o| (o[0].clone(), unquoted(&o[2])))
        .collect();
    Ok((module.clone(), options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(mechanism: &str, jaas: &str) -> Result<SaslCredentials, SecurityConfigError> {
        SaslCredentials::from_properties(&|key: &str| match key {
            "sasl.mechanism" => Some(mechanism),
            "sasl.jaas.config" => Some(jaas),
            _ => None,
        })
    }

    #[test]
    fn jaas_config_gives_the_user_and_password() {
        let scram = credentials(
            "SCRAM-SHA-512",
            "org.apache.kafka.common.security.scram.ScramLoginModule required\n  \
             username=\"carol\" password=\"p\\\"w;=d\";",
        )
        .unwrap();
        assert_eq!(scram.username, "carol");
        assert_eq!(scram.password, "p\"w;=d");
        let plain = credentials(
            "PLAIN",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=alice \
             password=\"alice-secret\";",
        )
        .unwrap();
        assert_eq!(
            (plain.username.as_str(), plain.password.as_str()),
            ("alice", "alice-secret")
        );
        assert!(!format!("{plain:?}").contains("alice-secret"));
    }

    #[test]
    fn bad_jaas_config_is_refused() {
        for jaas in [
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\";",
            "org.apache.kafka.common.security.scram.ScramLoginModule username=\"a\" password=\"b\";",
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b\"",
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
            "org.apache.kafka.common.security.scram.ScramLoginModule required password=\"b",
        ] {
            let error = credentials("SCRAM-SHA-256", jaas).unwrap_err();
            assert_eq!(error.key, "sasl.jaas.config", "{jaas}");
        }
        let error = credentials("GSSAPI", "x required;").unwrap_err();
        assert_eq!(error.key, "sasl.mechanism");
    }
}
