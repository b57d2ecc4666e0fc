//! `KafkaScheduler`'s job for storage: one background thread that runs blocking work (the
//! fsyncs of rolled segments, the removal of deleted segments' files) in submission order, or
//! after a delay, so neither the request path nor the async runtime's worker threads wait for
//! the disk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::warn;

type Job = Box<dyn FnOnce() + Send>;

/// What the thread receives: a job to run now, or one to run at an instant.
enum Message {
    Now(Job),
    At(Instant, Job),
}

/// A job waiting for its instant; equal instants run in submission order.
struct Delayed {
    due: Instant,
    sequence: u64,
    job: Job,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.sequence) == (other.due, other.sequence)
    }
}

impl Eq for Delayed {}

impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.sequence).cmp(&(other.due, other.sequence))
    }
}

/// The thread's loop: runs each job when it is due. Delayed jobs not yet due when the
/// scheduler shuts down are dropped, as Kafka's scheduler drops them.
fn run(receiver: Receiver<Message>) {
    let mut delayed: BinaryHeap<Reverse<Delayed>> = BinaryHeap::new();
    let mut sequence = 0u64;
    loop {
        let now = Instant::now();
        while delayed.peek().is_some_and(|Reverse(d)| d.due <= now) {
            if let Some(Reverse(due)) = delayed.pop() {
                (due.job)();
            }
        }
        let received = match delayed.peek() {
            Some(Reverse(next)) => receiver.recv_timeout(next.due.saturating_duration_since(now)),
            None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(Message::Now(job)) => job(),
            Ok(Message::At(due, job)) => {
                sequence += 1;
                delayed.push(Reverse(Delayed { due, sequence, job }));
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// A thread running submitted jobs one after another.
pub struct Scheduler {
    sender: Mutex<Option<Sender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Scheduler {
    /// Starts the thread, named `name`.
    pub fn start(name: &str) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Message>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(receiver))?;
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `job` after the jobs submitted before it; false (and dropped) after shutdown.
    pub fn schedule(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.send(Message::Now(Box::new(job)))
    }

    /// Runs `job` once `delay` has passed (jobs due at once run in submission order); false
    /// (and dropped) after shutdown.
    pub fn schedule_after(&self, delay: Duration, job: impl FnOnce() + Send + 'static) -> bool {
        let due = Instant::now().checked_add(delay);
        // A delay past the clock's range never comes: the job would only wait for shutdown.
        due.is_some_and(|due| self.send(Message::At(due, Box::new(job))))
    }

    fn send(&self, message: Message) -> bool {
        match &*self.sender.lock() {
            Some(sender) => sender.send(message).is_ok(),
            None => false,
        }
    }

    /// Waits until every job submitted so far has run.
    pub fn drain(&self) {
        let (done, finished) = mpsc::channel();
        if self.schedule(move || {
            let _ = done.send(());
        }) {
            let _ = finished.recv();
        }
    }

    /// Runs the jobs already submitted for now, then stops the thread; delayed jobs not yet
    /// due and later jobs are dropped.
    pub fn shutdown(&self) {
        self.sender.lock().take();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Removes `*.deleted` files on `scheduler` after `delay_ms` (Kafka's `file.delete.delay.ms`),
/// so a fetch that started reading one before it was renamed finishes first.
pub(crate) fn schedule_removal(scheduler: &Scheduler, files: Vec<PathBuf>, delay_ms: i64) {
    let delay = Duration::from_millis(u64::try_from(delay_ms).unwrap_or(0));
    scheduler.schedule_after(delay, move || {
        for path in files {
            match fs::remove_file(&path) {
                // The whole log may have been deleted meanwhile.
                Err(error) if error.kind() != io::ErrorKind::NotFound => {
                    warn!(path = %path.display(), %error, "cannot remove a deleted segment file");
                }
                _ => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn runs_jobs_in_order_and_none_after_shutdown() {
        let scheduler = Scheduler::start("test-scheduler").unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        for i in 0..5 {
            let seen = Arc::clone(&seen);
            assert!(scheduler.schedule(move || seen.lock().push(i)));
        }
        scheduler.drain();
        assert_eq!(*seen.lock(), vec![0, 1, 2, 3, 4]);
        scheduler.shutdown();
        assert!(!scheduler.schedule(|| panic!("ran after shutdown")));
    }

    #[test]
    fn delayed_jobs_run_by_due_time_and_those_not_due_are_dropped_at_shutdown() {
        let scheduler = Scheduler::start("test-scheduler").unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let push = |label: &'static str| {
            let seen = Arc::clone(&seen);
            move || seen.lock().push(label)
        };
        assert!(scheduler.schedule_after(Duration::from_millis(300), push("later")));
        assert!(scheduler.schedule_after(Duration::ZERO, push("due")));
        assert!(scheduler.schedule_after(Duration::from_secs(3600), push("never")));
        assert!(scheduler.schedule(push("now")));
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.lock().len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*seen.lock(), vec!["due", "now", "later"]);
        scheduler.shutdown();
        assert_eq!(seen.lock().len(), 3);
    }
}
