//! The behaviours every store and wrapper Tarn runs on must show.
//!
//! Tarn's correctness rests on a few store guarantees: reads see completed writes, listings
//! are complete, and a put-if-absent (`PutMode::Create`) has exactly one winner however many
//! writers race. Each check here takes a store and a prefix to work under (so a shared bucket
//! can host many runs), and returns a [`Failure`] naming the broken expectation instead of
//! panicking, so the same suite runs in tests, in benchmarks' preflight, or against a user's
//! own store.
//!
//! ```no_run
//! # async fn check() -> Result<(), tarn_store::conformance::Failure> {
//! let location = tarn_store::open("s3://my-bucket/conformance").expect("store");
//! tarn_store::conformance::run_all(location.store().clone(), location.root()).await?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};

/// A broken expectation: which check, and what was seen.
#[derive(Debug, thiserror::Error)]
#[error("store conformance check `{check}` failed: {detail}")]
pub struct Failure {
    /// The check that failed.
    pub check: &'static str,
    /// What was expected and what happened.
    pub detail: String,
}

type Outcome = std::result::Result<(), Failure>;

fn fail(check: &'static str, detail: impl Into<String>) -> Failure {
    Failure {
        check,
        detail: detail.into(),
    }
}

macro_rules! ensure {
    ($check:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(fail($check, format!($($fmt)+)));
        }
    };
}

/// Maps a store error into a failure of `check`.
fn store_err(check: &'static str, what: &str) -> impl FnOnce(object_store::Error) -> Failure {
    let what = what.to_string();
    move |e| fail(check, format!("{what}: {e}"))
}

/// Runs every check under `prefix`. Objects created are deleted again on success.
pub async fn run_all(store: Arc<dyn ObjectStore>, prefix: &Path) -> Outcome {
    put_get_range_head_delete(store.as_ref(), &prefix.clone().join("basic")).await?;
    list_prefix_delimiter_offset(store.as_ref(), &prefix.clone().join("list")).await?;
    put_if_absent(store.as_ref(), &prefix.clone().join("create")).await?;
    concurrent_creates_have_one_winner(Arc::clone(&store), &prefix.clone().join("race"), 16)
        .await?;
    special_characters_round_trip(store.as_ref(), &prefix.clone().join("chars")).await?;
    multipart_upload_round_trip(store.as_ref(), &prefix.clone().join("multipart")).await?;
    Ok(())
}

/// A multipart upload of two 5 MiB parts (S3's smallest) and a short last one reads back
/// whole and in ranges across the part boundaries; an aborted upload leaves no object.
pub async fn multipart_upload_round_trip(store: &dyn ObjectStore, prefix: &Path) -> Outcome {
    const CHECK: &str = "multipart_upload_round_trip";
    const PART: usize = 5 * 1024 * 1024;
    let path = prefix.clone().join("large.bin");
    let data: Bytes = (0..2 * PART + 1000)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let mut upload = store
        .put_multipart(&path)
        .await
        .map_err(store_err(CHECK, "start"))?;
    for part in [0..PART, PART..2 * PART, 2 * PART..data.len()] {
        upload
            .put_part(PutPayload::from_bytes(data.slice(part)))
            .await
            .map_err(store_err(CHECK, "part"))?;
    }
    upload
        .complete()
        .await
        .map_err(store_err(CHECK, "complete"))?;
    let got = store
        .get(&path)
        .await
        .map_err(store_err(CHECK, "get"))?
        .bytes()
        .await
        .map_err(store_err(CHECK, "get body"))?;
    ensure!(
        CHECK,
        got == data,
        "read back {} bytes, not the {} uploaded",
        got.len(),
        data.len()
    );
    let across = PART - 10..2 * PART + 10;
    let slice = store
        .get_range(&path, across.start as u64..across.end as u64)
        .await
        .map_err(store_err(CHECK, "ranged get"))?;
    ensure!(
        CHECK,
        slice == data.slice(across),
        "a range across the parts differs"
    );
    store
        .delete(&path)
        .await
        .map_err(store_err(CHECK, "delete"))?;

    let aborted = prefix.clone().join("aborted.bin");
    let mut upload = store
        .put_multipart(&aborted)
        .await
        .map_err(store_err(CHECK, "start"))?;
    upload
        .put_part(PutPayload::from_bytes(data.slice(0..PART)))
        .await
        .map_err(store_err(CHECK, "part"))?;
    upload.abort().await.map_err(store_err(CHECK, "abort"))?;
    match store.head(&aborted).await {
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        Ok(_) => Err(fail(CHECK, "an aborted upload left an object")),
        Err(e) => Err(fail(CHECK, format!("head after abort: {e}"))),
    }
}

