use openraft::entry::RaftEntry;

use super::*;
use crate::voters::Voter;
use crate::{Entry, MetadataRecord};

fn voters() -> StaticVoters {
    let listed = (1..=3)
        .map(|id| Voter {
            id,
            host: "localhost".into(),
            port: 9000 + id as u16,
        })
        .collect();
    StaticVoters::new(listed).unwrap()
}

fn append_request() -> AppendEntriesRequest<KRaft> {
    AppendEntriesRequest {
        vote: Vote::new_committed(4, 2),
        prev_log_id: Some(LogId::new_term_index(3, 9)),
        entries: vec![
            Entry::new_blank(LogId::new_term_index(4, 10)),
            Entry::new_normal(
                LogId::new_term_index(4, 11),
                MetadataRecord(Bytes::from_static(b"record")),
            ),
        ],
        leader_commit: Some(LogId::new_term_index(3, 9)),
    }
}

#[test]
fn every_message_round_trips() {
    let request = append_request();
    let decoded =
        decode_append_request(encode_append_request(&request, &voters()).unwrap()).unwrap();
    assert_eq!(
        (
            decoded.vote,
            decoded.prev_log_id,
            decoded.leader_commit,
            decoded.entries
        ),
        (
            request.vote,
            request.prev_log_id,
            request.leader_commit,
            request.entries
        )
    );
    for response in [
        AppendEntriesResponse::Success,
        AppendEntriesResponse::PartialSuccess(Some(LogId::new_term_index(1, 2))),
        AppendEntriesResponse::Conflict,
        AppendEntriesResponse::HigherVote(Vote::new(9, 3)),
    ] {
        let decoded = decode_append_response(encode_append_response(&response)).unwrap();
        assert_eq!(decoded, response);
    }
    let mut vote = VoteRequest::new(Vote::new(5, 1), Some(LogId::new_term_index(4, 11)));
    vote.leadership_transfer = true;
    assert_eq!(
        decode_vote_request(encode_vote_request(&vote)).unwrap(),
        vote
    );
    let granted = VoteResponse::new(Vote::new(5, 1), None, true);
    assert_eq!(
        decode_vote_response(encode_vote_response(&granted)).unwrap(),
        granted
    );
    let meta = SnapshotMeta {
        last_log_id: Some(LogId::new_term_index(4, 11)),
        last_membership: StoredMembership::new(
            Some(LogId::new_term_index(0, 0)),
            voters().membership(),
        ),
    };
    let data = Bytes::from_static(b"checkpoint bytes");
    let body = encode_snapshot(&Vote::new_committed(4, 2), &meta, &data).unwrap();
    assert_eq!(
        decode_snapshot(body).unwrap(),
        (Vote::new_committed(4, 2), meta, data)
    );
}

#[test]
fn transfer_leader_round_trips() {
    let request = TransferLeaderRequest::new(
        Vote::new_committed(3, 1),
        2,
        Some(LogId::new_term_index(3, 8)),
    );
    let decoded = decode_transfer_leader_request(encode_transfer_leader_request(&request));
    assert_eq!(decoded.unwrap(), request);
    let responses: [TransferLeaderResponse<KRaft>; 3] = [
        Ok(()),
        Err(TransferLeaderError::VoteChanged {
            expected: Vote::new_committed(3, 1),
            actual: Vote::new(4, 2),
        }),
        Err(TransferLeaderError::LogNotFlushed {
            expected: Some(LogId::new_term_index(3, 8)),
            actual: None,
        }),
    ];
    for response in responses {
        let decoded = decode_transfer_leader_response(encode_transfer_leader_response(&response));
        assert_eq!(decoded.unwrap(), response);
    }
}

#[test]
fn a_snapshot_beyond_the_senders_term_is_refused() {
    let meta = SnapshotMeta {
        last_log_id: Some(LogId::new_term_index(7, 11)),
        last_membership: StoredMembership::new(None, voters().membership()),
    };
    let body = encode_snapshot(&Vote::new_committed(4, 2), &meta, &Bytes::new()).unwrap();
    assert!(matches!(
        decode_snapshot(body),
        Err(WireError::Malformed(_))
    ));
}

#[test]
fn cut_or_garbled_messages_are_errors_never_panics() {
    let body = encode_append_request(&append_request(), &voters()).unwrap();
    for cut in 0..body.len() {
        assert!(
            decode_append_request(body.slice(..cut)).is_err(),
            "cut at {cut}"
        );
    }
    let mut extra = BytesMut::from(&body[..]);
    extra.put_u8(0);
    assert!(decode_append_request(extra.freeze()).is_err());
    // Seeded garbage through every decoder.
    let mut state = 0x1234_5678_9abc_def0u64;
    for len in 0..400usize {
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let garbage = Bytes::from(garbage);
        let _ = decode_append_request(garbage.clone());
        let _ = decode_append_response(garbage.clone());
        let _ = decode_vote_request(garbage.clone());
        let _ = decode_vote_response(garbage.clone());
        let _ = decode_snapshot(garbage.clone());
        let _ = decode_snapshot_response(garbage.clone());
        let _ = decode_transfer_leader_request(garbage.clone());
        let _ = decode_transfer_leader_response(garbage);
    }
}

#[test]
fn version_1_carries_the_senders_voters_and_answers_inconsistent_voter_set() {
    let body = encode_vote_request(&VoteRequest::new(Vote::new(5, 1), None));
    let (sent, rest) = decode_request(encode_request(&voters(), &body).unwrap()).unwrap();
    assert_eq!((sent, rest), (voters(), body.clone()));
    assert_eq!(
        decode_response(encode_response(&body)).unwrap(),
        Answer::Body(body)
    );
    let refusal = encode_inconsistent_voter_set(&voters()).unwrap();
    assert_eq!(&refusal[..2], &INCONSISTENT_VOTER_SET.to_be_bytes());
    assert_eq!(
        decode_response(refusal).unwrap(),
        Answer::InconsistentVoterSet(voters())
    );
    // Garbage is an error, never a panic.
    for garbage in [&b""[..], &b"\x00"[..], &b"\x00\x5e\x00\x00\x00\x09abc"[..]] {
        assert!(decode_response(Bytes::copy_from_slice(garbage)).is_err());
        assert!(decode_request(Bytes::copy_from_slice(garbage)).is_err());
    }
    assert!(matches!(
        decode_response(Bytes::from_static(b"\x00\x07")),
        Err(WireError::ErrorCode(7))
    ));
}
