//! `CacheStore` for real: a Tarn table on MinIO read through the cache (the same rows, and a
//! warm read fetches no data, deletion-vector or checkpoint byte), and readers in several
//! processes and threads sharing one small cache directory while it evicts under them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Table};
use tarn_store::{CacheOptions, CacheStore, Cacheability, CountingStore, SplitMix64};
use tarn_tests::minio::s3;
use tarn_tests::rows::canonical_rows;
use tarn_tests::unique;

fn batch(ids: Range<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let names: Vec<String> = ids.clone().map(|i| format!("name-{i}")).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_on_minio_reads_the_same_rows_and_warm_reads_fetch_no_data() {
    let location = s3().location(&unique("cache-table"));
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&batch(0..1).schema())
        .with_property("delta.enableDeletionVectors", "true")
        .with_property("delta.checkpointInterval", "4")
        .execute()
        .await
        .unwrap();
    for i in 0..5 {
        table
            .append([batch(i * 2000..i * 2000 + 2000)])
            .await
            .unwrap();
    }
    table
        .delete(col("id").lt(lit(300i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table.checkpoint().await.unwrap();
    let expected = canonical_rows(&table.scan().collect().await.unwrap());
    assert_eq!(expected.len(), 9_700);

    let dir = tempfile::tempdir().unwrap();
    let counting = CountingStore::new(Arc::clone(location.store()));
    let counter = counting.counter();
    let inner: Arc<dyn ObjectStore> = Arc::new(counting);
    let open = |inner: Arc<dyn ObjectStore>| {
        Arc::new(CacheStore::new(inner, CacheOptions::new(dir.path())).unwrap())
    };
    let cache = open(Arc::clone(&inner));
    let cached_location = location.clone().with_store(Arc::clone(&cache) as _);

    let cold = Table::open_at(cached_location.clone()).await.unwrap();
    assert_eq!(
        canonical_rows(&cold.scan().collect().await.unwrap()),
        expected
    );
    let after_cold = cache.stats();
    assert!(
        after_cold.block_misses > 0 && after_cold.revalidations == 1,
        "{after_cold:?}"
    );
    counter.take();

    // Warm, in this store and in a new one on the same directory (another process): the
    // rows again, with no block fetched; only the log's JSON and, for the new store, one
    // HEAD of the checkpoint go to MinIO.
    let warm = Table::open_at(cached_location).await.unwrap();
    assert_eq!(
        canonical_rows(&warm.scan().collect().await.unwrap()),
        expected
    );
    assert_eq!(cache.stats().block_misses, after_cold.block_misses);
    let counts = counter.take();
    assert_eq!(counts.heads, 0, "{counts}");

    let next = open(Arc::clone(&inner));
    let other = Table::open_at(location.clone().with_store(Arc::clone(&next) as _))
        .await
        .unwrap();
    assert_eq!(
        canonical_rows(&other.scan().collect().await.unwrap()),
        expected
    );
    let stats = next.stats();
    assert_eq!(stats.block_misses, 0, "{stats:?}");
    assert!(stats.block_hits > 0, "{stats:?}");
    let counts = counter.take();
    assert_eq!(counts.heads, 1, "{counts}");
    let log_objects = location
        .store()
        .list(Some(&location.root().clone().join("_delta_log")))
        .collect::<Vec<_>>()
        .await;
    let commits = log_objects
        .iter()
        .filter(|m| m.as_ref().unwrap().location.as_ref().ends_with(".json"))
        .count() as u64;
    assert!(counts.gets <= commits, "{counts} with {commits} commits");

    // Whatever the cache holds, what it answers is what MinIO holds.
    let listing: Vec<_> = location
        .store()
        .list(Some(location.root()))
        .collect::<Vec<_>>()
        .await;
    for meta in listing {
        let meta = meta.unwrap();
        if tarn_store::delta_objects(&meta.location) == Cacheability::Never {
            continue;
        }
        let truth = location
            .store()
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await;
        let cached = next.get(&meta.location).await.unwrap().bytes().await;
        assert_eq!(cached.unwrap(), truth.unwrap(), "{}", meta.location);
    }
}

/// The contents of test object `i`: a pure function, so every process knows the truth.
fn object_bytes(i: u64) -> Bytes {
    let mut rng = SplitMix64(i + 1);
    let len = 150_000 + (rng.next_u64() % 100_000) as usize;
    (0..len)
        .map(|_| rng.next_u64() as u8)
        .collect::<Vec<_>>()
        .into()
}

const OBJECTS: u64 = 6;
const CHILD_ENV: &str = "TARN_CACHE_SHARED_DIRS";

/// Two stores on `cache_dir` (as two open tables in one process would have), each read by
/// two tasks at random ranges of the objects under `data_dir`; every answer is checked.
/// The bound holds about twelve 4 KiB blocks of the ~1.2 MB read, so blocks are evicted
/// (here and by other processes) under readers all the time.
async fn hammer(data_dir: &std::path::Path, cache_dir: &std::path::Path, seed: u64) {
    let inner: Arc<dyn ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(data_dir).unwrap());
    let options = CacheOptions::new(cache_dir)
        .with_block_size(4096)
        .with_capacity(50_000);
    let mut tasks = Vec::new();
    for store_no in 0..2u64 {
        let store = Arc::new(
            CacheStore::new(Arc::clone(&inner), options.clone())
                .unwrap()
                .with_classifier(Arc::new(|_: &Path| Cacheability::Immutable)),
        );
        for task in 0..2u64 {
            let store = Arc::clone(&store);
            let mut rng = SplitMix64(seed * 100 + store_no * 10 + task);
            tasks.push(tokio::spawn(async move {
                for _ in 0..150 {
                    let i = rng.next_u64() % OBJECTS;
                    let truth = object_bytes(i);
                    let len = truth.len() as u64;
                    let start = rng.next_u64() % len;
                    let end = (start + 1 + rng.next_u64() % 20_000).min(len);
                    let path = Path::from(format!("obj-{i}.parquet"));
                    let got = store.get_range(&path, start..end).await.unwrap();
                    assert!(
                        got == truth.slice(start as usize..end as usize),
                        "object {i} range {start}..{end}: other bytes"
                    );
                }
                store.stats()
            }));
        }
    }
    let mut hits = 0;
    for task in tasks {
        hits += task.await.unwrap().block_hits;
    }
    assert!(
        hits > 0,
        "readers sharing a directory hit each other's blocks"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_in_several_processes_share_one_evicting_cache_directory() {
    if let Ok(dirs) = std::env::var(CHILD_ENV) {
        // A child process started by this test: hammer the parent's directories.
        let (data, rest) = dirs.split_once('|').unwrap();
        let (cache, seed) = rest.split_once('|').unwrap();
        hammer(data.as_ref(), cache.as_ref(), seed.parse().unwrap()).await;
        return;
    }
    let data_dir = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let store = object_store::local::LocalFileSystem::new_with_prefix(data_dir.path()).unwrap();
    for i in 0..OBJECTS {
        let path = Path::from(format!("obj-{i}.parquet"));
        store.put(&path, object_bytes(i).into()).await.unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (1..=3u64)
        .map(|seed| {
            let value = format!(
                "{}|{}|{seed}",
                data_dir.path().display(),
                cache_dir.path().display()
            );
            tokio::process::Command::new(&exe)
                .args([
                    "--exact",
                    &tarn_tests::test_name(
                        module_path!(),
                        "readers_in_several_processes_share_one_evicting_cache_directory",
                    ),
                    "--nocapture",
                ])
                .env(CHILD_ENV, value)
                .output()
        })
        .collect();
    // This process reads at the same time as its three children.
    let (outputs, ()) = tokio::join!(
        futures::future::join_all(children),
        hammer(data_dir.path(), cache_dir.path(), 0)
    );
    for output in outputs {
        let output = output.unwrap();
        assert!(
            output.status.success(),
            "a child reader failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
