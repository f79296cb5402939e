//! Reading Parquet files from an object store: the `AsyncFileReader` the Parquet decoder
//! pulls bytes through, and opening a table's data file for decoding, with the
//! corrections every reader of Delta data needs (INT96 timestamps read as microseconds,
//! a missing file reported as such).

use std::ops::Range;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field, FieldRef, Fields, Schema, TimeUnit};
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{
    AsyncFileReader, MetadataSuffixFetch, ParquetRecordBatchStreamBuilder,
};
use parquet::basic::Type as PhysicalType;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use tarn_store::StoreLocation;

use crate::cache::Caches;
use crate::paths;
use crate::protocol::Add;

/// A data file of a table, opened for decoding: its metadata is read (one ranged GET of
/// the footer when the size is known), and INT96 columns are set to decode straight to
/// microseconds.
pub(crate) struct DataFile {
    pub(crate) builder: ParquetRecordBatchStreamBuilder<ObjectFileReader>,
    /// The file and its footer, for more builders over it (row groups decoded on several
    /// tasks).
    pub(crate) reader: ObjectFileReader,
    pub(crate) metadata: ArrowReaderMetadata,
    /// Turns a Parquet error on this file into Tarn's, naming the file.
    pub(crate) errors: DataFileErrors,
}

/// Turns Parquet errors on one data file into typed errors: a missing object is
/// [`crate::Error::DataFileNotFound`] naming the table-relative and the full path; any
/// other failure is [`crate::Error::Parquet`] naming the full path.
#[derive(Debug, Clone)]
pub(crate) struct DataFileErrors(Arc<FileNames>);

/// What [`DataFileErrors`] names a file by; its full URL is built only for a message.
#[derive(Debug)]
struct FileNames {
    file: String,
    table: url::Url,
    path: Path,
    url: std::sync::OnceLock<String>,
}

impl DataFileErrors {
    fn new(location: &StoreLocation, file: &str, path: &Path) -> Self {
        Self(Arc::new(FileNames {
            file: file.to_string(),
            table: location.url().clone(),
            path: path.clone(),
            url: std::sync::OnceLock::new(),
        }))
    }

    /// The typed error for `error` on this file.
    pub(crate) fn error(&self, error: ParquetError) -> crate::Error {
        let missing = matches!(
            &error,
            ParquetError::External(e)
                if matches!(e.downcast_ref::<object_store::Error>(), Some(object_store::Error::NotFound { .. }))
        );
        if missing {
            return crate::Error::DataFileNotFound {
                file: self.0.file.clone(),
                url: self.url().to_string(),
            };
        }
        crate::Error::Parquet {
            path: self.url().to_string(),
            source: error,
        }
    }

    /// The full URL of the file, for messages.
    pub(crate) fn url(&self) -> &str {
        self.0
            .url
            .get_or_init(|| paths::url_of(&self.0.table, &self.0.path))
    }
}

