//! Authorization for native handlers (docs/authorization.md): decisions cached per (principal,
//! host, operation, resource) and, on a miss, asked of the Python authorizer plugin through a
//! channel served by a dedicated thread of the bindings crate. A tokio worker only awaits a
//! oneshot; a cached decision never touches Python. Without an authorizer configured the
//! server context has none and handlers check nothing.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::protocol::StrBytes;
use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot};

use crate::request::request_context::RequestContext;
use crate::security::session::{KafkaPrincipal, Session};

/// Kafka's AclOperation codes (the ones native handlers check).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
}

/// Kafka's ResourceType codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
}

/// The name of the one CLUSTER resource (Kafka's Resource.CLUSTER_NAME).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// PatternType ANY: "some resource of this type" (Kafka's authorizeByResourceType).
const PATTERN_ANY: i8 = 1;
const PATTERN_LITERAL: i8 = 3;
/// Past this many cached decisions the cache starts over rather than grow without bound.
const MAX_CACHED: usize = 1 << 16;

/// Kafka's AclEntry.supportedOperations of a topic, in KIP-430's bit order.
pub const TOPIC_OPERATIONS: &[AclOperation] = &[
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Describe,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];
/// Kafka's AclEntry.supportedOperations of the cluster.
pub const CLUSTER_OPERATIONS: &[AclOperation] = &[
    AclOperation::Create,
    AclOperation::ClusterAction,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
    AclOperation::IdempotentWrite,
    AclOperation::Alter,
    AclOperation::Describe,
];

/// One thing a request wants to do: an operation on a named resource, or (`any_of_type`) on
/// at least one resource of a type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Action {
    pub operation: AclOperation,
    pub resource_type: ResourceType,
    pub pattern_type: i8,
    pub name: String,
}

impl Action {
    pub fn new(operation: AclOperation, resource_type: ResourceType, name: &str) -> Self {
        Action {
            operation,
            resource_type,
            pattern_type: PATTERN_LITERAL,
            name: name.to_string(),
        }
    }

