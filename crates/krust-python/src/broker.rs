//! `krust._core.Core`: storage, metadata, internal logs and the serving loop.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use krust_server::bridge::Bridge;
use krust_server::broker::transactions::TxnMarker;
use krust_server::broker::{Broker, TransactionalProducer};
use krust_server::quota::connection_limits::ConnectionLimits;
use krust_server::quota::entities::ImageEntity;
use krust_server::quota::ClientQuotaTable;
use krust_server::request::routing::{Exposure, PythonApi};
use krust_storage::StorageError;
use pyo3::exceptions::{
    PyBlockingIOError, PyConnectionError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::authorizer_thread::run_authorizer_thread;
use crate::bridge_request::run_bridge_thread;
use crate::conversions::{
    broker_settings, log_defaults, metadata_delta, metadata_image, scram_credentials,
    ScramCredentialTuple,
};
use crate::quorum::{status_dict, Callbacks, QuorumRuntime};

/// A record as Python passes it: (key, value), either may be None.
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);
/// A client's quotas from the callback: produce, fetch and request (None: unlimited).
type QuotaValues = (Option<f64>, Option<f64>, Option<f64>);

/// How often the serving loop wakes up to let Python see signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

#[pyclass(name = "Core", module = "krust._core", frozen)]
pub struct PyBroker {
    inner: Arc<Broker>,
    /// The controller quorum's runtime, once `start_quorum` ran.
    quorum: parking_lot::Mutex<Option<Arc<QuorumRuntime>>>,
}

/// Python's apis with who may call them, by the exposure each was registered with
/// (`krust.bridge.Exposure`: "clients", "internal", "controller" or "forwarded").
fn python_api_routes(
    apis: BTreeMap<i16, (i16, i16, String)>,
) -> PyResult<BTreeMap<i16, PythonApi>> {
    apis.into_iter()
        .map(|(key, (min_version, max_version, exposure))| {
            let exposure = match exposure.as_str() {
                "clients" => Exposure::Clients,
                "internal" => Exposure::Internal,
                "controller" => Exposure::Controller,
                "forwarded" => Exposure::Forwarded,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "api key {key}: unknown exposure {other:?}"
                    )))
                }
            };
            let api = PythonApi {
                min_version,
                max_version,
                exposure,
            };
            Ok((key, api))
        })
        .collect()
}

/// A log dir locked by another process is BlockingIOError (what its flock reported), which
/// the command line reports as a configuration problem; anything else is OSError.
fn open_error(error: krust_server::broker::OpenError) -> PyErr {
    let locked = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<StorageError>())
        .is_some_and(|source| matches!(source, StorageError::LogDirLocked { .. }));
    if locked {
        PyBlockingIOError::new_err(error.to_string())
    } else {
        PyOSError::new_err(error.to_string())
    }
}

/// Whether a metadata delta says the ACLs changed (`acls_changed`, absent: no).
fn acls_changed(delta: &Bound<'_, PyAny>) -> PyResult<bool> {
    match delta.get_item("acls_changed") {
        Ok(value) => value.extract(),
        Err(error) if error.is_instance_of::<pyo3::exceptions::PyKeyError>(delta.py()) => Ok(false),
        Err(error) => Err(error),
    }
}

fn runtime_error(error: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(error.to_string())
}

impl PyBroker {
    fn quorum_runtime(&self) -> PyResult<Arc<QuorumRuntime>> {
        self.quorum
            .lock()
            .clone()
            .ok_or_else(|| runtime_error("the controller quorum is not started"))
    }
}

#[pymethods]
impl PyBroker {
    #[new]
    fn new(py: Python<'_>, settings: &Bound<'_, PyAny>) -> PyResult<Self> {
        crate::logging::ensure_default_logging();
        let settings = broker_settings(settings)?;
        let broker = py.detach(|| Broker::open(settings)).map_err(open_error)?;
        Ok(PyBroker {
            inner: Arc::new(broker),
            quorum: parking_lot::Mutex::default(),
        })
    }

