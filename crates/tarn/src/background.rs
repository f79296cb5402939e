//! Work a commit leaves running after it returns (checkpoints, deletes of decided
//! group-commit proposals and claims), counted so a process can wait for it before it
//! exits: a runtime that shuts down drops such tasks half done.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Background tasks started and not yet finished, in this process.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Woken each time one finishes.
static FINISHED: Notify = Notify::const_new();

/// Counts a task as in flight from now until it finishes or is dropped.
struct InFlight;

impl InFlight {
    fn start() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        FINISHED.notify_waiters();
    }
}

/// `work`, counted as background work in flight from this call until it ends.
pub(crate) fn tracked<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let in_flight = InFlight::start();
    async move {
        let out = work.await;
        drop(in_flight);
        out
    }
}

/// Waits until the work Tarn's commits left running in this process has finished
/// (background checkpoints, and deletes of decided group-commit proposals and of claims),
/// or until `limit` has passed; whether it all finished.
///
/// A process that exits right after its last commit calls it first. Otherwise the
/// runtime drops that work half done: a checkpoint due is written by a later writer, and a
/// decided proposal stays listed until its window of versions has passed, so every writer
/// of a crowd that lists it meanwhile reads it. Never fails.
pub async fn settle_background_work(limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let finished = FINISHED.notified();
        tokio::pin!(finished);
        // Registered before the count is read, so a task ending in between still wakes us.
        finished.as_mut().enable();
        if IN_FLIGHT.load(Ordering::Acquire) == 0 {
            return true;
        }
        if tokio::time::timeout_at(deadline, finished).await.is_err() {
            return IN_FLIGHT.load(Ordering::Acquire) == 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settling_waits_for_tracked_work_and_gives_up_at_its_limit() {
        // The count is process-wide: other tests' work may be in flight too, so only a
        // wait that must fail is given a short limit.
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(tracked(async move {
            let _ = released.await;
        }));
        assert!(!settle_background_work(Duration::from_millis(20)).await);
        release.send(()).unwrap();
        assert!(settle_background_work(Duration::from_secs(5)).await);
        task.await.unwrap();
        // A tracked future dropped before it ran counts as finished too.
        drop(tracked(std::future::pending::<()>()));
        assert!(settle_background_work(Duration::from_secs(5)).await);
    }
}
