//! Arrow record batches to and from Python through the Arrow PyCapsule interface
//! (`__arrow_c_array__`): pyarrow (>= 14) and other Arrow libraries take and give batches
//! this way without copying. arrow-rs's own `pyarrow` feature would tie us to its pyo3
//! version, the capsules need only the C data interface.

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

const SCHEMA_CAPSULE: &std::ffi::CStr = c"arrow_schema";
const ARRAY_CAPSULE: &std::ffi::CStr = c"arrow_array";

/// A record batch built in Rust, handed to Python: `pyarrow.record_batch(batch)` imports it.
#[pyclass(name = "ArrowBatch", module = "krust._core", frozen)]
pub struct PyArrowBatch {
    batch: RecordBatch,
}

impl PyArrowBatch {
    pub fn new(batch: RecordBatch) -> Self {
        Self { batch }
    }
}

#[pymethods]
impl PyArrowBatch {
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The Arrow PyCapsule protocol: the batch as a struct array (schema, array) pair.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // The schema is fixed by the source; a consumer that asked for another one casts.
        let _ = requested_schema;
        let data = StructArray::from(self.batch.clone()).into_data();
        let schema = FFI_ArrowSchema::try_from(data.data_type())
            .map_err(|e| PyValueError::new_err(format!("cannot export the schema: {e}")))?;
        let array = FFI_ArrowArray::new(&data);
        let schema = PyCapsule::new_with_value(py, schema, SCHEMA_CAPSULE)?;
        let array = PyCapsule::new_with_value(py, array, ARRAY_CAPSULE)?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }
}

/// Imports a record batch from any object with `__arrow_c_array__` (a `pyarrow.RecordBatch`).
pub fn import_batch(batch: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let capsules = batch.call_method0("__arrow_c_array__")?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = capsules.extract()?;
    let schema_ptr = schema
        .pointer_checked(Some(SCHEMA_CAPSULE))?
        .cast::<FFI_ArrowSchema>();
    let array_ptr = array
        .pointer_checked(Some(ARRAY_CAPSULE))?
        .cast::<FFI_ArrowArray>();
    // SAFETY: the capsules hold an ArrowSchema and an ArrowArray as the PyCapsule protocol
    // defines them. The array is moved out and an empty (released) one left behind, so the
    // capsule's destructor does not release it a second time; the schema is only borrowed.
    let data = unsafe {
        let array = std::ptr::replace(array_ptr.as_ptr(), FFI_ArrowArray::empty());
        from_ffi(array, schema_ptr.as_ref())
    }
    .map_err(|e| PyValueError::new_err(format!("not a valid Arrow array: {e}")))?;
    if !matches!(data.data_type(), arrow_schema::DataType::Struct(_)) {
        return Err(PyValueError::new_err(
            "expected a record batch (an Arrow struct array)",
        ));
    }
    let struct_array = StructArray::from(data);
    if struct_array.null_count() > 0 {
        return Err(PyValueError::new_err(
            "a record batch has no null rows; this struct array has some",
        ));
    }
    Ok(RecordBatch::from(struct_array))
}
