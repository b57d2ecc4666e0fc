//! The Prometheus endpoint: `GET /metrics` over plain HTTP/1.1, served on the broker's tokio
//! runtime (never through Python), one short-lived connection per scrape.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{BrokerMetrics, ScrapeSource};

/// A scrape request's head must arrive within this time and fit in this many bytes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// Prometheus' text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a scrape asked for.
#[derive(Debug, PartialEq)]
enum Route {
    Metrics,
    NotFound,
    MethodNotAllowed,
}

/// Serves scrapes until `shutdown` turns true.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<BrokerMetrics>,
    gauges: Arc<dyn ScrapeSource>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut scrapes = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    scrapes.spawn(answer(stream, metrics.clone(), gauges.clone()));
                }
                Err(error) => tracing::warn!("metrics endpoint: accept failed: {error}"),
            },
            _ = shutdown.wait_for(|stopped| *stopped) => break,
            Some(_) = scrapes.join_next(), if !scrapes.is_empty() => {}
        }
    }
}

async fn answer(mut stream: TcpStream, metrics: Arc<BrokerMetrics>, gauges: Arc<dyn ScrapeSource>) {
    let route = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(head)) => route(&head),
        _ => return,
    };
    let (status, body) = match route {
        Route::Metrics => {
            // Reading every log's size takes each log's lock: off the async workers.
            let rendered = tokio::task::spawn_blocking(move || metrics.render(&*gauges)).await;
            match rendered {
                Ok(text) => ("200 OK", text),
                Err(error) => ("500 Internal Server Error", format!("{error}\n")),
            }
        }
        Route::NotFound => (
            "404 Not Found",
            "krust serves its metrics at /metrics\n".into(),
        ),
        Route::MethodNotAllowed => ("405 Method Not Allowed", "use GET\n".into()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let written = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    if let Err(error) = written.await {
        tracing::debug!("metrics endpoint: cannot answer a scrape: {error}");
    }
}

/// Reads up to the blank line that ends the request head.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    Ok(head)
}

fn route(head: &[u8]) -> Route {
    let line = head
        .split(|b| *b == b'\r' || *b == b'\n')
        .next()
        .unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => Route::Metrics,
        (b"GET", _) => Route::NotFound,
        _ => Route::MethodNotAllowed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_of_the_metrics_path_is_served() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(
            route(b"GET /metrics?name=x HTTP/1.0\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b""), Route::MethodNotAllowed);
    }
}
