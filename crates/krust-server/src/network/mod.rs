//! Sockets: accepting connections and serving each one's requests in order.

pub mod acceptor;
pub mod authenticate;
pub mod connection;
pub mod dispatch;
pub mod forwarding;
pub mod receive;
pub mod request_log;
pub mod send_frame;
pub mod transport;
