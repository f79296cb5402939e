//! `CountingStore`: counts requests, bytes and the critical path of round trips.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};

/// Request counts by kind, bytes moved, and the critical path, as of one moment.
///
/// `critical_path` is the longest chain of requests that each started after the previous
/// one finished: the number of round trips an operation waited on one after another, which
/// is what its latency on a real object store is made of. Requests issued in parallel add
/// to the counts but not to the critical path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Single-request PUTs (`put_opts`).
    pub puts: u64,
    /// Multipart upload requests: creations, parts, completions and aborts.
    pub multipart_requests: u64,
    /// GETs, whole or ranged: `get_opts` without `head` counts one; `get_ranges` counts
    /// the requests an HTTP store sends after merging ranges less than 1 MiB apart.
    pub gets: u64,
    /// HEADs (`get_opts` with `head`).
    pub heads: u64,
    /// LIST calls (`list`, `list_with_offset`, `list_with_delimiter`).
    pub lists: u64,
    /// Objects deleted (`delete_stream` items).
    pub deletes: u64,
    /// Copies.
    pub copies: u64,
    /// Renames.
    pub renames: u64,
    /// Bytes returned by GETs.
    pub bytes_read: u64,
    /// Bytes sent by PUTs and parts.
    pub bytes_written: u64,
    /// Round trips waited on one after another.
    pub critical_path: u64,
}

impl RequestCounts {
    /// All requests of every kind.
    pub fn requests(&self) -> u64 {
        self.puts
            + self.multipart_requests
            + self.gets
            + self.heads
            + self.lists
            + self.deletes
            + self.copies
            + self.renames
    }

    /// The request counts by kind (`PUT`, `multipart`, `GET`, `HEAD`, `LIST`, `DELETE`,
    /// `COPY`, `RENAME`), leaving out the kinds with none.
    pub fn by_kind(&self) -> std::collections::BTreeMap<&'static str, u64> {
        [
            ("PUT", self.puts),
            ("multipart", self.multipart_requests),
            ("GET", self.gets),
            ("HEAD", self.heads),
            ("LIST", self.lists),
            ("DELETE", self.deletes),
            ("COPY", self.copies),
            ("RENAME", self.renames),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }

    /// Requests that write: PUTs, multipart requests, deletes, copies and renames.
    pub fn writes(&self) -> u64 {
        self.puts + self.multipart_requests + self.deletes + self.copies + self.renames
    }
}

impl fmt::Display for RequestCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests (get {}, head {}, list {}, put {}, multipart {}, delete {}, copy {}, \
             rename {}), {} B read, {} B written, critical path {}",
            self.requests(),
            self.gets,
            self.heads,
            self.lists,
            self.puts,
            self.multipart_requests,
            self.deletes,
            self.copies,
            self.renames,
            self.bytes_read,
            self.bytes_written,
            self.critical_path
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    puts: AtomicU64,
    multipart_requests: AtomicU64,
    gets: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    copies: AtomicU64,
    renames: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    /// Deepest chain among requests that have finished.
    completed_depth: AtomicU64,
    /// Deepest chain among requests that have started.
    max_depth: AtomicU64,
    /// Resets so far: a request started before the last one does not lengthen the
    /// chain measured after it.
    epoch: AtomicU64,
}

/// Where a request sits in the chain: the reset it started after, and its depth.
#[derive(Debug, Clone, Copy)]
struct Depth {
    epoch: u64,
    depth: u64,
}

impl Counters {
    /// A request starts: it may depend on everything that has finished, so its depth is one
    /// more than the deepest finished chain.
    fn begin(&self) -> Depth {
        let epoch = self.epoch.load(Ordering::SeqCst);
        let depth = self.completed_depth.load(Ordering::SeqCst) + 1;
        self.max_depth.fetch_max(depth, Ordering::SeqCst);
        Depth { epoch, depth }
    }

    fn end(&self, started: Depth) {
        if started.epoch == self.epoch.load(Ordering::SeqCst) {
            self.completed_depth
                .fetch_max(started.depth, Ordering::SeqCst);
        }
    }
}

/// A handle on a [`CountingStore`]'s counters that stays usable after the store is wrapped
/// or type-erased into an `Arc<dyn ObjectStore>`.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter {
    counters: Arc<Counters>,
}

impl RequestCounter {
    /// The counts so far.
    pub fn counts(&self) -> RequestCounts {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::SeqCst);
        RequestCounts {
            puts: load(&c.puts),
            multipart_requests: load(&c.multipart_requests),
            gets: load(&c.gets),
            heads: load(&c.heads),
            lists: load(&c.lists),
            deletes: load(&c.deletes),
            copies: load(&c.copies),
            renames: load(&c.renames),
            bytes_read: load(&c.bytes_read),
            bytes_written: load(&c.bytes_written),
            critical_path: load(&c.max_depth),
        }
    }

    /// Sets every count back to zero, to measure the next operation on its own.
    pub fn reset(&self) {
        let c = &self.counters;
        c.epoch.fetch_add(1, Ordering::SeqCst);
        for a in [
            &c.puts,
            &c.multipart_requests,
            &c.gets,
            &c.heads,
            &c.lists,
            &c.deletes,
            &c.copies,
            &c.renames,
            &c.bytes_read,
            &c.bytes_written,
            &c.completed_depth,
            &c.max_depth,
        ] {
            a.store(0, Ordering::SeqCst);
        }
    }

    /// The counts so far, then [`reset`](Self::reset).
    pub fn take(&self) -> RequestCounts {
        let counts = self.counts();
        self.reset();
        counts
    }
}

