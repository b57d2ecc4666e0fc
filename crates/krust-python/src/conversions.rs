//! Python values to core types: broker settings, metadata images and deltas.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

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

fn set<'py, T: FromPyObjectOwned<'py>>(
    mapping: &Bound<'py, PyAny>,
    key: &str,
    slot: &mut T,
) -> PyResult<()> {
    if let Some(value) = get(mapping, key)? {
        *slot = value;
    }
    Ok(())
}

/// A Kafka "long" setting whose maximum means "never" (e.g. log.flush.interval.messages).
fn set_long<'py>(mapping: &Bound<'py, PyAny>, key: &str, slot: &mut u64) -> PyResult<()> {
    if let Some(value) = get::<i64>(mapping, key)? {
        *slot = u64::try_from(value).unwrap_or(u64::MAX);
    }
    Ok(())
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

/// Reads the settings the core uses from the validated config mapping (Kafka names).
pub fn broker_settings(mapping: &Bound<'_, PyAny>) -> PyResult<BrokerSettings> {
    let mut s = BrokerSettings::default();
    set(mapping, "node.id", &mut s.node_id)?;
    if let Some(listeners) = listeners(mapping, "listeners")? {
        s.advertised_listeners = listeners.clone();
        s.listeners = listeners;
    }
    if let Some(advertised) = listeners(mapping, "advertised.listeners")? {
        s.advertised_listeners = advertised;
    }
    if let Some(dirs) = get::<Vec<String>>(mapping, "log.dirs")? {
        s.log_dirs = dirs.into_iter().map(PathBuf::from).collect();
    }
    set(mapping, "num.partitions", &mut s.num_partitions)?;
    set(
        mapping,
        "default.replication.factor",
        &mut s.default_replication_factor,
    )?;
    set(
        mapping,
        "auto.create.topics.enable",
        &mut s.auto_create_topics_enable,
    )?;
    set(
        mapping,
        "socket.request.max.bytes",
        &mut s.socket_request_max_bytes,
    )?;
    set(mapping, "queued.max.requests", &mut s.queued_max_requests)?;
    set(
        mapping,
        "max.connections.per.ip",
        &mut s.max_connections_per_ip,
    )?;
    set(mapping, "max.connections", &mut s.max_connections)?;
    set(mapping, "quota.window.num", &mut s.quota_window.samples)?;
    if let Some(seconds) = get::<i64>(mapping, "quota.window.size.seconds")? {
        s.quota_window.window_ms = seconds.saturating_mul(1000);
    }
    s.metrics_port = get(mapping, "krust.metrics.port")?;
    // krust.config parsed the voters into (id, host, port).
    set(mapping, "controller.quorum.voters", &mut s.quorum.voters)?;
    if let Some(roles) = get::<Vec<String>>(mapping, "process.roles")? {
        s.quorum.is_voter = roles.iter().any(|role| role == "controller");
    }
    if let Some(names) = get::<Vec<String>>(mapping, "controller.listener.names")? {
        s.quorum.controller_listener_names = names;
    }
    set(
        mapping,
        "controller.quorum.election.timeout.ms",
        &mut s.quorum.election_timeout_ms,
    )?;
    set_long(
        mapping,
        "connections.max.idle.ms",
        &mut s.connections_max_idle_ms,
    )?;
    set(
        mapping,
        "socket.send.buffer.bytes",
        &mut s.socket_send_buffer_bytes,
    )?;
    set(
        mapping,
        "socket.receive.buffer.bytes",
        &mut s.socket_receive_buffer_bytes,
    )?;
    set_long(
        mapping,
        "log.flush.scheduler.interval.ms",
        &mut s.log_flush_scheduler_interval_ms,
    )?;
    set_long(
        mapping,
        "log.retention.check.interval.ms",
        &mut s.log_retention_check_interval_ms,
    )?;
    set_long(
        mapping,
        "replica.high.watermark.checkpoint.interval.ms",
        &mut s.replica_high_watermark_checkpoint_interval_ms,
    )?;
    let replication = &mut s.replication;
    set(
        mapping,
        "replica.lag.time.max.ms",
        &mut replication.replica_lag_time_max_ms,
    )?;
    set(
        mapping,
        "replica.fetch.max.bytes",
        &mut replication.replica_fetch_max_bytes,
    )?;
    set(
        mapping,
        "replica.fetch.response.max.bytes",
        &mut replication.replica_fetch_response_max_bytes,
    )?;
    set(
        mapping,
        "replica.fetch.wait.max.ms",
        &mut replication.replica_fetch_wait_max_ms,
    )?;
    set(
        mapping,
        "replica.fetch.min.bytes",
        &mut replication.replica_fetch_min_bytes,
    )?;
    set_long(
        mapping,
        "replica.fetch.backoff.ms",
        &mut replication.replica_fetch_backoff_ms,
    )?;
    set(
        mapping,
        "num.replica.fetchers",
        &mut replication.num_replica_fetchers,
    )?;
    replication.inter_broker_listener_name = get(mapping, "inter.broker.listener.name")?;
    let metadata_log = &mut s.metadata_log;
    set(
        mapping,
        "metadata.log.segment.bytes",
        &mut metadata_log.segment_bytes,
    )?;
    set(
        mapping,
        "metadata.log.segment.ms",
        &mut metadata_log.segment_ms,
    )?;
    set(
        mapping,
        "metadata.max.retention.bytes",
        &mut metadata_log.max_retention_bytes,
    )?;
    set(
        mapping,
        "metadata.max.retention.ms",
        &mut metadata_log.max_retention_ms,
    )?;
    let log = &mut s.log_defaults;
    set(mapping, "log.segment.bytes", &mut log.segment_bytes)?;
    set(mapping, "log.roll.ms", &mut log.segment_ms)?;
    set(
        mapping,
        "log.index.size.max.bytes",
        &mut log.segment_index_bytes,
    )?;
    set(
        mapping,
        "log.index.interval.bytes",
        &mut log.index_interval_bytes,
    )?;
    set(mapping, "message.max.bytes", &mut log.max_message_bytes)?;
    set(
        mapping,
        "log.flush.interval.messages",
        &mut log.flush_interval_messages,
    )?;
    set(mapping, "log.flush.interval.ms", &mut log.flush_interval_ms)?;
    set(mapping, "min.insync.replicas", &mut log.min_insync_replicas)?;
    set(
        mapping,
        "log.message.timestamp.before.max.ms",
        &mut log.message_timestamp_before_max_ms,
    )?;
    set(
        mapping,
        "log.message.timestamp.after.max.ms",
        &mut log.message_timestamp_after_max_ms,
    )?;
    set(mapping, "log.roll.jitter.ms", &mut log.segment_jitter_ms)?;
    set(mapping, "log.retention.ms", &mut log.retention_ms)?;
    set(mapping, "log.retention.bytes", &mut log.retention_bytes)?;
    set(
        mapping,
        "log.segment.delete.delay.ms",
        &mut log.file_delete_delay_ms,
    )?;
    if let Some(policy) = get::<Vec<String>>(mapping, "log.cleanup.policy")? {
        log.apply_override("cleanup.policy", &policy.join(","))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(kind) = get::<String>(mapping, "log.message.timestamp.type")? {
        log.apply_override("message.timestamp.type", &kind)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    // Python checked every key against the config table; the core checks its own copy again so
    // that no caller can start it with defaults its logs would refuse.
    log_cleaner_settings(mapping, &mut s)?;
    s.log_defaults
        .validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(s)
}

/// The cleaner's broker keys and the broker defaults of the topic keys it and recompression
/// obey.
fn log_cleaner_settings(mapping: &Bound<'_, PyAny>, s: &mut BrokerSettings) -> PyResult<()> {
    let cleaner = &mut s.cleaner;
    set(mapping, "log.cleaner.enable", &mut cleaner.enable)?;
    set(mapping, "log.cleaner.threads", &mut cleaner.threads)?;
    set(
        mapping,
        "log.cleaner.dedupe.buffer.size",
        &mut cleaner.dedupe_buffer_size,
    )?;
    set(mapping, "log.cleaner.backoff.ms", &mut cleaner.backoff_ms)?;
    set(
        mapping,
        "log.cleaner.io.max.bytes.per.second",
        &mut cleaner.io_max_bytes_per_second,
    )?;
    let log = &mut s.log_defaults;
    set(
        mapping,
        "log.cleaner.delete.retention.ms",
        &mut log.delete_retention_ms,
    )?;
    set(
        mapping,
        "log.cleaner.min.compaction.lag.ms",
        &mut log.min_compaction_lag_ms,
    )?;
    set(
        mapping,
        "log.cleaner.max.compaction.lag.ms",
        &mut log.max_compaction_lag_ms,
    )?;
    set(
        mapping,
        "log.cleaner.min.cleanable.ratio",
        &mut log.min_cleanable_dirty_ratio,
    )?;
    let invalid =
        |e: krust_storage::config_keys::ConfigValueError| PyValueError::new_err(e.to_string());
    if let Some(codec) = get::<String>(mapping, "compression.type")? {
        log.apply_override("compression.type", &codec)
            .map_err(invalid)?;
    }
    if let Some(policy) = get::<Vec<String>>(mapping, "log.cleanup.policy")? {
        log.apply_override("cleanup.policy", &policy.join(","))
            .map_err(invalid)?;
    }
    Ok(())
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
