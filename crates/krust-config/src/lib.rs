//! krust's config table for the Rust core. Every config key is declared once, in
//! `python/krust/config_keys.toml` (docs/config.md): its name, type, default, bounds, dynamic
//! scope and the test that shows it acts. The Python layer validates a broker's config against
//! it; the core embeds the same file and reads its settings through it.
//!
//! - [`table`]: the rows, parsed, with Kafka's parsing and bounds checks per key.
//! - [`values`]: one key's value as a Rust type: the value given, else the table's default.
//! - [`config_settings!`]: a settings struct whose fields name the keys they hold; it reads
//!   itself from given values, and its `Default` is the table's defaults, so no default, type
//!   or key name is written a second time in Rust.

mod settings;
pub mod table;
pub mod values;

pub use table::{
    broker_key, table, topic_key, ConfigKey, ConfigTable, ConfigType, ConfigValueError,
};
pub use values::{read, ConfigValues, FromConfig, NoValues};
