//! What a client needs to reach the cluster: bootstrap servers, client id, timeouts and the
//! security settings every connection uses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::security::{SecurityConfig, SecurityConfigError};

/// What a client needs to reach the cluster.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `bootstrap.servers`: `host:port` entries.
    pub bootstrap_servers: Vec<String>,
    pub client_id: String,
    /// `request.timeout.ms`: connect, send and receive each give up after this.
    pub request_timeout: Duration,
    /// `security.protocol`, `ssl.*`, `sasl.*`: used for every connection, to bootstrap
    /// servers and partition leaders alike.
    pub security: Arc<SecurityConfig>,
}

impl ClientConfig {
    /// A config from Kafka's comma-separated `bootstrap.servers` form.
    pub fn new(bootstrap_servers: &str) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            client_id: "krust-spark".to_string(),
            request_timeout: Duration::from_secs(30),
            security: Arc::default(),
        }
    }

    /// A config with the security settings of `properties` (Kafka client keys).
    pub fn with_properties(
        bootstrap_servers: &str,
        properties: &BTreeMap<String, String>,
    ) -> Result<Self, SecurityConfigError> {
        Ok(Self {
            security: Arc::new(SecurityConfig::from_properties(properties)?),
            ..Self::new(bootstrap_servers)
        })
    }
}
