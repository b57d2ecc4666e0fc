//! A request as the core sees it, between the socket and a handler: its context and header,
//! the response frame it returns, and the routing table of which handler serves which api.
//! No socket code (`network`) and no handler (`handlers`) lives here.

pub mod request_context;
pub mod response_frame;
pub mod routing;
