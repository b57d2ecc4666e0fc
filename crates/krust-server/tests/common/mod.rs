//! Helpers the in-process broker tests share.

use std::net::TcpListener;

use krust_server::settings::Listener;

/// A port of 127.0.0.1 nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PLAINTEXT listener named `name` on 127.0.0.1:`port`.
pub fn listener(name: &str, port: u16) -> Listener {
    Listener::plaintext(name, "127.0.0.1", port)
}
