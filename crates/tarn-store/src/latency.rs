//! `LatencyStore`: replays object-store latency on one machine.
//!
//! The profiles are models, not measurements of ours. Their sources:
//!
//! - **S3 Standard.** AWS, *Best Practices Design Patterns: Optimizing Amazon S3 Performance*
//!   ("Timeouts and Retries for Latency-Sensitive Applications"): for requests under 512 KB
//!   "median latencies are often in the tens of milliseconds range", and a request still
//!   unanswered after 2 seconds is worth retrying, so the tail is long. Durner, Leis and
//!   Neumann, *Exploiting Cloud Object Storage for High-Performance Analytics* (PVLDB 16(11),
//!   2023) measure first-byte latencies of that order and a per-request bandwidth well under
//!   100 MiB/s, which is why large objects are fetched with many parallel ranged requests.
//! - **S3 Express One Zone.** AWS's product page and user guide: "consistent single-digit
//!   millisecond request latency", "up to 10x" faster than S3 Standard.
//! - **GCS Standard** and **Azure Blob (standard account, hot tier)**. Google's *Storage
//!   classes* page gives every class a time to first byte of typically tens of
//!   milliseconds; Microsoft's *Latency in Blob storage* page defines latency end to end,
//!   mostly server time for small requests, with premium block blob accounts the tier for
//!   low, consistent latency. Three published side-by-side measurements from VMs in the
//!   bucket's region shape the two against S3: Bjornson, *Cloud storage performance*
//!   (2015, time to first byte on all three with PerfKitBenchmarker); BigBitBus, *Public
//!   cloud objectstores are very unequal* (2018: small Azure blobs upload faster, large
//!   Azure downloads up to 4x slower); Deyhim, *Cloud blob storage performance: a
//!   side-by-side comparison* (2024: one-byte GETs and PUTs slowest on GCS, Azure between
//!   it and S3). So `gcs-standard` has the slowest small requests (PUTs slowest, as a
//!   regional bucket acknowledges a write in two zones), and `azure-blob` small requests
//!   about as quick as S3 Standard's (BigBitBus finds its small uploads quicker, Deyhim
//!   slower) but the lowest per-request bandwidth. The magnitudes are fitted conservatively to
//!   those findings, not copied from any one of them: models, not measurements of ours.
//!
//! Each request's delay is drawn from a log-normal distribution fitted to a median and a
//! 99th percentile, plus the transfer time of its payload at the profile's per-request
//! bandwidth. The generator is seeded, so a run replays the same delays in the same order.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};

use crate::error::Error;
use crate::random::SplitMix64;

/// The latency of one kind of request: a median and a 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpLatency {
    /// Median time to first byte.
    pub median: Duration,
    /// 99th percentile time to first byte.
    pub p99: Duration,
}

impl OpLatency {
    /// A latency from milliseconds.
    pub const fn ms(median: u64, p99: u64) -> Self {
        Self {
            median: Duration::from_millis(median),
            p99: Duration::from_millis(p99),
        }
    }

    const ZERO: Self = Self::ms(0, 0);

    /// Draws one delay; `z` is a standard normal variate.
    fn sample(&self, z: f64) -> Duration {
        let median = self.median.as_secs_f64();
        if median <= 0.0 {
            return Duration::ZERO;
        }
        let ratio = (self.p99.as_secs_f64() / median).max(1.0);
        // The 99th percentile of a standard normal is 2.326.
        let sigma = ratio.ln() / 2.326_347_874;
        Duration::from_secs_f64(median * (sigma * z).exp())
    }
}

/// A named model of an object store's request latency.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyProfile {
    /// The profile's name (one of [`LatencyProfile::NAMES`]).
    pub name: String,
    /// GET and ranged GET, to first byte.
    pub get: OpLatency,
    /// HEAD.
    pub head: OpLatency,
    /// PUT (and each multipart request), until acknowledged.
    pub put: OpLatency,
    /// One LIST page.
    pub list: OpLatency,
    /// DELETE, COPY, RENAME.
    pub other: OpLatency,
    /// Bytes per second one request transfers once it has started.
    pub bandwidth: f64,
}

impl LatencyProfile {
    /// No delay at all.
    pub fn none() -> Self {
        Self {
            name: "none".into(),
            get: OpLatency::ZERO,
            head: OpLatency::ZERO,
            put: OpLatency::ZERO,
            list: OpLatency::ZERO,
            other: OpLatency::ZERO,
            bandwidth: f64::INFINITY,
        }
    }

