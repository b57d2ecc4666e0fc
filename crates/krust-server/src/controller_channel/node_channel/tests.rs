use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use bytes::BytesMut;
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::*;

/// One request frame's body, read the blocking way the stand-in works.
fn read_frame(stream: &mut TcpStream) -> std::io::Result<Bytes> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    stream.read_exact(&mut body)?;
    Ok(Bytes::from(body))
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// A controller stand-in: answers each request with its body reversed, after closing the
/// first `drop_first` connections without an answer.
fn fake_controller(drop_first: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for (index, stream) in listener.incoming().enumerate() {
            let mut stream = stream.unwrap();
            if index < drop_first {
                let _ = read_frame(&mut stream);
                continue;
            }
            while let Ok(mut frame) = read_frame(&mut stream) {
                let header = RequestHeader::decode(&mut frame, 2).unwrap();
                let mut response = BytesMut::new();
                response.extend_from_slice(&[0; 4]);
                ResponseHeader::default()
                    .with_correlation_id(header.correlation_id)
                    .encode(&mut response, 1)
                    .unwrap();
                response.extend(frame.iter().rev());
                let size = (response.len() - 4) as i32;
                response[..4].copy_from_slice(&size.to_be_bytes());
                if stream.write_all(&response).is_err() {
                    break;
                }
            }
        }
    });
    address
}

fn channel(locator: &Arc<ControllerLocator>, timeout: Duration) -> NodeChannel {
    NodeChannel::start(
        "test",
        1,
        Arc::clone(locator) as Arc<dyn ChannelTarget>,
        timeout,
    )
    .unwrap()
}

// BrokerHeartbeat uses header v2 and answers with header v1, as the fake does.
fn heartbeat(channel: &NodeChannel, body: &'static [u8]) -> Result<Bytes, ChannelError> {
    channel.send_blocking(ApiKey::BrokerHeartbeat, 1, Bytes::from_static(body))
}

#[test]
fn a_request_waits_for_a_controller_and_is_answered() {
    let locator = Arc::new(ControllerLocator::new([(3, fake_controller(0))]));
    let channel = channel(&locator, TIMEOUT);
    let later = Arc::clone(&locator);
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        later.set_leader(3);
    });
    assert_eq!(
        heartbeat(&channel, b"abc").unwrap(),
        Bytes::from_static(b"cba")
    );
    assert_eq!(
        heartbeat(&channel, b"xy").unwrap(),
        Bytes::from_static(b"yx")
    );
}

#[test]
fn a_broken_connection_is_made_again_to_the_new_controller() {
    let locator = Arc::new(ControllerLocator::new([
        (1, fake_controller(usize::MAX)),
        (2, fake_controller(0)),
    ]));
    locator.set_leader(1);
    let channel = channel(&locator, TIMEOUT);
    let later = Arc::clone(&locator);
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        later.set_leader(2);
    });
    assert_eq!(
        heartbeat(&channel, b"12").unwrap(),
        Bytes::from_static(b"21")
    );
}

#[test]
fn without_a_controller_a_request_fails_after_its_timeout() {
    let locator = Arc::new(ControllerLocator::new([(1, fake_controller(0))]));
    let channel = channel(&locator, Duration::from_millis(200));
    assert!(matches!(
        heartbeat(&channel, b"1"),
        Err(ChannelError::NoTarget(_))
    ));
    // A leader id that is not a voter is no controller either.
    locator.set_leader(9);
    assert!(locator.active().is_none());
}
