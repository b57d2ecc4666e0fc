//! The Python face of a bridged request, and the thread that hands requests to Python.

use bytes::Bytes;
use krust_server::bridge::{BridgeReceiver, BridgeReply, BridgeRequest};
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::oneshot;

/// One request crossing to Python; answered once with `respond` or `close_connection`.
#[pyclass(name = "BridgeRequest", module = "krust._core", frozen)]
pub struct PyBridgeRequest {
    #[pyo3(get)]
    api_key: i16,
    #[pyo3(get)]
    api_version: i16,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    client_id: Option<String>,
    #[pyo3(get)]
    principal: String,
    #[pyo3(get)]
    listener_name: String,
    #[pyo3(get)]
    security_protocol: &'static str,
    #[pyo3(get)]
    client_host: String,
    #[pyo3(get)]
    client_port: u16,
    #[pyo3(get)]
    internal: bool,
    #[pyo3(get)]
    client_software_name: String,
    #[pyo3(get)]
    client_software_version: String,
    body: Bytes,
    reply: Mutex<Option<oneshot::Sender<BridgeReply>>>,
}

impl From<BridgeRequest> for PyBridgeRequest {
    fn from(request: BridgeRequest) -> Self {
        let call = request.call;
        let session = call.session;
        PyBridgeRequest {
            api_key: call.api_key,
            api_version: call.api_version,
            correlation_id: call.correlation_id,
            client_id: call.client_id,
            principal: session.principal.to_string(),
            security_protocol: session.security_protocol.name(),
            client_host: session.client_address.ip().to_string(),
            client_port: session.client_address.port(),
            internal: session.is_internal(),
            listener_name: session.listener_name,
            client_software_name: session.client_software.name,
            client_software_version: session.client_software.version,
            body: call.body,
            reply: Mutex::new(Some(request.reply)),
        }
    }
}

#[pymethods]
impl PyBridgeRequest {
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.body)
    }

    /// Sends the encoded response body; the connection frames and writes it, then is not read
    /// for `throttle_ms` (the throttle time the body carries, KIP-219).
    #[pyo3(signature = (body, throttle_ms = 0))]
    fn respond(&self, body: &[u8], throttle_ms: i64) -> PyResult<()> {
        self.answer(BridgeReply::Response {
            body: Bytes::copy_from_slice(body),
            throttle_ms,
        })
    }

    /// Answers nothing and closes the client's connection.
    fn close_connection(&self) -> PyResult<()> {
        self.answer(BridgeReply::CloseConnection)
    }

    fn __repr__(&self) -> String {
        format!(
            "BridgeRequest(api_key={}, api_version={}, correlation_id={}, client_id={:?}, \
             principal={}, listener_name={}, internal={})",
            self.api_key,
            self.api_version,
            self.correlation_id,
            self.client_id,
            self.principal,
            self.listener_name,
            self.internal
        )
    }
}

impl PyBridgeRequest {
    fn answer(&self, reply: BridgeReply) -> PyResult<()> {
        let sender = self
            .reply
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this request was already answered"))?;
        // The client may have gone away meanwhile; then there is no one to answer.
        let _ = sender.send(reply);
        Ok(())
    }
}

/// Runs on a dedicated thread: takes requests off the bridge channel and hands each to the
/// Python `handler`, holding the GIL only for that call. Returns when the core stops.
pub fn run_bridge_thread(mut receiver: BridgeReceiver, handler: Py<PyAny>) {
    while let Some(request) = receiver.recv_blocking() {
        Python::attach(|py| {
            let result = Py::new(py, PyBridgeRequest::from(request))
                .and_then(|request| handler.call1(py, (request,)));
            if let Err(error) = result {
                // The request's reply sender is dropped with it: its connection is closed.
                error.print(py);
            }
        });
    }
}
