//! Python values to core types: broker settings, metadata images and deltas.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use krust_config::ConfigValueError;
use krust_server::metadata::metadata_cache::{
    BrokerEndpoint, MetadataDelta, MetadataImage, PartitionMetadata, SupportedVersionRange,
    TopicMetadata,
};
use krust_server::security::sasl::{SaslMechanism, SaslSettings};
use krust_server::security::scram::{ScramCredential, ScramMechanism};
use krust_server::security::session::SecurityProtocol;
use krust_server::security::tls::{ClientAuth, TlsListener, TlsSettings};
use krust_server::security::{ListenerSecurity, SecurityConfigError};
use krust_server::settings::{BrokerSettings, Listener};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyAny;
use uuid::Uuid;

fn get<'py, T: FromPyObjectOwned<'py>>(
    mapping: &Bound<'py, PyAny>,
    key: &str,
) -> PyResult<Option<T>> {
    match mapping.get_item(key) {
        Ok(value) if value.is_none() => Ok(None),
        Ok(value) => value.extract::<T>().map(Some).map_err(|e| {
            let error: PyErr = e.into();
            PyValueError::new_err(format!("setting {key}: {error}"))
        }),
        Err(_) => Ok(None),
    }
}

/// The listeners under `key`, each with its protocol from listener.security.protocol.map
/// (PLAINTEXT when the map does not name it, as for advertised listeners of other brokers).
fn listeners(mapping: &Bound<'_, PyAny>, key: &str) -> PyResult<Option<Vec<Listener>>> {
    let protocols: HashMap<String, String> =
        get(mapping, "listener.security.protocol.map")?.unwrap_or_default();
    let securities: HashMap<String, Bound<'_, PyAny>> =
        get(mapping, "listener.security")?.unwrap_or_default();
    let Some(list) = get::<Vec<(String, String, u16)>>(mapping, key)? else {
        return Ok(None);
    };
    list.into_iter()
        .map(|(name, host, port)| {
            let security_protocol = match protocols.get(&name) {
                Some(protocol) => protocol.parse().map_err(|error| {
                    PyValueError::new_err(format!("listener.security.protocol.map: {error}"))
                })?,
                None => SecurityProtocol::Plaintext,
            };
            let security = match securities.get(&name) {
                Some(security) => listener_security(security)?,
                None => ListenerSecurity::default(),
            };
            security
                .check(&name, security_protocol)
                .map_err(|error| PyValueError::new_err(error.to_string()))?;
            Ok(Listener {
                name,
                host,
                port,
                security_protocol,
                security,
            })
        })
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// A listener's TLS and SASL from its resolved ssl.* and sasl.* settings (krust.security_config);
/// bad TLS material is a ValueError naming the key.
fn listener_security(security: &Bound<'_, PyAny>) -> PyResult<ListenerSecurity> {
    let invalid = |error: SecurityConfigError| PyValueError::new_err(error.to_string());
    let tls = match get::<Bound<'_, PyAny>>(security, "ssl")? {
        None => None,
        Some(ssl) => {
            let client_auth = match get::<String>(&ssl, "client_auth")?.as_deref() {
                Some("required") => ClientAuth::Required,
                Some("requested") => ClientAuth::Requested,
                _ => ClientAuth::None,
            };
            let settings = TlsSettings {
                certificate_chain: get(&ssl, "certificate_chain")?.unwrap_or_default(),
                private_key: get(&ssl, "private_key")?.unwrap_or_default(),
                trusted_certificates: get(&ssl, "trusted_certificates")?,
                client_auth,
                principal_mapping_rules: get(&ssl, "principal_mapping_rules")?
                    .unwrap_or_else(|| "DEFAULT".to_string()),
            };
            Some(Arc::new(TlsListener::new(&settings).map_err(invalid)?))
        }
    };
    let sasl = match get::<Bound<'_, PyAny>>(security, "sasl")? {
        None => None,
        Some(sasl) => {
            let names: Vec<String> = get(&sasl, "mechanisms")?.unwrap_or_default();
            let enabled_mechanisms = names
                .iter()
                .map(|name| {
                    SaslMechanism::from_name(name).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "sasl.enabled.mechanisms: {name} is not supported"
                        ))
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            Some(Arc::new(SaslSettings {
                enabled_mechanisms,
                plain_users: get(&sasl, "plain_users")?.unwrap_or_default(),
                plain_callback: get(&sasl, "plain_callback")?.unwrap_or(false),
                reauth_ms: get(&sasl, "reauth_ms")?.unwrap_or(0),
            }))
        }
    };
    Ok(ListenerSecurity { tls, sasl })
}

/// SCRAM credentials as Python passes them: (user, mechanism type, salt, stored key, server
/// key, iterations), the mechanism numbered as in UserScramCredentialRecord.
pub type ScramCredentialTuple = (String, i8, Vec<u8>, Vec<u8>, Vec<u8>, i32);

pub fn scram_credentials(
    credentials: Vec<ScramCredentialTuple>,
) -> PyResult<HashMap<(String, ScramMechanism), ScramCredential>> {
    credentials
        .into_iter()
        .map(
            |(user, mechanism, salt, stored_key, server_key, iterations)| {
                let mechanism = ScramMechanism::from_type(mechanism).ok_or_else(|| {
                    PyValueError::new_err(format!("unknown SCRAM mechanism type {mechanism}"))
                })?;
                let credential = ScramCredential {
                    salt,
                    stored_key,
                    server_key,
                    iterations,
                };
                Ok(((user, mechanism), credential))
            },
        )
        .collect()
}

