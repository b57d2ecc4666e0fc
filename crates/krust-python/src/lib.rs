//! `krust._core`: the Rust core exposed to Python. The Python API is small (see
//! python/krust/_core.pyi); everything else stays in the Rust crates.

mod bridge_request;
mod broker;
mod conversions;

use pyo3::prelude::*;

/// Sends the core's log lines to stderr; `KRUST_LOG` filters them (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("KRUST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second initialisation (module re-import) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logging();
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<broker::PyBroker>()?;
    module.add_class::<bridge_request::PyBridgeRequest>()?;
    Ok(())
}
