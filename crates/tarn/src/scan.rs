//! Scans: projection and a predicate over a snapshot, as a stream of Arrow batches.
//!
//! Pruning happens in order: partition values, then file statistics (both in
//! [`Scan::plan`], without IO), then Parquet row-group statistics when a file is opened.
//! Deletion vectors and the residual predicate are applied to the rows read. Files are
//! read concurrently.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::filter_record_batch;
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::{Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, RowSelection, RowSelector};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;

use crate::reader::ObjectFileReader;
use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::PageIndexPolicy;
use roaring::RoaringTreemap;

use tarn_store::StoreLocation;

use crate::conform::{Source, conform, find_field};
use crate::dv::{DvLocation, decode_bitmap, dv_store_path, verify_record};
use crate::error::{Error, Result};
use crate::expr::{ColumnName, Expr, Scalar, StatsView, evaluate_predicate, may_match};
use crate::paths;
use crate::protocol::{Add, DeletionVectorDescriptor, StructField};
use crate::snapshot::Snapshot;
use crate::stats::{ColumnInfo, FileStats, FileStatsView, column_infos};

/// A stream of record batches.
pub type RecordBatchStream = BoxStream<'static, Result<RecordBatch>>;

/// Default rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 8192;
/// Default number of files read at once.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// A scan of one snapshot: which columns, which rows. Build with [`Snapshot::scan`] or
/// `Table::scan`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Scan {
    snapshot: Snapshot,
    columns: Option<Vec<String>>,
    predicate: Option<Expr>,
    batch_size: usize,
    concurrency: usize,
}

/// What a scan will read, and how much pruning removed.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// The files to read.
    pub files: Vec<Add>,
    /// Live files in the snapshot.
    pub total_files: usize,
    /// Files skipped by partition values.
    pub skipped_by_partition: usize,
    /// Files skipped by statistics.
    pub skipped_by_stats: usize,
    /// The schema of the batches the scan returns.
    pub schema: SchemaRef,
}

