//! `krust._core.KafkaClient` and `PartitionReader`: the native Kafka client the Spark data
//! source (spark/) reads and writes with. Every network call and all record decoding run
//! with the GIL released. Both take Kafka's client security settings (`security.protocol`,
//! `ssl.*`, `sasl.*`) as a dict.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use krust_client::client::ClientConfig;
use krust_client::fetch::RangeReader;
use krust_client::produce::ACKS_ALL;
use krust_client::{
    ClientError, FetchOptions, KafkaClient, OffsetSpec, ProduceOptions, SecurityConfig,
    SecurityConfigError,
};
use krust_storage::batch::Compression;
use parking_lot::Mutex;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::arrow_ffi::{import_batch, PyArrowBatch};

create_exception!(
    _core,
    KafkaClientError,
    PyException,
    "A Kafka request failed (the message says which broker, topic, partition and why)."
);
create_exception!(
    _core,
    KafkaConfigError,
    PyValueError,
    "A client setting is malformed or not supported (the message starts with its Kafka key)."
);
create_exception!(
    _core,
    DataLossError,
    KafkaClientError,
    "Offsets asked for are no longer in the log (retention or DeleteRecords removed them)."
);

pub fn client_error(error: ClientError) -> PyErr {
    match error {
        ClientError::DataLoss { .. } => DataLossError::new_err(error.to_string()),
        other => KafkaClientError::new_err(other.to_string()),
    }
}

fn config_error(error: SecurityConfigError) -> PyErr {
    KafkaConfigError::new_err(error.to_string())
}

/// A client for `bootstrap_servers` with the security `settings` (Kafka client keys); no
/// connection is opened yet.
fn connect(
    bootstrap_servers: &str,
    settings: Option<BTreeMap<String, String>>,
) -> PyResult<KafkaClient> {
    let config = ClientConfig::with_properties(bootstrap_servers, &settings.unwrap_or_default())
        .map_err(config_error)?;
    KafkaClient::new(config).map_err(client_error)
}

/// Checks Kafka client security `settings` (reading the PEM files they name) without
/// connecting; raises KafkaConfigError naming the first bad one.
#[pyfunction]
pub fn check_client_settings(settings: BTreeMap<String, String>) -> PyResult<()> {
    SecurityConfig::from_properties(&settings)
        .map(drop)
        .map_err(config_error)
}

fn offset_spec(spec: &Bound<'_, PyAny>) -> PyResult<OffsetSpec> {
    if let Ok(name) = spec.extract::<String>() {
        return match name.as_str() {
            "earliest" => Ok(OffsetSpec::Earliest),
            "latest" => Ok(OffsetSpec::Latest),
            _ => Err(PyValueError::new_err(format!(
                "offset spec must be 'earliest', 'latest' or a timestamp in ms, not {name:?}"
            ))),
        };
    }
    Ok(OffsetSpec::Timestamp(spec.extract::<i64>()?))
}

fn compression(name: &str) -> PyResult<Compression> {
    Ok(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => {
            return Err(PyValueError::new_err(format!(
                "compression must be one of none, gzip, snappy, lz4, zstd, not {name:?}"
            )))
        }
    })
}

/// A connection to a Kafka cluster for metadata, offsets and producing.
#[pyclass(name = "KafkaClient", module = "krust._core", frozen)]
pub struct PyKafkaClient {
    inner: Mutex<KafkaClient>,
}

#[pymethods]
impl PyKafkaClient {
    #[new]
    #[pyo3(signature = (bootstrap_servers, settings=None))]
    fn new(bootstrap_servers: &str, settings: Option<BTreeMap<String, String>>) -> PyResult<Self> {
        Ok(Self {
            inner: Mutex::new(connect(bootstrap_servers, settings)?),
        })
    }