/// Marks a request finished when dropped, so streams count as finished when consumed or
/// abandoned.
struct Finish {
    counters: Arc<Counters>,
    depth: Depth,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.counters.end(self.depth);
    }
}

/// An [`ObjectStore`] that counts the requests it forwards to an inner store.
///
/// ```
/// # use std::sync::Arc;
/// # use object_store::{memory::InMemory, path::Path, ObjectStoreExt};
/// # use tarn_store::CountingStore;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> object_store::Result<()> {
/// let store = CountingStore::new(InMemory::new());
/// let counter = store.counter();
/// store.put(&Path::from("a"), "x".into()).await?;
/// store.get(&Path::from("a")).await?.bytes().await?;
/// let counts = counter.take();
/// assert_eq!((counts.puts, counts.gets, counts.critical_path), (1, 1, 2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CountingStore<T = Arc<dyn ObjectStore>> {
    inner: T,
    counter: RequestCounter,
}

impl<T: ObjectStore> CountingStore<T> {
    /// Wraps `inner` with fresh counters.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            counter: RequestCounter::default(),
        }
    }

    /// A handle on this store's counters.
    pub fn counter(&self) -> RequestCounter {
        self.counter.clone()
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn c(&self) -> &Arc<Counters> {
        &self.counter.counters
    }
}

impl<T: ObjectStore> fmt::Display for CountingStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

