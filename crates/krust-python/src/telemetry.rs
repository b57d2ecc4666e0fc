//! KIP-714 payloads for Python's client metrics service: decompressed here with the codecs the
//! storage validates produced batches with, so Python needs no compression libraries.

use krust_storage::{decompress_payload, PayloadError};
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The payload of a PushTelemetry request, decompressed with Kafka's codec `compression_type`;
/// OverflowError past `max_bytes` of output (TELEMETRY_TOO_LARGE), ValueError for an unknown
/// codec or bytes that do not decompress.
#[pyfunction]
pub fn decompress_telemetry<'py>(
    py: Python<'py>,
    compression_type: i8,
    data: &[u8],
    max_bytes: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    match py.detach(|| decompress_payload(compression_type, data, max_bytes)) {
        Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
        Err(error @ PayloadError::TooLarge { .. }) => {
            Err(PyOverflowError::new_err(error.to_string()))
        }
        Err(error) => Err(PyValueError::new_err(error.to_string())),
    }
}
