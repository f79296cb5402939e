//! Reading Parquet files from an object store: the `AsyncFileReader` the Parquet decoder
//! pulls bytes through.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataSuffixFetch};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// Bytes read from the end of a file in the first request, so the footer and metadata
/// of most files arrive in one round trip.
pub(crate) const FOOTER_HINT: usize = 64 * 1024;

/// A Parquet file in an object store. With the size known (from the `add` action) the
/// footer is fetched with one ranged GET and no HEAD.
#[derive(Debug, Clone)]
pub(crate) struct ObjectFileReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: Option<u64>,
}

impl ObjectFileReader {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, path: Path, size: Option<u64>) -> Self {
        Self { store, path, size }
    }
}

/// The text of a caught panic.
pub(crate) fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// A Parquet error standing for a panic of the decoder (it panics on some corrupt files).
pub(crate) fn decoder_panic(payload: &Box<dyn std::any::Any + Send>) -> ParquetError {
    ParquetError::General(format!(
        "corrupt file: the Parquet decoder failed: {}",
        panic_message(payload)
    ))
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        let load = async move {
            let reader = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(FOOTER_HINT));
            let metadata = match self.size {
                Some(size) => reader.load_and_finish(self, size).await?,
                None => reader.load_via_suffix_and_finish(self).await?,
            };
            Ok(Arc::new(metadata))
        };
        std::panic::AssertUnwindSafe(load)
            .catch_unwind()
            .map(|r| r.unwrap_or_else(|panic| Err(decoder_panic(&panic))))
            .boxed()
    }
}

impl MetadataSuffixFetch for &mut ObjectFileReader {
    fn fetch_suffix(&mut self, suffix: usize) -> BoxFuture<'_, Result<Bytes>> {
        let options = GetOptions {
            range: Some(GetRange::Suffix(suffix as u64)),
            ..Default::default()
        };
        async move {
            let result = self
                .store
                .get_opts(&self.path, options)
                .await
                .map_err(external)?;
            result.bytes().await.map_err(external)
        }
        .boxed()
    }
}
