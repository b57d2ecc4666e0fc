use std::sync::atomic::AtomicUsize;

use kafka_protocol::messages::{ApiKey, RequestHeader};

use super::*;
use crate::request::request_context::RequestSlot;
use crate::security::session::SecurityProtocol;

/// A stand-in for the Python authorizer thread: answers with `decide` and counts the actions
/// it was asked about.
fn python(decide: fn(&Action) -> Option<bool>) -> (Authorizer, Arc<AtomicUsize>) {
    let (authorizer, mut receiver) = Authorizer::new(Arc::default());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        while let Some(call) = receiver.recv_blocking() {
            counter.fetch_add(call.actions.len(), Ordering::SeqCst);
            let answer: Option<Vec<bool>> = call.actions.iter().map(decide).collect();
            let _ = call.reply.send(answer);
        }
    });
    (authorizer, asked)
}

fn client() -> Session {
    Session::client(
        "PLAINTEXT",
        SecurityProtocol::Plaintext,
        "10.0.0.7:5000".parse().unwrap(),
    )
}

async fn decide(authorizer: &Authorizer, session: &Session, actions: &[Action]) -> Vec<bool> {
    let header = RequestHeader::default().with_request_api_key(ApiKey::Produce as i16);
    let request = RequestContext::new(header, ApiKey::Produce, session, 0, RequestSlot::default());
    authorizer.authorize(&request, actions).await
}

fn write(topic: &str) -> Action {
    Action::new(AclOperation::Write, ResourceType::Topic, topic)
}

fn allow_public(action: &Action) -> Option<bool> {
    Some(action.name.starts_with("public"))
}

#[tokio::test]
async fn a_cached_decision_is_not_asked_again_until_invalidated() {
    let (authorizer, asked) = python(allow_public);
    let session = client();
    let actions = [write("public-a"), write("secret")];
    assert_eq!(decide(&authorizer, &session, &actions).await, [true, false]);
    assert_eq!(decide(&authorizer, &session, &actions).await, [true, false]);
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    authorizer.cache.invalidate();
    assert!(authorizer.cache.is_empty());
    decide(&authorizer, &session, &actions).await;
    assert_eq!(asked.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn decisions_are_per_principal_and_host() {
    let (authorizer, asked) = python(allow_public);
    let first = client();
    let mut other_host = client();
    other_host.client_address = "10.0.0.8:5000".parse().unwrap();
    let mut other_user = client();
    other_user.principal.name = "alice".into();
    for session in [&first, &other_host, &other_user, &first] {
        decide(&authorizer, session, &[write("public-a")]).await;
    }
    assert_eq!(asked.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_failed_plugin_call_denies_and_is_not_cached() {
    let (authorizer, asked) = python(|_| None);
    let session = client();
    assert_eq!(
        decide(&authorizer, &session, &[write("public-a")]).await,
        [false]
    );
    assert_eq!(
        decide(&authorizer, &session, &[write("public-a")]).await,
        [false]
    );
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert!(authorizer.cache.is_empty());
}

#[tokio::test]
async fn an_answer_from_before_an_invalidation_is_not_cached() {
    let (authorizer, mut receiver) = Authorizer::new(Arc::default());
    let cache = authorizer.cache.clone();
    std::thread::spawn(move || {
        while let Some(call) = receiver.recv_blocking() {
            // The ACLs change while the plugin decides on the old ones.
            cache.invalidate();
            let _ = call.reply.send(Some(vec![true]));
        }
    });
    let session = client();
    assert_eq!(decide(&authorizer, &session, &[write("a")]).await, [true]);
    assert!(authorizer.cache.is_empty());
}

#[tokio::test]
async fn the_cores_own_requests_are_not_asked_about() {
    let (authorizer, asked) = python(|_| Some(false));
    let internal = Session::internal();
    assert_eq!(decide(&authorizer, &internal, &[write("a")]).await, [true]);
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}

#[test]
fn authorized_operations_are_kafkas_bit_field() {
    // KIP-430: bit n set for the operation with code n; DESCRIBE (8) and READ (3) -> 0x108.
    assert_eq!(
        all_operations(&[AclOperation::Read, AclOperation::Describe]),
        0x108
    );
    assert_eq!(all_operations(TOPIC_OPERATIONS), 0b1101_1111_1000);
}
