//! The config table (`config_keys.toml`, which the core embeds at compile time) as Python
//! values: Python's config layer reads the very table the core uses, without parsing TOML in
//! Python at every start (a tenth of an empty broker's start-up).

use krust_config::table::CONFIG_TABLE;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use toml::Value;

/// The whole table: `{"broker": [...], "topic": [...], "group": [...], "client_metrics": [...]}`,
/// each entry a dict.
#[pyfunction]
pub fn config_table(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let table: toml::Table =
        toml::from_str(CONFIG_TABLE).map_err(|error| PyValueError::new_err(error.to_string()))?;
    table_to_python(py, &table)
}

fn table_to_python<'py>(py: Python<'py>, table: &toml::Table) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in table {
        dict.set_item(key, value_to_python(py, value)?)?;
    }
    Ok(dict)
}

fn value_to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::String(text) => text.into_pyobject(py)?.into_any(),
        Value::Integer(number) => number.into_pyobject(py)?.into_any(),
        Value::Float(number) => number.into_pyobject(py)?.into_any(),
        Value::Boolean(flag) => flag.into_pyobject(py)?.to_owned().into_any(),
        Value::Datetime(datetime) => datetime.to_string().into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let converted = items
                .iter()
                .map(|item| value_to_python(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, converted)?.into_any()
        }
        Value::Table(table) => table_to_python(py, table)?.into_any(),
    })
}
