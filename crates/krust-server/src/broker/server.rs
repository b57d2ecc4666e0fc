//! The running server: listeners, periodic flushes and checkpoints, and graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::now_ms;
use crate::metrics::endpoint::serve_metrics;
use crate::network::acceptor::run_listener;
use crate::quota::manager::INACTIVE_CLIENT_EXPIRY_MS;
use crate::server_context::ServerContext;

/// How long shutdown waits for in-flight requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How often client quota rates of inactive clients are looked for.
const QUOTA_EXPIRY_CHECK_INTERVAL: Duration = Duration::from_secs(60);
/// Kafka's log.flush.offset.checkpoint.interval.ms default.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

/// Binds every listener (then turns `listening` true), serves until `stop` turns true, then
/// stops accepting and lets connections finish the request in flight, for at most a few
/// seconds.
pub async fn serve(
    context: Arc<ServerContext>,
    mut stop: watch::Receiver<bool>,
    listening: &watch::Sender<bool>,
) -> Result<(), ServeError> {
    let mut listeners = Vec::new();
    for listener in &context.settings.listeners {
        listeners.push((bind(&listener.host, listener.port).await?, listener.clone()));
    }
    let metrics_endpoint = match (context.settings.metrics_port, listeners.first()) {
        (Some(port), Some((_, first))) => Some(bind(&first.host, port).await?),
        _ => None,
    };
    listening.send_replace(true);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for (bound, listener) in listeners {
        tasks.spawn(run_listener(
            bound,
            listener,
            context.clone(),
            shutdown_rx.clone(),
        ));
    }
    if let Some(endpoint) = metrics_endpoint {
        tasks.spawn(serve_metrics(
            endpoint,
            context.metrics.clone(),
            context.replicas.clone(),
            shutdown_rx.clone(),
        ));
    }
    tasks.spawn(flush_periodically(context.clone(), shutdown_rx.clone()));
    tasks.spawn(checkpoint_periodically(
        context.clone(),
        shutdown_rx.clone(),
    ));
    tasks.spawn(checkpoint_high_watermarks_periodically(
        context.clone(),
        shutdown_rx.clone(),
    ));
    tasks.spawn(retain_periodically(context.clone(), shutdown_rx.clone()));
    tasks.spawn(shrink_isrs_periodically(
        context.clone(),
        shutdown_rx.clone(),
    ));
    tasks.spawn(expire_quota_rates_periodically(
        context.clone(),
        shutdown_rx.clone(),
    ));
    wait_for_stop(&mut stop).await;
    let _ = shutdown_tx.send(true);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// Binds `host:port`; Kafka's empty host ("PLAINTEXT://:9092") means every interface.
async fn bind(host: &str, port: u16) -> Result<TcpListener, ServeError> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    let address = format!("{host}:{port}");
    TcpListener::bind(&address)
        .await
        .map_err(|source| ServeError::Bind { address, source })
}

/// Until `stop` turns true. Signals are the embedding process's: krust-broker's Python side
/// turns SIGTERM into a controlled shutdown first, then asks the core to stop.
async fn wait_for_stop(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
    tracing::info!("shutting down: no new connections, requests in flight finish");
}

/// Runs `work` every `period` until shutdown, the first time one period after start-up when
/// `delay_first`.
async fn every<F, Fut>(
    period: Duration,
    delay_first: bool,
    mut shutdown: watch::Receiver<bool>,
    mut work: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(period);
    if delay_first {
        ticker.tick().await;
    }
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        work().await;
    }
}

/// A configured period in ms, capped at a year: a longer one would overflow the timer's
/// deadline arithmetic.
fn period_ms(ms: u64) -> Duration {
    Duration::from_millis(ms.clamp(1, 365 * 24 * 3_600_000))
}

/// Recovery points are checkpointed so a restart after a crash rescans only the recent tail.
async fn checkpoint_periodically(context: Arc<ServerContext>, shutdown: watch::Receiver<bool>) {
    every(CHECKPOINT_INTERVAL, true, shutdown, || {
        off_the_workers(&context, |c| c.replicas.checkpoint())
    })
    .await;
}

/// High watermarks are checkpointed every replica.high.watermark.checkpoint.interval.ms, so a
/// restart begins from the committed offsets it knew (and shutdown writes them last).
async fn checkpoint_high_watermarks_periodically(
    context: Arc<ServerContext>,
    shutdown: watch::Receiver<bool>,
) {
    let period = period_ms(
        context
            .settings
            .replica_high_watermark_checkpoint_interval_ms,
    );
    every(period, true, shutdown, || {
        off_the_workers(&context, |c| c.replicas.checkpoint_high_watermarks())
    })
    .await;
}

/// Runs blocking file work (fsyncs, checkpoint writes) on tokio's blocking pool, so the async
/// worker threads keep serving requests meanwhile.
async fn off_the_workers(context: &Arc<ServerContext>, work: fn(&ServerContext)) {
    let context = Arc::clone(context);
    if let Err(error) = tokio::task::spawn_blocking(move || work(&context)).await {
        tracing::error!("background storage work failed: {error}");
    }
}

/// Retention runs every log.retention.check.interval.ms, the first pass one interval after
/// start-up.
async fn retain_periodically(context: Arc<ServerContext>, shutdown: watch::Receiver<bool>) {
    let period = period_ms(context.settings.log_retention_check_interval_ms);
    every(period, true, shutdown, || {
        off_the_workers(&context, |c| c.replicas.cleanup_logs(now_ms()))
    })
    .await;
}

/// Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, the partitions this
/// broker leads drop the followers that lagged longer from their ISR.
async fn shrink_isrs_periodically(context: Arc<ServerContext>, shutdown: watch::Receiver<bool>) {
    let lag_ms = context
        .replicas
        .replication_settings()
        .replica_lag_time_max_ms;
    let period = period_ms(u64::try_from(lag_ms / 2).unwrap_or(1));
    every(period, true, shutdown, || async {
        context.replicas.maybe_shrink_isrs(now_ms());
    })
    .await;
}

/// Client quota rates of clients that went away are dropped after an hour, as Kafka expires
/// its inactive quota sensors.
async fn expire_quota_rates_periodically(
    context: Arc<ServerContext>,
    shutdown: watch::Receiver<bool>,
) {
    every(QUOTA_EXPIRY_CHECK_INTERVAL, false, shutdown, || async {
        context
            .quotas
            .expire_inactive(now_ms(), INACTIVE_CLIENT_EXPIRY_MS);
    })
    .await;
}

/// log.flush.interval.* are checked every log.flush.scheduler.interval.ms.
async fn flush_periodically(context: Arc<ServerContext>, mut shutdown: watch::Receiver<bool>) {
    let interval_ms = context.settings.log_flush_scheduler_interval_ms;
    if interval_ms == u64::MAX {
        let _ = shutdown.wait_for(|s| *s).await;
        return;
    }
    every(
        Duration::from_millis(interval_ms.max(1)),
        false,
        shutdown,
        || off_the_workers(&context, |c| c.replicas.flush_dirty(now_ms())),
    )
    .await;
}