/// The config values as Kafka writes them: the mapping's string values, by key name.
fn config_values(mapping: &Bound<'_, PyAny>) -> PyResult<HashMap<String, String>> {
    let mut values = HashMap::new();
    for item in mapping.call_method0("items")?.try_iter()? {
        let (name, value): (String, Bound<'_, PyAny>) = item?.extract()?;
        if let Ok(text) = value.extract::<String>() {
            values.insert(name, text);
        }
    }
    Ok(values)
}

/// The broker's settings from the config layer's mapping (krust.config.broker.core_settings):
/// every key through the config table, and the listeners and voters the config layer parsed.
pub fn broker_settings(mapping: &Bound<'_, PyAny>) -> PyResult<BrokerSettings> {
    let invalid = |error: ConfigValueError| PyValueError::new_err(error.to_string());
    let mut s = BrokerSettings::from_config(&config_values(mapping)?).map_err(invalid)?;
    if let Some(listeners) = listeners(mapping, "listeners")? {
        s.advertised_listeners = listeners.clone();
        s.listeners = listeners;
    }
    if let Some(advertised) = listeners(mapping, "advertised.listeners")? {
        s.advertised_listeners = advertised;
    }
    if let Some(voters) = get(mapping, "controller.quorum.voters")? {
        s.quorum.voters = voters;
    }
    Ok(s)
}

fn required<'py>(mapping: &Bound<'py, PyAny>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    mapping
        .get_item(key)
        .map_err(|_| PyValueError::new_err(format!("metadata lacks {key}")))
}

/// Converts a `MetadataImage` TypedDict (see _core.pyi) into the core's image.
pub fn metadata_image(image: &Bound<'_, PyAny>) -> PyResult<MetadataImage> {
    Ok(MetadataImage::new(
        required(image, "cluster_id")?.extract()?,
        required(image, "controller_id")?.extract()?,
        required(image, "metadata_offset")?.extract()?,
        brokers(&required(image, "brokers")?)?,
        topics(&required(image, "topics")?)?,
    )
    .with_features(
        supported_features(&required(image, "supported_features")?)?,
        required(image, "finalized_features")?.extract()?,
    ))
}

fn supported_features(
    mapping: &Bound<'_, PyAny>,
) -> PyResult<BTreeMap<String, SupportedVersionRange>> {
    let ranges: BTreeMap<String, (i16, i16)> = mapping.extract()?;
    Ok(ranges
        .into_iter()
        .map(|(name, (min, max))| (name, SupportedVersionRange { min, max }))
        .collect())
}

/// Converts a `MetadataDelta` TypedDict (see _core.pyi) into the core's delta.
pub fn metadata_delta(delta: &Bound<'_, PyAny>) -> PyResult<MetadataDelta> {
    let brokers = required(delta, "brokers")?;
    Ok(MetadataDelta {
        metadata_offset: required(delta, "metadata_offset")?.extract()?,
        controller_id: required(delta, "controller_id")?.extract()?,
        brokers: if brokers.is_none() {
            None
        } else {
            Some(self::brokers(&brokers)?)
        },
        topics: topics(&required(delta, "topics")?)?,
        deleted_topic_ids: required(delta, "deleted_topic_ids")?
            .try_iter()?
            .map(|id| uuid(&id?))
            .collect::<PyResult<_>>()?,
        finalized_features: required(delta, "finalized_features")?.extract()?,
        log_defaults: log_defaults(delta)?,
    })
}

/// The optional `log_defaults` of an image or delta: topic key names to broker defaults.
pub fn log_defaults(mapping: &Bound<'_, PyAny>) -> PyResult<Option<HashMap<String, String>>> {
    get(mapping, "log_defaults")
}

fn brokers(list: &Bound<'_, PyAny>) -> PyResult<Vec<BrokerEndpoint>> {
    list.try_iter()?
        .map(|b| {
            let b = b?;
            Ok(BrokerEndpoint {
                node_id: b.get_item("node_id")?.extract()?,
                host: b.get_item("host")?.extract()?,
                port: b.get_item("port")?.extract()?,
                rack: b.get_item("rack")?.extract()?,
                listeners: get(&b, "listeners")?.unwrap_or_default(),
            })
        })
        .collect()
}

fn topics(list: &Bound<'_, PyAny>) -> PyResult<Vec<TopicMetadata>> {
    list.try_iter()?.map(|t| topic(&t?)).collect()
}

fn uuid(bytes: &Bound<'_, PyAny>) -> PyResult<Uuid> {
    let bytes: Vec<u8> = bytes.extract()?;
    Uuid::from_slice(&bytes).map_err(|_| PyValueError::new_err("topic_id must be 16 bytes"))
}

fn topic(t: &Bound<'_, PyAny>) -> PyResult<TopicMetadata> {
    let topic_id = uuid(&t.get_item("topic_id")?)?;
    let mut partitions = t
        .get_item("partitions")?
        .try_iter()?
        .map(|p| {
            let p = p?;
            Ok(PartitionMetadata {
                partition: p.get_item("partition")?.extract()?,
                leader: p.get_item("leader")?.extract()?,
                leader_epoch: p.get_item("leader_epoch")?.extract()?,
                partition_epoch: p.get_item("partition_epoch")?.extract()?,
                replicas: p.get_item("replicas")?.extract()?,
                isr: p.get_item("isr")?.extract()?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    partitions.sort_by_key(|p| p.partition);
    Ok(TopicMetadata {
        name: t.get_item("name")?.extract()?,
        topic_id,
        internal: t.get_item("internal")?.extract()?,
        configs: t
            .get_item("configs")?
            .extract::<HashMap<String, String>>()?,
        partitions,
    })
}
