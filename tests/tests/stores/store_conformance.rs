//! The store conformance suite (put/get/range/list/delete, put-if-absent, 16 racing
//! creates with one winner, multipart uploads) on every store and wrapper Tarn runs on,
//! MinIO, Azurite and fake GCS included.
//! `CacheStore` runs it twice: with its Delta classifier, and caching every object (so the
//! suite's overwrites and deletes go through its blocks).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use tarn_store::conformance::run_all;
use tarn_store::{
    CacheOptions, CacheStore, Cacheability, CountingStore, Fault, FaultOp, FaultRule, FaultStore,
    HedgePolicy, HedgedStore, LatencyProfile, LatencyStore,
};
use tarn_tests::azurite::azure;
use tarn_tests::gcs::gcs;
use tarn_tests::minio::s3;
use tarn_tests::unique;

fn prefix() -> Path {
    Path::from(unique("conformance"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_conforms() {
    run_all(Arc::new(InMemory::new()), &prefix()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_files_conform() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    run_all(Arc::new(store), &prefix()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counting_and_latency_wrappers_conform() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counting = CountingStore::new(Arc::clone(&inner));
    let counter = counting.counter();
    run_all(Arc::new(counting), &prefix()).await.unwrap();
    let counts = counter.counts();
    assert!(
        counts.puts >= 16 && counts.gets > 0 && counts.lists > 0,
        "{counts}"
    );
    let latency = LatencyStore::new(inner, LatencyProfile::s3_express().scaled(0.1), 42);
    run_all(Arc::new(latency), &prefix()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_puts_conform_on_memory_and_every_cloud() {
    // Hedge at the fastest recent PUT (at least 1 ms), over a store with a long tail: most
    // PUTs are sent twice, put-if-absent among them. (At the median, a short run on a busy
    // machine could hedge none.)
    let policy = HedgePolicy {
        min_delay: std::time::Duration::from_millis(1),
        quantile: 0.0,
        window: 8,
        warm_up: 2,
        ..HedgePolicy::default()
    };
    let minio = s3().location("conformance-hedged");
    let azurite = azure().location("conformance-hedged");
    let targets: [(&str, Arc<dyn ObjectStore>, Path); 3] = [
        ("memory", Arc::new(InMemory::new()), prefix()),
        ("minio", Arc::clone(minio.store()), minio.root().clone()),
        (
            "azurite",
            Arc::clone(azurite.store()),
            azurite.root().clone(),
        ),
    ];
    for (name, inner, root) in targets {
        let latency = LatencyStore::new(inner, LatencyProfile::s3_standard().scaled(0.1), 11);
        let hedged = Arc::new(HedgedStore::new(
            Arc::new(latency) as Arc<dyn ObjectStore>,
            policy,
        ));
        run_all(Arc::clone(&hedged) as Arc<dyn ObjectStore>, &root)
            .await
            .unwrap();
        assert!(hedged.hedged() > 0, "{name}: nothing was hedged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minio_conforms() {
    let location = s3().location("conformance");
    run_all(Arc::clone(location.store()), location.root())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azurite_conforms() {
    let location = azure().location("conformance");
    run_all(Arc::clone(location.store()), location.root())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_gcs_conforms() {
    let location = gcs().location("conformance");
    run_all(Arc::clone(location.store()), location.root())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrappers_over_minio_conform() {
    let location = s3().location("conformance-wrapped");
    let latency = LatencyStore::new(
        Arc::clone(location.store()),
        LatencyProfile::s3_standard().scaled(0.05),
        7,
    );
    let counting = CountingStore::new(Arc::new(latency) as Arc<dyn ObjectStore>);
    let counter = counting.counter();
    run_all(Arc::new(counting), location.root()).await.unwrap();
    assert!(counter.counts().critical_path > 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_store_with_faults_off_conforms() {
    let plain = FaultStore::new(Arc::new(InMemory::new()) as Arc<dyn ObjectStore>, 1);
    run_all(Arc::new(plain), &prefix()).await.unwrap();
    // Rules present but disabled: transparent too, on MinIO.
    let location = s3().location("conformance-faults-off");
    let faulty = FaultStore::new(Arc::clone(location.store()), 2)
        .with_rule(FaultRule::new(FaultOp::Any, Fault::FailBefore));
    let control = faulty.control();
    control.set_enabled(false);
    run_all(Arc::new(faulty), location.root()).await.unwrap();
    assert_eq!(control.injected(), 0);
}

/// A cache over `inner` in `dir` with 4 KiB blocks (the suite's 10 KB objects span three),
/// caching every path when `everything`.
fn cache(inner: Arc<dyn ObjectStore>, dir: &std::path::Path, everything: bool) -> CacheStore {
    let store = CacheStore::new(inner, CacheOptions::new(dir).with_block_size(4096)).unwrap();
    if everything {
        store.with_classifier(Arc::new(|_: &Path| Cacheability::Immutable))
    } else {
        store
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    for everything in [false, true] {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let cached = cache(inner, dir.path(), everything);
        run_all(Arc::new(cached), &prefix()).await.unwrap();
    }
    for location in [
        s3().location("conformance-cached"),
        azure().location("conformance-cached"),
        gcs().location("conformance-cached"),
    ] {
        let cached = cache(Arc::clone(location.store()), dir.path(), true);
        run_all(Arc::new(cached), location.root()).await.unwrap();
    }
}
