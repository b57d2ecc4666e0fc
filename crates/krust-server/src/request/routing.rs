//! The one routing table: for a session (listener, internal or not) and an api key, which
//! handler serves which versions, or that the api is not enabled there.
//!
//! Kafka enables each api on a set of listener types (`ApiMessageType.ListenerType`) and lists
//! in ApiVersions only what the listener serves; a request for anything else closes the
//! connection. Controller apis (BrokerHeartbeat, AllocateProducerIds, ...) are served on the
//! controller listeners (`controller.listener.names`); a node that is a quorum of one has
//! none and reaches its controller in-process, through the core's own internal session.

use std::collections::BTreeMap;

use kafka_protocol::messages::ApiKey;

use crate::security::session::Session;

/// Version ranges of the apis the core answers itself. They start low enough for librdkafka's
/// feature probes (MsgVer2 needs Produce 3 and Fetch 4) and keep Metadata v0 for aiokafka.
const NATIVE_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 11),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeLogDirs, 1, 4),
    // Kafka 4 serves v1-2 (KIP-896 removed v0).
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// Apis the core answers on the controller listeners (and for itself).
const CONTROLLER_NATIVE_APIS: &[(ApiKey, i16, i16)] = &[(ApiKey::Envelope, 0, 0)];

/// Who may call an api.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Clients on the broker listeners, and the core itself.
    Clients,
    /// The core itself only; never advertised.
    Internal,
    /// Controller apis: the controller listeners and the core itself (a node that is a
    /// quorum of one reaches its controller in-process).
    Controller,
    /// Admin apis the active controller decides (Kafka's `forwardable`): served on the
    /// controller listeners, and on the broker listeners too, where a node with a
    /// controller quorum forwards them to the active controller (KIP-590).
    Forwarded,
}

/// Which side answers an api.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// A handler in the core (`handlers::handle_native`).
    Native,
    /// Python, across the bridge.
    Python,
}

/// An api Python registered: its versions and who may call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonApi {
    pub min_version: i16,
    pub max_version: i16,
    pub exposure: Exposure,
}

/// Where requests of one api go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub handler: Handler,
    pub min_version: i16,
    pub max_version: i16,
    pub exposure: Exposure,
}

/// Native apis every listener serves: the connection's own handshake, the quorum's state
/// and the cluster's nodes (Kafka serves DescribeQuorum and DescribeCluster to brokers' and
/// controllers' clients alike; KIP-919's `--bootstrap-controller`).
const EVERY_LISTENER: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeCluster,
];

impl Route {
    fn enabled_for(&self, api_key: i16, session: &Session, on_controller: bool) -> bool {
        if session.is_internal() {
            return true;
        }
        match self.exposure {
            Exposure::Clients => {
                !on_controller || EVERY_LISTENER.iter().any(|key| *key as i16 == api_key)
            }
            Exposure::Internal => false,
            Exposure::Controller => on_controller,
            Exposure::Forwarded => true,
        }
    }
}

/// Every api the broker serves, native and Python, with who may call it.
#[derive(Debug, Clone)]
pub struct RoutingTable {
    routes: BTreeMap<i16, Route>,
    /// `controller.listener.names`.
    controller_listeners: Vec<String>,
}