/// Prints each request to standard error when `TARN_TRACE_REQUESTS` is set: a
/// developer's view of what an operation asks of the store, in order.
fn trace(operation: &str, path: &Path) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("TARN_TRACE_REQUESTS").is_some()) {
        eprintln!("[store] {operation} {path}");
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for CountingStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        trace("put", location);
        let c = self.c();
        c.puts.fetch_add(1, Ordering::Relaxed);
        c.bytes_written
            .fetch_add(payload.content_length() as u64, Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.put_opts(location, payload, opts).await;
        c.end(depth);
        result
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let c = self.c();
        c.multipart_requests.fetch_add(1, Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.put_multipart_opts(location, opts).await;
        c.end(depth);
        Ok(Box::new(CountingUpload {
            inner: result?,
            counters: Arc::clone(c),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        trace(if options.head { "head" } else { "get" }, location);
        let c = self.c();
        let head = options.head;
        if head {
            c.heads.fetch_add(1, Ordering::Relaxed);
        } else {
            c.gets.fetch_add(1, Ordering::Relaxed);
        }
        let depth = c.begin();
        let result = self.inner.get_opts(location, options).await;
        c.end(depth);
        if let (Ok(r), false) = (&result, head) {
            c.bytes_read
                .fetch_add(r.range.end.saturating_sub(r.range.start), Ordering::Relaxed);
        }
        result
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        trace("get ranges", location);
        let c = self.c();
        c.gets
            .fetch_add(coalesced_requests(ranges), Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.get_ranges(location, ranges).await;
        c.end(depth);
        if let Ok(parts) = &result {
            let bytes: usize = parts.iter().map(Bytes::len).sum();
            c.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        result
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let c = Arc::clone(self.c());
        let finish = Finish {
            depth: c.begin(),
            counters: Arc::clone(&c),
        };
        let counted = locations
            .map(move |location| {
                c.deletes.fetch_add(1, Ordering::Relaxed);
                location
            })
            .boxed();
        self.inner
            .delete_stream(counted)
            .map(move |r| {
                let _ = &finish;
                r
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        trace("list", prefix.unwrap_or(&Path::default()));
        let c = self.c();
        c.lists.fetch_add(1, Ordering::Relaxed);
        let finish = Finish {
            depth: c.begin(),
            counters: Arc::clone(c),
        };
        self.inner
            .list(prefix)
            .map(move |r| {
                let _ = &finish;
                r
            })
            .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        trace("list from", offset);
        let c = self.c();
        c.lists.fetch_add(1, Ordering::Relaxed);
        let finish = Finish {
            depth: c.begin(),
            counters: Arc::clone(c),
        };
        self.inner
            .list_with_offset(prefix, offset)
            .map(move |r| {
                let _ = &finish;
                r
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        trace("list /", prefix.unwrap_or(&Path::default()));
        let c = self.c();
        c.lists.fetch_add(1, Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.list_with_delimiter(prefix).await;
        c.end(depth);
        result
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let c = self.c();
        c.copies.fetch_add(1, Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.copy_opts(from, to, options).await;
        c.end(depth);
        result
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let c = self.c();
        c.renames.fetch_add(1, Ordering::Relaxed);
        let depth = c.begin();
        let result = self.inner.rename_opts(from, to, options).await;
        c.end(depth);
        result
    }
}

/// How many requests `object_store`'s HTTP stores send for `get_ranges`: ranges closer
/// than [`object_store::OBJECT_STORE_COALESCE_DEFAULT`] merge into one.
fn coalesced_requests(ranges: &[Range<u64>]) -> u64 {
    let mut sorted: Vec<&Range<u64>> = ranges.iter().collect();
    sorted.sort_by_key(|r| r.start);
    let mut requests = 0;
    let mut end: Option<u64> = None;
    for range in sorted {
        match end {
            Some(e)
                if range.start <= e.saturating_add(object_store::OBJECT_STORE_COALESCE_DEFAULT) =>
            {
                end = Some(e.max(range.end));
            }
            _ => {
                requests += 1;
                end = Some(range.end);
            }
        }
    }
    requests
}

#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    counters: Arc<Counters>,
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let c = Arc::clone(&self.counters);
        c.multipart_requests.fetch_add(1, Ordering::Relaxed);
        c.bytes_written
            .fetch_add(data.content_length() as u64, Ordering::Relaxed);
        let depth = c.begin();
        let part = self.inner.put_part(data);
        async move {
            let result = part.await;
            c.end(depth);
            result
        }
        .boxed()
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.counters
            .multipart_requests
            .fetch_add(1, Ordering::Relaxed);
        let depth = self.counters.begin();
        let result = self.inner.complete().await;
        self.counters.end(depth);
        result
    }

    async fn abort(&mut self) -> Result<()> {
        self.counters
            .multipart_requests
            .fetch_add(1, Ordering::Relaxed);
        let depth = self.counters.begin();
        let result = self.inner.abort().await;
        self.counters.end(depth);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn parallel_requests_share_one_step_of_the_critical_path() {
        // Latency keeps both GETs in flight at once, as on a real store.
        let slow = crate::LatencyStore::new(
            InMemory::new(),
            crate::LatencyProfile::s3_express().scaled(0.5),
            1,
        );
        let store = CountingStore::new(slow);
        let counter = store.counter();
        store.put(&Path::from("a"), "1".into()).await.unwrap();
        store.put(&Path::from("b"), "22".into()).await.unwrap();
        counter.reset();

        let (pa, pb) = (Path::from("a"), Path::from("b"));
        let (a, b) = tokio::join!(store.get(&pa), store.get(&pb));
        a.unwrap();
        b.unwrap();
        let listed: Vec<_> = store.list(None).collect().await;
        assert_eq!(listed.len(), 2);

        let counts = counter.take();
        assert_eq!(counts.gets, 2);
        assert_eq!(counts.lists, 1);
        assert_eq!(counts.bytes_read, 3);
        assert_eq!(counts.critical_path, 2, "two parallel GETs, then one LIST");
        assert_eq!(
            counts.by_kind(),
            std::collections::BTreeMap::from([("GET", 2), ("LIST", 1)])
        );
        assert_eq!(counter.counts(), RequestCounts::default());
    }

    #[test]
    fn nearby_ranges_count_as_one_request() {
        let mib = 1024 * 1024;
        assert_eq!(coalesced_requests(&[0..10, 20..30, 40..50]), 1);
        assert_eq!(coalesced_requests(&[0..10, (3 * mib)..(3 * mib + 1)]), 2);
        assert_eq!(coalesced_requests(&[]), 0);
    }

    #[tokio::test]
    async fn heads_and_deletes_are_counted_by_kind() {
        let store = CountingStore::new(InMemory::new());
        let counter = store.counter();
        store.put(&Path::from("a"), "abc".into()).await.unwrap();
        store.head(&Path::from("a")).await.unwrap();
        store.delete(&Path::from("a")).await.unwrap();
        let counts = counter.counts();
        assert_eq!((counts.puts, counts.heads, counts.deletes), (1, 1, 1));
        assert_eq!((counts.bytes_written, counts.bytes_read), (3, 0));
        assert_eq!(counts.critical_path, 3);
        assert_eq!(counts.requests(), 3);
    }

    #[tokio::test]
    async fn a_request_started_before_a_reset_does_not_lengthen_the_next_chain() {
        let slow = crate::LatencyStore::new(
            InMemory::new(),
            crate::LatencyProfile::s3_express().scaled(0.5),
            1,
        );
        let store = Arc::new(CountingStore::new(slow));
        let counter = store.counter();
        for i in 0..3 {
            store
                .put(&Path::from(format!("p{i}")), "x".into())
                .await
                .unwrap();
        }
        // A fourth request in the chain, still running when the counter is reset.
        let background = Arc::clone(&store);
        let late = tokio::spawn(async move {
            background
                .put(&Path::from("late"), "x".into())
                .await
                .unwrap();
        });
        tokio::task::yield_now().await;
        counter.reset();
        late.await.unwrap();
        store.put(&Path::from("q"), "x".into()).await.unwrap();
        assert_eq!(counter.take().critical_path, 1);
    }
}
