//! What every connection and handler shares.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::authorizer::Authorizer;
use crate::bridge::Bridge;
use crate::controller_channel::broker_channels::BrokerChannels;
use crate::controller_channel::controller_quorum::QuorumCell;
use crate::controller_channel::controller_route::ControllerChannels;
use crate::controller_channel::node_channel::ControllerLocator;
use crate::fetch_session::FetchSessionCache;
use crate::metadata::metadata_cache::MetadataCache;
use crate::metrics::BrokerMetrics;
use crate::quota::connection_limits::ConnectionCounter;
use crate::quota::ClientQuotaManager;
use crate::replica::replica_manager::ReplicaManager;
use crate::request::routing::RoutingTable;
use crate::security::scram::ScramCredentials;
use crate::settings::BrokerSettings;
use crate::transaction::producer_ids::ProducerIdManager;

/// The broker state a request may read or change, shared by every connection.
pub struct ServerContext {
    pub settings: BrokerSettings,
    pub metadata: Arc<MetadataCache>,
    pub replicas: Arc<ReplicaManager>,
    pub bridge: Bridge,
    pub metrics: Arc<BrokerMetrics>,
    pub routes: RoutingTable,
    pub fetch_sessions: FetchSessionCache,
    pub producer_ids: Arc<ProducerIdManager>,
    /// Channels to the other brokers.
    pub broker_channels: Arc<BrokerChannels>,
    pub connections: Arc<ConnectionCounter>,
    /// The configured authorizer; `None`: no authorization, no check at all.
    pub authorizer: Option<Authorizer>,
    /// Client quotas: producer and consumer byte rates, request time.
    pub quotas: Arc<ClientQuotaManager>,
    /// queued.max.requests: permits for complete requests being handled broker-wide.
    pub request_slots: Semaphore,
    /// The SCRAM credentials of the metadata image, for SASL/SCRAM authentication.
    pub scram_credentials: Arc<ScramCredentials>,
    /// Which node is the active controller.
    pub controller_locator: Arc<ControllerLocator>,
    /// The channels to the active controller; `None` when this node is a quorum of one.
    pub controller_channels: Option<ControllerChannels>,
    /// This node's member of the controller quorum, once started.
    pub quorum: QuorumCell,
}

impl ServerContext {
    pub fn new(
        settings: BrokerSettings,
        metadata: Arc<MetadataCache>,
        replicas: Arc<ReplicaManager>,
        bridge: Bridge,
        metrics: Arc<BrokerMetrics>,
        quotas: Arc<ClientQuotaManager>,
        connections: Arc<ConnectionCounter>,
    ) -> Self {
        let slots = settings.queued_max_requests.max(1);
        ServerContext {
            producer_ids: Arc::new(ProducerIdManager::new(settings.node_id)),
            broker_channels: Arc::new(BrokerChannels::new(
                settings.node_id,
                settings.inter_broker_listener_name(),
                Arc::clone(&metadata),
            )),
            routes: RoutingTable::new(
                bridge.python_apis(),
                &settings.quorum.controller_listener_names,
            ),
            settings,
            metadata,
            replicas,
            bridge,
            metrics,
            fetch_sessions: FetchSessionCache::default(),
            connections,
            quotas,
            authorizer: None,
            request_slots: Semaphore::new(slots),
            scram_credentials: Arc::default(),
            controller_locator: Arc::default(),
            controller_channels: None,
            quorum: Arc::default(),
        }
    }

    /// The same context, reaching the controller through `locator` and `channels`.
    pub fn with_controller(
        self,
        locator: Arc<ControllerLocator>,
        channels: Option<ControllerChannels>,
    ) -> Self {
        ServerContext {
            controller_locator: locator,
            controller_channels: channels,
            ..self
        }
    }

    /// Whether this node is the active controller (always, for a quorum of one).
    pub fn is_active_controller(&self) -> bool {
        self.controller_channels.is_none()
            || self
                .controller_locator
                .active()
                .is_some_and(|node| node.id == self.settings.node_id)
    }

    /// The same context, with requests authorized by `authorizer`.
    pub fn with_authorizer(self, authorizer: Option<Authorizer>) -> Self {
        ServerContext { authorizer, ..self }
    }
}
