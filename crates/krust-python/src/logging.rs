//! The core's log output on stderr: text for people or JSON lines, levels per module through a
//! tracing `EnvFilter` (docs/logging.md). Python's own log lines take the same shape
//! (python/krust/logs.py), so one broker's stderr reads as one log.

use std::sync::OnceLock;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tracing_subscriber::EnvFilter;

/// The one subscriber of the process, installed at most once.
static INSTALLED: OnceLock<()> = OnceLock::new();

/// Parses `levels` (e.g. `info,krust_server::network=debug`) the way the subscriber will.
/// openraft logs every vote and election at info: it gets `warn` unless `levels` names it.
fn env_filter(levels: &str) -> PyResult<EnvFilter> {
    let levels = if levels.contains("openraft") {
        levels.to_string()
    } else {
        format!("{levels},openraft=warn")
    };
    EnvFilter::try_new(levels).map_err(|error| PyValueError::new_err(error.to_string()))
}

/// Installs the subscriber: `levels` is an EnvFilter, `format` "text" or "json". The first
/// call wins for the life of the process; later ones only validate their arguments.
#[pyfunction]
pub fn configure_logging(levels: &str, format: &str) -> PyResult<()> {
    let filter = env_filter(levels)?;
    let json = match format {
        "text" => false,
        "json" => true,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown log format {other:?}: expected text or json"
            )))
        }
    };
    INSTALLED.get_or_init(|| {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        // A second subscriber (set by an embedding program) keeps its own.
        let _ = if json {
            builder.json().flatten_event(true).try_init()
        } else {
            builder
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .try_init()
        };
    });
    Ok(())
}

/// The subscriber a program that never configured logging gets when it opens a broker:
/// `KRUST_LOG` (default `info`), as text.
pub fn ensure_default_logging() {
    if INSTALLED.get().is_none() {
        let levels = std::env::var("KRUST_LOG").unwrap_or_else(|_| "info".into());
        if configure_logging(&levels, "text").is_err() {
            let _ = configure_logging("info", "text");
        }
    }
}
