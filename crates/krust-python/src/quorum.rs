//! The controller quorum as Python drives it: `Broker.start_quorum(...)` and friends. The
//! quorum runs on its own small tokio runtime (made when it starts, in the serving process);
//! the controller's callbacks run, in log order, on one dedicated Python thread, never on a
//! tokio worker.

use std::sync::mpsc;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use krust_raft::quorum::{QuorumError, QuorumStatus, ReplicaStatus};
use krust_raft::state_machine::{AppliedRecord, Applier, ApplyError};
use krust_server::broker::Broker;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

create_exception!(
    _core,
    NotControllerError,
    PyException,
    "This node is not the active controller (the quorum's leader); `leader_id` names the leader, -1 if unknown."
);

/// One call to the controller's callbacks, answered on `reply`.
enum Callback {
    Apply(Vec<AppliedRecord>, mpsc::SyncSender<Result<(), ApplyError>>),
    Snapshot(mpsc::SyncSender<Result<Option<Vec<Bytes>>, ApplyError>>),
    LoadSnapshot(i64, Vec<Bytes>, mpsc::SyncSender<Result<(), ApplyError>>),
    LeaderChanged(i32, i32),
}

/// The Python callbacks start_quorum got.
pub struct Callbacks {
    pub apply: Py<PyAny>,
    pub snapshot: Py<PyAny>,
    pub load_snapshot: Py<PyAny>,
    pub leader_changed: Py<PyAny>,
}

/// The Applier the quorum calls: each call goes to the callback thread and waits.
struct PyApplier {
    calls: mpsc::SyncSender<Callback>,
}

fn gone() -> ApplyError {
    ApplyError("the controller's callback thread has stopped".into())
}

impl PyApplier {
    fn ask<T>(&self, call: impl FnOnce(mpsc::SyncSender<T>) -> Callback) -> Result<T, ApplyError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.calls.send(call(reply)).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())
    }
}

impl Applier for PyApplier {
    fn apply(&self, records: Vec<AppliedRecord>) -> Result<(), ApplyError> {
        self.ask(|reply| Callback::Apply(records, reply))?
    }

    fn snapshot(&self) -> Result<Option<Vec<Bytes>>, ApplyError> {
        self.ask(Callback::Snapshot)?
    }

    fn load_snapshot(&self, end_offset: i64, records: Vec<Bytes>) -> Result<(), ApplyError> {
        self.ask(|reply| Callback::LoadSnapshot(end_offset, records, reply))?
    }
}

fn py_error(py: Python<'_>, error: PyErr) -> ApplyError {
    error.print(py);
    ApplyError(error.to_string())
}

/// The callback thread: runs each call with the GIL, in the order they came.
fn run_callbacks(calls: mpsc::Receiver<Callback>, callbacks: Callbacks) {
    while let Ok(call) = calls.recv() {
        Python::attach(|py| match call {
            Callback::Apply(records, reply) => {
                let batch: Vec<(i64, i32, Py<PyBytes>)> = records
                    .iter()
                    .map(|r| (r.offset, r.epoch, PyBytes::new(py, &r.value).unbind()))
                    .collect();
                let result = callbacks.apply.call1(py, (batch,)).map(drop);
                let _ = reply.send(result.map_err(|e| py_error(py, e)));
            }
            Callback::Snapshot(reply) => {
                let result = callbacks
                    .snapshot
                    .call0(py)
                    .and_then(|records| records.extract::<Option<Vec<Vec<u8>>>>(py))
                    .map(|records| records.map(|r| r.into_iter().map(Bytes::from).collect()));
                let _ = reply.send(result.map_err(|e| py_error(py, e)));
            }
            Callback::LoadSnapshot(end_offset, records, reply) => {
                let records: Vec<Py<PyBytes>> = records
                    .iter()
                    .map(|r| PyBytes::new(py, r).unbind())
                    .collect();
                let result = callbacks
                    .load_snapshot
                    .call1(py, (end_offset, records))
                    .map(drop);
                let _ = reply.send(result.map_err(|e| py_error(py, e)));
            }
            Callback::LeaderChanged(leader_id, epoch) => {
                if let Err(error) = callbacks.leader_changed.call1(py, (leader_id, epoch)) {
                    error.print(py);
                }
            }
        });
    }
}

/// The quorum's runtime; dropping it stops the quorum.
pub struct QuorumRuntime {
    runtime: tokio::runtime::Runtime,
}