/// The object's size and its last `n` bytes, by a suffix GET.
async fn get_suffix(
    store: &dyn ObjectStore,
    path: &Path,
    n: u64,
    check: &'static str,
) -> std::result::Result<(u64, Bytes), Failure> {
    let options = GetOptions {
        range: Some(GetRange::Suffix(n)),
        ..GetOptions::default()
    };
    let got = store
        .get_opts(path, options)
        .await
        .map_err(store_err(check, "suffix get"))?;
    let size = got.meta.size;
    let bytes = got.bytes().await.map_err(store_err(check, "suffix body"))?;
    Ok((size, bytes))
}

/// PUT then GET returns the bytes; ranged and suffix GETs return the slice; HEAD the size; overwrite
/// replaces; a missing object is `NotFound`; DELETE removes.
pub async fn put_get_range_head_delete(store: &dyn ObjectStore, prefix: &Path) -> Outcome {
    const CHECK: &str = "put_get_range_head_delete";
    let path = prefix.clone().join("object.bin");
    let data: Bytes = (0..=255u8).cycle().take(10_000).collect::<Vec<_>>().into();
    store
        .put(&path, PutPayload::from_bytes(data.clone()))
        .await
        .map_err(store_err(CHECK, "put"))?;
    let got = store
        .get(&path)
        .await
        .map_err(store_err(CHECK, "get"))?
        .bytes()
        .await
        .map_err(store_err(CHECK, "get body"))?;
    ensure!(
        CHECK,
        got == data,
        "get returned {} bytes, not the 10000 put",
        got.len()
    );
    let range = store
        .get_range(&path, 100..356)
        .await
        .map_err(store_err(CHECK, "get_range"))?;
    ensure!(
        CHECK,
        range == data.slice(100..356),
        "get_range 100..356 returned other bytes"
    );
    let ranges = store
        .get_ranges(&path, &[0..10, 9_990..10_000])
        .await
        .map_err(store_err(CHECK, "get_ranges"))?;
    ensure!(
        CHECK,
        ranges == vec![data.slice(0..10), data.slice(9_990..10_000)],
        "get_ranges returned other bytes"
    );
    // A suffix read, as index objects and Parquet footers of unknown size are opened.
    let (size, suffix) = get_suffix(store, &path, 300, CHECK).await?;
    ensure!(CHECK, size == 10_000, "a suffix get reports size {size}");
    ensure!(
        CHECK,
        suffix == data.slice(9_700..10_000),
        "a suffix get of 300 returned {} other bytes",
        suffix.len()
    );
    let (_, longer) = get_suffix(store, &path, 20_000, CHECK).await?;
    ensure!(
        CHECK,
        longer == data,
        "a suffix longer than the object returned {} bytes, not the whole 10000",
        longer.len()
    );
    let meta = store.head(&path).await.map_err(store_err(CHECK, "head"))?;
    ensure!(
        CHECK,
        meta.size == 10_000,
        "head size {} != 10000",
        meta.size
    );

    store
        .put(&path, PutPayload::from_static(b"replaced"))
        .await
        .map_err(store_err(CHECK, "overwrite"))?;
    let got = store
        .get(&path)
        .await
        .map_err(store_err(CHECK, "get after overwrite"))?
        .bytes()
        .await
        .map_err(store_err(CHECK, "get body"))?;
    ensure!(
        CHECK,
        got.as_ref() == b"replaced",
        "overwrite did not replace the object"
    );

    let missing = store.get(&prefix.clone().join("missing")).await;
    ensure!(
        CHECK,
        matches!(missing, Err(object_store::Error::NotFound { .. })),
        "get of a missing object gave {missing:?}, not NotFound"
    );
    store
        .delete(&path)
        .await
        .map_err(store_err(CHECK, "delete"))?;
    let gone = store.head(&path).await;
    ensure!(
        CHECK,
        matches!(gone, Err(object_store::Error::NotFound { .. })),
        "head after delete gave {gone:?}, not NotFound"
    );
    Ok(())
}

