//! Reading only some columns of a large Parquet log file (a checkpoint or sidecar): its
//! footer, then the byte ranges of the wanted column chunks, all at once.
//!
//! A checkpoint of 100,000 files holds both JSON and typed statistics; a reader that
//! wants only the typed ones fetched the JSON's 50 MB for nothing. Small files are
//! still read whole: one request beats two.

use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::reader::{ChunkReader, Length};

use crate::error::{Error, Result};

/// Files up to this size are fetched whole.
pub(crate) const WHOLE_BELOW: u64 = 4 * 1024 * 1024;

/// Requests in flight when fetching a large file's column chunks.
const FETCHES_AT_ONCE: usize = 4;

/// Bytes read from the end of a file in the first request: most footers fit.
const FOOTER_GUESS: u64 = 256 * 1024;

/// The error of a corrupt or missing checkpoint file.
pub(super) fn invalid(path: &Path, reason: impl Into<String>) -> Error {
    Error::InvalidCheckpoint {
        path: path.to_string(),
        reason: reason.into(),
    }
}

async fn get_range(store: &dyn ObjectStore, path: &Path, range: Range<u64>) -> Result<Bytes> {
    match store.get_range(path, range).await {
        Ok(bytes) => Ok(bytes),
        Err(object_store::Error::NotFound { .. }) => Err(invalid(path, "the file is missing")),
        Err(e) => Err(Error::store(tarn_store::StoreOp::Get, path)(e)),
    }
}

/// Reads and decodes the footer of the Parquet file `meta`.
///
/// Fails with [`Error::InvalidCheckpoint`] when the file is too short, not Parquet, or its
/// footer does not decode.
pub(crate) async fn footer(
    store: &dyn ObjectStore,
    meta: &ObjectMeta,
) -> Result<ArrowReaderMetadata> {
    let path = &meta.location;
    let size = meta.size;
    if size < 12 {
        return Err(invalid(
            path,
            format!("{size} bytes is too short for Parquet"),
        ));
    }
    let guess = size.min(FOOTER_GUESS);
    let mut tail = get_range(store, path, size - guess..size).await?;
    let end = &tail[tail.len() - 8..];
    if &end[4..] != b"PAR1" {
        return Err(invalid(
            path,
            "the file does not end with Parquet's magic bytes",
        ));
    }
    let length = u64::from(u32::from_le_bytes([end[0], end[1], end[2], end[3]]));
    if length + 8 > size {
        return Err(invalid(
            path,
            format!("its footer claims {length} bytes of a {size}-byte file"),
        ));
    }
    if length + 8 > guess {
        tail = get_range(store, path, size - length - 8..size).await?;
    }
    let footer = &tail[tail.len() - 8 - length as usize..tail.len() - 8];
    let decoded = std::panic::catch_unwind(|| ParquetMetaDataReader::decode_metadata(footer))
        .map_err(|_| invalid(path, "the Parquet footer does not decode"))?
        .map_err(|e| invalid(path, e.to_string()))?;
    ArrowReaderMetadata::try_new(Arc::new(decoded), ArrowReaderOptions::default())
        .map_err(|e| invalid(path, e.to_string()))
}

/// Fetches the column chunks of `leaves` in every row group of `meta`, all at once.
///
/// Fails with [`Error::InvalidCheckpoint`] when the footer names bytes past the end of
/// the file, and with [`Error::Store`] when the store fails.
pub(crate) async fn fetch_columns(
    store: &dyn ObjectStore,
    meta: &ObjectMeta,
    metadata: &ArrowReaderMetadata,
    leaves: &[usize],
) -> Result<SparseFile> {
    let path = &meta.location;
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for group in metadata.metadata().row_groups() {
        for &leaf in leaves {
            let (start, length) = group.column(leaf).byte_range();
            let end = start.checked_add(length).filter(|end| *end <= meta.size);
            let Some(end) = end else {
                return Err(invalid(
                    path,
                    format!("a column chunk at {start}+{length} is past the end"),
                ));
            };
            ranges.push(start..end);
        }
    }
    ranges.sort_by_key(|r| r.start);
    // Adjacent chunks (the columns of one row group are) go as one range.
    let mut merged: Vec<Range<u64>> = Vec::new();
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    // A few requests at once, each a run of ranges: the reads overlap (on local disk, on
    // several threads) instead of running one after another.
    let per_request = merged.len().div_ceil(FETCHES_AT_ONCE).max(1);
    let fetched = futures::future::try_join_all(
        merged
            .chunks(per_request)
            .map(|run| store.get_ranges(path, run)),
    )
    .await;
    let bytes = match fetched {
        Ok(bytes) => bytes.into_iter().flatten(),
        Err(object_store::Error::NotFound { .. }) => {
            return Err(invalid(path, "the file is missing"));
        }
        Err(e) => return Err(Error::store(tarn_store::StoreOp::Get, path)(e)),
    };
    let chunks = merged.into_iter().map(|r| r.start).zip(bytes).collect();
    Ok(SparseFile {
        len: meta.size,
        chunks: Arc::new(chunks),
    })
}

/// Some byte ranges of a file, which the Parquet reader reads as the file: a read
/// outside them is an error (the projection asked for columns that were not fetched).
#[derive(Debug, Clone)]
pub(crate) struct SparseFile {
    len: u64,
    /// `(offset, bytes)`, sorted and disjoint.
    chunks: Arc<Vec<(u64, Bytes)>>,
}

impl SparseFile {
    fn slice(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let index = self.chunks.partition_point(|(offset, _)| *offset <= start);
        let missing = || {
            ParquetError::General(format!(
                "bytes {start}+{length} of the file were not fetched"
            ))
        };
        let (offset, bytes) = self.chunks.get(index.wrapping_sub(1)).ok_or_else(missing)?;
        let from = (start - offset) as usize;
        if from + length > bytes.len() {
            return Err(missing());
        }
        Ok(bytes.slice(from..from + length))
    }
}

impl Length for SparseFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for SparseFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let index = self.chunks.partition_point(|(offset, _)| *offset <= start);
        let (offset, bytes) = self.chunks.get(index.wrapping_sub(1)).ok_or_else(|| {
            ParquetError::General(format!("byte {start} of the file was not fetched"))
        })?;
        let from = ((start - offset) as usize).min(bytes.len());
        Ok(bytes.slice(from..).reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length)
    }
}
