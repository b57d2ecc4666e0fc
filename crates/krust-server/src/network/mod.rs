//! Sockets: accepting connections, authenticating them, and serving each one's requests in
//! order, dispatched to a handler, across the bridge, or forwarded to the active controller.
//! What a request and its response are lives in `request`; answering one lives in `handlers`.

pub mod acceptor;
pub mod authenticate;
pub mod client_software;
pub mod connection;
pub mod dispatch;
pub mod forwarding;
pub mod receive;
pub mod request_log;
pub mod send_frame;
pub mod transport;
