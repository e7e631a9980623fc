//! Asynchronous I/O for plugins: one tokio runtime per engine process, and the pieces
//! that let a reader built on it fit the engine's threads without sleep-polling.
//!
//! A source that waits on a socket (a database's replication stream, a broker) runs its
//! network code as a task on [`runtime`] and hands what it fetched to its reader thread
//! through a [`Fetcher`]: a bounded queue (the task waits when the reader falls behind,
//! so memory stays bounded) plus a [`Readiness`] signal raised whenever an item arrives.
//! The reader's [`SourceReader::poll_next`](crate::SourceReader::poll_next) takes what is
//! queued without blocking, and returns `Idle` when nothing is; because the reader offers
//! its readiness ([`SourceReader::readiness`](crate::SourceReader::readiness)), the engine
//! sleeps on that signal and on its control channel at once, so the reader wakes the
//! moment data arrives and a checkpoint barrier is never held up by a wait for data.
//!
//! This is Flink's split-fetcher model (`SingleThreadFetcherManager` handing records to
//! the reader through an element queue, `SourceReader::isAvailable` as the wake-up) with
//! tokio tasks in place of fetcher threads. Blocking drivers remain possible: a reader may
//! still do short blocking calls in `poll_next` as the API's contract allows.

use std::future::Future;
use std::sync::OnceLock;

use crossbeam_channel::{bounded, Receiver, Sender};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;

use crate::error::{FerryError, Result};

/// Worker threads of the I/O runtime: network waits need few, and the engine's own
/// threads do the CPU work of decoding and writing.
const IO_THREADS: usize = 2;

/// The process's I/O runtime, started on first use: a multi-threaded tokio runtime with
/// timers and network I/O, whose threads are named `ferry-io`. Plugins spawn their
/// network tasks on it; they must not block its threads.
pub fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(IO_THREADS)
                .thread_name("ferry-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| FerryError::external("I/O runtime", format!("cannot start: {e}")))
}

/// A handle to [`runtime`], for spawning tasks and for `block_on` from plugin threads
/// (never from inside a task).
pub fn handle() -> Result<Handle> {
    runtime().map(|r| r.handle().clone())
}

/// A wake-up signal from a fetch task to the thread that consumes what it fetched. It
/// holds at most one pending notification, so raising it often costs nothing and a wake-up
/// raised while nobody waits is kept for the next wait.
#[derive(Debug, Clone)]
pub struct Readiness {
    tx: Sender<()>,
    rx: Receiver<()>,
}

impl Default for Readiness {
    fn default() -> Self {
        let (tx, rx) = bounded(1);
        Readiness { tx, rx }
    }
}

impl Readiness {
    /// A signal with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Says that something may be ready. Never blocks.
    pub fn notify(&self) {
        let _ = self.tx.try_send(());
    }

    /// The channel a waiting thread selects on; a message on it means "poll again".
    pub fn receiver(&self) -> &Receiver<()> {
        &self.rx
    }
}

/// The sending half of a [`Fetcher`], owned by the fetch task.
#[derive(Debug)]
pub struct FetchSender<T> {
    /// Always `Some` until the sender is dropped; taken in `drop` so that the queue is
    /// closed before the final wake-up is raised.
    tx: Option<mpsc::Sender<Result<T>>>,
    readiness: Readiness,
}

impl<T> FetchSender<T> {
    /// Queues `item` for the reader, waiting (asynchronously) while the queue is full.
    /// Returns `false` when the reader is gone and the task should end.
    pub async fn send(&self, item: Result<T>) -> bool {
        let sent = match &self.tx {
            Some(tx) => tx.send(item).await.is_ok(),
            None => false,
        };
        self.readiness.notify();
        sent
    }
}

impl<T> Drop for FetchSender<T> {
    fn drop(&mut self) {
        // The reader learns that the task ended (its queue closes) without waiting for a
        // timer. Close the queue first: a wake-up raised while it is still open could be
        // taken by a reader that then finds it empty but not closed, and sleeps for good.
        drop(self.tx.take());
        self.readiness.notify();
    }
}

/// What [`Fetcher::try_next`] found.
#[derive(Debug)]
pub enum Fetched<T> {
    /// An item the task fetched.
    Item(T),
    /// Nothing queued now; the [`Readiness`] will be raised when something is.
    Empty,
    /// The task ended and everything it queued has been taken.
    Closed,
}

/// A task on the I/O runtime that fetches items, and the queue that hands them to a
/// reader thread. Dropping it cancels the task.
#[derive(Debug)]
pub struct Fetcher<T> {
    rx: mpsc::Receiver<Result<T>>,
    task: tokio::task::JoinHandle<()>,
}

