//! Work spawned onto tasks of its own, so that decoding several files at once runs on
//! every worker thread instead of on whichever task polls a `buffered` stream. A spawned
//! task is aborted when its handle is dropped (a failed or abandoned read stops the
//! others), and a task that panics or is cancelled becomes [`Error::TaskFailed`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// A spawned task's handle that aborts the task when dropped.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = std::result::Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

/// The cores this process may use: how many encoders, decoders and rewrites run at once.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `work` over `items` split into one run per core, on scoped threads, and returns
/// the runs' results in order; below `min_parallel` items, one run on this thread. A
/// panic in a run is resumed here.
pub(crate) fn on_cores<T: Sync, R: Send>(
    items: &[T],
    min_parallel: usize,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let threads = if items.len() < min_parallel.max(2) {
        1
    } else {
        cores().clamp(1, items.len())
    };
    if threads == 1 {
        return vec![work(items)];
    }
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| scope.spawn(|| work(c)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// `work` of every item, consuming the items, on one scoped thread per core (item `i` on
/// thread `i % cores`), while this thread hands the results to `consume` in item order
/// as they arrive: the caller's sequential part overlaps the parallel one. A single item
/// runs on this thread. A panic in `work` is resumed here.
pub(crate) fn on_cores_in_order<T: Send, R: Send>(
    items: Vec<T>,
    work: impl Fn(T) -> R + Sync,
    mut consume: impl FnMut(R),
) {
    let threads = cores().clamp(1, items.len().max(1));
    if threads == 1 {
        items.into_iter().map(work).for_each(consume);
        return;
    }
    let mut runs: Vec<Vec<(usize, T)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        runs[i % threads].push((i, item));
    }
    let work = &work;
    std::thread::scope(|scope| {
        let (sender, results) = std::sync::mpsc::channel::<(usize, R)>();
        let handles: Vec<_> = runs
            .into_iter()
            .map(|run| {
                let sender = sender.clone();
                scope.spawn(move || {
                    for (i, item) in run {
                        // The receiver is gone only when `consume` panicked.
                        let _ = sender.send((i, work(item)));
                    }
                })
            })
            .collect();
        drop(sender);
        // Results that came ahead of their turn wait here.
        let mut early = std::collections::BTreeMap::new();
        let mut next = 0;
        for (i, result) in results {
            early.insert(i, result);
            while let Some(result) = early.remove(&next) {
                consume(result);
                next += 1;
            }
        }
        for handle in handles {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// Runs blocking CPU work on tokio's blocking pool, off the async threads; `task` names
/// the work in the error when it panics.
pub(crate) async fn blocking<T: Send + 'static>(
    task: &'static str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|source| Error::TaskFailed { task, source })?
}

/// Runs `future` on a task of its own and returns its result; `task` names the work in
/// the error when the task panics.
pub(crate) fn spawn<T: Send + 'static>(
    task: &'static str,
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> impl Future<Output = Result<T>> + Send + 'static {
    let handle = AbortOnDrop(tokio::spawn(future));
    async move {
        handle
            .await
            .map_err(|source| Error::TaskFailed { task, source })?
    }
}

/// Drives the stream `open` returns on a task of its own, a couple of items ahead of the
/// consumer (so memory stays bounded), and yields its items.
pub(crate) fn spawn_stream<T, S>(
    task: &'static str,
    open: impl Future<Output = Result<S>> + Send + 'static,
) -> BoxStream<'static, Result<T>>
where
    T: Send + 'static,
    S: Stream<Item = Result<T>> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<T>>(2);
    let handle = AbortOnDrop(tokio::spawn(async move {
        let stream = match open.await {
            Ok(stream) => stream,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            // A closed channel means the consumer went away.
            if tx.send(item).await.is_err() {
                return;
            }
        }
    }));
    let items = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    // After the last item: a panic in the task is an error, not a short read.
    let end = futures::stream::once(async move {
        handle
            .await
            .err()
            .map(|source| Err(Error::TaskFailed { task, source }))
    })
    .filter_map(futures::future::ready);
    items.chain(end).boxed()
}

/// The text of a caught panic.
pub(crate) fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_reach_the_caller_in_the_order_of_their_items() {
        for n in [0usize, 1, 2, 3, 17] {
            let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let mut out = Vec::new();
            on_cores_in_order(items.clone(), |s: String| s + "!", |r| out.push(r));
            let want: Vec<String> = items.into_iter().map(|s| s + "!").collect();
            assert_eq!(out, want, "{n} items");
        }
    }

    #[test]
    #[should_panic(expected = "item 5")]
    fn a_panicking_item_panics_the_caller() {
        on_cores_in_order(
            (0..8).collect(),
            |i: i32| {
                assert!(i != 5, "item {i}");
                i
            },
            |_| {},
        );
    }
}