/// LIST is recursive and complete under a prefix, respects segment boundaries, and
/// `list_with_offset` returns only keys after the offset; `list_with_delimiter` returns the
/// direct children and common prefixes.
pub async fn list_prefix_delimiter_offset(store: &dyn ObjectStore, prefix: &Path) -> Outcome {
    const CHECK: &str = "list_prefix_delimiter_offset";
    let keys: Vec<Path> = (0..25)
        .map(|i| prefix.clone().join("log").join(format!("{i:020}.json")))
        .chain([
            prefix.clone().join("log").join("nested").join("x"),
            prefix.clone().join("log_sibling").join("y"),
        ])
        .collect();
    for key in &keys {
        store
            .put(key, PutPayload::from_static(b"{}"))
            .await
            .map_err(store_err(CHECK, "put"))?;
    }
    let log = prefix.clone().join("log");
    let mut listed: Vec<Path> = store
        .list(Some(&log))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(store_err(CHECK, "list"))?;
    listed.sort();
    let mut expected: Vec<Path> = keys[..26].to_vec();
    expected.sort();
    ensure!(
        CHECK,
        listed == expected,
        "list returned {} keys, expected the 26 under {log} (and not its sibling)",
        listed.len()
    );

    let offset = log.clone().join(format!("{:020}.json", 19));
    let mut after: Vec<Path> = store
        .list_with_offset(Some(&log), &offset)
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(store_err(CHECK, "list_with_offset"))?;
    after.sort();
    let expected_after: Vec<Path> = expected.iter().filter(|p| **p > offset).cloned().collect();
    ensure!(
        CHECK,
        after == expected_after,
        "list_with_offset returned {after:?}, expected {expected_after:?}"
    );

    let delimited = store
        .list_with_delimiter(Some(&log))
        .await
        .map_err(store_err(CHECK, "list_with_delimiter"))?;
    ensure!(
        CHECK,
        delimited.objects.len() == 25
            && delimited.common_prefixes == vec![log.clone().join("nested")],
        "list_with_delimiter gave {} objects and prefixes {:?}",
        delimited.objects.len(),
        delimited.common_prefixes
    );

    let deleted: Vec<Path> = store
        .delete_stream(futures::stream::iter(keys.clone().into_iter().map(Ok)).boxed())
        .try_collect()
        .await
        .map_err(store_err(CHECK, "delete_stream"))?;
    ensure!(
        CHECK,
        deleted.len() == keys.len(),
        "delete_stream deleted {}",
        deleted.len()
    );
    let left: Vec<_> = store.list(Some(prefix)).collect().await;
    ensure!(
        CHECK,
        left.is_empty(),
        "{} objects left after delete_stream",
        left.len()
    );
    Ok(())
}

/// `PutMode::Create` writes a new object, and on an existing one fails with
/// `AlreadyExists` and leaves it unchanged.
pub async fn put_if_absent(store: &dyn ObjectStore, prefix: &Path) -> Outcome {
    const CHECK: &str = "put_if_absent";
    let path = prefix.clone().join("00000000000000000000.json");
    let create = PutOptions::from(PutMode::Create);
    store
        .put_opts(&path, PutPayload::from_static(b"first"), create.clone())
        .await
        .map_err(store_err(CHECK, "first create"))?;
    let second = store
        .put_opts(&path, PutPayload::from_static(b"second"), create)
        .await;
    ensure!(
        CHECK,
        matches!(second, Err(object_store::Error::AlreadyExists { .. })),
        "second create gave {second:?}, not AlreadyExists"
    );
    let got = store
        .get(&path)
        .await
        .map_err(store_err(CHECK, "get"))?
        .bytes()
        .await
        .map_err(store_err(CHECK, "get body"))?;
    ensure!(
        CHECK,
        got.as_ref() == b"first",
        "the losing create changed the object"
    );
    store
        .delete(&path)
        .await
        .map_err(store_err(CHECK, "delete"))?;
    Ok(())
}

