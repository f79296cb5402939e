//! `HedgedStore`: sends a second copy of a small PUT that is running long, and takes the
//! first answer that settles it, so one slow request does not set an operation's latency.
//!
//! S3's latency has a long tail: AWS's performance guide advises latency-sensitive
//! applications to retry requests that run long rather than wait, and a hedged request
//! (Dean and Barroso, *The Tail at Scale*, CACM 2013) is that retry sent before giving up
//! on the first. A commit waits on two PUTs one after the other (a manifest page or index
//! segment, then the log entry), so their tails add up; hedging cuts each.
//!
//! Only small PUTs are hedged (a large upload's time is its transfer, not its tail): a
//! put-if-absent, or an overwrite of an object whose name is never reused (a data file,
//! deletion vector or index object, as [`delta_objects`] tells), since a late copy of an
//! overwrite of anything else (`_last_checkpoint`) could land over a newer version.
//! ETag-conditioned PUTs are never hedged. The delay is learnt: the 90th percentile of the
//! PUT times seen so far (a hedged PUT counts the time its answer took), never under a
//! floor, so about one PUT in ten is sent twice.
//!
//! For a put-if-absent, either copy succeeding means ours is in place. Both refused is
//! reported as a refusal, and a refusal beside an error as the error, since the copy that
//! failed may be the one that landed; a caller that must know reads the object back (S3
//! also answers 409 to two overlapping conditional PUTs, so a refusal alone never proves
//! another writer's object is there). Once an answer is returned, no copy of a
//! put-if-absent is left in flight that could still land: either ours landed, or both
//! copies were answered.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::{Either, select};
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::ops::Range;

use crate::cache::{Cacheability, delta_objects};

/// When a PUT gets a second copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgePolicy {
    /// Never hedge sooner than this.
    pub min_delay: Duration,
    /// The share of PUT times the delay sits above (0.9: the slowest tenth is hedged).
    pub quantile: f64,
    /// PUTs larger than this are never hedged.
    pub max_bytes: usize,
    /// PUT times remembered.
    pub window: usize,
    /// PUT times known before hedging starts (with few, the quantile is the slowest
    /// seen, so early hedges are rare).
    pub warm_up: usize,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_millis(25),
            quantile: 0.9,
            max_bytes: 1024 * 1024,
            window: 128,
            warm_up: 8,
        }
    }
}

/// An [`ObjectStore`] that hedges small PUTs (see the module docs); every other request
/// goes straight through.
#[derive(Debug)]
pub struct HedgedStore<T = Arc<dyn ObjectStore>> {
    inner: T,
    policy: HedgePolicy,
    observed: Mutex<VecDeque<Duration>>,
    hedged: AtomicU64,
}

impl<T: ObjectStore> HedgedStore<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, policy: HedgePolicy) -> Self {
        Self {
            inner,
            policy,
            observed: Mutex::new(VecDeque::new()),
            hedged: AtomicU64::new(0),
        }
    }

    /// How many PUTs were sent a second time so far.
    pub fn hedged(&self) -> u64 {
        self.hedged.load(Ordering::Relaxed)
    }

    /// The wait before a second copy, once enough PUT times are known.
    fn delay(&self) -> Option<Duration> {
        let observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if observed.len() < self.policy.warm_up.max(1) {
            return None;
        }
        let mut sorted: Vec<Duration> = observed.iter().copied().collect();
        sorted.sort_unstable();
        let rank = ((sorted.len() as f64) * self.policy.quantile) as usize;
        let at = sorted[rank.min(sorted.len() - 1)];
        Some(at.max(self.policy.min_delay))
    }

    fn observe(&self, took: Duration) {
        let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if observed.len() >= self.policy.window.max(1) {
            observed.pop_front();
        }
        observed.push_back(took);
    }
}

impl<T: ObjectStore> fmt::Display for HedgedStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HedgedStore({})", self.inner)
    }
}

