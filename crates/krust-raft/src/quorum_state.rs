//! The Raft vote as Kafka's `quorum-state` file (QuorumStateData, version 0 JSON) in the
//! metadata log's directory, written `.tmp`, fsynced and renamed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{invalid_data, NodeId, Vote};

pub const QUORUM_STATE_FILE: &str = "quorum-state";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuorumStateData {
    #[serde(default)]
    cluster_id: String,
    leader_id: i32,
    leader_epoch: i32,
    voted_id: i32,
    #[serde(default)]
    applied_offset: i64,
    #[serde(default)]
    current_voters: Vec<CurrentVoter>,
    #[serde(rename = "data_version")]
    data_version: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CurrentVoter {
    voter_id: i32,
}

/// Kafka's leaderEpoch/leaderId/votedId of a vote: the term; the leader once the vote is
/// committed (granted by a quorum), else -1; the node voted for.
pub fn to_json(vote: &Vote, voters: &[NodeId]) -> io::Result<Vec<u8>> {
    let leader_id = vote.leader_id;
    let data = QuorumStateData {
        cluster_id: String::new(),
        leader_id: if vote.committed {
            leader_id.voted_for
        } else {
            -1
        },
        leader_epoch: crate::epoch_of(leader_id.term)?,
        voted_id: leader_id.voted_for,
        applied_offset: 0,
        current_voters: voters
            .iter()
            .map(|id| CurrentVoter { voter_id: *id })
            .collect(),
        data_version: 0,
    };
    serde_json::to_vec(&data).map_err(io::Error::other)
}

/// The vote a quorum-state file holds; `None` when it names no vote (Kafka's unattached state).
pub fn from_json(bytes: &[u8]) -> io::Result<Option<Vote>> {
    let data: QuorumStateData =
        serde_json::from_slice(bytes).map_err(|e| invalid_data(format!("quorum-state: {e}")))?;
    let term = u64::try_from(data.leader_epoch)
        .map_err(|_| invalid_data(format!("quorum-state: leaderEpoch {}", data.leader_epoch)))?;
    let voted_for = if data.voted_id >= 0 {
        data.voted_id
    } else {
        data.leader_id
    };
    if voted_for < 0 {
        return Ok(None);
    }
    let mut vote = Vote::new(term, voted_for);
    vote.committed = data.leader_id >= 0;
    Ok(Some(vote))
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(QUORUM_STATE_FILE)
}

/// The vote in `dir`'s quorum-state, `None` without the file.
pub fn read(dir: &Path) -> io::Result<Option<Vote>> {
    match fs::read(path(dir)) {
        Ok(bytes) => from_json(&bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `vote` durably: `quorum-state.tmp`, fsync, rename, fsync of the directory.
pub fn write(dir: &Path, vote: &Vote, voters: &[NodeId]) -> io::Result<()> {
    let json = to_json(vote, voters)?;
    let tmp = dir.join(format!("{QUORUM_STATE_FILE}.tmp"));
    {
        let mut file = fs::File::create(&tmp)?;
        io::Write::write_all(&mut file, &json)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path(dir))?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vote_survives_the_file_and_the_file_is_kafkas_json() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let vote = Vote::new(7, 2);
        write(dir.path(), &vote, &[1, 2, 3]).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(vote));
        let mut committed = Vote::new_committed(8, 3);
        committed.committed = true;
        write(dir.path(), &committed, &[1, 2, 3]).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(committed));
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(path(dir.path())).unwrap()).unwrap();
        assert_eq!(json["leaderId"], 3);
        assert_eq!(json["leaderEpoch"], 8);
        assert_eq!(json["votedId"], 3);
        assert_eq!(json["currentVoters"][1]["voterId"], 2);
        assert_eq!(json["data_version"], 0);
        assert!(!dir.path().join("quorum-state.tmp").exists());
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_lost_vote() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(path(dir.path()), b"{\"leaderId\":").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
