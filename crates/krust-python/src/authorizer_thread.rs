//! The thread that asks the Python authorizer about the core's cache misses.

use krust_server::authorizer::{AuthorizationCall, AuthorizerReceiver};
use pyo3::prelude::*;

/// One action as Python gets it: (operation, resource type, pattern type, resource name).
type PyAction = (i8, i8, i8, String);

/// Runs on a dedicated thread: each call goes to `authorize(principal, listener_name,
/// security_protocol, client_host, client_id, api_key, api_version, actions)`, which answers
/// one bool per action or None (the plugin failed: deny, cache nothing). The GIL is held only
/// while Python runs; the plugin's own thread does the work. Returns when the core stops.
pub fn run_authorizer_thread(mut receiver: AuthorizerReceiver, authorize: Py<PyAny>) {
    while let Some(call) = receiver.recv_blocking() {
        let AuthorizationCall {
            session,
            client_id,
            api_key,
            api_version,
            actions,
            reply,
        } = call;
        let actions: Vec<PyAction> = actions
            .into_iter()
            .map(|a| {
                (
                    a.operation as i8,
                    a.resource_type as i8,
                    a.pattern_type,
                    a.name,
                )
            })
            .collect();
        let answer = Python::attach(|py| {
            let args = (
                session.principal.to_string(),
                session.listener_name.clone(),
                session.security_protocol.name(),
                session.client_address.ip().to_string(),
                client_id,
                api_key,
                api_version,
                actions,
            );
            match authorize
                .call1(py, args)
                .and_then(|result| result.extract::<Option<Vec<bool>>>(py))
            {
                Ok(answer) => answer,
                Err(error) => {
                    error.print(py);
                    None
                }
            }
        });
        // The request may have gone away meanwhile; then no one waits for the answer.
        let _ = reply.send(answer);
    }
}