/// `writers` concurrent creates of one key: exactly one succeeds, every other gets
/// `AlreadyExists`, and the object holds the winner's bytes.
pub async fn concurrent_creates_have_one_winner(
    store: Arc<dyn ObjectStore>,
    prefix: &Path,
    writers: usize,
) -> Outcome {
    const CHECK: &str = "concurrent_creates_have_one_winner";
    let path = prefix.clone().join("00000000000000000001.json");
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let store = Arc::clone(&store);
            let path = path.clone();
            tokio::spawn(async move {
                let payload = PutPayload::from(format!("writer-{i}"));
                (
                    i,
                    store
                        .put_opts(&path, payload, PutOptions::from(PutMode::Create))
                        .await,
                )
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (i, result) = task
            .await
            .map_err(|e| fail(CHECK, format!("writer task failed: {e}")))?;
        match result {
            Ok(_) => winners.push(i),
            Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(other) => return Err(fail(CHECK, format!("writer {i} got {other}"))),
        }
    }
    ensure!(
        CHECK,
        winners.len() == 1,
        "{} winners: {winners:?}",
        winners.len()
    );
    let got = store
        .get(&path)
        .await
        .map_err(store_err(CHECK, "get"))?
        .bytes()
        .await
        .map_err(store_err(CHECK, "get body"))?;
    let expected = format!("writer-{}", winners[0]);
    ensure!(
        CHECK,
        got.as_ref() == expected.as_bytes(),
        "object holds {:?}, not the winner's {expected:?}",
        String::from_utf8_lossy(&got)
    );
    store
        .delete(&path)
        .await
        .map_err(store_err(CHECK, "delete"))?;
    Ok(())
}

/// Keys with the characters Hive-style partition folders use (`=`, spaces, `%`, `:`) are
/// stored and listed under exactly the key given.
pub async fn special_characters_round_trip(store: &dyn ObjectStore, prefix: &Path) -> Outcome {
    const CHECK: &str = "special_characters_round_trip";
    let key = prefix
        .clone()
        .join("date=2024-01-01 10%3A00%3A00")
        .clone()
        .join("name=a b+c")
        .clone()
        .join("part-0.parquet");
    store
        .put(&key, PutPayload::from_static(b"p"))
        .await
        .map_err(store_err(CHECK, "put"))?;
    let listed: Vec<Path> = store
        .list(Some(prefix))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(store_err(CHECK, "list"))?;
    ensure!(
        CHECK,
        listed == vec![key.clone()],
        "listed {listed:?}, expected [{key}]"
    );
    store
        .delete(&key)
        .await
        .map_err(store_err(CHECK, "delete"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CountingStore, LatencyProfile, LatencyStore};
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn memory_store_conforms() {
        run_all(Arc::new(InMemory::new()), &Path::from("t"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn local_store_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        run_all(Arc::new(store), &Path::from("t")).await.unwrap();
    }

    #[tokio::test]
    async fn tarns_local_store_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = Path::from_absolute_path(dir.path()).unwrap();
        run_all(Arc::new(crate::LocalStore::new(dir.path())), &prefix)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn wrappers_conform() {
        let counting = CountingStore::new(Arc::new(InMemory::new()) as Arc<dyn ObjectStore>);
        let counter = counting.counter();
        run_all(Arc::new(counting), &Path::from("t")).await.unwrap();
        assert!(counter.counts().puts > 20);
        let latency = LatencyStore::new(
            Arc::new(InMemory::new()) as Arc<dyn ObjectStore>,
            LatencyProfile::s3_express().scaled(0.05),
            3,
        );
        run_all(Arc::new(latency), &Path::from("t")).await.unwrap();
    }

    #[tokio::test]
    async fn a_store_without_put_if_absent_fails_the_check() {
        /// Overwrites on create: what a store without conditional PUT would do.
        #[derive(Debug)]
        struct NoCreate(InMemory);
        impl std::fmt::Display for NoCreate {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "NoCreate")
            }
        }
        #[async_trait::async_trait]
        impl ObjectStore for NoCreate {
            async fn put_opts(
                &self,
                location: &Path,
                payload: PutPayload,
                _opts: PutOptions,
            ) -> object_store::Result<object_store::PutResult> {
                self.0.put(location, payload).await
            }
            async fn put_multipart_opts(
                &self,
                location: &Path,
                opts: object_store::PutMultipartOptions,
            ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
                self.0.put_multipart_opts(location, opts).await
            }
            async fn get_opts(
                &self,
                location: &Path,
                options: object_store::GetOptions,
            ) -> object_store::Result<object_store::GetResult> {
                self.0.get_opts(location, options).await
            }
            fn delete_stream(
                &self,
                locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
            ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
                self.0.delete_stream(locations)
            }
            fn list(
                &self,
                prefix: Option<&Path>,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
            {
                self.0.list(prefix)
            }
            async fn list_with_delimiter(
                &self,
                prefix: Option<&Path>,
            ) -> object_store::Result<object_store::ListResult> {
                self.0.list_with_delimiter(prefix).await
            }
            async fn copy_opts(
                &self,
                from: &Path,
                to: &Path,
                options: object_store::CopyOptions,
            ) -> object_store::Result<()> {
                self.0.copy_opts(from, to, options).await
            }
        }
        let err = put_if_absent(&NoCreate(InMemory::new()), &Path::from("t"))
            .await
            .unwrap_err();
        assert_eq!(err.check, "put_if_absent");
    }
}
