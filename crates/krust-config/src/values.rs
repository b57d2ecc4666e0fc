//! A broker key's value as the Rust type of the field that holds it: the value given, else the
//! table's default, checked against the key's type, bounds and choices.

use std::collections::HashMap;

use crate::table::{broker_key, ConfigKey, ConfigType, ConfigValueError};

/// The values a broker was given, by Kafka key name, each as Kafka writes it (`true`, `1048576`,
/// `a,b`). Keys not given read as the table's default.
pub trait ConfigValues {
    fn value(&self, name: &str) -> Option<String>;
}

impl ConfigValues for HashMap<String, String> {
    fn value(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// Values written out in place: `[("num.partitions", "3")]`.
impl<const N: usize> ConfigValues for [(&str, &str); N] {
    fn value(&self, name: &str) -> Option<String> {
        self.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_string())
    }
}

/// No value given: every key reads as the table's default.
pub struct NoValues;

impl ConfigValues for NoValues {
    fn value(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A Rust type a config value is read as.
pub trait FromConfig: Sized {
    /// The table types a value of this Rust type can come from.
    const TYPES: &'static [ConfigType];

    /// `raw` has passed the key's type, bounds and choices checks.
    fn parse(key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError>;

    /// The value of a key with neither a given value nor a default.
    fn unset(key: &ConfigKey) -> Result<Self, ConfigValueError> {
        Err(key.invalid("", "the key has no value and no default"))
    }
}

/// The broker key `name` as a `T`: its given value, else its default.
pub fn read<T: FromConfig>(values: &dyn ConfigValues, name: &str) -> Result<T, ConfigValueError> {
    let key = broker_key(name)?;
    if !T::TYPES.contains(&key.config_type) {
        let problem = format!(
            "a {:?} key cannot be read as {}",
            key.config_type,
            std::any::type_name::<T>()
        );
        return Err(key.invalid("", problem));
    }
    match values.value(name).or_else(|| key.default.clone()) {
        Some(raw) => {
            key.validate(&raw)?;
            T::parse(key, &raw)
        }
        None => T::unset(key),
    }
}

const INTEGERS: &[ConfigType] = &[ConfigType::Short, ConfigType::Int, ConfigType::Long];

impl FromConfig for bool {
    const TYPES: &'static [ConfigType] = &[ConfigType::Boolean];

    fn parse(_key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        Ok(raw.trim().eq_ignore_ascii_case("true"))
    }
}

/// Integer types narrower than a LONG: the table's type and bounds keep values in range.
macro_rules! from_integer {
    ($($rust:ty => [$($table:ident),+]),* $(,)?) => {$(
        impl FromConfig for $rust {
            const TYPES: &'static [ConfigType] = &[$(ConfigType::$table),+];

            fn parse(key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
                let value = key.parse_int(raw)?;
                <$rust>::try_from(value).map_err(|_| {
                    key.invalid(raw, format!(
                        "value must be in [{}, {}]", <$rust>::MIN, <$rust>::MAX
                    ))
                })
            }
        }
    )*};
}

from_integer! {
    i16 => [Short, Int],
    i32 => [Short, Int],
    i64 => [Short, Int, Long],
    u16 => [Short, Int],
    usize => [Short, Int, Long],
}

/// A duration or size that Kafka writes as a LONG whose maximum, or a negative value, means
/// "never" or "no limit": read as `u64::MAX` then.
impl FromConfig for u64 {
    const TYPES: &'static [ConfigType] = INTEGERS;

    fn parse(key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        Ok(u64::try_from(key.parse_int(raw)?).unwrap_or(u64::MAX))
    }
}

impl FromConfig for f64 {
    const TYPES: &'static [ConfigType] = &[ConfigType::Double];

    fn parse(key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        let text = raw.trim();
        text.trim_end_matches(['d', 'D', 'f', 'F'])
            .parse()
            .map_err(|_| key.invalid(raw, "not a number of type DOUBLE"))
    }
}

impl FromConfig for String {
    const TYPES: &'static [ConfigType] = &[ConfigType::String, ConfigType::Password];

    fn parse(_key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        Ok(raw.trim().to_string())
    }
}

/// A LIST of strings or paths; one with no value and no default is empty.
impl<T: for<'a> From<&'a str>> FromConfig for Vec<T> {
    const TYPES: &'static [ConfigType] = &[ConfigType::List];

    fn parse(_key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        Ok(raw
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(T::from)
            .collect())
    }

    fn unset(_key: &ConfigKey) -> Result<Self, ConfigValueError> {
        Ok(Vec::new())
    }
}

/// A key that may be unset (no value and no default): `None` then.
impl<T: FromConfig> FromConfig for Option<T> {
    const TYPES: &'static [ConfigType] = T::TYPES;

    fn parse(key: &ConfigKey, raw: &str) -> Result<Self, ConfigValueError> {
        T::parse(key, raw).map(Some)
    }

    fn unset(_key: &ConfigKey) -> Result<Self, ConfigValueError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_not_given_reads_as_the_tables_default() {
        assert_eq!(read::<i32>(&NoValues, "num.partitions"), Ok(1));
        assert_eq!(
            read::<bool>(&NoValues, "auto.create.topics.enable"),
            Ok(true)
        );
        assert_eq!(
            read::<Option<u16>>(&NoValues, "krust.metrics.port"),
            Ok(None)
        );
        let values = [("num.partitions", "12"), ("krust.metrics.port", "9404")];
        assert_eq!(read::<i32>(&values, "num.partitions"), Ok(12));
        assert_eq!(
            read::<Option<u16>>(&values, "krust.metrics.port"),
            Ok(Some(9404))
        );
    }

    #[test]
    fn a_value_is_checked_against_the_table() {
        let error = read::<i32>(&[("num.partitions", "0")], "num.partitions").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid value 0 for configuration num.partitions: value must be at least 1"
        );
        assert!(read::<bool>(
            &[("auto.create.topics.enable", "yes")],
            "auto.create.topics.enable"
        )
        .is_err());
    }

    #[test]
    fn a_field_of_the_wrong_type_for_its_key_is_refused() {
        assert!(read::<bool>(&NoValues, "num.partitions").is_err());
        assert!(read::<i16>(&NoValues, "log.retention.bytes").is_err());
        assert_eq!(
            read::<u16>(&NoValues, "no.such.key"),
            Err(ConfigValueError::UnknownBrokerKey("no.such.key".into()))
        );
    }

    #[test]
    fn a_negative_long_is_never_as_an_unsigned_duration() {
        let values = [("log.retention.bytes", "-1")];
        assert_eq!(read::<u64>(&values, "log.retention.bytes"), Ok(u64::MAX));
        assert_eq!(
            read::<Vec<String>>(&NoValues, "controller.quorum.voters"),
            Ok(vec![])
        );
    }
}