    /// S3 Standard: tens of milliseconds at the median, a long tail, about 85 MiB/s per
    /// request (see the module docs for sources).
    pub fn s3_standard() -> Self {
        Self {
            name: "s3-standard".into(),
            get: OpLatency::ms(27, 110),
            head: OpLatency::ms(20, 80),
            put: OpLatency::ms(45, 180),
            list: OpLatency::ms(35, 140),
            other: OpLatency::ms(30, 120),
            bandwidth: 85.0 * 1024.0 * 1024.0,
        }
    }

    /// S3 Express One Zone: single-digit milliseconds, about 10x S3 Standard, with a higher
    /// per-request bandwidth (see the module docs for sources).
    pub fn s3_express() -> Self {
        Self {
            name: "s3-express".into(),
            get: OpLatency::ms(4, 10),
            head: OpLatency::ms(3, 8),
            put: OpLatency::ms(6, 15),
            list: OpLatency::ms(5, 12),
            other: OpLatency::ms(5, 12),
            bandwidth: 200.0 * 1024.0 * 1024.0,
        }
    }

    /// Google Cloud Storage, Standard class, regional bucket: the slowest small requests
    /// of the three clouds, PUTs slower than GETs (see the module docs for sources).
    pub fn gcs_standard() -> Self {
        Self {
            name: "gcs-standard".into(),
            get: OpLatency::ms(40, 160),
            head: OpLatency::ms(35, 140),
            put: OpLatency::ms(80, 320),
            list: OpLatency::ms(50, 200),
            other: OpLatency::ms(45, 180),
            bandwidth: 80.0 * 1024.0 * 1024.0,
        }
    }

    /// Azure Blob Storage, standard account, hot tier: small requests about as quick as
    /// S3 Standard's, the lowest per-request bandwidth (see the module docs for sources).
    pub fn azure_blob() -> Self {
        Self {
            name: "azure-blob".into(),
            get: OpLatency::ms(30, 120),
            head: OpLatency::ms(25, 100),
            put: OpLatency::ms(45, 180),
            list: OpLatency::ms(35, 140),
            other: OpLatency::ms(30, 120),
            bandwidth: 40.0 * 1024.0 * 1024.0,
        }
    }

    /// The names [`by_name`](Self::by_name) knows.
    pub const NAMES: [&'static str; 5] = [
        "none",
        "s3-standard",
        "s3-express",
        "gcs-standard",
        "azure-blob",
    ];

    /// A profile by name: `none`, `s3-standard`, `s3-express`, `gcs-standard` or
    /// `azure-blob`.
    ///
    /// Fails with [`Error::UnknownProfile`] for any other name.
    pub fn by_name(name: &str) -> Result<Self, Error> {
        match name {
            "none" => Ok(Self::none()),
            "s3-standard" => Ok(Self::s3_standard()),
            "s3-express" => Ok(Self::s3_express()),
            "gcs-standard" => Ok(Self::gcs_standard()),
            "azure-blob" => Ok(Self::azure_blob()),
            other => Err(Error::UnknownProfile {
                name: other.to_string(),
            }),
        }
    }

    /// The same profile with every latency multiplied by `factor` (bandwidth divided by it),
    /// for tests that want the shape of S3 without its wall-clock cost.
    #[must_use]
    pub fn scaled(mut self, factor: f64) -> Self {
        let factor = factor.max(0.0);
        for op in [
            &mut self.get,
            &mut self.head,
            &mut self.put,
            &mut self.list,
            &mut self.other,
        ] {
            op.median = op.median.mul_f64(factor);
            op.p99 = op.p99.mul_f64(factor);
        }
        self.bandwidth /= factor;
        self
    }

    fn transfer(&self, bytes: u64) -> Duration {
        if self.bandwidth.is_finite() && self.bandwidth > 0.0 {
            Duration::from_secs_f64(bytes as f64 / self.bandwidth)
        } else {
            Duration::ZERO
        }
    }
}

#[derive(Debug)]
struct Delays {
    profile: LatencyProfile,
    rng: Mutex<SplitMix64>,
}

impl Delays {
    fn draw(&self, op: OpLatency, bytes: u64) -> Duration {
        // A poisoned lock still holds a usable generator state.
        let z = self.rng.lock().unwrap_or_else(|e| e.into_inner()).normal();
        op.sample(z) + self.profile.transfer(bytes)
    }

    async fn wait(&self, op: OpLatency, bytes: u64) {
        let delay = self.draw(op, bytes);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }
}

/// An [`ObjectStore`] that delays every request it forwards following a [`LatencyProfile`].
#[derive(Debug)]
pub struct LatencyStore<T = Arc<dyn ObjectStore>> {
    inner: T,
    delays: Arc<Delays>,
}

