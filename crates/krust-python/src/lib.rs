//! `krust._core`: the Rust core exposed to Python. The Python API is small (see
//! python/krust/_core.pyi); everything else stays in the Rust crates.

mod bridge_request;
mod broker;
mod conversions;
mod logging;

use pyo3::prelude::*;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(logging::configure_logging, module)?)?;
    module.add_class::<broker::PyBroker>()?;
    module.add_class::<bridge_request::PyBridgeRequest>()?;
    Ok(())
}