impl Snapshot {
    /// A scan of this snapshot: all columns, all rows, until narrowed.
    pub fn scan(&self) -> Scan {
        Scan {
            snapshot: self.clone(),
            columns: None,
            predicate: None,
            batch_size: DEFAULT_BATCH_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

impl Scan {
    /// Returns only these columns, in this order.
    pub fn select(mut self, columns: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// Returns only rows for which `predicate` is true (null counts as false).
    pub fn filter(mut self, predicate: Expr) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Rows per batch (default 8192).
    pub fn with_batch_size(mut self, rows: usize) -> Self {
        self.batch_size = rows.max(1);
        self
    }

    /// Files read at once (default 8).
    pub fn with_concurrency(mut self, files: usize) -> Self {
        self.concurrency = files.max(1);
        self
    }

    fn context(&self) -> Result<ScanContext> {
        let snapshot = &self.snapshot;
        let schema = snapshot.schema();
        let output: Vec<String> = match &self.columns {
            Some(columns) => {
                for c in columns {
                    if schema.field(c).is_none() {
                        return Err(Error::UnknownColumn {
                            column: c.clone(),
                            available: schema.field_names(),
                        });
                    }
                }
                columns.clone()
            }
            None => schema.field_names(),
        };
        let predicate = self
            .predicate
            .as_ref()
            .map(|p| p.bind(schema))
            .transpose()?;
        // Columns to read: the output plus what the predicate needs, in table order.
        let mut needed: Vec<String> = output.clone();
        if let Some(p) = &predicate {
            for c in p.columns() {
                if !needed.iter().any(|n| n == c.root()) {
                    needed.push(c.root().to_string());
                }
            }
        }
        let read_fields: Vec<StructField> = schema
            .fields
            .iter()
            .filter(|f| needed.contains(&f.name))
            .cloned()
            .collect();
        let columns = predicate
            .as_ref()
            .map(|p| column_infos(schema, p.columns()))
            .unwrap_or_default();
        let full = snapshot.arrow_schema();
        let output_schema = Arc::new(Schema::new(
            output
                .iter()
                .filter_map(|name| full.field_with_name(name).ok().cloned())
                .collect::<Vec<_>>(),
        ));
        let read_schema = Arc::new(Schema::new(
            read_fields
                .iter()
                .filter_map(|f| full.field_with_name(&f.name).ok().cloned())
                .collect::<Vec<_>>(),
        ));
        Ok(ScanContext {
            snapshot: snapshot.clone(),
            predicate,
            columns,
            read_fields,
            read_schema,
            output,
            output_schema,
            batch_size: self.batch_size,
        })
    }

    /// Plans the scan without IO: checks the projection and predicate against the schema
    /// and prunes files by partition values and statistics.
    ///
    /// Fails with [`Error::UnknownColumn`] or [`Error::TypeMismatch`] for a projection or
    /// predicate that does not fit the schema, and [`Error::InvalidPartitionValue`] when a
    /// file's partition value does not parse as its column's type.
    pub fn plan(&self) -> Result<ScanPlan> {
        let ctx = self.context()?;
        let (files, by_partition, by_stats) = ctx.prune_files()?;
        Ok(ScanPlan {
            files: files.into_iter().map(|f| f.add).collect(),
            total_files: self.snapshot.file_count(),
            skipped_by_partition: by_partition,
            skipped_by_stats: by_stats,
            schema: Arc::clone(&ctx.output_schema),
        })
    }

    /// Runs the scan: a stream of batches in the output schema. Batches of different
    /// files arrive in no particular order.
    ///
    /// Fails as [`plan`](Self::plan) does; the stream then yields typed errors for files
    /// that cannot be read ([`Error::Parquet`], [`Error::InvalidDeletionVector`],
    /// [`Error::InvalidPath`], [`Error::Store`]).
    pub async fn execute(self) -> Result<RecordBatchStream> {
        let ctx = Arc::new(self.context()?);
        let (files, _, _) = ctx.prune_files()?;
        let concurrency = self.concurrency;
        let stream = futures::stream::iter(files)
            .map(move |file| {
                let ctx = Arc::clone(&ctx);
                async move { read_file(ctx, file).await }
            })
            .buffer_unordered(concurrency)
            .try_flatten_unordered(concurrency);
        Ok(stream.boxed())
    }

    /// Runs the scan and collects every batch.
    pub async fn collect(self) -> Result<Vec<RecordBatch>> {
        self.execute().await?.try_collect().await
    }
}

/// A file chosen by planning, with its parsed partition values.
struct PlannedFile {
    add: Add,
    partitions: HashMap<ColumnName, Scalar>,
}

struct ScanContext {
    snapshot: Snapshot,
    predicate: Option<Expr>,
    columns: HashMap<ColumnName, ColumnInfo>,
    read_fields: Vec<StructField>,
    read_schema: SchemaRef,
    output: Vec<String>,
    output_schema: SchemaRef,
    batch_size: usize,
}

impl ScanContext {
    fn partition_values(&self, add: &Add) -> Result<HashMap<ColumnName, Scalar>> {
        self.snapshot
            .partition_columns()
            .iter()
            .map(|pc| {
                let raw = add
                    .partition_values
                    .get(&pc.physical_name)
                    .and_then(|v| v.as_deref());
                let value = Scalar::parse_partition(raw, pc.data_type).map_err(|reason| {
                    Error::InvalidPartitionValue {
                        column: pc.name.clone(),
                        value: raw.unwrap_or_default().to_string(),
                        reason: format!("{reason} (in file {})", add.path),
                    }
                })?;
                Ok((ColumnName::new([pc.name.clone()]), value))
            })
            .collect()
    }

    /// The files to read, and how many partition values and statistics ruled out.
    fn prune_files(&self) -> Result<(Vec<PlannedFile>, usize, usize)> {
        let mut files = Vec::new();
        let (mut by_partition, mut by_stats) = (0, 0);
        let no_columns = HashMap::new();
        for add in self.snapshot.files() {
            let partitions = self.partition_values(add)?;
            if let Some(p) = &self.predicate {
                let partition_only = FileStatsView {
                    stats: None,
                    columns: &no_columns,
                    partitions: &partitions,
                };
                if !partitions.is_empty() && !may_match(p, &partition_only) {
                    by_partition += 1;
                    continue;
                }
                let stats = add.stats.as_deref().and_then(FileStats::parse);
                let view = FileStatsView {
                    stats: stats.as_ref(),
                    columns: &self.columns,
                    partitions: &partitions,
                };
                if !may_match(p, &view) {
                    by_stats += 1;
                    continue;
                }
            }
            files.push(PlannedFile {
                add: add.clone(),
                partitions,
            });
        }
        Ok((files, by_partition, by_stats))
    }
}

/// The live rows of one data file (those its deletion vector does not mark), in the
/// table's logical schema, with each row's position in the file.
#[derive(Debug, Clone)]
pub(crate) struct FileRows {
    pub(crate) batch: RecordBatch,
    pub(crate) positions: Vec<u64>,
    /// Rows in the file, deleted ones included.
    pub(crate) physical_rows: u64,
}

/// Reads every live row of a file with its position (row groups in order, no pruning).
pub(crate) async fn read_file_rows(snapshot: &Snapshot, add: &Add) -> Result<FileRows> {
    read_file_rows_of(&snapshot.scan(), add, None).await
}

/// Reads the live rows of a file with their positions: the columns `scan` selects and, when
/// `only` is given, only the rows at those positions (decoded through a row selection, so
/// the rest of each page is skipped).
pub(crate) async fn read_file_rows_of(
    scan: &Scan,
    add: &Add,
    only: Option<&RoaringTreemap>,
) -> Result<FileRows> {
    let snapshot = &scan.snapshot;
    let ctx = Arc::new(scan.context()?);
    let location = snapshot.location();
    let path = paths::resolve(location, &add.path)?;
    let size = u64::try_from(add.size).ok().filter(|s| *s > 0);
    let reader = ObjectFileReader::new(Arc::clone(location.store()), path.clone(), size);
    let deletion = add
        .deletion_vector
        .as_ref()
        .map(|dv| load_deletion_vector(location, dv));
    // With a few rows wanted, the offset index lets the reader fetch only their pages.
    let options = if only.is_some() {
        ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional)
    } else {
        ArrowReaderOptions::new()
    };
    let (builder, deleted) = futures::join!(
        ParquetRecordBatchStreamBuilder::new_with_options(reader, options),
        async {
            match deletion {
                Some(f) => f.await.map(Some),
                None => Ok(None),
            }
        }
    );
    let builder = builder.map_err(Error::parquet(&path))?;
    let deleted = deleted?;
    let mode = snapshot.column_mapping_mode();
    let file_schema = Arc::clone(builder.schema());
    let mut roots: Vec<usize> = ctx
        .read_fields
        .iter()
        .filter_map(|f| find_field(file_schema.fields(), f, Source::File(mode)))
        .collect();
    roots.sort_unstable();
    roots.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let physical_rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
    let mut builder = builder.with_projection(mask).with_batch_size(64 * 1024);
    // The file positions the batches hold, in order.
    let read_positions: Vec<u64> = match only {
        Some(wanted) => {
            let wanted: Vec<u64> = wanted.iter().filter(|p| *p < physical_rows).collect();
            builder = builder.with_row_selection(selection_of(&wanted, physical_rows));
            wanted
        }
        None => (0..physical_rows).collect(),
    };
    let stream = builder.build().map_err(Error::parquet(&path))?;
    let stream = std::panic::AssertUnwindSafe(stream)
        .catch_unwind()
        .map(|r| r.unwrap_or_else(|panic| Err(crate::reader::decoder_panic(&panic))));
    let partitions = ctx.partition_values(add)?;
    let path_text = path.to_string();
    let batches: Vec<RecordBatch> = stream
        .map(|b| {
            let b = b.map_err(Error::parquet(&path_text))?;
            assemble(&ctx, &b, &partitions, mode, &path_text)
        })
        .try_collect()
        .await?;
    let all = arrow::compute::concat_batches(&ctx.output_schema, &batches)
        .map_err(Error::arrow(format!("reading {path_text}")))?;
    if all.num_rows() != read_positions.len() {
        return Err(Error::Parquet {
            path: path_text,
            source: parquet::errors::ParquetError::General(format!(
                "read {} rows where {} were selected",
                all.num_rows(),
                read_positions.len()
            )),
        });
    }
    let (batch, positions) = match deleted {
        None => (all, read_positions),
        Some(bitmap) => {
            let keep: arrow::array::BooleanArray = read_positions
                .iter()
                .map(|p| Some(!bitmap.contains(*p)))
                .collect();
            let positions = read_positions
                .into_iter()
                .filter(|p| !bitmap.contains(*p))
                .collect();
            let kept = filter_record_batch(&all, &keep)
                .map_err(Error::arrow("applying a deletion vector"))?;
            (kept, positions)
        }
    };
    Ok(FileRows {
        batch,
        positions,
        physical_rows,
    })
}

/// A row selection reading exactly `wanted` (sorted, distinct) of `rows` rows.
fn selection_of(wanted: &[u64], rows: u64) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0u64;
    let mut i = 0;
    while i < wanted.len() {
        let start = wanted[i];
        let mut end = start + 1;
        while i + 1 < wanted.len() && wanted[i + 1] == end {
            i += 1;
            end += 1;
        }
        if start > at {
            selectors.push(RowSelector::skip((start - at) as usize));
        }
        selectors.push(RowSelector::select((end - start) as usize));
        at = end;
        i += 1;
    }
    if rows > at {
        selectors.push(RowSelector::skip((rows - at) as usize));
    }
    RowSelection::from(selectors)
}

/// Whether a file may hold rows matching a bound predicate, judged from its partition
/// values and statistics (used by the conflict checker for files added concurrently).
pub(crate) fn file_may_match(snapshot: &Snapshot, add: &Add, predicate: &Expr) -> Result<bool> {
    let ctx = snapshot.scan().filter(predicate.clone()).context()?;
    let partitions = ctx.partition_values(add)?;
    let stats = add.stats.as_deref().and_then(FileStats::parse);
    let view = FileStatsView {
        stats: stats.as_ref(),
        columns: &ctx.columns,
        partitions: &partitions,
    };
    Ok(ctx.predicate.as_ref().is_none_or(|p| may_match(p, &view)))
}

/// Opens one file and returns the stream of its output batches.
async fn read_file(ctx: Arc<ScanContext>, file: PlannedFile) -> Result<RecordBatchStream> {
    let location = ctx.snapshot.location();
    let path = paths::resolve(location, &file.add.path)?;
    let store = Arc::clone(location.store());
    let size = u64::try_from(file.add.size).ok().filter(|s| *s > 0);
    let reader = ObjectFileReader::new(Arc::clone(&store), path.clone(), size);
    let deletion = file
        .add
        .deletion_vector
        .as_ref()
        .map(|dv| load_deletion_vector(ctx.snapshot.location(), dv));
    let (builder, deleted) = futures::join!(ParquetRecordBatchStreamBuilder::new(reader), async {
        match deletion {
            Some(f) => f.await.map(Some),
            None => Ok(None),
        }
    });
    let builder = builder.map_err(Error::parquet(&path))?;
    let deleted = deleted?;
    let file_schema = Arc::clone(builder.schema());
    let mode = ctx.snapshot.column_mapping_mode();
    let partition_names: Vec<&str> = ctx
        .snapshot
        .partition_columns()
        .iter()
        .map(|p| p.name.as_str())
        .collect();

    // Data columns to read, by their root index in the file.
    let mut roots = Vec::new();
    for field in ctx
        .read_fields
        .iter()
        .filter(|f| !partition_names.contains(&f.name.as_str()))
    {
        if let Some(i) = find_field(file_schema.fields(), field, Source::File(mode)) {
            roots.push(i);
        }
    }
    roots.sort_unstable();
    roots.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);

    let metadata = Arc::clone(builder.metadata());
    let row_groups: Vec<usize> = match &ctx.predicate {
        Some(p) => {
            let view = RowGroupStats::new(&ctx, &file_schema, &metadata, &file.partitions);
            (0..metadata.num_row_groups())
                .filter(|rg| may_match(p, &view.at(*rg)))
                .collect()
        }
        None => (0..metadata.num_row_groups()).collect(),
    };
    if row_groups.is_empty() {
        return Ok(futures::stream::empty().boxed());
    }
    let mut builder = builder
        .with_projection(mask)
        .with_batch_size(ctx.batch_size)
        .with_row_groups(row_groups.clone());
    if let Some(deleted) = &deleted {
        let mut starts = Vec::with_capacity(metadata.num_row_groups());
        let mut next = 0u64;
        for rg in metadata.row_groups() {
            starts.push((next, rg.num_rows() as u64));
            next += rg.num_rows() as u64;
        }
        let kept: Vec<(u64, u64)> = row_groups.iter().map(|rg| starts[*rg]).collect();
        builder = builder.with_row_selection(deletion_selection(deleted, &kept));
    }
    let stream = builder.build().map_err(Error::parquet(&path))?;
    // A corrupt page can make the decoder panic: the scan gets an error for this file.
    let stream = std::panic::AssertUnwindSafe(stream)
        .catch_unwind()
        .map(|r| r.unwrap_or_else(|panic| Err(crate::reader::decoder_panic(&panic))));
    let ctx2 = Arc::clone(&ctx);
    let partitions = file.partitions;
    let path_text = path.to_string();
    Ok(stream
        .map(move |batch| {
            let batch = batch.map_err(Error::parquet(&path_text))?;
            assemble(&ctx2, &batch, &partitions, mode, &path_text)
        })
        .try_filter(|b| futures::future::ready(b.num_rows() > 0))
        .boxed())
}

/// Turns a batch read from a file into an output batch: logical columns, partition
/// values, the residual predicate, the projection.
fn assemble(
    ctx: &ScanContext,
    batch: &RecordBatch,
    partitions: &HashMap<ColumnName, Scalar>,
    mode: crate::properties::ColumnMappingMode,
    path: &str,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let batch_schema = batch.schema();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(ctx.read_fields.len());
    for field in &ctx.read_fields {
        let column = match partitions.get(&ColumnName::new([field.name.clone()])) {
            Some(value) => value
                .to_array(&field.data_type.to_arrow(), rows)
                .map_err(|reason| Error::InvalidPartitionValue {
                    column: field.name.clone(),
                    value: value.to_string(),
                    reason,
                })?,
            None => match find_field(batch_schema.fields(), field, Source::File(mode)) {
                Some(i) => {
                    conform(batch.column(i), field, Source::File(mode)).map_err(|reason| {
                        Error::SchemaMismatch {
                            reason: format!("data file {path}: {reason}"),
                        }
                    })?
                }
                // A column added after this file was written.
                None => arrow::array::new_null_array(&field.data_type.to_arrow(), rows),
            },
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    let read = RecordBatch::try_new_with_options(Arc::clone(&ctx.read_schema), columns, &options)
        .map_err(Error::arrow(format!("assembling rows of {path}")))?;
    let filtered = match &ctx.predicate {
        Some(p) => {
            let mask = evaluate_predicate(p, &read)?;
            let mask = if mask.null_count() > 0 {
                prep_null_mask_filter(&mask)
            } else {
                mask
            };
            filter_record_batch(&read, &mask).map_err(Error::arrow("filtering rows"))?
        }
        None => read,
    };
    let indices: Vec<usize> = ctx
        .output
        .iter()
        .filter_map(|name| ctx.read_schema.index_of(name).ok())
        .collect();
    let projected = filtered
        .project(&indices)
        .map_err(Error::arrow("projecting columns"))?;
    // `project` keeps the row count even with no columns (COUNT(*) scans).
    RecordBatch::try_new_with_options(
        Arc::clone(&ctx.output_schema),
        projected.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(projected.num_rows())),
    )
    .map_err(Error::arrow("projecting columns"))
}

/// Reads and checks a file's deletion vector.
pub(crate) async fn load_deletion_vector(
    location: &StoreLocation,
    dv: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let (path, offset) = match dv.location()? {
        DvLocation::Inline(data) => return decode_bitmap(&data, dv),
        DvLocation::Relative { path, offset } => (dv_store_path(location.root(), &path)?, offset),
        DvLocation::Absolute { url, offset } => (paths::resolve(location, &url)?, offset),
    };
    let size = u64::try_from(dv.size_in_bytes).unwrap_or(0);
    let record = location
        .store()
        .get_range(&path, offset..offset + size + 8)
        .await
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } | object_store::Error::Generic { .. } => {
                Error::InvalidDeletionVector {
                    location: dv.describe(),
                    reason: format!("cannot read {path}: {e}"),
                }
            }
            other => Error::store("get", &path)(other),
        })?;
    let data = verify_record(&record, dv)?;
    decode_bitmap(&data, dv)
}

