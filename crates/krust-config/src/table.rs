//! The config table's rows: `python/krust/config_keys.toml`, embedded at compile time so that the
//! core and the Python config layer read the same names, types, defaults and bounds.

use std::sync::LazyLock;

use serde::Deserialize;
use thiserror::Error;

/// The table's text, as the Python package ships it.
pub const CONFIG_TABLE: &str = include_str!("../../../python/krust/config_keys.toml");

/// Kafka's ConfigDef types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ConfigType {
    Boolean,
    Short,
    Int,
    Long,
    Double,
    String,
    List,
    /// A STRING that is never described (a key, a JAAS config); only broker keys have it.
    Password,
}

/// A bound as the table writes it: a whole number, or a fraction for DOUBLE keys.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Bound {
    Whole(i64),
    Fraction(f64),
}

impl Bound {
    fn as_f64(self) -> f64 {
        match self {
            Bound::Whole(value) => value as f64,
            Bound::Fraction(value) => value,
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Whole(value) => write!(f, "{value}"),
            Bound::Fraction(value) => write!(f, "{value}"),
        }
    }
}

/// One row of the table (the fields are described at the top of the TOML file).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigKey {
    pub name: String,
    #[serde(rename = "type")]
    pub config_type: ConfigType,
    pub default: Option<String>,
    pub min: Option<Bound>,
    pub max: Option<Bound>,
    #[serde(default)]
    pub choices: Vec<String>,
    /// A check only the Python layer runs; the core never reads such a key.
    pub check: Option<String>,
    pub kafka_min: Option<Bound>,
    pub why: Option<String>,
    pub dynamic: Option<String>,
    #[serde(default)]
    pub synonyms: Vec<String>,
    #[serde(default)]
    pub internal: bool,
    /// The test that shows the key acts (docs/config.md, "No setting is silently ignored").
    pub honoured_by: Option<String>,
    /// Why only the default is accepted; the Python layer refuses any other value.
    pub refused: Option<String>,
    pub doc: String,
}

/// The whole table: broker keys and topic keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigTable {
    pub broker: Vec<ConfigKey>,
    pub topic: Vec<ConfigKey>,
    /// Kafka 4's group configs (GroupConfig); only the Python layer serves them.
    pub group: Vec<ConfigKey>,
    /// Kafka's client metrics subscription configs (ClientMetricsConfigs, KIP-714); only the
    /// Python layer serves them.
    pub client_metrics: Vec<ConfigKey>,
}

/// A config value the table refuses; names the key as Kafka's InvalidConfigurationException does.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigValueError {
    #[error("unknown topic config name: {0}")]
    UnknownKey(String),
    #[error("unknown broker config name: {0}")]
    UnknownBrokerKey(String),
    #[error("invalid value {value} for configuration {key}: {problem}")]
    Invalid {
        key: String,
        value: String,
        problem: String,
    },
}

static TABLE: LazyLock<ConfigTable> = LazyLock::new(|| {
    // The file is part of the build and a unit test parses it: a failure here is a build defect.
    toml::from_str(CONFIG_TABLE).expect("config_keys.toml is a valid config table")
});

/// The parsed table.
pub fn table() -> &'static ConfigTable {
    &TABLE
}

/// The broker key called `name`.
pub fn broker_key(name: &str) -> Result<&'static ConfigKey, ConfigValueError> {
    find(&TABLE.broker, name).ok_or_else(|| ConfigValueError::UnknownBrokerKey(name.to_string()))
}

/// The topic key called `name`.
pub fn topic_key(name: &str) -> Result<&'static ConfigKey, ConfigValueError> {
    find(&TABLE.topic, name).ok_or_else(|| ConfigValueError::UnknownKey(name.to_string()))
}

fn find<'a>(keys: &'a [ConfigKey], name: &str) -> Option<&'a ConfigKey> {
    keys.iter().find(|key| key.name == name)
}

impl ConfigKey {
    pub(crate) fn invalid(
        &self,
        value: impl ToString,
        problem: impl Into<String>,
    ) -> ConfigValueError {
        ConfigValueError::Invalid {
            key: self.name.clone(),
            value: value.to_string(),
            problem: problem.into(),
        }
    }

    /// Parses `raw` as this key's integer type and checks the bounds.
    pub fn parse_int(&self, raw: &str) -> Result<i64, ConfigValueError> {
        let text = raw.trim();
        let (low, high) = match self.config_type {
            ConfigType::Short => (i64::from(i16::MIN), i64::from(i16::MAX)),
            ConfigType::Int => (i64::from(i32::MIN), i64::from(i32::MAX)),
            ConfigType::Long => (i64::MIN, i64::MAX),
            other => return Err(self.invalid(raw, format!("{other:?} is not an integer type"))),
        };
        let value = text
            .parse::<i64>()
            .ok()
            .filter(|value| (low..=high).contains(value))
            .ok_or_else(|| {
                self.invalid(raw, format!("not a number of type {:?}", self.config_type))
            })?;
        self.check_bounds(value)
    }