    /// Partition count of every named topic that exists (all non-internal topics when
    /// `topics` is None).
    #[pyo3(signature = (topics=None))]
    fn partition_counts(
        &self,
        py: Python<'_>,
        topics: Option<Vec<String>>,
    ) -> PyResult<Vec<(String, usize)>> {
        py.detach(|| {
            let mut client = self.inner.lock();
            match topics {
                None => Ok(client
                    .all_topics()?
                    .into_iter()
                    .map(|(topic, partitions)| (topic, partitions.len()))
                    .collect()),
                Some(topics) => {
                    let mut counts = Vec::new();
                    for topic in topics {
                        match client.partitions(&topic) {
                            Ok(partitions) => counts.push((topic, partitions.len())),
                            Err(ClientError::UnknownTopic(_)) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(counts)
                }
            }
        })
        .map_err(client_error)
    }

    /// The offset `spec` names ("earliest", "latest" or a timestamp in ms) in each of
    /// `partitions` of `topic`; None where no record is at or after the timestamp.
    #[pyo3(signature = (topic, partitions, spec, read_committed=false))]
    fn list_offsets(
        &self,
        py: Python<'_>,
        topic: &str,
        partitions: Vec<i32>,
        spec: &Bound<'_, PyAny>,
        read_committed: bool,
    ) -> PyResult<Vec<Option<i64>>> {
        let spec = offset_spec(spec)?;
        py.detach(|| {
            let mut client = self.inner.lock();
            partitions
                .iter()
                .map(|&p| client.list_offset(topic, p, spec, read_committed))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(client_error)
    }

    /// Produces the rows of `batch` (an Arrow record batch with Spark's Kafka sink columns)
    /// as an idempotent producer; returns the number of records written.
    #[pyo3(signature = (batch, topic=None, acks="all", compression="none"))]
    fn produce(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        topic: Option<&str>,
        acks: &str,
        compression: &str,
    ) -> PyResult<usize> {
        // acks=0 is not offered: without a response there is no error to report.
        let acks = match acks {
            "all" | "-1" => ACKS_ALL,
            "1" => 1,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "acks must be all (-1) or 1, not {acks:?}"
                )))
            }
        };
        let options = ProduceOptions {
            acks,
            compression: self::compression(compression)?,
        };
        let rows = import_batch(batch)?;
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        py.detach(|| self.inner.lock().produce(&rows, topic, &options, now_ms))
            .map_err(client_error)
    }

    /// Makes this client the transactional producer of `transactional_id`, fencing older
    /// producers of the id and aborting the transaction they left open; every record it
    /// produces from then on belongs to the open transaction.
    #[pyo3(signature = (transactional_id, transaction_timeout_ms=60_000))]
    fn init_transactions(
        &self,
        py: Python<'_>,
        transactional_id: &str,
        transaction_timeout_ms: i32,
    ) -> PyResult<()> {
        py.detach(|| {
            self.inner
                .lock()
                .init_transactions(transactional_id, transaction_timeout_ms)
        })
        .map_err(client_error)
    }

    /// Commits `offset` (and `metadata`) of `group` for `topic`-`partition` within the open
    /// transaction: visible if and only if the transaction commits.
    #[pyo3(signature = (group, topic, partition, offset, metadata=None))]
    fn send_offsets_to_transaction(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        metadata: Option<&str>,
    ) -> PyResult<()> {
        py.detach(|| {
            self.inner
                .lock()
                .send_offsets_to_transaction(group, topic, partition, offset, metadata)
        })
        .map_err(client_error)
    }

    /// Commits the open transaction.
    fn commit_transaction(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.lock().end_transaction(true))
            .map_err(client_error)
    }

    /// Aborts the open transaction: its records are never read by read_committed readers.
    fn abort_transaction(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.lock().end_transaction(false))
            .map_err(client_error)
    }

    /// The offset and metadata `group` committed for `topic`-`partition`, None if none;
    /// waits for transactions still committing offsets of the group (require_stable).
    fn committed_offset(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> PyResult<Option<(i64, Option<String>)>> {
        py.detach(|| self.inner.lock().committed_offset(group, topic, partition))
            .map_err(client_error)
    }
}

/// Reads offsets `[start, end)` of one partition as Arrow batches of Spark's Kafka source
/// schema.
#[pyclass(name = "PartitionReader", module = "krust._core", frozen)]
pub struct PyPartitionReader {
    inner: Mutex<RangeReader>,
}

#[pymethods]
impl PyPartitionReader {
    #[new]
    #[pyo3(signature = (
        bootstrap_servers, topic, partition, start, end, include_headers=false,
        read_committed=false, settings=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        bootstrap_servers: &str,
        topic: &str,
        partition: i32,
        start: i64,
        end: i64,
        include_headers: bool,
        read_committed: bool,
        settings: Option<BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        if start < 0 || end < start {
            return Err(PyValueError::new_err(format!(
                "offset range [{start}, {end}) of {topic}-{partition} is not a valid range"
            )));
        }
        let options = FetchOptions {
            include_headers,
            read_committed,
            ..FetchOptions::default()
        };
        let client = connect(bootstrap_servers, settings)?;
        Ok(Self {
            inner: Mutex::new(RangeReader::new(
                client,
                topic,
                partition,
                start..end,
                options,
            )),
        })
    }

    /// The next batch of rows, or None once the whole range was read.
    fn next_batch(&self, py: Python<'_>) -> PyResult<Option<PyArrowBatch>> {
        py.detach(|| self.inner.lock().next_batch())
            .map(|batch| batch.map(PyArrowBatch::new))
            .map_err(client_error)
    }
}
