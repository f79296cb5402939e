//! Building a full-text index in memory and writing it as one bundle object, with the
//! hot cache of the byte ranges opening it reads.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use tantivy::directory::{Directory, RamDirectory};
use tantivy::schema::Field;
use tantivy::{Index, IndexSettings, IndexWriter, TantivyDocument};

use crate::format::{self, IndexKind, ObjectInfo, ObjectWriter};
use crate::{Error, Result};

use super::bundle::{BundleMeta, FileEntry, HotCache, file_ranges};
use super::directory::{BundleDirectory, Source};
use super::options::{
    ADDRESS_FIELD, FullTextOptions, META_JSON, TOKENIZER, WRITER_MEMORY, engine, schema,
};
use super::reader::Opened;

/// Builds a full-text index from string arrays and their row addresses.
pub struct FullTextBuilder {
    options: FullTextOptions,
    index: Index,
    /// The index's files as tantivy wrote them, footers included.
    files: RamDirectory,
    writer: IndexWriter<TantivyDocument>,
    text: Field,
    address: Field,
    rows: u64,
}

impl std::fmt::Debug for FullTextBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullTextBuilder")
            .field("options", &self.options)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl FullTextBuilder {
    /// A builder analyzing text as `options` say.
    ///
    /// Fails with [`Error::FullText`] when tantivy cannot start a writer.
    pub fn new(options: FullTextOptions) -> Result<Self> {
        let (schema, text, address) = schema();
        let files = RamDirectory::create();
        let index =
            Index::create(files.clone(), schema, IndexSettings::default()).map_err(engine(""))?;
        index.tokenizers().register(TOKENIZER, options.analyzer());
        let writer = index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(engine(""))?;
        Ok(Self {
            options,
            index,
            files,
            writer,
            text,
            address,
            rows: 0,
        })
    }

    /// Adds the strings of `values` with their row addresses; nulls are skipped.
    ///
    /// Fails with [`Error::UnsupportedType`] for arrays that are not strings and
    /// [`Error::InvalidInput`] when the lengths differ.
    pub fn push(&mut self, values: &ArrayRef, addresses: &[u64]) -> Result<()> {
        if values.len() != addresses.len() {
            return Err(Error::InvalidInput {
                reason: format!("{} values with {} addresses", values.len(), addresses.len()),
            });
        }
        let text = |i: usize| -> Option<&str> {
            match values.data_type() {
                DataType::Utf8 => Some(values.as_string::<i32>().value(i)),
                DataType::LargeUtf8 => Some(values.as_string::<i64>().value(i)),
                DataType::Utf8View => Some(values.as_string_view().value(i)),
                _ => None,
            }
        };
        if !matches!(
            values.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(Error::UnsupportedType {
                kind: "full-text",
                data_type: values.data_type().to_string(),
            });
        }
        for (i, address) in addresses.iter().enumerate() {
            if values.is_null(i) {
                continue;
            }
            let mut doc = TantivyDocument::default();
            doc.add_text(self.text, text(i).unwrap_or_default());
            doc.add_u64(self.address, *address);
            self.writer.add_document(doc).map_err(engine(""))?;
            self.rows += 1;
        }
        Ok(())
    }

    /// Commits, merges into one segment and bundles the files with their hot cache: CPU
    /// work, to run off the async threads.
    ///
    /// Fails with [`Error::FullText`] when tantivy fails.
    pub fn finish(mut self) -> Result<(Bytes, ObjectInfo)> {
        self.writer.commit().map_err(engine(""))?;
        let segments = self.index.searchable_segment_ids().map_err(engine(""))?;
        if segments.len() > 1 {
            self.writer.merge(&segments).wait().map_err(engine(""))?;
        }
        self.writer.wait_merging_threads().map_err(engine(""))?;
        let meta_json = self
            .files
            .atomic_read(std::path::Path::new(META_JSON))
            .map_err(|e| Error::FullText {
                path: String::new(),
                reason: e.to_string(),
            })?;
        let metas = self.index.load_metas().map_err(engine(""))?;
        let mut names: Vec<PathBuf> = metas
            .list_segment_files()
            .into_iter()
            .filter(|p| self.files.exists(p).unwrap_or(false))
            .collect();
        names.sort();
        let mut writer = ObjectWriter::default();
        let mut files = BTreeMap::new();
        for name in &names {
            let bytes = self
                .files
                .open_read(name)
                .and_then(|f| {
                    f.read_bytes()
                        .map_err(|e| tantivy::directory::error::OpenReadError::IoError {
                            io_error: Arc::new(e),
                            filepath: name.clone(),
                        })
                })
                .map_err(|e| Error::FullText {
                    path: String::new(),
                    reason: e.to_string(),
                })?;
            let (range, crc) = writer.part(bytes.as_slice());
            files.insert(
                name.to_string_lossy().into_owned(),
                FileEntry {
                    start: range.start,
                    len: range.end - range.start,
                    crc,
                },
            );
        }
        let files_bytes = writer.snapshot();
        let meta_text = String::from_utf8_lossy(&meta_json).into_owned();
        let hot_ranges = record_hot_ranges(&files_bytes, &files, &meta_text, &self.options)?;
        // The hot cache: the recorded ranges, merged and packed end to end.
        let mut slices = Vec::new();
        let mut blob = Vec::new();
        for range in hot_ranges {
            slices.push((range.start, range.end - range.start));
            blob.extend_from_slice(&files_bytes[range.start as usize..range.end as usize]);
        }
        let (hot_range, hot_crc) = writer.part(&blob);
        let meta = BundleMeta {
            version: 1,
            files,
            meta_json: meta_text,
            hot: HotCache {
                start: hot_range.start,
                len: hot_range.end - hot_range.start,
                crc: hot_crc,
                slices,
            },
            options: self.options,
            docs: self.rows,
        };
        let meta = serde_json::to_vec(&meta).map_err(|e| Error::FullText {
            path: String::new(),
            reason: format!("encoding the bundle meta: {e}"),
        })?;
        let bytes = writer.finish(&meta, IndexKind::FullText);
        let info = ObjectInfo {
            size: bytes.len() as u64,
            rows: self.rows,
        };
        Ok((bytes, info))
    }

    /// Builds the index on a blocking thread and uploads it to `path`.
    ///
    /// Fails as [`finish`](Self::finish) does, and with [`Error::Store`] when the upload
    /// fails.
    pub async fn write(self, store: &dyn ObjectStore, path: &Path) -> Result<ObjectInfo> {
        let (bytes, info) = tokio::task::spawn_blocking(move || self.finish())
            .await
            .map_err(|source| Error::TaskFailed {
                task: "full-text build",
                source,
            })??;
        format::put(store, path, bytes).await?;
        Ok(info)
    }
}

/// Opens the bundle in memory, does what opening and a term lookup do, and returns the
/// byte ranges that read, merged.
pub(super) fn record_hot_ranges(
    bundle: &Bytes,
    files: &BTreeMap<String, FileEntry>,
    meta_json: &str,
    options: &FullTextOptions,
) -> Result<Vec<Range<u64>>> {
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let directory = BundleDirectory::new(
        Source::Memory {
            bytes: bundle.clone(),
            recorded: Arc::clone(&recorded),
        },
        file_ranges(files),
        HashMap::from([(PathBuf::from(META_JSON), meta_json.as_bytes().to_vec())]),
    );
    let opened = Opened::open(directory, options, "")?;
    let searcher = opened.reader.searcher();
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(opened.text).map_err(engine(""))?;
        // A lookup touches the term dictionary's index blocks.
        let _ = inverted.terms().get(b"tarn").map_err(|e| Error::FullText {
            path: String::new(),
            reason: e.to_string(),
        })?;
        let _ = segment
            .fast_fields()
            .u64(ADDRESS_FIELD)
            .map_err(engine(""))?;
    }
    let mut ranges = std::mem::take(&mut *recorded.lock().unwrap_or_else(|p| p.into_inner()));
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    Ok(merged)
}
