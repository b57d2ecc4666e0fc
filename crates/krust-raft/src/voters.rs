//! The static voter set, `controller.quorum.voters` (`id@host:port,...`): written once as the
//! log's membership entry, and any other voter set later met is refused.

use std::collections::{BTreeMap, BTreeSet};

use openraft::BasicNode;

use crate::{Membership, NodeId};

/// One voter: its node id and its controller listener.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Voter {
    pub id: NodeId,
    pub host: String,
    pub port: u16,
}

impl Voter {
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VotersError {
    #[error("controller.quorum.voters is empty")]
    Empty,
    #[error("controller.quorum.voters names node {0} twice")]
    Duplicate(NodeId),
    #[error("the voter address {0:?} is not host:port")]
    BadAddress(String),
    #[error("joint or learner memberships are not supported: krust's quorum is the static controller.quorum.voters")]
    NotStatic,
    #[error("the metadata log's voters are {stored} but controller.quorum.voters is {configured}: krust supports only a static voter set, so controller.quorum.voters must not change")]
    Changed { stored: String, configured: String },
}

/// The voter set from the config, sorted by node id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticVoters {
    voters: Vec<Voter>,
}

impl StaticVoters {
    pub fn new(mut voters: Vec<Voter>) -> Result<Self, VotersError> {
        if voters.is_empty() {
            return Err(VotersError::Empty);
        }
        voters.sort();
        for pair in voters.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(VotersError::Duplicate(pair[0].id));
            }
        }
        Ok(Self { voters })
    }

    pub fn voters(&self) -> &[Voter] {
        &self.voters
    }

    pub fn get(&self, id: NodeId) -> Option<&Voter> {
        self.voters.iter().find(|v| v.id == id)
    }

    pub fn ids(&self) -> BTreeSet<NodeId> {
        self.voters.iter().map(|v| v.id).collect()
    }

    /// The voters as Raft nodes (their address: host:port).
    pub fn nodes(&self) -> BTreeMap<NodeId, BasicNode> {
        self.voters
            .iter()
            .map(|v| (v.id, BasicNode { addr: v.address() }))
            .collect()
    }

    /// The Raft membership: one config of these voters, no learners.
    pub fn membership(&self) -> Membership {
        Membership::new(vec![self.ids()], self.nodes()).expect("the voters are their own nodes")
    }

    /// The voters a membership holds; a joint config or learners are refused.
    pub fn from_membership(membership: &Membership) -> Result<Self, VotersError> {
        let configs = membership.get_joint_config();
        if configs.len() != 1 || membership.nodes().count() != configs[0].len() {
            return Err(VotersError::NotStatic);
        }
        let voters = membership
            .nodes()
            .map(|(id, node)| {
                let (host, port) = node
                    .addr
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.to_string(), p.parse().ok()?)))
                    .ok_or_else(|| VotersError::BadAddress(node.addr.clone()))?;
                Ok(Voter {
                    id: *id,
                    host,
                    port,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(voters)
    }

    /// Refuses a stored voter set other than this one. A single voter may have moved to
    /// another address (a quorum of one's controller listener): no peer holds the old one,
    /// and the configured address is the one used from now on.
    pub fn check_same(&self, stored: &StaticVoters) -> Result<(), VotersError> {
        if stored == self || (self.voters.len() == 1 && stored.ids() == self.ids()) {
            return Ok(());
        }
        Err(VotersError::Changed {
            stored: stored.to_string(),
            configured: self.to_string(),
        })
    }
}

impl std::fmt::Display for StaticVoters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let listed: Vec<String> = self
            .voters
            .iter()
            .map(|v| format!("{}@{}", v.id, v.address()))
            .collect();
        f.write_str(&listed.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voter(id: NodeId, port: u16) -> Voter {
        Voter {
            id,
            host: "localhost".into(),
            port,
        }
    }

    #[test]
    fn membership_round_trips_and_a_change_is_refused_naming_the_key() {
        let voters = StaticVoters::new(vec![voter(2, 9094), voter(1, 9093)]).unwrap();
        let back = StaticVoters::from_membership(&voters.membership()).unwrap();
        assert_eq!(back, voters);
        let other = StaticVoters::new(vec![voter(1, 9093)]).unwrap();
        let error = other.check_same(&voters).unwrap_err().to_string();
        assert!(error.contains("controller.quorum.voters"), "{error}");
        assert!(
            error.contains("1@localhost:9093,2@localhost:9094"),
            "{error}"
        );
    }

    #[test]
    fn a_single_voter_may_move_but_not_change_its_id() {
        let stored = StaticVoters::new(vec![voter(1, 9092)]).unwrap();
        let moved = StaticVoters::new(vec![voter(1, 9093)]).unwrap();
        assert_eq!(moved.check_same(&stored), Ok(()));
        let other = StaticVoters::new(vec![voter(2, 9093)]).unwrap();
        assert!(other.check_same(&stored).is_err());
        let grown = StaticVoters::new(vec![voter(1, 9093), voter(2, 9094)]).unwrap();
        assert!(grown.check_same(&stored).is_err());
    }

    #[test]
    fn duplicates_and_empty_sets_are_refused() {
        assert_eq!(StaticVoters::new(vec![]), Err(VotersError::Empty));
        assert_eq!(
            StaticVoters::new(vec![voter(1, 1), voter(1, 2)]),
            Err(VotersError::Duplicate(1))
        );
    }
}