/// Opens the data file `add` of the table at `location` for decoding. Its footer (with
/// the offset index, so row selections fetch only their pages) comes from `caches` when
/// read before, and is kept there otherwise.
///
/// Fails with [`crate::Error::InvalidPath`] for a malformed path,
/// [`crate::Error::PathOutsideTable`] for one that leaves the table,
/// [`crate::Error::DataFileNotFound`] when the object is missing, and
/// [`crate::Error::Parquet`] for a footer that does not decode.
pub(crate) async fn open_data_file(
    location: &StoreLocation,
    add: &Add,
    caches: &Caches,
) -> crate::Result<DataFile> {
    // Kept with its Arrow schema: converting the schema again costs as much as reading
    // a small file's footer. Kept by the log's path, with the object it names: a kept
    // file's path is neither resolved nor confined again. Its file was confined when the
    // footer was read, and data files never change: following its links again would
    // cost a lookup per path component. (A file replaced by a link while the handle
    // lives is followed unchecked: that takes write access to the table's directory,
    // which can change its rows anyway.)
    let cached = caches.footer(&add.path);
    let path = match &cached {
        Some(kept) => kept.object.clone(),
        None => {
            let path = paths::locate(location, &add.path)?;
            paths::confine_on_disk(location, &add.path, path)?
        }
    };
    let errors = DataFileErrors::new(location, &add.path, &path);
    let size = u64::try_from(add.size).ok().filter(|s| *s > 0);
    let mut reader = ObjectFileReader::new(Arc::clone(location.store()), path.clone(), size);
    // The column index's page bounds serve page pruning, and the offset index lets a row
    // selection fetch only its pages; both sit just before the footer. A file read whole
    // whose row groups fit a page per column gains nothing from them, and its footer is
    // decoded and kept faster and smaller without them.
    let whole = reader.read_whole();
    let page_index = match whole {
        true => PageIndexPolicy::Skip,
        false => PageIndexPolicy::Optional,
    };
    let mut options = ArrowReaderOptions::new().with_page_index_policy(page_index);
    let metadata = match cached {
        Some(kept) => kept.metadata,
        None => {
            let mut loaded =
                match ArrowReaderMetadata::load_async(&mut reader, options.clone()).await {
                    Ok(loaded) => loaded,
                    // A column index that does not decode costs only page pruning; a store
                    // error is the store's.
                    Err(e) if matches!(e, ParquetError::External(_)) => return Err(errors.error(e)),
                    Err(_) => {
                        options = options.with_column_index_policy(PageIndexPolicy::Skip);
                        ArrowReaderMetadata::load_async(&mut reader, options.clone())
                            .await
                            .map_err(|e| errors.error(e))?
                    }
                };
            let paged = loaded
                .metadata()
                .row_groups()
                .iter()
                .any(|group| group.num_rows() > PAGE_ROWS);
            if whole && paged {
                // From the bytes already held; without it, the scan reads every page.
                let with_index = options
                    .clone()
                    .with_page_index_policy(PageIndexPolicy::Optional);
                if let Ok(indexed) =
                    ArrowReaderMetadata::load_async(&mut reader, with_index.clone()).await
                {
                    (loaded, options) = (indexed, with_index);
                }
            }
            if let Some(schema) = int96_as_microseconds(loaded.metadata(), loaded.schema()) {
                loaded = ArrowReaderMetadata::try_new(
                    Arc::clone(loaded.metadata()),
                    options.with_schema(Arc::new(schema)),
                )
                .map_err(|e| errors.error(e))?;
            }
            caches.keep_footer(&add.path, path.clone(), loaded.clone());
            loaded
        }
    };
    let builder =
        ParquetRecordBatchStreamBuilder::new_with_metadata(reader.clone(), metadata.clone());
    Ok(DataFile {
        builder,
        reader,
        metadata,
        errors,
    })
}