    pub fn on_cluster(operation: AclOperation) -> Self {
        Action::new(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Allowed if the operation is allowed on some resource of the type.
    pub fn any_of_type(operation: AclOperation, resource_type: ResourceType) -> Self {
        Action {
            operation,
            resource_type,
            pattern_type: PATTERN_ANY,
            name: String::new(),
        }
    }
}

/// A cache miss on its way to Python: the request's identity and the actions to decide.
#[derive(Debug)]
pub struct AuthorizationCall {
    pub session: Session,
    pub client_id: Option<String>,
    pub api_key: i16,
    pub api_version: i16,
    pub actions: Vec<Action>,
    /// One decision per action, or `None` when the plugin failed (deny, cache nothing).
    pub reply: oneshot::Sender<Option<Vec<bool>>>,
}

/// The receiving half, served by the bindings crate's authorizer thread.
pub struct AuthorizerReceiver {
    receiver: mpsc::UnboundedReceiver<AuthorizationCall>,
}

impl AuthorizerReceiver {
    /// Blocks the calling (non-tokio) thread until the next call; `None` once the server is gone.
    pub fn recv_blocking(&mut self) -> Option<AuthorizationCall> {
        self.receiver.blocking_recv()
    }
}

#[derive(Debug, PartialEq, Eq)]
struct CacheKey {
    principal: KafkaPrincipal,
    host: IpAddr,
    action: Action,
}

/// Cached decisions; `invalidate` forgets them all (ACLs changed, or the plugin asked).
#[derive(Default)]
pub struct DecisionCache {
    // By a hash of the key computed without allocating; the full key resolves collisions.
    decisions: RwLock<HashMap<u64, Vec<(CacheKey, bool)>>>,
    len: AtomicU64,
    generation: AtomicU64,
}

fn key_hash(principal: &KafkaPrincipal, host: IpAddr, action: &Action) -> u64 {
    let mut hasher = DefaultHasher::new();
    principal.principal_type.hash(&mut hasher);
    principal.name.hash(&mut hasher);
    host.hash(&mut hasher);
    action.hash(&mut hasher);
    hasher.finish()
}

impl DecisionCache {
    fn get(&self, principal: &KafkaPrincipal, host: IpAddr, action: &Action) -> Option<bool> {
        let hash = key_hash(principal, host, action);
        let decisions = self.decisions.read();
        decisions.get(&hash)?.iter().find_map(|(key, allowed)| {
            (key.host == host && &key.principal == principal && &key.action == action)
                .then_some(*allowed)
        })
    }

    /// Stores decisions made at `generation`; dropped if the cache was invalidated meanwhile.
    fn insert(
        &self,
        generation: u64,
        principal: &KafkaPrincipal,
        host: IpAddr,
        decided: Vec<(Action, bool)>,
    ) {
        let mut decisions = self.decisions.write();
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if self.len.load(Ordering::Relaxed) as usize >= MAX_CACHED {
            decisions.clear();
            self.len.store(0, Ordering::Relaxed);
        }
        for (action, allowed) in decided {
            let hash = key_hash(principal, host, &action);
            let bucket = decisions.entry(hash).or_default();
            if bucket.iter().any(|(key, _)| {
                key.action == action && key.host == host && &key.principal == principal
            }) {
                continue;
            }
            bucket.push((
                CacheKey {
                    principal: principal.clone(),
                    host,
                    action,
                },
                allowed,
            ));
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets every decision, including those being asked for right now.
    pub fn invalidate(&self) {
        let mut decisions = self.decisions.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        decisions.clear();
        self.len.store(0, Ordering::Relaxed);
    }

    /// How many decisions are cached.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What handlers ask: the cache first, Python for the misses (in one call per request).
#[derive(Clone)]
pub struct Authorizer {
    cache: Arc<DecisionCache>,
    sender: mpsc::UnboundedSender<AuthorizationCall>,
}

impl Authorizer {
    pub fn new(cache: Arc<DecisionCache>) -> (Authorizer, AuthorizerReceiver) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (
            Authorizer { cache, sender },
            AuthorizerReceiver { receiver },
        )
    }

    /// One decision per action, in order.
    pub async fn authorize(&self, request: &RequestContext<'_>, actions: &[Action]) -> Vec<bool> {
        let session = request.session;
        if session.is_internal() {
            return vec![true; actions.len()];
        }
        let host = session.client_address.ip();
        let principal = &session.principal;
        let mut decisions: Vec<Option<bool>> = actions
            .iter()
            .map(|action| self.cache.get(principal, host, action))
            .collect();
        let misses: Vec<Action> = actions
            .iter()
            .zip(&decisions)
            .filter(|(_, decided)| decided.is_none())
            .map(|(action, _)| action.clone())
            .collect();
        if misses.is_empty() {
            return decisions.into_iter().map(|d| d.unwrap_or(false)).collect();
        }
        // The plugin may take a while: the request stops holding a queued.max.requests slot.
        request.park();
        let generation = self.cache.generation.load(Ordering::Acquire);
        let answered = self.ask(request, misses.clone()).await;
        let mut answers = answered.clone().unwrap_or_default().into_iter();
        for decided in decisions.iter_mut().filter(|d| d.is_none()) {
            *decided = Some(answers.next().unwrap_or(false));
        }
        if let Some(answers) = answered {
            let decided = misses.into_iter().zip(answers).collect();
            self.cache.insert(generation, principal, host, decided);
        }
        decisions.into_iter().map(|d| d.unwrap_or(false)).collect()
    }

    async fn ask(&self, request: &RequestContext<'_>, actions: Vec<Action>) -> Option<Vec<bool>> {
        let expected = actions.len();
        let (reply, answer) = oneshot::channel();
        let call = AuthorizationCall {
            session: request.session.clone(),
            client_id: request.header.client_id.as_ref().map(StrBytes::to_string),
            api_key: request.header.request_api_key,
            api_version: request.header.request_api_version,
            actions,
            reply,
        };
        if self.sender.send(call).is_err() {
            tracing::error!("the authorizer is not running: denying");
            return None;
        }
        answer.await.ok().flatten().filter(|a| a.len() == expected)
    }

    /// The names among `names` the request may not do `operation` on (a topic or group).
    pub async fn denied<'n>(
        &self,
        request: &RequestContext<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
        names: impl IntoIterator<Item = &'n str>,
    ) -> HashSet<String> {
        let unique: Vec<&str> = names
            .into_iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let actions: Vec<Action> = unique
            .iter()
            .map(|name| Action::new(operation, resource_type, name))
            .collect();
        let decisions = self.authorize(request, &actions).await;
        unique
            .into_iter()
            .zip(decisions)
            .filter(|(_, allowed)| !allowed)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Whether the request may do `action`.
    pub async fn allows(&self, request: &RequestContext<'_>, action: Action) -> bool {
        self.authorize(request, std::slice::from_ref(&action))
            .await
            .first()
            .copied()
            .unwrap_or(false)
    }

    /// KIP-430: the bit field of the operations among `supported` the request may perform.
    pub async fn authorized_operations(
        &self,
        request: &RequestContext<'_>,
        resource_type: ResourceType,
        name: &str,
        supported: &[AclOperation],
    ) -> i32 {
        let actions: Vec<Action> = supported
            .iter()
            .map(|op| Action::new(*op, resource_type, name))
            .collect();
        let decisions = self.authorize(request, &actions).await;
        supported
            .iter()
            .zip(decisions)
            .filter(|(_, allowed)| *allowed)
            .fold(0, |bits, (op, _)| bits | 1 << (*op as i8))
    }
}

/// KIP-430's answer without an authorizer: every supported operation.
pub fn all_operations(supported: &[AclOperation]) -> i32 {
    supported.iter().fold(0, |bits, op| bits | 1 << (*op as i8))
}

#[cfg(test)]
mod tests;