    fn apply_metadata(&self, py: Python<'_>, image: &Bound<'_, PyAny>) -> PyResult<()> {
        let defaults = log_defaults(image)?;
        let image = metadata_image(image)?;
        let broker = self.inner.clone();
        py.detach(|| {
            if let Some(defaults) = &defaults {
                broker.set_log_defaults(defaults);
            }
            broker.apply_metadata(image)
        })
        .map_err(runtime_error)
    }

    /// Replaces the SCRAM credentials SASL/SCRAM listeners authenticate against.
    fn set_scram_credentials(&self, credentials: Vec<ScramCredentialTuple>) -> PyResult<()> {
        self.inner
            .set_scram_credentials(scram_credentials(credentials)?);
        Ok(())
    }

    fn apply_metadata_delta(&self, py: Python<'_>, delta: &Bound<'_, PyAny>) -> PyResult<()> {
        let acls_changed = acls_changed(delta)?;
        let delta = metadata_delta(delta)?;
        let broker = self.inner.clone();
        py.detach(|| {
            if acls_changed {
                broker.invalidate_authorizations();
            }
            broker.apply_metadata_delta(&delta)
        })
        .map_err(runtime_error)
    }

    /// Forgets every cached authorization decision (the authorizer plugin's `invalidate()`).
    fn invalidate_authorizations(&self) {
        self.inner.invalidate_authorizations();
    }

    /// Appends records as one batch; with `producer` (producer id, epoch) the batch belongs to
    /// that producer's transaction (TxnOffsetCommit).
    #[pyo3(signature = (topic, partition, records, producer=None))]
    fn internal_append(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        records: Vec<KeyValue>,
        producer: Option<(i64, i16)>,
    ) -> PyResult<i64> {
        let records: Vec<(Option<Bytes>, Option<Bytes>)> = records
            .into_iter()
            .map(|(k, v)| (k.map(Bytes::from), v.map(Bytes::from)))
            .collect();
        let producer = producer.map(|(producer_id, producer_epoch)| TransactionalProducer {
            producer_id,
            producer_epoch,
        });
        let broker = self.inner.clone();
        py.detach(|| broker.internal_append(topic, partition, &records, producer))
            .map_err(runtime_error)
    }