/// The file's Arrow schema with its INT96 timestamps read as microseconds, when it has
/// any. Delta timestamps are microseconds, and the default (nanoseconds) overflows
/// outside 1677-2262; decoding INT96 straight to microseconds covers Spark's whole range
/// (0001-01-01 to 9999-12-31).
fn int96_as_microseconds(metadata: &ParquetMetaData, schema: &Schema) -> Option<Schema> {
    let descr = metadata.file_metadata().schema_descr();
    let mut roots = vec![false; descr.root_schema().get_fields().len()];
    for (i, column) in descr.columns().iter().enumerate() {
        if column.physical_type() == PhysicalType::INT96 {
            roots[descr.get_column_root_idx(i)] = true;
        }
    }
    if !roots.contains(&true) || roots.len() != schema.fields().len() {
        return None;
    }
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .zip(&roots)
        .map(|(f, int96)| {
            if *int96 {
                micros_field(f)
            } else {
                Arc::clone(f)
            }
        })
        .collect();
    Some(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The field with every nanosecond timestamp in it made microseconds.
fn micros_field(field: &FieldRef) -> FieldRef {
    Arc::new(Field::clone(field).with_data_type(micros_type(field.data_type())))
}

fn micros_type(ty: &ArrowType) -> ArrowType {
    match ty {
        ArrowType::Timestamp(TimeUnit::Nanosecond, tz) => {
            ArrowType::Timestamp(TimeUnit::Microsecond, tz.clone())
        }
        ArrowType::Struct(fields) => {
            ArrowType::Struct(fields.iter().map(micros_field).collect::<Fields>())
        }
        ArrowType::List(f) => ArrowType::List(micros_field(f)),
        ArrowType::LargeList(f) => ArrowType::LargeList(micros_field(f)),
        ArrowType::FixedSizeList(f, n) => ArrowType::FixedSizeList(micros_field(f), *n),
        ArrowType::Map(f, sorted) => ArrowType::Map(micros_field(f), *sorted),
        other => other.clone(),
    }
}

/// Bytes read from the end of a file in the first request, so the footer and metadata
/// of most files arrive in one round trip.
pub(crate) const FOOTER_HINT: usize = 64 * 1024;

/// Rows a data page holds at most, as Tarn writes them (parquet-rs and parquet-mr write
/// 20,000): a small file's row group of more rows has pages worth its page index.
const PAGE_ROWS: i64 = 16 * 1024;

/// A Parquet file in an object store. With the size known (from the `add` action) the
/// footer is fetched with one ranged GET and no HEAD.
#[derive(Debug, Clone)]
pub(crate) struct ObjectFileReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: Option<u64>,
    /// The whole file, when it is small enough to fetch in the request that would have
    /// fetched its footer; later ranges are served from it.
    whole: Option<Bytes>,
}

/// Files up to this size are read whole with one GET instead of footer then data: a
/// round trip costs more than the transfer of the columns not needed.
/// As large as the local store reads on the calling thread, so a small file costs it no
/// thread hand-off.
const WHOLE_FILE_MAX: u64 = tarn_store::INLINE_BYTES;

impl ObjectFileReader {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, path: Path, size: Option<u64>) -> Self {
        Self {
            store,
            path,
            size,
            whole: None,
        }
    }

    /// Whether the file is small enough to be fetched whole with its footer.
    fn read_whole(&self) -> bool {
        self.size.is_some_and(|size| size <= WHOLE_FILE_MAX)
    }

    /// The whole file of `size` bytes (as the log says) and its footer. A ranged read
    /// rather than a GET: one request either way, and a local store serves a small one
    /// without a thread hand-off. When the log's size is wrong (the read fails, or its
    /// bytes end in no footer), the object is fetched as it is, as a GET always did.
    async fn fetch_whole(
        &self,
        size: u64,
        reader: impl Fn() -> ParquetMetaDataReader,
    ) -> Result<(Bytes, ParquetMetaData)> {
        let ranged = self
            .store
            .get_ranges(&self.path, std::slice::from_ref(&(0..size)))
            .await;
        match ranged {
            Ok(mut bytes) => {
                let whole = bytes.pop().unwrap_or_default();
                if let Ok(metadata) = reader().parse_and_finish(&whole) {
                    return Ok((whole, metadata));
                }
            }
            Err(e @ object_store::Error::NotFound { .. }) => return Err(external(e)),
            Err(_) => {}
        }
        let whole = self
            .store
            .get(&self.path)
            .await
            .map_err(external)?
            .bytes()
            .await
            .map_err(external)?;
        let metadata = reader().parse_and_finish(&whole)?;
        Ok((whole, metadata))
    }

    /// The bytes of `range` from the fetched whole file, if it was fetched.
    fn held_range(&self, range: &Range<u64>) -> Option<Result<Bytes>> {
        let whole = self.whole.as_ref()?;
        let (start, end) = (usize::try_from(range.start), usize::try_from(range.end));
        Some(match (start, end) {
            (Ok(start), Ok(end)) if start <= end && end <= whole.len() => {
                Ok(whole.slice(start..end))
            }
            _ => Err(ParquetError::EOF(format!(
                "range {range:?} is past the end of {} ({} bytes)",
                self.path,
                whole.len()
            ))),
        })
    }
}