impl<T: Send + 'static> Fetcher<T> {
    /// Starts `fetch` on the I/O runtime with a queue of `capacity` items; `readiness` is
    /// raised whenever an item is queued and when the task ends. A reader creates its
    /// [`Readiness`] when it is created (the engine asks for it then) and passes it to each
    /// fetcher it starts later. `fetch` gets the sending half and should end when
    /// [`FetchSender::send`] returns `false`.
    pub fn spawn<F, Fut>(capacity: usize, readiness: &Readiness, fetch: F) -> Result<Self>
    where
        F: FnOnce(FetchSender<T>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let readiness = readiness.clone();
        let sender = FetchSender {
            tx: Some(tx),
            readiness: readiness.clone(),
        };
        let task = runtime()?.spawn(fetch(sender));
        Ok(Fetcher { rx, task })
    }

    /// The next fetched item if one is queued; never blocks. An error the task queued is
    /// returned as it is.
    pub fn try_next(&mut self) -> Result<Fetched<T>> {
        match self.rx.try_recv() {
            Ok(Ok(item)) => Ok(Fetched::Item(item)),
            Ok(Err(e)) => Err(e),
            Err(mpsc::error::TryRecvError::Empty) => Ok(Fetched::Empty),
            Err(mpsc::error::TryRecvError::Disconnected) => Ok(Fetched::Closed),
        }
    }
}

impl<T> Drop for Fetcher<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn items_arrive_in_order_with_a_wake_up_and_the_queue_closes_when_the_task_ends() {
        let ready = Readiness::new();
        let mut f = Fetcher::spawn(2, &ready, |tx| async move {
            for i in 0..5 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                if !tx.send(Ok(i)).await {
                    return;
                }
            }
        })
        .unwrap();
        let mut got = Vec::new();
        let start = Instant::now();
        loop {
            match f.try_next().unwrap() {
                Fetched::Item(i) => got.push(i),
                Fetched::Empty => {
                    // Woken by the task, not by the timeout.
                    ready
                        .receiver()
                        .recv_timeout(Duration::from_secs(10))
                        .expect("woken");
                }
                Fetched::Closed => break,
            }
        }
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_reader_never_sleeps_through_the_end_of_the_task() {
        // The end of a task must wake a reader that has just found the queue empty: the
        // wake-up used to be raised before the queue closed, and a reader could take it,
        // see "empty, not closed" and then wait for a wake-up that never came.
        for _ in 0..300 {
            let ready = Readiness::new();
            let mut f = Fetcher::spawn(1, &ready, |tx| async move {
                tx.send(Ok(1u8)).await;
            })
            .unwrap();
            loop {
                match f.try_next().unwrap() {
                    Fetched::Item(_) => {}
                    Fetched::Empty => ready
                        .receiver()
                        .recv_timeout(Duration::from_secs(5))
                        .expect("woken when the task ended"),
                    Fetched::Closed => break,
                }
            }
        }
    }

    #[test]
    fn errors_reach_the_reader_and_dropping_the_fetcher_stops_the_task() {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let ready = Readiness::new();
        let mut f = Fetcher::<u32>::spawn(1, &ready, |tx| async move {
            tx.send(Err(FerryError::external("test", "connection reset")))
                .await;
            // Blocks on a full queue until the fetcher is dropped.
            let mut n = 0;
            while tx.send(Ok(n)).await {
                n += 1;
            }
            let _ = done_tx.send(());
        })
        .unwrap();
        let err = loop {
            match f.try_next() {
                Err(e) => break e,
                Ok(_) => {
                    let _ = ready.receiver().recv_timeout(Duration::from_secs(10));
                }
            }
        };
        assert!(err.to_string().contains("connection reset"), "{err}");
        drop(f);
        // The task stops: aborted at its next await (it never reports), or, if it was
        // running when the queue closed, its send fails and it ends (it reports). Either
        // way it does not hang on the full queue.
        let stopped = done_rx.recv_timeout(Duration::from_secs(10));
        assert!(
            !matches!(stopped, Err(std::sync::mpsc::RecvTimeoutError::Timeout)),
            "the fetch task still runs after its fetcher was dropped"
        );
    }

    #[test]
    fn a_notification_raised_while_nobody_waits_is_kept_once() {
        let r = Readiness::new();
        r.notify();
        r.notify();
        assert!(r.receiver().try_recv().is_ok());
        assert!(r.receiver().try_recv().is_err());
    }
}
