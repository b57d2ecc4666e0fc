//! `krust._core`: the Rust core exposed to Python. The Python API is small (see
//! python/krust/_core.pyi); everything else stays in the Rust crates.

mod arrow_ffi;
mod authorizer_thread;
mod bridge_request;
mod broker;
mod config_table;
mod conversions;
mod kafka_client;
mod logging;
mod quorum;
mod telemetry;

use pyo3::prelude::*;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(logging::configure_logging, module)?)?;
    module.add_function(wrap_pyfunction!(config_table::config_table, module)?)?;
    module.add_function(wrap_pyfunction!(telemetry::decompress_telemetry, module)?)?;
    module.add_class::<broker::PyBroker>()?;
    module.add_class::<bridge_request::PyBridgeRequest>()?;
    module.add_class::<arrow_ffi::PyArrowBatch>()?;
    module.add_class::<kafka_client::PyKafkaClient>()?;
    module.add_class::<kafka_client::PyPartitionReader>()?;
    module.add_function(wrap_pyfunction!(
        kafka_client::check_client_settings,
        module
    )?)?;
    let py = module.py();
    module.add(
        "KafkaClientError",
        py.get_type::<kafka_client::KafkaClientError>(),
    )?;
    module.add(
        "KafkaConfigError",
        py.get_type::<kafka_client::KafkaConfigError>(),
    )?;
    module.add(
        "NotControllerError",
        py.get_type::<quorum::NotControllerError>(),
    )?;
    module.add(
        "DataLossError",
        py.get_type::<kafka_client::DataLossError>(),
    )?;
    Ok(())
}