/// The rows to read of the kept row groups (each `(first row, rows)` in file order),
/// skipping those the deletion vector marks.
fn deletion_selection(deleted: &RoaringTreemap, kept: &[(u64, u64)]) -> RowSelection {
    let mut selectors = Vec::new();
    let mut rows_deleted = deleted.iter().peekable();
    for &(start, rows) in kept {
        let end = start + rows;
        let mut position = start;
        while let Some(row) = rows_deleted.next_if(|r| *r < end) {
            if row < start {
                continue;
            }
            if row > position {
                selectors.push(RowSelector::select((row - position) as usize));
            }
            selectors.push(RowSelector::skip(1));
            position = row + 1;
        }
        if end > position {
            selectors.push(RowSelector::select((end - position) as usize));
        }
    }
    RowSelection::from(selectors)
}

/// Row-group statistics of the predicate's top-level columns in one file.
struct RowGroupStats<'a> {
    mins: HashMap<ColumnName, ArrayRef>,
    maxes: HashMap<ColumnName, ArrayRef>,
    nulls: HashMap<ColumnName, arrow::array::UInt64Array>,
    rows: Vec<u64>,
    columns: &'a HashMap<ColumnName, ColumnInfo>,
    partitions: &'a HashMap<ColumnName, Scalar>,
}