    fn internal_read<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        partition: i32,
        start_offset: i64,
        max_bytes: usize,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let broker = self.inner.clone();
        let records = py
            .detach(|| broker.internal_read(topic, partition, start_offset, max_bytes))
            .map_err(runtime_error)?;
        records
            .into_iter()
            .map(|r| {
                let dict = PyDict::new(py);
                dict.set_item("offset", r.offset)?;
                dict.set_item("timestamp", r.timestamp)?;
                dict.set_item("key", r.key.map(|k| PyBytes::new(py, &k)))?;
                dict.set_item("value", r.value.map(|v| PyBytes::new(py, &v)))?;
                dict.set_item("producer_id", r.producer_id)?;
                dict.set_item("control", r.control)?;
                Ok(dict)
            })
            .collect()
    }

    fn log_end_offset(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<i64> {
        let broker = self.inner.clone();
        py.detach(|| broker.log_end_offset(topic, partition))
            .map_err(runtime_error)
    }

    fn log_start_offset(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<i64> {
        let broker = self.inner.clone();
        py.detach(|| broker.log_start_offset(topic, partition))
            .map_err(runtime_error)
    }

    /// Serves until `shutdown()`; Python's signal handlers run while it waits, and a signal
    /// whose handler raises (Ctrl-C without one) stops it too. `on_listening` is called (on
    /// this thread) once every listener is bound. The GIL is released while serving; the tokio
    /// runtime is made here, in the serving process, never at import (fork safety).
    #[pyo3(signature = (handler, python_apis, authorize=None, on_listening=None))]
    fn serve(
        &self,
        py: Python<'_>,
        handler: Py<PyAny>,
        python_apis: BTreeMap<i16, (i16, i16, String)>,
        authorize: Option<Py<PyAny>>,
        mut on_listening: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let (bridge, receiver) = Bridge::new(python_api_routes(python_apis)?);
        let bridge_thread = std::thread::Builder::new()
            .name("krust-bridge".into())
            .spawn(move || run_bridge_thread(receiver, handler))
            .map_err(runtime_error)?;
        let (authorizer, authorizer_thread) = match authorize {
            None => (None, None),
            Some(authorize) => {
                let (authorizer, receiver) = self.inner.authorizer();
                let thread = std::thread::Builder::new()
                    .name("krust-authorizer".into())
                    .spawn(move || run_authorizer_thread(receiver, authorize))
                    .map_err(runtime_error)?;
                (Some(authorizer), Some(thread))
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("krust-io")
            .enable_all()
            .build()
            .map_err(runtime_error)?;
        let broker = self.inner.clone();
        let mut listening = self.inner.listening();
        let mut callback_failure = None;
        let mut server = runtime.spawn(async move { broker.serve(bridge, authorizer).await });
        let outcome = loop {
            let waiting_to_listen = on_listening.is_some();
            let step = py.detach(|| {
                runtime.block_on(async {
                    tokio::select! {
                        result = &mut server => Some(result),
                        _ = listening.wait_for(|bound| *bound), if waiting_to_listen => None,
                        _ = tokio::time::sleep(SIGNAL_POLL) => None,
                    }
                })
            });
            if let Some(result) = step {
                break result;
            }
            if *listening.borrow() {
                if let Some(callback) = on_listening.take() {
                    if let Err(error) = callback.call0(py) {
                        self.inner.shutdown();
                        callback_failure = Some(error);
                    }
                }
            }
            if py.check_signals().is_err() {
                // A handler raised (KeyboardInterrupt): stop serving.
                self.inner.shutdown();
            }
        };
        py.detach(|| {
            runtime.shutdown_timeout(Duration::from_secs(1));
            let _ = bridge_thread.join();
            if let Some(thread) = authorizer_thread {
                let _ = thread.join();
            }
        });
        if let Some(error) = callback_failure {
            return Err(error);
        }
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(PyOSError::new_err(error.to_string())),
            Err(error) => Err(runtime_error(error)),
        }
    }

    /// The controller quorum's leader is `leader` (-1: none known).
    fn set_active_controller(&self, leader: i32) {
        self.inner.set_active_controller(leader);
    }

    /// This broker's epoch from its registration (AlterPartition requests carry it).
    fn set_broker_epoch(&self, epoch: i64) {
        self.inner.set_broker_epoch(epoch);
    }

    /// Sends a request body to the active controller and returns the response body (the
    /// broker lifecycle's BrokerRegistration and BrokerHeartbeat). Blocks without the GIL.
    fn send_to_controller<'py>(
        &self,
        py: Python<'py>,
        api_key: i16,
        version: i16,
        body: Vec<u8>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let api = ApiKey::try_from(api_key)
            .map_err(|_| PyValueError::new_err(format!("unknown api key {api_key}")))?;
        let Some(channels) = self.inner.controller_channels() else {
            return Err(PyRuntimeError::new_err(
                "this node is a quorum of one: its controller is in-process",
            ));
        };
        let channel = channels.lifecycle.clone();
        let response = py
            .detach(|| channel.send_blocking(api, version, Bytes::from(body)))
            .map_err(runtime_error)?;
        Ok(PyBytes::new(py, &response))
    }

    /// A new producer id for the transaction coordinator, from this broker's block. Blocks
    /// without the GIL (it may ask the controller for a new block).
    fn next_producer_id(&self, py: Python<'_>) -> PyResult<i64> {
        py.detach(|| self.inner.next_producer_id())
            .map_err(runtime_error)
    }

    /// Sends a request body to broker `node_id` over the inter-broker listener and returns the
    /// response body (WriteTxnMarkers from the transaction coordinator). Blocks without the
    /// GIL; raises ConnectionError when the broker cannot be reached in time.
    fn send_to_broker<'py>(
        &self,
        py: Python<'py>,
        node_id: i32,
        api_key: i16,
        version: i16,
        body: Vec<u8>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let response = py
            .detach(|| {
                self.inner
                    .send_to_broker(node_id, api_key, version, Bytes::from(body))
            })
            .map_err(|error| PyConnectionError::new_err(error.to_string()))?;
        Ok(PyBytes::new(py, &response))
    }

    /// The partition leader's side of WriteTxnMarkers: each marker (topic, partition,
    /// producer id, producer epoch, coordinator epoch, commit) is appended and replicated;
    /// returns their Kafka error codes in order. Blocks without the GIL.
    fn write_txn_markers(
        &self,
        py: Python<'_>,
        markers: Vec<(String, i32, i64, i16, i32, bool)>,
    ) -> Vec<i16> {
        let markers: Vec<TxnMarker> = markers
            .into_iter()
            .map(
                |(topic, partition, producer_id, producer_epoch, coordinator_epoch, commit)| {
                    TxnMarker {
                        topic,
                        partition,
                        producer_id,
                        producer_epoch,
                        coordinator_epoch,
                        commit,
                    }
                },
            )
            .collect();
        py.detach(|| self.inner.write_txn_markers(&markers))
    }

    fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Installs the metadata image's client quotas: (entity pairs, quota values by key).
    fn set_client_quotas(&self, quotas: Vec<ImageEntity>) -> PyResult<()> {
        let table = ClientQuotaTable::from_entities(quotas)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        self.inner.set_client_quotas(table);
        Ok(())
    }

    /// Charges `seconds` of a Python-served request's handling against the client's
    /// request_percentage (`user`: the principal's name); the throttle time in ms.
    fn charge_request_time(&self, user: &str, client_id: &str, seconds: f64) -> i64 {
        let handling = std::time::Duration::try_from_secs_f64(seconds).unwrap_or_default();
        self.inner.charge_request_time(user, client_id, handling)
    }

    /// The client metrics clients pushed (KIP-714), in Prometheus' text format: every scrape
    /// of the metrics endpoint ends with this text, until the next call replaces it.
    fn set_client_telemetry_metrics(&self, text: String) {
        self.inner.metrics().set_client_telemetry(text);
    }

    /// max.connections, max.connections.per.ip, max.connections.per.ip.overrides (by ip
    /// address) and max.connection.creation.rate in force; ValueError for a bad address.
    fn set_connection_limits(
        &self,
        max_connections: usize,
        max_per_ip: usize,
        per_ip_overrides: HashMap<String, usize>,
        max_creation_rate: i32,
    ) -> PyResult<()> {
        let per_ip_overrides = per_ip_overrides
            .into_iter()
            .map(|(address, count)| {
                address
                    .parse::<IpAddr>()
                    .map(|ip| (ip, count))
                    .map_err(|error| PyValueError::new_err(format!("{address}: {error}")))
            })
            .collect::<PyResult<_>>()?;
        self.inner.set_connection_limits(ConnectionLimits {
            max_connections,
            max_per_ip,
            per_ip_overrides,
            max_creation_rate: f64::from(max_creation_rate),
        });
        Ok(())
    }

    /// leader.replication.throttled.rate and follower.replication.throttled.rate in force
    /// (bytes/s).
    fn set_replication_throttled_rates(&self, leader: i64, follower: i64) {
        self.inner.set_replication_throttled_rates(leader, follower);
    }

    /// replica.alter.log.dirs.io.max.bytes.per.second in force (bytes/s).
    fn set_alter_log_dirs_throttled_rate(&self, rate: i64) {
        self.inner.set_alter_log_dirs_throttled_rate(rate);
    }

    /// log.cleaner.threads, log.cleaner.dedupe.buffer.size, log.cleaner.backoff.ms and
    /// log.cleaner.io.max.bytes.per.second in force; a running cleaner restarts its threads
    /// with them. OSError if a thread cannot start.
    fn reconfigure_cleaner(
        &self,
        threads: usize,
        dedupe_buffer_size: u64,
        backoff_ms: u64,
        io_max_bytes_per_second: f64,
    ) -> PyResult<()> {
        let config = krust_storage::CleanerConfig {
            enable: true,
            threads,
            dedupe_buffer_size,
            backoff_ms,
            io_max_bytes_per_second,
        };
        self.inner
            .reconfigure_cleaner(config)
            .map_err(|error| pyo3::exceptions::PyOSError::new_err(error.to_string()))
    }

    /// From now on the client quota callback decides every client's quotas.
    fn use_quota_callback(&self) {
        self.inner.quotas().use_callback();
    }

    /// The (principal name, client id) pairs to ask the callback about; waits up to
    /// `timeout_s` for one, without the GIL.
    fn take_unresolved_quota_clients(
        &self,
        py: Python<'_>,
        timeout_s: f64,
    ) -> Vec<(String, String)> {
        let broker = self.inner.clone();
        let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
        py.detach(|| broker.quotas().take_unresolved(timeout))
    }

    /// The callback's answers: ((principal name, client id), (produce, fetch, request)).
    fn set_quota_callback_limits(&self, limits: Vec<((String, String), QuotaValues)>) {
        self.inner.quotas().set_callback_limits(
            limits
                .into_iter()
                .map(|(client, (p, f, r))| (client, [p, f, r]))
                .collect(),
        );
    }

    /// The callback's quotas changed: every known client is asked about again.
    fn reset_quota_callback_limits(&self) {
        self.inner.quotas().reset_callback_limits();
    }

    /// Joins the controller quorum (docs/quorum.md). The callbacks run on one dedicated
    /// thread, in log order: `load_snapshot(end_offset, records)` with the newest snapshot
    /// (before this returns) and with one installed from the leader; `apply([(offset, epoch,
    /// record)])` with committed records (returning acknowledges them); `snapshot()` for the
    /// image's records at the applied offset (None inside a metadata transaction);
    /// `leader_changed(leader_id or -1, epoch)`.
    fn start_quorum(
        &self,
        py: Python<'_>,
        apply: Py<PyAny>,
        snapshot: Py<PyAny>,
        load_snapshot: Py<PyAny>,
        leader_changed: Py<PyAny>,
    ) -> PyResult<()> {
        if self.quorum.lock().is_some() {
            return Err(runtime_error("the controller quorum is already started"));
        }
        let callbacks = Callbacks {
            apply,
            snapshot,
            load_snapshot,
            leader_changed,
        };
        let runtime = QuorumRuntime::start(py, &self.inner, callbacks)?;
        *self.quorum.lock() = Some(Arc::new(runtime));
        Ok(())
    }

    /// Appends `records` as consecutive entries on the leader; the offset of the last once
    /// committed. NotControllerError (with `leader_id`) on any other node. Blocking.
    fn propose(&self, py: Python<'_>, records: Vec<Vec<u8>>) -> PyResult<i64> {
        self.quorum_runtime()?.propose(py, &self.inner, records)
    }

    /// The quorum as this node sees it (DescribeQuorum's fields).
    fn quorum_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let quorum = self
            .inner
            .quorum()
            .ok_or_else(|| runtime_error("the controller quorum is not started"))?;
        status_dict(py, &quorum.status())
    }

    /// Writes a snapshot of the applied image (through the `snapshot` callback).
    fn trigger_metadata_snapshot(&self, py: Python<'_>) -> PyResult<()> {
        self.quorum_runtime()?.trigger_snapshot(py, &self.inner)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let quorum = self.quorum.lock().take();
        if let Some(quorum) = quorum {
            quorum.stop(py, &self.inner);
            // Its runtime winds down without the GIL (a callback may still want it).
            py.detach(move || drop(quorum));
        }
        let broker = self.inner.clone();
        py.detach(|| broker.close()).map_err(runtime_error)
    }
}