/// A Parquet error standing for a panic of the decoder (it panics on some corrupt files).
pub(crate) fn decoder_panic(payload: &Box<dyn std::any::Any + Send>) -> ParquetError {
    ParquetError::General(format!(
        "corrupt file: the Parquet decoder failed: {}",
        crate::tasks::panic_message(payload)
    ))
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        if let Some(bytes) = self.held_range(&range) {
            return futures::future::ready(bytes).boxed();
        }
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(external)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        if self.whole.is_some() {
            let bytes: Result<Vec<Bytes>> = ranges
                .iter()
                .filter_map(|range| self.held_range(range))
                .collect();
            return futures::future::ready(bytes).boxed();
        }
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
            let reader = || {
                ParquetMetaDataReader::new()
                    .with_arrow_reader_options(options)
                    .with_prefetch_hint(Some(FOOTER_HINT))
            };
            let metadata = match self.size {
                Some(size) if self.read_whole() => {
                    let (whole, metadata) = match self.whole.clone() {
                        Some(whole) => {
                            let metadata = reader().parse_and_finish(&whole)?;
                            (whole, metadata)
                        }
                        None => self.fetch_whole(size, reader).await?,
                    };
                    self.whole = Some(whole);
                    metadata
                }
                Some(size) => reader().load_and_finish(self, size).await?,
                None => reader().load_via_suffix_and_finish(self).await?,
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use object_store::{ObjectStoreExt, PutPayload};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// Stores `bytes` at `t/name` of `store` and returns the plain `add` of that file.
    /// An in-memory store and a table location `t/` in it.
    pub(crate) fn memory_table() -> (Arc<dyn ObjectStore>, StoreLocation) {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let location = StoreLocation::new(
            url::Url::parse("memory:///t/").unwrap(),
            Arc::clone(&store),
            Path::from("t"),
        );
        (store, location)
    }

    pub(crate) async fn put_add(store: &Arc<dyn ObjectStore>, name: &str, bytes: Vec<u8>) -> Add {
        let size = bytes.len() as i64;
        store
            .put(&Path::from(format!("t/{name}")), PutPayload::from(bytes))
            .await
            .unwrap();
        Add {
            path: name.into(),
            partition_values: Default::default(),
            size,
            modification_time: 0,
            data_change: true,
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }
    }

    /// A Parquet file of `rows` random-ish longs in pages of 1,000 rows, with its page
    /// index, stored at `t/name` of `store`; returns its `add`.
    async fn put_file(store: &Arc<dyn ObjectStore>, name: &str, rows: i64) -> Add {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let values = Int64Array::from_iter_values((0..rows).map(|i| i.wrapping_mul(0x9E37_79B9)));
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values) as ArrayRef]).unwrap();
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(1_000)
            .set_write_batch_size(1_000)
            .build();
        let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        put_add(store, name, writer.into_inner().unwrap()).await
    }

    #[tokio::test]
    async fn a_file_read_whole_keeps_no_page_index_unless_its_pages_can_be_pruned() {
        let (store, location) = memory_table();
        let small = put_file(&store, "small.parquet", 10_000).await;
        let paged = put_file(&store, "paged.parquet", 40_000).await;
        assert!(paged.size as u64 <= WHOLE_FILE_MAX);
        let large = put_file(&store, "large.parquet", 200_000).await;
        assert!(small.size as u64 <= WHOLE_FILE_MAX);
        assert!(large.size as u64 > WHOLE_FILE_MAX);
        let caches = Caches::default();

        let file = open_data_file(&location, &small, &caches).await.unwrap();
        assert!(file.metadata.metadata().offset_index().is_none());
        assert!(file.metadata.metadata().column_index().is_none());
        // The whole file came with the footer: its columns need no other request.
        assert!(file.reader.whole.is_some());

        // Small, but a row group of more rows than a page: its pages can be pruned.
        let file = open_data_file(&location, &paged, &caches).await.unwrap();
        let offsets = file.metadata.metadata().offset_index().unwrap();
        assert_eq!(offsets[0][0].page_locations().len(), 40);

        let file = open_data_file(&location, &large, &caches).await.unwrap();
        let offsets = file.metadata.metadata().offset_index().unwrap();
        assert_eq!(offsets[0][0].page_locations().len(), 200);

        // Kept: opening the file again decodes no footer, even with the object gone.
        store.delete(&Path::from("t/large.parquet")).await.unwrap();
        let again = open_data_file(&location, &large, &caches).await.unwrap();
        assert!(Arc::ptr_eq(
            again.metadata.metadata(),
            file.metadata.metadata()
        ));
    }

    #[tokio::test]
    async fn a_small_file_whose_logged_size_is_wrong_is_still_read() {
        let (store, location) = memory_table();
        let add = put_file(&store, "small.parquet", 1_000).await;
        for size in [add.size - 100, add.size + 100] {
            let wrong = Add {
                size,
                ..add.clone()
            };
            let file = open_data_file(&location, &wrong, &Caches::default())
                .await
                .unwrap();
            assert_eq!(file.metadata.metadata().file_metadata().num_rows(), 1_000);
        }
    }
}