impl<'a> RowGroupStats<'a> {
    fn new(
        ctx: &'a ScanContext,
        file_schema: &Schema,
        metadata: &parquet::file::metadata::ParquetMetaData,
        partitions: &'a HashMap<ColumnName, Scalar>,
    ) -> Self {
        let descr = metadata.file_metadata().schema_descr();
        let mut stats = Self {
            mins: HashMap::new(),
            maxes: HashMap::new(),
            nulls: HashMap::new(),
            rows: metadata
                .row_groups()
                .iter()
                .map(|rg| rg.num_rows() as u64)
                .collect(),
            columns: &ctx.columns,
            partitions,
        };
        for (column, info) in &ctx.columns {
            // Row-group statistics are read for top-level columns only.
            let [physical] = info.physical.as_slice() else {
                continue;
            };
            let Ok(converter) = StatisticsConverter::try_new(physical, file_schema, descr) else {
                continue;
            };
            // INT96 statistics are not ordered by time in files written by Spark.
            if converter
                .parquet_column_index()
                .is_some_and(|i| descr.column(i).physical_type() == PhysicalType::INT96)
            {
                continue;
            }
            let groups = metadata.row_groups().iter();
            if let Ok(mins) = converter.row_group_mins(groups.clone()) {
                stats.mins.insert(column.clone(), mins);
            }
            if let Ok(maxes) = converter.row_group_maxes(groups.clone()) {
                stats.maxes.insert(column.clone(), maxes);
            }
            if let Ok(nulls) = converter.row_group_null_counts(groups) {
                stats.nulls.insert(column.clone(), nulls);
            }
        }
        stats
    }

