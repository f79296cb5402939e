//! Shared pieces of Tarn's benchmarks: store targets with latency profiles and request
//! counting, repeated measurements summarised by median and tail, and result tables.
//!
//! Every figure is reported with the object-store requests and round trips behind it,
//! because on S3 those, not CPU, make most of the time.

pub mod answers;
pub mod catalog;
pub mod catalog_log;
pub mod cdc;
pub mod compare;
pub mod concurrency;
pub mod r#gen;
pub mod index;
pub mod plot;
pub mod queries;
pub mod reads;
pub mod registry;
pub mod report;
#[cfg(feature = "sql")]
pub mod sql_overhead;
pub mod streaming;
#[cfg(feature = "sql")]
pub mod tpcds;
pub mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};
use tarn_store::{
    CacheOptions, CacheStore, CountingStore, HedgePolicy, HedgedStore, LatencyProfile,
    LatencyStore, RequestCounter, RequestCounts, StoreLocation, StoreOptions,
};

/// A location wrapped for measurement: latency replayed (if a profile is given) under a
/// request counter.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The wrapped location.
    pub location: StoreLocation,
    /// Its request counter.
    pub counter: RequestCounter,
}

/// Opens `url`, replays `profile` on it and counts its requests.
///
/// Fails when the URL cannot be opened.
pub fn measured(
    url: &str,
    options: &StoreOptions,
    profile: &LatencyProfile,
    seed: u64,
) -> Result<Measured, tarn_store::Error> {
    let location = tarn_store::open_with_options(url, options)?;
    Ok(wrap(location, profile, seed))
}

/// Wraps an open location for measurement.
pub fn wrap(location: StoreLocation, profile: &LatencyProfile, seed: u64) -> Measured {
    let inner = Arc::clone(location.store());
    let store: Arc<dyn ObjectStore> = if profile.name == "none" {
        inner
    } else {
        Arc::new(LatencyStore::new(inner, profile.clone(), seed))
    };
    let counting = CountingStore::new(store);
    let counter = counting.counter();
    // Over a replayed profile, hedge small PUTs as an S3 store does; the counter sees
    // both copies.
    let store: Arc<dyn ObjectStore> = if profile.name == "none" {
        Arc::new(counting)
    } else {
        Arc::new(HedgedStore::new(
            Arc::new(counting) as Arc<dyn ObjectStore>,
            HedgePolicy::default(),
        ))
    };
    Measured {
        location: location.with_store(store),
        counter,
    }
}

/// One timed run and the requests it made.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Wall-clock time.
    pub elapsed: Duration,
    /// Requests, bytes and round trips.
    pub counts: RequestCounts,
}

/// Times `f` once, counting the requests it makes through `counter`.
pub async fn sample<T, E, F: std::future::Future<Output = Result<T, E>>>(
    counter: &RequestCounter,
    f: F,
) -> Result<(T, Sample), E> {
    counter.reset();
    let started = Instant::now();
    let out = f.await?;
    let elapsed = started.elapsed();
    Ok((
        out,
        Sample {
            elapsed,
            counts: counter.take(),
        },
    ))
}

/// Median and tail of repeated samples.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Runs measured.
    pub runs: usize,
    /// Median time.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Median requests.
    pub requests: u64,
    /// Median GETs.
    pub gets: u64,
    /// Median LISTs.
    pub lists: u64,
    /// Median round trips.
    pub round_trips: u64,
    /// Median bytes read.
    pub bytes_read: u64,
}

fn quantile<T: Copy + Ord>(values: &mut [T], q: f64) -> T {
    values.sort_unstable();
    let index = ((values.len() as f64 - 1.0) * q).round() as usize;
    values[index.min(values.len() - 1)]
}

impl Summary {
    /// Summarises samples (at least one).
    pub fn of(samples: &[Sample]) -> Summary {
        let mut times: Vec<Duration> = samples.iter().map(|s| s.elapsed).collect();
        let median = |f: fn(&RequestCounts) -> u64| {
            let mut v: Vec<u64> = samples.iter().map(|s| f(&s.counts)).collect();
            quantile(&mut v, 0.5)
        };
        Summary {
            runs: samples.len(),
            p50: quantile(&mut times, 0.5),
            p90: quantile(&mut times, 0.9),
            p99: quantile(&mut times, 0.99),
            requests: median(RequestCounts::requests),
            gets: median(|c| c.gets),
            lists: median(|c| c.lists),
            round_trips: median(|c| c.critical_path),
            bytes_read: median(|c| c.bytes_read),
        }
    }

    /// The summary as a JSON object, with a name and extra fields.
    pub fn to_json(&self, name: &str, extra: serde_json::Value) -> serde_json::Value {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut value = serde_json::json!({
            "name": name,
            "runs": self.runs,
            "p50_ms": ms(self.p50),
            "p90_ms": ms(self.p90),
            "p99_ms": ms(self.p99),
            "requests": self.requests,
            "gets": self.gets,
            "lists": self.lists,
            "round_trips": self.round_trips,
            "bytes_read": self.bytes_read,
        });
        if let (Some(map), serde_json::Value::Object(extra)) = (value.as_object_mut(), extra) {
            map.extend(extra);
        }
        value
    }
}

