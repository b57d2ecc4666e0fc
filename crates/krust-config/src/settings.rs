//! `config_settings!`: a settings struct whose fields say which key each holds.

/// Declares a settings struct. Each field ends with where its value comes from:
/// - `= "kafka.key.name"`: the broker key's given value, else its table default, read as the
///   field's type ([`crate::FromConfig`]; a type that does not fit the key's table type is an
///   error naming the key);
/// - `= nested`: a settings struct of its own (anything with a `from_config` like this one's);
/// - `= given`: not a plain key (listeners, say); `Default::default()` here, the caller sets it.
///
/// It generates `from_config(&dyn ConfigValues)` and a `Default` that is the table's defaults.
#[macro_export]
macro_rules! config_settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $ty:ty = $source:tt
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $name {
            /// Every field from `values`, each key not given at its table default.
            pub fn from_config(
                values: &dyn $crate::ConfigValues,
            ) -> ::std::result::Result<Self, $crate::ConfigValueError> {
                Ok(Self {
                    $( $field: $crate::config_settings!(@read values, $ty, $source), )*
                })
            }
        }

        impl ::std::default::Default for $name {
            /// The config table's defaults.
            fn default() -> Self {
                Self::from_config(&$crate::NoValues)
                    .unwrap_or_else(|error| panic!("{}: {error}", stringify!($name)))
            }
        }
    };
    (@read $values:ident, $ty:ty, nested) => { <$ty>::from_config($values)? };
    (@read $values:ident, $ty:ty, given) => { <$ty as ::std::default::Default>::default() };
    (@read $values:ident, $ty:ty, $key:literal) => { $crate::read::<$ty>($values, $key)? };
}

#[cfg(test)]
mod tests {
    crate::config_settings! {
        #[derive(Debug, PartialEq)]
        struct Partitions {
            count: i32 = "num.partitions",
            replication_factor: i16 = "default.replication.factor",
            names: Vec<String> = given,
        }
    }

    crate::config_settings! {
        #[derive(Debug, PartialEq)]
        struct Outer {
            partitions: Partitions = nested,
            auto_create: bool = "auto.create.topics.enable",
        }
    }

    #[test]
    fn defaults_come_from_the_table_and_given_values_win() {
        let defaults = Outer::default();
        assert_eq!(defaults.partitions.count, 1);
        assert_eq!(defaults.partitions.replication_factor, 1);
        assert!(defaults.auto_create);
        let values = [
            ("num.partitions", "3"),
            ("auto.create.topics.enable", "false"),
        ];
        let given = Outer::from_config(&values).unwrap();
        assert_eq!(given.partitions.count, 3);
        assert!(!given.auto_create);
        assert!(given.partitions.names.is_empty());
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let values = [("default.replication.factor", "40000")];
        let error = Outer::from_config(&values).unwrap_err();
        assert!(
            error.to_string().contains("default.replication.factor"),
            "{error}"
        );
    }
}
