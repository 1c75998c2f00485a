//! Slow work off the event loop: attach and detach walk network namespaces and cgroups and
//! switch every selected socket, which takes long with many (and a user-named path must never
//! hold the loop). Each runs on a thread of its own, one at a time, in the order asked; the
//! answer goes back to the control connection that asked, when the job is done (the loop's waker makes
//! the loop look at once).

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use mio::{Token, Waker};

use crate::datapath::{AttachJob, AttachReport};

/// Jobs waiting beyond the one running; more are refused.
const MAX_QUEUED: usize = 16;

/// Who asked: the control connection's token and serial.
pub type Asker = (Token, u64);

pub struct Jobs {
    waker: Arc<Waker>,
    done_tx: Sender<(Asker, Result<AttachReport, String>)>,
    done_rx: Receiver<(Asker, Result<AttachReport, String>)>,
    queue: VecDeque<(Asker, AttachJob)>,
    running: bool,
}

impl Jobs {
    /// Jobs that wake the loop with `waker` when they are done.
    pub fn new(waker: Arc<Waker>) -> Jobs {
        let (done_tx, done_rx) = channel();
        Jobs { waker, done_tx, done_rx, queue: VecDeque::new(), running: false }
    }

    /// Queues `job`; an error when too many wait already.
    pub fn submit(&mut self, asker: Asker, job: AttachJob) -> Result<(), String> {
        if self.queue.len() >= MAX_QUEUED {
            return Err(format!("{MAX_QUEUED} attach/detach requests are waiting already; try again when they are done"));
        }
        self.queue.push_back((asker, job));
        self.start_next();
        Ok(())
    }

    fn start_next(&mut self) {
        if self.running {
            return;
        }
        let Some((asker, job)) = self.queue.pop_front() else { return };
        self.running = true;
        let (tx, waker) = (self.done_tx.clone(), self.waker.clone());
        let spawned = std::thread::Builder::new().name("ccp-attach".into()).spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                .unwrap_or_else(|_| Err("the attach/detach job panicked; nothing more was changed".into()));
            let _ = tx.send((asker, result));
            let _ = waker.wake();
        });
        if let Err(e) = spawned {
            self.running = false;
            let _ = self.done_tx.send((asker, Err(format!("could not start the attach/detach job: {e}"))));
            let _ = self.waker.wake();
        }
    }

    /// Finished jobs, with who asked; starts the next one.
    pub fn finished(&mut self) -> Vec<(Asker, Result<AttachReport, String>)> {
        let done: Vec<_> = self.done_rx.try_iter().collect();
        if !done.is_empty() {
            self.running = false;
            self.start_next();
        }
        done
    }

    /// Jobs not done yet (running or waiting).
    pub fn outstanding(&self) -> usize {
        self.queue.len() + usize::from(self.running)
    }
}