    /// Checks a number against the key's bounds.
    pub fn check_bounds(&self, value: i64) -> Result<i64, ConfigValueError> {
        let as_float = value as f64;
        match (self.min, self.max) {
            (Some(low), Some(high)) if !(low.as_f64()..=high.as_f64()).contains(&as_float) => {
                Err(self.invalid(value, format!("value must be in [{low}, {high}]")))
            }
            (Some(low), _) if as_float < low.as_f64() => {
                Err(self.invalid(value, format!("value must be at least {low}")))
            }
            (_, Some(high)) if as_float > high.as_f64() => {
                Err(self.invalid(value, format!("value must be at most {high}")))
            }
            _ => Ok(value),
        }
    }

    /// Checks `raw` against the key's choices.
    pub fn parse_choice<'a>(&self, raw: &'a str) -> Result<&'a str, ConfigValueError> {
        let text = raw.trim();
        if self.choices.iter().any(|choice| choice == text) {
            Ok(text)
        } else {
            Err(self.invalid(raw, format!("not one of {}", self.choices.join(", "))))
        }
    }

    /// Checks `raw` by the key's type, bounds and choices (named checks are the Python
    /// layer's; no key the core reads has one).
    pub fn validate(&self, raw: &str) -> Result<(), ConfigValueError> {
        let text = raw.trim();
        match self.config_type {
            ConfigType::Short | ConfigType::Int | ConfigType::Long => {
                self.parse_int(raw)?;
            }
            ConfigType::Boolean
                if !text.eq_ignore_ascii_case("true") && !text.eq_ignore_ascii_case("false") =>
            {
                return Err(self.invalid(raw, "expected true or false"));
            }
            ConfigType::Double => self.check_fraction(raw, text)?,
            ConfigType::String if !self.choices.is_empty() => {
                self.parse_choice(raw)?;
            }
            ConfigType::List if !self.choices.is_empty() && !text.is_empty() => {
                for item in text.split(',') {
                    self.parse_choice(item)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check_fraction(&self, raw: &str, text: &str) -> Result<(), ConfigValueError> {
        let value: f64 = text
            .parse()
            .map_err(|_| self.invalid(raw, "not a number of type DOUBLE"))?;
        let below = self.min.is_some_and(|low| value < low.as_f64());
        let above = self.max.is_some_and(|high| value > high.as_f64());
        if below || above || value.is_nan() {
            let (low, high) = (
                self.min.map(|b| b.to_string()),
                self.max.map(|b| b.to_string()),
            );
            let range = format!(
                "[{}, {}]",
                low.unwrap_or_default(),
                high.unwrap_or_default()
            );
            return Err(self.invalid(raw, format!("value must be in {range}")));
        }
        Ok(())
    }

    /// The key's default as a number (the table's tests guarantee it is one).
    pub fn default_int(&self) -> i64 {
        self.default
            .as_deref()
            .and_then(|raw| self.parse_int(raw).ok())
            .unwrap_or_else(|| panic!("{} has an integer default in the table", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_every_integer_default_is_in_bounds() {
        let table = table();
        assert!(!table.broker.is_empty() && !table.topic.is_empty());
        for key in table.broker.iter().chain(&table.topic) {
            let integer = matches!(
                key.config_type,
                ConfigType::Short | ConfigType::Int | ConfigType::Long
            );
            if let (true, Some(default)) = (integer, &key.default) {
                assert!(key.parse_int(default).is_ok(), "{}", key.name);
            }
            if let Some(kafka_min) = key.kafka_min {
                assert!(
                    key.min.unwrap().as_f64() > kafka_min.as_f64(),
                    "{}",
                    key.name
                );
                assert!(key.why.is_some(), "{}", key.name);
            }
        }
    }

    #[test]
    fn integers_are_parsed_like_kafka_and_bounded_by_the_table() {
        let key = topic_key("segment.index.bytes").unwrap();
        assert_eq!(key.parse_int(" 4096 "), Ok(4096));
        assert_eq!(key.parse_int("+12"), Ok(12));
        assert!(key.parse_int("+-12").is_err());
        let error = key.parse_int("8").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value 8 for configuration segment.index.bytes: value must be at least 12"
        );
        assert!(key.parse_int("2147483648").is_err());
        assert!(key.parse_int("ten").is_err());
        let policy = topic_key("cleanup.policy").unwrap();
        assert!(policy.validate("compact, delete").is_ok());
        assert!(policy.validate("delete,shred").is_err());
        let ratio = topic_key("min.cleanable.dirty.ratio").unwrap();
        assert!(ratio.validate("0.25").is_ok());
        assert!(ratio.validate("1.5").is_err());
        assert!(topic_key("preallocate").unwrap().validate("maybe").is_err());
        assert_eq!(
            topic_key("no.such.key").unwrap_err(),
            ConfigValueError::UnknownKey("no.such.key".into())
        );
    }
}