/// The Spark-written golden tables: `TARN_GOLDEN_DIR`, else `shared/delta-golden` beside
/// the repository.
pub fn golden_root() -> PathBuf {
    std::env::var_os("TARN_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/delta-golden")
        })
}

/// The process's peak memory (resident set), to report beside times.
pub mod memory {
    /// Resets the peak to the current resident set (Linux: `/proc/self/clear_refs`);
    /// elsewhere it does nothing and peaks are since the process started.
    pub fn reset_peak() {
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }

    /// The peak resident set since the last reset, in bytes (0 where unknown).
    pub fn peak_rss() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024)
    }
}

/// Errors a workload reports: Tarn's, the store's, I/O.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// Where and how the workloads run: the URL every table goes under, the latency profile
/// replayed on measured operations, the scale of the data and the runs per measurement.
#[derive(Debug, Clone)]
pub struct Bench {
    /// A local directory, `memory://...` or `s3://bucket/prefix`; tables go beneath it.
    pub root: String,
    /// Store options (S3 endpoint, credentials) beside the environment's.
    pub options: StoreOptions,
    /// Latency replayed on measured operations (setup runs without it).
    pub profile: LatencyProfile,
    /// Multiplies every workload's row and file counts (1.0: the default replay).
    pub scale: f64,
    /// Runs per measurement; the tables report their median and tail.
    pub runs: usize,
    /// Seed of the data generators and the latency replay.
    pub seed: u64,
    /// A [`CacheStore`] directory: `reads` then also measures warm reads through it.
    pub cache: Option<PathBuf>,
}

impl Bench {
    /// The URL of the table `name` under the root.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{}", self.root.trim_end_matches('/'), name)
    }

    /// The table `name`, unwrapped: for setup, which should not pay replayed latency.
    ///
    /// Fails when the URL cannot be opened.
    pub fn plain(&self, name: &str) -> Result<StoreLocation, tarn_store::Error> {
        tarn_store::open_with_options(&self.url(name), &self.options)
    }

    /// The table `name` under the latency profile and a request counter; `run` varies the
    /// latency seed between runs.
    ///
    /// Fails when the URL cannot be opened.
    pub fn measured(&self, name: &str, run: usize) -> Result<Measured, tarn_store::Error> {
        Ok(wrap(
            self.plain(name)?,
            &self.profile,
            self.seed.wrapping_add(run as u64),
        ))
    }

    /// The table `name` read through a [`CacheStore`] in `dir`, over the latency profile and
    /// the request counter: the counter sees only what reaches the store.
    ///
    /// Fails when the URL cannot be opened or the cache directory cannot be used.
    pub fn cached(
        &self,
        name: &str,
        run: usize,
        dir: &std::path::Path,
    ) -> Result<(Measured, Arc<CacheStore>), tarn_store::Error> {
        let measured = self.measured(name, run)?;
        let cache = Arc::new(CacheStore::new(
            Arc::clone(measured.location.store()),
            CacheOptions::new(dir),
        )?);
        let store: Arc<dyn ObjectStore> = Arc::clone(&cache) as _;
        Ok((
            Measured {
                location: measured.location.with_store(store),
                counter: measured.counter,
            },
            cache,
        ))
    }

    /// `base` scaled, at least `min`.
    pub fn scaled(&self, base: u64, min: u64) -> u64 {
        ((base as f64 * self.scale).round() as u64).max(min)
    }

    /// Deletes every object of the table `name`, so a workload starts from nothing.
    ///
    /// Fails when listing or deleting fails.
    pub async fn clear(&self, name: &str) -> Result<(), BenchError> {
        let location = self.plain(name)?;
        let store = Arc::clone(location.store());
        let paths = store
            .list(Some(location.root()))
            .map_ok(|m| m.location)
            .boxed();
        store.delete_stream(paths).try_collect::<Vec<_>>().await?;
        Ok(())
    }

    /// Copies every object of table `from` to table `to` (server-side on S3), so each
    /// case of a mutating workload starts from the same table without regenerating it.
    ///
    /// Fails when listing or copying fails.
    pub async fn copy_table(&self, from: &str, to: &str) -> Result<(), BenchError> {
        self.clear(to).await?;
        let source = self.plain(from)?;
        let target = self.plain(to)?;
        let store = Arc::clone(source.store());
        let objects: Vec<_> = store
            .list(Some(source.root()))
            .map_ok(|m| m.location)
            .try_collect()
            .await?;
        let prefix = source.root().as_ref().len();
        futures::stream::iter(objects)
            .map(|path| {
                let relative = path.as_ref()[prefix..].trim_start_matches('/').to_string();
                let to = object_store::path::Path::from(format!(
                    "{}/{}",
                    target.root().as_ref(),
                    relative
                ));
                let store = Arc::clone(target.store());
                async move { store.copy(&path, &to).await }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>()
            .await?;
        Ok(())
    }
}