fn runtime_error(error: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(error.to_string())
}

fn quorum_error(py: Python<'_>, error: QuorumError) -> PyErr {
    match error {
        QuorumError::NotLeader { leader_id } => {
            let error = NotControllerError::new_err(format!(
                "this node is not the active controller; the leader is {}",
                leader_id.map_or("unknown".to_string(), |id| id.to_string())
            ));
            let _ = error
                .value(py)
                .setattr("leader_id", leader_id.unwrap_or(-1));
            error
        }
        other => runtime_error(other),
    }
}

impl QuorumRuntime {
    /// Starts the callback thread, the runtime and the quorum; returns once this node is a
    /// member (the newest snapshot already loaded through `load_snapshot`).
    pub fn start(py: Python<'_>, broker: &Arc<Broker>, callbacks: Callbacks) -> PyResult<Self> {
        let (calls, receiver) = mpsc::sync_channel(1024);
        std::thread::Builder::new()
            .name("krust-quorum-callbacks".into())
            .spawn(move || run_callbacks(receiver, callbacks))
            .map_err(runtime_error)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("krust-raft")
            .enable_all()
            .build()
            .map_err(runtime_error)?;
        let applier = Arc::new(PyApplier {
            calls: calls.clone(),
        });
        let broker = Arc::clone(broker);
        py.detach(|| {
            runtime.block_on(async {
                broker.start_quorum(applier).await?;
                let changes = broker.quorum().expect("just started").leader_changes();
                tokio::spawn(report_leader_changes(changes, calls));
                Ok::<_, krust_server::controller_channel::controller_quorum::StartError>(())
            })
        })
        .map_err(runtime_error)?;
        Ok(QuorumRuntime { runtime })
    }

    pub fn propose(&self, py: Python<'_>, broker: &Broker, records: Vec<Vec<u8>>) -> PyResult<i64> {
        let quorum = broker
            .quorum()
            .ok_or_else(|| runtime_error("the quorum is not started"))?;
        let records = records.into_iter().map(Bytes::from).collect();
        let result = py.detach(|| self.runtime.block_on(quorum.propose(records)));
        result.map_err(|e| quorum_error(py, e))
    }

    pub fn trigger_snapshot(&self, py: Python<'_>, broker: &Broker) -> PyResult<()> {
        let quorum = broker
            .quorum()
            .ok_or_else(|| runtime_error("the quorum is not started"))?;
        let result = py.detach(|| self.runtime.block_on(quorum.trigger_snapshot()));
        result.map_err(|e| quorum_error(py, e))
    }

    pub fn stop(&self, py: Python<'_>, broker: &Broker) {
        if let Some(quorum) = broker.quorum() {
            py.detach(|| self.runtime.block_on(quorum.shutdown()));
        }
    }
}

/// Tells the controller each new (leader, epoch), -1 while none is known.
async fn report_leader_changes(
    mut changes: BoxStream<'static, (i32, i32)>,
    calls: mpsc::SyncSender<Callback>,
) {
    while let Some((leader, epoch)) = changes.next().await {
        let calls = calls.clone();
        let sent =
            tokio::task::spawn_blocking(move || calls.send(Callback::LeaderChanged(leader, epoch)))
                .await;
        if !matches!(sent, Ok(Ok(()))) {
            return;
        }
    }
}

fn replicas<'py>(py: Python<'py>, replicas: &[ReplicaStatus]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in replicas {
        let entry = PyDict::new(py);
        entry.set_item("replica_id", r.replica_id)?;
        entry.set_item("log_end_offset", r.log_end_offset)?;
        entry.set_item("last_fetch_timestamp", r.last_fetch_timestamp)?;
        entry.set_item("last_caught_up_timestamp", r.last_caught_up_timestamp)?;
        list.append(entry)?;
    }
    Ok(list)
}

/// `Broker.quorum_status()`'s dict.
pub fn status_dict<'py>(py: Python<'py>, status: &QuorumStatus) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("node_id", status.node_id)?;
    dict.set_item("leader_id", status.leader_id)?;
    dict.set_item("leader_epoch", status.leader_epoch)?;
    dict.set_item("high_watermark", status.high_watermark)?;
    dict.set_item("is_leader", status.is_leader)?;
    dict.set_item("voters", replicas(py, &status.voters)?)?;
    dict.set_item("observers", replicas(py, &status.observers)?)?;
    Ok(dict)
}
