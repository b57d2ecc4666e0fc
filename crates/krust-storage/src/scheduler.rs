//! `KafkaScheduler`'s job for storage: one background thread that runs blocking work (the
//! fsyncs of rolled segments) in submission order, so neither the request path nor the async
//! runtime's worker threads wait for the disk.

use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// A thread running submitted jobs one after another.
pub struct Scheduler {
    sender: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Scheduler {
    /// Starts the thread, named `name`.
    pub fn start(name: &str) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                for job in receiver {
                    job();
                }
            })?;
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `job` after the jobs submitted before it; false (and dropped) after shutdown.
    pub fn schedule(&self, job: impl FnOnce() + Send + 'static) -> bool {
        match &*self.sender.lock() {
            Some(sender) => sender.send(Box::new(job)).is_ok(),
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

    /// Runs the jobs already submitted, then stops the thread; later jobs are dropped.
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
}
