//! How this node talks to other nodes: the channels to the active controller and to brokers,
//! reaching the active controller (in-process or over a channel), and this node's member of the
//! controller quorum. Answering requests (forwarding included) lives in `network` and `handlers`.

pub mod broker_channels;
pub mod controller_quorum;
pub mod controller_route;
pub mod node_channel;
