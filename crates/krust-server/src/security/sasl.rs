//! A SASL listener's settings and one connection's SASL exchange (PLAIN or SCRAM).

use std::collections::HashMap;

use super::authentication::AuthenticationFailed;
use super::plain;
use super::scram::{ScramCredentials, ScramServer, ScramStep};

pub use krust_wire::sasl::SaslMechanism;

/// A SASL listener's settings: sasl.enabled.mechanisms and the PLAIN users of its
/// `listener.name.<l>.plain.sasl.jaas.config`, or a Python callback that checks PLAIN
/// credentials (`listener.name.<l>.plain.sasl.server.callback.handler.class`).
#[derive(Debug, Clone, Default)]
pub struct SaslSettings {
    pub enabled_mechanisms: Vec<SaslMechanism>,
    pub plain_users: HashMap<String, String>,
    pub plain_callback: bool,
    /// connections.max.reauth.ms: a connection must authenticate again within this many ms
    /// (KIP-368); 0: never.
    pub reauth_ms: i64,
}

impl SaslSettings {
    /// The enabled mechanism named `name`, if it is one.
    pub fn enabled(&self, name: &str) -> Option<SaslMechanism> {
        SaslMechanism::from_name(name).filter(|m| self.enabled_mechanisms.contains(m))
    }

    /// When a session authenticated now must have re-authenticated (None: never).
    pub fn session_deadline(&self) -> Option<std::time::Instant> {
        let lifetime = u64::try_from(self.reauth_ms).ok().filter(|ms| *ms > 0)?;
        Some(std::time::Instant::now() + std::time::Duration::from_millis(lifetime))
    }

    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.enabled_mechanisms.iter().map(|m| m.name()).collect()
    }
}

/// The answer to one client SASL message.
pub enum SaslStep {
    /// Send these bytes and wait for the client's next message.
    Challenge(Vec<u8>),
    /// The client authenticated as `user`; send these final bytes.
    Done { user: String, reply: Vec<u8> },
}

/// One connection's exchange with the mechanism it chose in SaslHandshake.
pub enum SaslExchange {
    Plain,
    Scram(ScramServer),
}

impl SaslExchange {
    pub fn new(mechanism: SaslMechanism) -> Self {
        match mechanism {
            SaslMechanism::Plain => SaslExchange::Plain,
            SaslMechanism::Scram(scram) => SaslExchange::Scram(ScramServer::new(scram)),
        }
    }

    pub fn evaluate(
        &mut self,
        message: &[u8],
        settings: &SaslSettings,
        credentials: &ScramCredentials,
    ) -> Result<SaslStep, AuthenticationFailed> {
        match self {
            SaslExchange::Plain => {
                let user = plain::authenticate(message, &settings.plain_users)?;
                Ok(SaslStep::Done {
                    user,
                    reply: Vec::new(),
                })
            }
            SaslExchange::Scram(server) => Ok(
                match server
                    .evaluate(message, |user, mechanism| credentials.get(user, mechanism))
                    .map_err(|e| AuthenticationFailed(e.to_string()))?
                {
                    ScramStep::Challenge(challenge) => SaslStep::Challenge(challenge),
                    ScramStep::Done { user, server_final } => SaslStep::Done {
                        user,
                        reply: server_final,
                    },
                },
            ),
        }
    }
}
