//! The principal of a TLS client certificate, as Kafka's default principal builder makes it:
//! the subject written as Java's `X500Principal.getName()` (RFC 2253: last RDN first), passed
//! through `ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper`, KIP-371).

use regex::Regex;
use x509_parser::asn1_rs::ToDer;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

use super::SecurityConfigError;

const KEY: &str = "ssl.principal.mapping.rules";

/// One rule: DEFAULT (the name unchanged) or RULE:pattern/replacement/[LU].
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<Case>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Lower,
    Upper,
}

/// `ssl.principal.mapping.rules`: the first rule that matches the whole subject names the
/// principal; a subject no rule matches cannot authenticate (as in Kafka).
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PrincipalMapper {
    pub fn parse(text: &str) -> Result<Self, SecurityConfigError> {
        let invalid = |problem: String| SecurityConfigError::Invalid { key: KEY, problem };
        let mut rules = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after).ok_or_else(|| {
                    invalid(format!("{rest:?}: expected RULE:pattern/replacement/[LU]"))
                })?;
                let (replacement, after) = until_slash(after).ok_or_else(|| {
                    invalid(format!("{rest:?}: expected RULE:pattern/replacement/[LU]"))
                })?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Some(Case::Lower), &after[1..]),
                    Some('U') => (Some(Case::Upper), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|error| invalid(format!("bad pattern {pattern:?}: {error}")))?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = after;
            } else {
                return Err(invalid(format!("{rest:?}: expected DEFAULT or RULE:")));
            }
            rest = rest.trim_start();
            match rest.chars().next() {
                None => {}
                Some(',') => rest = rest[1..].trim_start(),
                Some(_) => return Err(invalid(format!("{rest:?}: rules are separated by commas"))),
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal name of `subject`, or None when no rule matches it.
    pub fn map(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(subject.to_string()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => pattern.is_match(subject).then(|| {
                let name = pattern.replace(subject, replacement.as_str()).into_owned();
                match case {
                    Some(Case::Lower) => name.to_lowercase(),
                    Some(Case::Upper) => name.to_uppercase(),
                    None => name,
                }
            }),
        })
    }
}

/// Text up to the next unescaped '/', with `\/` unescaped, and what follows the slash.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '\\' if text[index + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[index + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` group references as the regex crate's `${1}` (so `$1x` stays group 1).
fn java_replacement(replacement: &str) -> String {
    let group = Regex::new(r"\$(\d+)").expect("a constant pattern");
    group.replace_all(replacement, "$${$1}").into_owned()
}

/// Why a client certificate has no subject the broker can read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the client certificate: {0}")]
pub struct CertificateError(String);

/// The subject of a DER certificate as Java's `X500Principal.getName()` writes it.
pub fn certificate_subject(der: &[u8]) -> Result<String, CertificateError> {
    let (_, certificate) =
        X509Certificate::from_der(der).map_err(|error| CertificateError(error.to_string()))?;
    Ok(rfc2253(certificate.subject()))
}

fn rfc2253(name: &X509Name<'_>) -> String {
    let mut rdns: Vec<String> = name
        .iter()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    rdns.reverse();
    rdns.join(",")
}

fn attribute(attribute: &AttributeTypeAndValue<'_>) -> String {
    let oid = attribute.attr_type().to_id_string();
    let keyword = match oid.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    match (keyword, attribute.as_str()) {
        (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
        // Java writes other attributes as the dotted OID and the value's DER in hex.
        _ => {
            let hex: String = attribute
                .attr_value()
                .to_der_vec()
                .unwrap_or_default()
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            format!("{oid}=#{hex}")
        }
    }
}

/// RFC 2253 escaping: special characters, and a leading '#' or space or a trailing space.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (index, c) in value.chars().enumerate() {
        let edge_space = c == ' ' && (index == 0 || index == last);
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || edge_space
            || (c == '#' && index == 0)
        {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBJECT: &str = "CN=alice,OU=Eng,O=Acme,C=US";

    #[test]
    fn default_keeps_the_whole_subject() {
        let mapper = PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(mapper.map(SUBJECT).as_deref(), Some(SUBJECT));
    }

    #[test]
    fn the_first_matching_rule_names_the_principal() {
        let mapper = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=Ops.*$/ops-$1/, RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L, DEFAULT",
        )
        .unwrap();
        assert_eq!(mapper.map(SUBJECT).as_deref(), Some("alice@eng"));
        assert_eq!(
            mapper.map("CN=bob,OU=Ops,O=Acme").as_deref(),
            Some("ops-bob")
        );
        assert_eq!(mapper.map("O=Other").as_deref(), Some("O=Other"));
    }

    #[test]
    fn a_subject_no_rule_matches_has_no_principal() {
        let mapper = PrincipalMapper::parse("RULE:^CN=(.*?),.*$/$1/U").unwrap();
        assert_eq!(mapper.map(SUBJECT).as_deref(), Some("ALICE"));
        assert_eq!(mapper.map("O=Acme"), None);
    }

    #[test]
    fn escaped_slashes_and_bad_rules() {
        let mapper = PrincipalMapper::parse(r"RULE:^CN=([^,]*).*$/a\/$1/").unwrap();
        assert_eq!(mapper.map(SUBJECT).as_deref(), Some("a/alice"));
        for bad in ["RULE:^CN=.*", "DEFAULTS", "RULE:(/x/", "DEFAULT DEFAULT"] {
            let error = PrincipalMapper::parse(bad).unwrap_err().to_string();
            assert!(error.starts_with(KEY), "{bad}: {error}");
        }
    }

    #[test]
    fn special_characters_are_escaped_as_java_does() {
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
        assert_eq!(escape("#x "), r"\#x\ ");
    }
}