/// What two copies of one PUT settle on, once neither succeeded: both refused as taken is
/// a refusal; otherwise the error that is not a refusal (its copy may have landed).
fn settle(first: object_store::Error, second: object_store::Error) -> object_store::Error {
    match (&first, &second) {
        (object_store::Error::AlreadyExists { .. }, _) => second,
        _ => first,
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for HedgedStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let hedgeable = payload.content_length() <= self.policy.max_bytes
            && match opts.mode {
                PutMode::Create => true,
                PutMode::Overwrite => delta_objects(location) == Cacheability::Immutable,
                PutMode::Update(_) => false,
            };
        if !hedgeable {
            return self.inner.put_opts(location, payload, opts).await;
        }
        let started = Instant::now();
        let Some(delay) = self.delay() else {
            let result = self.inner.put_opts(location, payload, opts).await;
            self.observe(started.elapsed());
            return result;
        };
        let first = self.inner.put_opts(location, payload.clone(), opts.clone());
        let first = match select(first, Box::pin(tokio::time::sleep(delay))).await {
            Either::Left((result, _)) => {
                self.observe(started.elapsed());
                return result;
            }
            Either::Right(((), first)) => first,
        };
        self.hedged.fetch_add(1, Ordering::Relaxed);
        let second = self.inner.put_opts(location, payload, opts);
        let settled = match select(first, second).await {
            Either::Left((Ok(done), _)) | Either::Right((Ok(done), _)) => Ok(done),
            Either::Left((Err(a), second)) => second.await.map_err(|b| settle(a, b)),
            Either::Right((Err(b), first)) => first.await.map_err(|a| settle(a, b)),
        };
        // The time the answer took, past the delay: when PUTs slow down for good, the
        // delay rises with them rather than hedging every PUT.
        self.observe(started.elapsed());
        settled
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    /// A store whose PUTs wait as planned: before landing, and after (a lost-in-transit
    /// acknowledgement), one plan entry per PUT in order.
    #[derive(Debug, Default)]
    struct Planned {
        inner: InMemory,
        plan: Mutex<VecDeque<(Duration, Duration)>>,
    }

    impl fmt::Display for Planned {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Planned")
        }
    }

    #[async_trait]
    impl ObjectStore for Planned {
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
            let (before, after) = self.plan.lock().unwrap().pop_front().unwrap_or_default();
            tokio::time::sleep(before).await;
            let result = self.inner.put_opts(l, p, o).await;
            tokio::time::sleep(after).await;
            result
        }
        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(l, o).await
        }
        async fn get_opts(&self, l: &Path, o: GetOptions) -> Result<GetResult> {
            self.inner.get_opts(l, o).await
        }
        fn delete_stream(
            &self,
            l: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.inner.delete_stream(l)
        }
        fn list(&self, p: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.inner.list(p)
        }
        async fn list_with_delimiter(&self, p: Option<&Path>) -> Result<ListResult> {
            self.inner.list_with_delimiter(p).await
        }
        async fn copy_opts(&self, f: &Path, t: &Path, o: CopyOptions) -> Result<()> {
            self.inner.copy_opts(f, t, o).await
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    /// A hedged store that has seen four quick PUTs, so it hedges after 10 ms.
    async fn warmed(plan: &[(Duration, Duration)]) -> HedgedStore<Planned> {
        let store = HedgedStore::new(
            Planned::default(),
            HedgePolicy {
                min_delay: Duration::from_millis(10),
                window: 16,
                warm_up: 4,
                ..HedgePolicy::default()
            },
        );
        for i in 0..4 {
            store
                .put(&Path::from(format!("warm/{i}.parquet")), "w".into())
                .await
                .unwrap();
        }
        store
            .inner
            .plan
            .lock()
            .unwrap()
            .extend(plan.iter().copied());
        store
    }

    fn create() -> PutOptions {
        PutOptions::from(PutMode::Create)
    }

    #[tokio::test]
    async fn a_slow_put_is_answered_by_its_second_copy() {
        let store = warmed(&[(LONG, Duration::ZERO)]).await;
        let started = Instant::now();
        store
            .put(&Path::from("a.parquet"), "data".into())
            .await
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(store.hedged(), 1);
        let bytes = store
            .get(&Path::from("a.parquet"))
            .await
            .unwrap()
            .bytes()
            .await;
        assert_eq!(bytes.unwrap(), "data");
    }

    #[tokio::test]
    async fn a_quick_put_is_sent_once() {
        let store = warmed(&[]).await;
        store
            .put(&Path::from("a.parquet"), "data".into())
            .await
            .unwrap();
        assert_eq!(store.hedged(), 0);
    }

    #[tokio::test]
    async fn put_if_absent_whose_first_copy_landed_slowly_is_ours() {
        // The first copy lands at once but its answer is slow; the second is refused
        // because of it. The PUT succeeded: it must not be reported as taken.
        let store = warmed(&[(Duration::ZERO, Duration::from_millis(300))]).await;
        store
            .put_opts(&Path::from("v"), "ours".into(), create())
            .await
            .unwrap();
        assert_eq!(store.hedged(), 1);
    }

    #[tokio::test]
    async fn put_if_absent_on_a_taken_name_is_refused_by_both_copies() {
        let store = warmed(&[]).await;
        store.put(&Path::from("v"), "theirs".into()).await.unwrap();
        store
            .inner
            .plan
            .lock()
            .unwrap()
            .push_back((Duration::from_millis(300), Duration::ZERO));
        let err = store
            .put_opts(&Path::from("v"), "ours".into(), create())
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::AlreadyExists { .. }),
            "{err}"
        );
        assert_eq!(store.hedged(), 1);
        let bytes = store.get(&Path::from("v")).await.unwrap().bytes().await;
        assert_eq!(bytes.unwrap(), "theirs");
    }

    #[tokio::test]
    async fn large_puts_and_a_cold_store_are_not_hedged() {
        let cold = HedgedStore::new(Planned::default(), HedgePolicy::default());
        cold.inner
            .plan
            .lock()
            .unwrap()
            .push_back((Duration::from_millis(300), Duration::ZERO));
        cold.put(&Path::from("a.parquet"), "x".into())
            .await
            .unwrap();
        assert_eq!(cold.hedged(), 0, "nothing learnt yet");
        let store = warmed(&[(Duration::from_millis(300), Duration::ZERO)]).await;
        let big = vec![0u8; 2 * 1024 * 1024];
        store
            .put(&Path::from("big.parquet"), big.into())
            .await
            .unwrap();
        assert_eq!(store.hedged(), 0);
    }

    #[tokio::test]
    async fn overwrites_of_objects_that_change_are_not_hedged() {
        let store = warmed(&[(Duration::from_millis(300), Duration::ZERO)]).await;
        let hint = Path::from("t/_delta_log/_last_checkpoint");
        store.put(&hint, "{}".into()).await.unwrap();
        assert_eq!(store.hedged(), 0);
    }

    #[test]
    fn two_failed_copies_settle_on_the_error_that_is_not_a_refusal() {
        let taken = || object_store::Error::AlreadyExists {
            path: "v".into(),
            source: "exists".into(),
        };
        let broken = || object_store::Error::Generic {
            store: "test",
            source: "reset".into(),
        };
        assert!(matches!(
            settle(taken(), taken()),
            object_store::Error::AlreadyExists { .. }
        ));
        assert!(matches!(
            settle(taken(), broken()),
            object_store::Error::Generic { .. }
        ));
        assert!(matches!(
            settle(broken(), taken()),
            object_store::Error::Generic { .. }
        ));
    }
}