impl RoutingTable {
    /// The native apis plus Python's; a Python registration of a native api key replaces it,
    /// except an internal-only one (a service the core calls, e.g. the SASL/PLAIN callback on
    /// SaslAuthenticate), which the core reaches through the bridge without routing.
    pub fn new(python_apis: &BTreeMap<i16, PythonApi>, controller_listeners: &[String]) -> Self {
        let native_route = |exposure| {
            move |(key, min, max): &(ApiKey, i16, i16)| {
                let route = Route {
                    handler: Handler::Native,
                    min_version: *min,
                    max_version: *max,
                    exposure,
                };
                (*key as i16, route)
            }
        };
        let native = NATIVE_APIS
            .iter()
            .map(native_route(Exposure::Clients))
            .chain(
                CONTROLLER_NATIVE_APIS
                    .iter()
                    .map(native_route(Exposure::Controller)),
            );
        let native_keys: Vec<i16> = NATIVE_APIS.iter().map(|(key, ..)| *key as i16).collect();
        let python = python_apis
            .iter()
            .filter(move |(key, api)| {
                api.exposure != Exposure::Internal || !native_keys.contains(key)
            })
            .map(|(key, api)| {
                let route = Route {
                    handler: Handler::Python,
                    min_version: api.min_version,
                    max_version: api.max_version,
                    exposure: api.exposure,
                };
                (*key, route)
            });
        RoutingTable {
            routes: native.chain(python).collect(),
            controller_listeners: controller_listeners.to_vec(),
        }
    }

    /// Whether the session came in on a controller listener.
    pub fn on_controller_listener(&self, session: &Session) -> bool {
        self.controller_listeners.contains(&session.listener_name)
    }

    /// Whether a quorum RPC (`krust_raft::wire`, krust-private api keys never listed in
    /// ApiVersions) is served on this session: only on a controller listener.
    pub fn serves_quorum_rpcs(&self, session: &Session) -> bool {
        !session.is_internal() && self.on_controller_listener(session)
    }

    /// Where `api_key` goes for this session; `None` if it is not enabled there.
    pub fn route(&self, session: &Session, api_key: ApiKey) -> Option<Route> {
        let on_controller = self.on_controller_listener(session);
        self.routes
            .get(&(api_key as i16))
            .filter(|route| route.enabled_for(api_key as i16, session, on_controller))
            .copied()
    }

