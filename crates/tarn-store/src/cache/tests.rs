use super::*;
use crate::CountingStore;
use object_store::memory::InMemory;

const BLOCK: u64 = 4096;

fn data(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

struct Setup {
    inner: Arc<dyn ObjectStore>,
    counting: Arc<CountingStore>,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let counting = Arc::new(CountingStore::new(Arc::clone(&inner)));
        Self {
            inner,
            counting,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn cache(&self, capacity: u64) -> CacheStore {
        let store: Arc<dyn ObjectStore> = Arc::clone(&self.counting) as _;
        CacheStore::new(
            store,
            CacheOptions::new(self.dir.path())
                .with_block_size(BLOCK)
                .with_capacity(capacity),
        )
        .unwrap()
    }

    fn gets(&self) -> u64 {
        self.counting.counter().take().gets
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_read_is_served_from_disk_without_a_request() {
    let setup = Setup::new();
    let path = Path::from("t/part-0.parquet");
    let bytes = data(50_000, 1);
    setup.inner.put(&path, bytes.clone().into()).await.unwrap();
    let cache = setup.cache(1 << 30);
    setup.gets();
    let first = cache.get_range(&path, 5_000..20_000).await.unwrap();
    assert_eq!(first, bytes.slice(5_000..20_000));
    assert_eq!(setup.gets(), 1, "one GET for the run of missing blocks");
    let again = cache.get_range(&path, 6_000..19_000).await.unwrap();
    assert_eq!(again, bytes.slice(6_000..19_000));
    assert_eq!(setup.gets(), 0);
    // Ranges reaching into cached and uncached blocks fetch only the missing runs, one
    // request each; the tail block is short and still whole.
    let ranges = [0..100, 4_000..4_200, 19_000..21_000, 49_990..50_000];
    let parts = cache.get_ranges(&path, &ranges).await.unwrap();
    for (part, range) in parts.iter().zip(&ranges) {
        assert_eq!(*part, bytes.slice(range.start as usize..range.end as usize));
    }
    assert_eq!(setup.gets(), 3, "blocks 0, 5 and 12 are three runs");
    let whole = cache.get(&path).await.unwrap();
    assert_eq!(whole.meta.size, 50_000);
    assert_eq!(whole.bytes().await.unwrap(), bytes);
    let tail = cache
        .get_opts(
            &path,
            GetOptions {
                range: Some(GetRange::Suffix(10)),
                ..GetOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail.range, 49_990..50_000);
    assert_eq!(tail.bytes().await.unwrap(), bytes.slice(49_990..));
    assert_eq!(
        setup.gets(),
        1,
        "the whole read fetched blocks 6..=11 in one run"
    );
    assert_eq!(setup.gets(), 0);
    let stats = cache.stats();
    assert_eq!(stats.block_misses, 13);
    assert!(stats.block_hits >= 13, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_before_the_size_is_known_and_past_the_end_behave_like_the_store() {
    let setup = Setup::new();
    let path = Path::from("t/part-1.parquet");
    let bytes = data(10_000, 2);
    setup.inner.put(&path, bytes.clone().into()).await.unwrap();
    let cache = setup.cache(1 << 30);
    let suffix = cache
        .get_opts(
            &path,
            GetOptions {
                range: Some(GetRange::Suffix(3_000)),
                ..GetOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(suffix.range, 7_000..10_000);
    assert_eq!(suffix.bytes().await.unwrap(), bytes.slice(7_000..));
    // A bounded range past the end is cut at the end, as object_store's stores do.
    let past = cache.get_range(&path, 9_000..20_000).await.unwrap();
    assert_eq!(past, bytes.slice(9_000..));
    // A range starting past the end fails, with or without the metadata cached.
    assert!(cache.get_range(&path, 10_000..10_010).await.is_err());
    let fresh = Setup::new();
    fresh.inner.put(&path, bytes.into()).await.unwrap();
    assert!(
        fresh
            .cache(1 << 30)
            .get_range(&path, 12_000..12_010)
            .await
            .is_err()
    );
    // A missing object is not found, and nothing is cached of it.
    let missing = Path::from("t/none.parquet");
    assert!(matches!(
        cache.get_range(&missing, 0..10).await,
        Err(object_store::Error::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_can_change_is_never_cached() {
    let setup = Setup::new();
    let cache = setup.cache(1 << 30);
    for path in [
        "t/_delta_log/_last_checkpoint",
        "t/_delta_log/00000000000000000001.json",
    ] {
        let path = Path::from(path);
        setup.inner.put(&path, data(100, 3).into()).await.unwrap();
        cache.get(&path).await.unwrap().bytes().await.unwrap();
        setup.inner.put(&path, data(100, 4).into()).await.unwrap();
        let now = cache.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(now, data(100, 4));
    }
    assert_eq!(cache.stats().bytes_cached, 0);
    assert_eq!(
        delta_objects(&Path::from("t/_tarn_index/ix/abc.btree")),
        Cacheability::Immutable
    );
    assert_eq!(
        delta_objects(&Path::from("t/deletion_vector_1a2b.bin")),
        Cacheability::Immutable
    );
    assert_eq!(
        delta_objects(&Path::from(
            "t/_delta_log/00000000000000000010.checkpoint.parquet"
        )),
        Cacheability::Revalidate
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_recreated_behind_the_cache_is_read_anew() {
    let setup = Setup::new();
    let path = Path::from("t/_delta_log/00000000000000000010.checkpoint.parquet");
    setup.inner.put(&path, data(9_000, 5).into()).await.unwrap();
    let cache = setup.cache(1 << 30);
    assert_eq!(
        cache.get_range(&path, 0..9_000).await.unwrap(),
        data(9_000, 5)
    );
    assert_eq!(
        cache.get_range(&path, 0..9_000).await.unwrap(),
        data(9_000, 5)
    );
    assert_eq!(
        cache.stats().revalidations,
        1,
        "one HEAD per path per store"
    );
    // The table is deleted and re-created by someone else, same checkpoint name.
    setup.inner.delete(&path).await.unwrap();
    setup.inner.put(&path, data(9_000, 6).into()).await.unwrap();
    let next = setup.cache(1 << 30);
    assert_eq!(
        next.get_range(&path, 0..9_000).await.unwrap(),
        data(9_000, 6)
    );
    // Even a reader that skipped the HEAD could not take an old block for the new object:
    // each block is bound to its object's identity.
    assert_eq!(
        next.get_range(&path, 100..200).await.unwrap(),
        data(9_000, 6).slice(100..200)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_cache_drop_what_it_held() {
    let setup = Setup::new();
    let cache = setup.cache(1 << 30);
    let path = Path::from("t/part-2.parquet");
    cache.put(&path, data(10_000, 7).into()).await.unwrap();
    assert_eq!(
        cache.get_range(&path, 0..10_000).await.unwrap(),
        data(10_000, 7)
    );
    cache.put(&path, data(12_000, 8).into()).await.unwrap();
    assert_eq!(
        cache.get_range(&path, 0..12_000).await.unwrap(),
        data(12_000, 8)
    );
    let copy = Path::from("t/part-3.parquet");
    cache.put(&copy, data(5_000, 9).into()).await.unwrap();
    assert_eq!(
        cache.get_range(&copy, 0..5_000).await.unwrap(),
        data(5_000, 9)
    );
    cache.copy(&path, &copy).await.unwrap();
    assert_eq!(
        cache.get_range(&copy, 0..12_000).await.unwrap(),
        data(12_000, 8)
    );
    let deleted: Vec<Path> = cache
        .delete_stream(futures::stream::iter([Ok(copy.clone())]).boxed())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(deleted, vec![copy.clone()]);
    assert!(matches!(
        cache.get_range(&copy, 0..10).await,
        Err(object_store::Error::NotFound { .. })
    ));
    let mut upload = cache.put_multipart(&path).await.unwrap();
    upload.put_part(data(6_000, 10).into()).await.unwrap();
    upload.complete().await.unwrap();
    assert_eq!(
        cache.get_range(&path, 0..6_000).await.unwrap(),
        data(6_000, 10)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_stays_within_its_bound() {
    let setup = Setup::new();
    // Room for 10 blocks (and their CRCs).
    let cache = setup.cache(10 * (BLOCK + 4));
    let path = Path::from("t/big.parquet");
    let bytes = data(40 * BLOCK as usize, 11);
    setup.inner.put(&path, bytes.clone().into()).await.unwrap();
    for start in (0..40 * BLOCK).step_by(3 * BLOCK as usize) {
        let range = start..(start + 3 * BLOCK).min(40 * BLOCK);
        let got = cache.get_range(&path, range.clone()).await.unwrap();
        assert_eq!(got, bytes.slice(range.start as usize..range.end as usize));
        assert!(cache.stats().bytes_cached <= 10 * (BLOCK + 4));
    }
    assert!(cache.stats().evictions >= 30, "{:?}", cache.stats());
    // The newest blocks are the ones kept.
    setup.gets();
    cache
        .get_range(&path, 39 * BLOCK..40 * BLOCK)
        .await
        .unwrap();
    assert_eq!(setup.gets(), 0);
}