impl<T: ObjectStore> LatencyStore<T> {
    /// Wraps `inner`; `seed` fixes the sequence of delays.
    pub fn new(inner: T, profile: LatencyProfile, seed: u64) -> Self {
        Self {
            inner,
            delays: Arc::new(Delays {
                profile,
                rng: Mutex::new(SplitMix64(seed)),
            }),
        }
    }

    /// The profile in use.
    pub fn profile(&self) -> &LatencyProfile {
        &self.delays.profile
    }

    /// The wrapped store.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: ObjectStore> fmt::Display for LatencyStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LatencyStore({}, {})",
            self.delays.profile.name, self.inner
        )
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<T: ObjectStore> ObjectStore for LatencyStore<T> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let p = &self.delays.profile;
        self.delays
            .wait(p.put, payload.content_length() as u64)
            .await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.delays.wait(self.delays.profile.put, 0).await;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(LatencyUpload {
            inner,
            delays: Arc::clone(&self.delays),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let p = &self.delays.profile;
        let op = if options.head { p.head } else { p.get };
        self.delays.wait(op, 0).await;
        let result = self.inner.get_opts(location, options).await?;
        let bytes = result.range.end.saturating_sub(result.range.start);
        let transfer = p.transfer(bytes);
        if !transfer.is_zero() {
            tokio::time::sleep(transfer).await;
        }
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // The ranges go out in parallel: one first-byte wait, then the largest transfer.
        let largest = ranges.iter().map(|r| r.end - r.start).max().unwrap_or(0);
        self.delays.wait(self.delays.profile.get, largest).await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let delays = Arc::clone(&self.delays);
        let delete = self.inner.delete_stream(locations);
        futures::stream::once(async move {
            delays.wait(delays.profile.other, 0).await;
            delete
        })
        .flatten()
        .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let delays = Arc::clone(&self.delays);
        let list = self.inner.list(prefix);
        futures::stream::once(async move {
            delays.wait(delays.profile.list, 0).await;
            list
        })
        .flatten()
        .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let delays = Arc::clone(&self.delays);
        let list = self.inner.list_with_offset(prefix, offset);
        futures::stream::once(async move {
            delays.wait(delays.profile.list, 0).await;
            list
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.delays.wait(self.delays.profile.list, 0).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.delays.wait(self.delays.profile.other, 0).await;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.delays.wait(self.delays.profile.other, 0).await;
        self.inner.rename_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct LatencyUpload {
    inner: Box<dyn MultipartUpload>,
    delays: Arc<Delays>,
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MultipartUpload for LatencyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let delay = self
            .delays
            .draw(self.delays.profile.put, data.content_length() as u64);
        let part = self.inner.put_part(data);
        async move {
            tokio::time::sleep(delay).await;
            part.await
        }
        .boxed()
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.delays.wait(self.delays.profile.put, 0).await;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.delays.wait(self.delays.profile.other, 0).await;
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantile(mut xs: Vec<Duration>, q: f64) -> Duration {
        xs.sort();
        xs[((xs.len() as f64 - 1.0) * q).round() as usize]
    }

    #[test]
    fn draws_follow_the_profile_median_and_tail() {
        let delays = Delays {
            profile: LatencyProfile::s3_standard(),
            rng: Mutex::new(SplitMix64(7)),
        };
        let op = delays.profile.get;
        let xs: Vec<Duration> = (0..20_000).map(|_| delays.draw(op, 0)).collect();
        let (p50, p99) = (quantile(xs.clone(), 0.5), quantile(xs, 0.99));
        let near = |a: Duration, b: Duration| (a.as_secs_f64() / b.as_secs_f64() - 1.0).abs() < 0.1;
        assert!(near(p50, op.median), "p50 {p50:?} vs {:?}", op.median);
        assert!(near(p99, op.p99), "p99 {p99:?} vs {:?}", op.p99);
    }

    #[test]
    fn the_same_seed_replays_the_same_delays() {
        let draw = |seed| {
            let d = Delays {
                profile: LatencyProfile::s3_express(),
                rng: Mutex::new(SplitMix64(seed)),
            };
            (0..5)
                .map(|_| d.draw(d.profile.put, 1024))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn profiles_are_found_by_name() {
        for name in LatencyProfile::NAMES {
            assert_eq!(LatencyProfile::by_name(name).unwrap().name, name);
        }
        assert!(matches!(
            LatencyProfile::by_name("s3-glacier"),
            Err(Error::UnknownProfile { .. })
        ));
        let fast = LatencyProfile::s3_standard().scaled(0.1);
        assert_eq!(fast.get.median, Duration::from_micros(2700));
    }
}