    /// The (api key, min, max) this session may use, by api key: what ApiVersions lists.
    /// The core's own session sees only what clients see: it never asks ApiVersions.
    pub fn enabled(&self, session: &Session) -> impl Iterator<Item = (i16, i16, i16)> + '_ {
        let on_controller = self.on_controller_listener(session);
        let internal = session.is_internal();
        let session = session.clone();
        let listed = move |key: i16, route: &Route| {
            route.exposure != Exposure::Internal
                && (internal || route.enabled_for(key, &session, on_controller))
        };
        self.routes
            .iter()
            .filter(move |(key, route)| listed(**key, route))
            .map(|(key, route)| (*key, route.min_version, route.max_version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::session::SecurityProtocol;

    fn table() -> RoutingTable {
        let python = BTreeMap::from([
            (
                ApiKey::CreateTopics as i16,
                PythonApi {
                    min_version: 2,
                    max_version: 7,
                    exposure: Exposure::Clients,
                },
            ),
            (
                ApiKey::AllocateProducerIds as i16,
                PythonApi {
                    min_version: 0,
                    max_version: 0,
                    exposure: Exposure::Internal,
                },
            ),
        ]);
        RoutingTable::new(&python, &[])
    }

    fn client() -> Session {
        Session::client(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            "127.0.0.1:4000".parse().unwrap(),
        )
    }

    #[test]
    fn internal_only_apis_are_neither_routed_nor_listed_for_clients() {
        let table = table();
        assert_eq!(table.route(&client(), ApiKey::AllocateProducerIds), None);
        let listed: Vec<i16> = table.enabled(&client()).map(|(key, _, _)| key).collect();
        assert!(!listed.contains(&(ApiKey::AllocateProducerIds as i16)));
        assert!(listed.contains(&(ApiKey::CreateTopics as i16)));
        assert!(listed.contains(&(ApiKey::Produce as i16)));
    }

    #[test]
    fn the_core_reaches_internal_only_and_client_apis() {
        let table = table();
        let internal = Session::internal();
        let route = table.route(&internal, ApiKey::AllocateProducerIds).unwrap();
        assert_eq!(route.handler, Handler::Python);
        let route = table.route(&internal, ApiKey::CreateTopics).unwrap();
        assert_eq!((route.min_version, route.max_version), (2, 7));
    }

    #[test]
    fn quorum_rpcs_are_served_only_on_controller_listeners() {
        let table = RoutingTable::new(&BTreeMap::new(), &["CONTROLLER".to_string()]);
        assert!(!table.serves_quorum_rpcs(&client()));
        assert!(!table.serves_quorum_rpcs(&Session::internal()));
        let controller = Session::client(
            "CONTROLLER",
            SecurityProtocol::Plaintext,
            "127.0.0.1:4001".parse().unwrap(),
        );
        assert!(table.serves_quorum_rpcs(&controller));
        let listed: Vec<i16> = table.enabled(&controller).map(|(key, _, _)| key).collect();
        assert!(listed
            .iter()
            .all(|key| !krust_raft::wire::is_quorum_api(*key)));
        assert!(listed.contains(&(ApiKey::DescribeQuorum as i16)));
    }

    #[test]
    fn unregistered_apis_are_not_enabled() {
        assert_eq!(table().route(&client(), ApiKey::JoinGroup), None);
        assert_eq!(
            table().route(&client(), ApiKey::Fetch).map(|r| r.handler),
            Some(Handler::Native)
        );
    }

    #[test]
    fn an_internal_only_python_service_keeps_the_native_client_api() {
        let python = BTreeMap::from([(
            ApiKey::SaslAuthenticate as i16,
            PythonApi {
                min_version: 2,
                max_version: 2,
                exposure: Exposure::Internal,
            },
        )]);
        let route = RoutingTable::new(&python, &[])
            .route(&client(), ApiKey::SaslAuthenticate)
            .unwrap();
        assert_eq!(
            (route.handler, route.min_version, route.max_version),
            (Handler::Native, 0, 2)
        );
    }

    fn api(exposure: Exposure) -> PythonApi {
        PythonApi {
            min_version: 0,
            max_version: 3,
            exposure,
        }
    }

    #[test]
    fn the_controller_listener_serves_controller_apis_and_no_broker_api() {
        let python = BTreeMap::from([
            (ApiKey::BrokerHeartbeat as i16, api(Exposure::Controller)),
            (ApiKey::CreateTopics as i16, api(Exposure::Forwarded)),
            (ApiKey::JoinGroup as i16, api(Exposure::Clients)),
        ]);
        let table = RoutingTable::new(&python, &["CONTROLLER".to_string()]);
        let controller = Session::client(
            "CONTROLLER",
            SecurityProtocol::Plaintext,
            "127.0.0.1:4000".parse().unwrap(),
        );
        let served = |session: &Session, key| table.route(session, key).is_some();
        for key in [
            ApiKey::BrokerHeartbeat,
            ApiKey::CreateTopics,
            ApiKey::Envelope,
            ApiKey::ApiVersions,
            ApiKey::DescribeCluster,
        ] {
            assert!(
                served(&controller, key),
                "{key:?} on the controller listener"
            );
        }
        for key in [
            ApiKey::Produce,
            ApiKey::Fetch,
            ApiKey::Metadata,
            ApiKey::JoinGroup,
        ] {
            assert!(
                !served(&controller, key),
                "{key:?} on the controller listener"
            );
        }
        for key in [ApiKey::BrokerHeartbeat, ApiKey::Envelope] {
            assert!(!served(&client(), key), "{key:?} on a broker listener");
        }
        assert!(served(&client(), ApiKey::CreateTopics));
        let listed: Vec<i16> = table.enabled(&controller).map(|(key, ..)| key).collect();
        assert!(listed.contains(&(ApiKey::BrokerHeartbeat as i16)));
        assert!(!listed.contains(&(ApiKey::Produce as i16)));
        // The core's own session reaches the controller apis of a quorum of one.
        assert!(served(&Session::internal(), ApiKey::BrokerHeartbeat));
    }
}