    fn at(&self, row_group: usize) -> RowGroupView<'_> {
        RowGroupView {
            stats: self,
            row_group,
        }
    }
}

struct RowGroupView<'a> {
    stats: &'a RowGroupStats<'a>,
    row_group: usize,
}

impl RowGroupView<'_> {
    fn bound(&self, column: &ColumnName, arrays: &HashMap<ColumnName, ArrayRef>) -> Option<Scalar> {
        if let Some(v) = self.stats.partitions.get(column) {
            return Some(v.clone());
        }
        let info = self.stats.columns.get(column)?;
        let array = arrays.get(column)?;
        Scalar::from_array(array.as_ref(), self.row_group, info.ty).filter(|v| !v.is_null())
    }
}

impl StatsView for RowGroupView<'_> {
    fn min(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, &self.stats.mins)
    }

    fn max(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, &self.stats.maxes)
    }

    fn null_count(&self, column: &ColumnName) -> Option<u64> {
        if let Some(v) = self.stats.partitions.get(column) {
            return if v.is_null() {
                self.row_count()
            } else {
                Some(0)
            };
        }
        let nulls = self.stats.nulls.get(column)?;
        (!nulls.is_null(self.row_group)).then(|| nulls.value(self.row_group))
    }

    fn row_count(&self) -> Option<u64> {
        self.stats.rows.get(self.row_group).copied()
    }

    fn all_null(&self, column: &ColumnName) -> bool {
        match self.stats.partitions.get(column) {
            Some(v) => v.is_null(),
            None => {
                matches!((self.null_count(column), self.row_count()), (Some(n), Some(r)) if n == r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_vectors_become_row_selections_over_kept_row_groups() {
        let deleted: RoaringTreemap = [0u64, 7, 14, 25].into_iter().collect();
        // Row groups of 10 rows; the second one (rows 10..20) is pruned.
        let selection = deletion_selection(&deleted, &[(0, 10), (20, 10)]);
        let selectors: Vec<RowSelector> = selection.into();
        assert_eq!(
            selectors,
            vec![
                RowSelector::skip(1),
                RowSelector::select(6),
                RowSelector::skip(1),
                RowSelector::select(2),
                RowSelector::select(5),
                RowSelector::skip(1),
                RowSelector::select(4),
            ]
            .into_iter()
            .fold(Vec::new(), |mut acc: Vec<RowSelector>, s| {
                // RowSelection merges adjacent selectors of the same kind.
                match acc.last_mut() {
                    Some(last) if last.skip == s.skip => last.row_count += s.row_count,
                    _ => acc.push(s),
                }
                acc
            })
        );
    }
}
