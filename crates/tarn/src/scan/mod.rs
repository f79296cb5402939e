//! Scans: projection and a predicate over a snapshot, as a stream of Arrow batches.
//!
//! Pruning happens in order: partition values, then file statistics (both in
//! [`Scan::plan`], without IO), then Parquet row-group statistics and the page index when
//! a file is opened. Deletion vectors become row selections; the predicate runs in the
//! decoder on its own columns before the others decode (late materialisation), and again
//! on the rows read. Files are read concurrently.

mod assemble;
mod count;
mod file;
mod late;
mod min_max;
mod pages;
mod parts;
mod plan_stats;
mod predicates;
mod row_groups;
mod row_ids;
mod summary;
mod views;

use assemble::assemble;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

pub use count::CountOutcome;
pub(crate) use file::{
    FileRows, load_deletion_vector_of, read_file_rows, read_file_rows_of, shares_of, stream_file,
};
pub use min_max::MinMaxOutcome;
pub use parts::PartFile;
pub(crate) use predicates::{bind_predicate, first_file_matching, names_partitions_only};
pub(crate) use row_ids::{StableIds, with_columns as with_row_ids};
pub use summary::ColumnStatistics;

use crate::error::{Error, Result};
use crate::expr::{ColumnName, Expr, Scalar, may_match};
use crate::index::{IndexUse, select_rows, table_indices};
use crate::protocol::{Add, StructField};
use crate::snapshot::Snapshot;
use crate::stats::{ColumnInfo, FileStatsView, column_infos};
use plan_stats::{
    PARALLEL_FILES, PlanStats, file_partition_values, partition_values_of, plan_stats,
};
use roaring::RoaringTreemap;
use views::as_view;

/// A stream of record batches.
pub type RecordBatchStream = BoxStream<'static, Result<RecordBatch>>;

/// Default rows per batch.
pub const DEFAULT_BATCH_SIZE: usize = 8192;
/// Fewest files read at once (unless a scan asks for fewer).
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Most files read at once by default.
pub const MAX_CONCURRENCY: usize = 128;
/// Bytes of data files a scan keeps in flight by default (their sizes on storage).
pub const IN_FLIGHT_BYTES: u64 = 256 * 1024 * 1024;
/// Files read at once when an index selected their rows.
const INDEXED_CONCURRENCY: usize = 64;

/// A scan of one snapshot: which columns, which rows. Build with [`Snapshot::scan`] or
/// `Table::scan`.
#[derive(Debug, Clone)]
#[must_use]
pub struct Scan {
    snapshot: Snapshot,
    columns: Option<Vec<String>>,
    predicate: Option<Expr>,
    batch_size: usize,
    /// Files read at once; `None` sizes it to the files.
    concurrency: Option<usize>,
    /// At most this many rows.
    limit: Option<usize>,
    use_indices: bool,
    /// Columns outside the table's schema read after its columns (row tracking's
    /// materialized row ids, a change file's change type), null where a file lacks them.
    hidden: Vec<StructField>,
    /// Whether `hidden` are the materialized row ids, which whole-file reads turn into
    /// the rows' stable ids ([`FileRows::ids`]).
    row_ids: bool,
    /// Whether top-level string and binary columns come back as views.
    views: bool,
}

/// A file's partition values parsed to their columns' types, shared by the plan and the
/// file's reads.
pub(crate) type ParsedPartitions = Arc<HashMap<ColumnName, Scalar>>;

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
    /// Files skipped because an index found no matching row in them.
    pub skipped_by_index: usize,
    /// The indices that answered parts of the predicate, and what they found.
    pub indices: Vec<IndexUse>,
    /// The schema of the batches the scan returns.
    pub schema: SchemaRef,
    /// For files an index covers (by canonical path): the rows that may match.
    pub(crate) rows: HashMap<String, RoaringTreemap>,
    /// Whether indices answered the whole predicate for every file planned.
    pub(crate) exact: bool,
    /// Each planned file's parsed partition values, in [`files`](Self::files) order, with
    /// the file they were parsed for: a part whose file differs (`files` is public, and
    /// may have been changed) parses its own.
    pub(crate) partitions: Vec<(Arc<Add>, ParsedPartitions)>,
}

impl ScanPlan {
    /// This plan with only the files `keep` allows (given each file's position in
    /// [`files`](Self::files)), for an engine that skips files at run time; what the
    /// plan knows of the rest (index lookups) is kept.
    pub fn with_files_where(&self, mut keep: impl FnMut(usize, &Add) -> bool) -> ScanPlan {
        let kept: Vec<usize> = (0..self.files.len())
            .filter(|i| keep(*i, &self.files[*i]))
            .collect();
        ScanPlan {
            files: kept.iter().map(|i| self.files[*i].clone()).collect(),
            partitions: kept
                .iter()
                .filter_map(|i| self.partitions.get(*i).cloned())
                .collect(),
            total_files: self.total_files,
            skipped_by_partition: self.skipped_by_partition,
            skipped_by_stats: self.skipped_by_stats,
            skipped_by_index: self.skipped_by_index,
            indices: self.indices.clone(),
            schema: Arc::clone(&self.schema),
            rows: self.rows.clone(),
            exact: self.exact,
        }
    }

    /// The parsed partition values planning found for the `index`-th planned file, when
    /// that is still `add`.
    pub(crate) fn partitions_of(&self, index: usize, add: &Add) -> Option<ParsedPartitions> {
        let (planned, values) = self.partitions.get(index)?;
        (planned.path == add.path && planned.partition_values == add.partition_values)
            .then(|| Arc::clone(values))
    }

    /// The rows of a planned file an index allows (deleted rows included), when an index
    /// covers it.
    pub(crate) fn rows_of(&self, snapshot: &Snapshot, add: &Add) -> Option<&RoaringTreemap> {
        // Most plans have no index rows: skip building the file's canonical path.
        if self.rows.is_empty() {
            return None;
        }
        self.rows
            .get(&crate::paths::canonical(snapshot.location(), &add.path))
    }
}

impl Snapshot {
    /// A scan of this snapshot: all columns, all rows, until narrowed.
    pub fn scan(&self) -> Scan {
        Scan {
            snapshot: self.clone(),
            columns: None,
            predicate: None,
            batch_size: DEFAULT_BATCH_SIZE,
            concurrency: None,
            limit: None,
            use_indices: true,
            hidden: Vec::new(),
            row_ids: false,
            views: false,
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

    /// Files read at once. By default as many as fit [`IN_FLIGHT_BYTES`] of the planned
    /// files' sizes, from [`DEFAULT_CONCURRENCY`] up to [`MAX_CONCURRENCY`]: many small
    /// files on an object store then take a few round trips, not one per batch of 8.
    pub fn with_concurrency(mut self, files: usize) -> Self {
        self.concurrency = Some(files.max(1));
        self
    }

    /// Returns at most `rows` rows (`LIMIT`). Without a predicate, planning stops at
    /// the first files whose row counts in the log cover the limit, and only those are
    /// read; with one, reading stops once the limit is reached.
    pub fn with_limit(mut self, rows: usize) -> Self {
        self.limit = Some(rows);
        self
    }

    /// Files read at once for these planned files.
    /// Files of `plan` to keep in flight while reading `files`. Rows an index selected
    /// are a few pages per file: more files are kept in flight, so the reads take one
    /// round trip rather than one per batch of files.
    fn concurrency_of(&self, files: &[PlannedFile], plan: &ScanPlan) -> usize {
        match plan.rows.is_empty() {
            true => self.concurrency_for(files),
            false => self.concurrency_for(files).max(INDEXED_CONCURRENCY),
        }
    }

    fn concurrency_for(&self, files: &[PlannedFile]) -> usize {
        if let Some(n) = self.concurrency {
            return n;
        }
        let bytes: u64 = files.iter().map(|f| f.add.size.max(1) as u64).sum();
        let average = bytes / files.len().max(1) as u64;
        ((IN_FLIGHT_BYTES / average.max(1)) as usize).clamp(DEFAULT_CONCURRENCY, MAX_CONCURRENCY)
    }

    /// Returns the table's top-level string and binary columns as `Utf8View` and
    /// `BinaryView` (default no), decoded straight into views as DataFusion reads them:
    /// no offsets to build and no bytes to copy for short values, so a scan of a string
    /// column decodes in about half the time. A batch whose values are all inline (12
    /// bytes or fewer) holds no decoded pages. Nested strings keep their types.
    pub fn with_string_views(mut self, views: bool) -> Self {
        self.views = views;
        self
    }

    /// Whether the table's indices narrow the files and rows read (default yes). The rows
    /// returned are the same either way.
    pub fn with_indices(mut self, use_indices: bool) -> Self {
        self.use_indices = use_indices;
        self
    }

    /// Also reads `hidden`, columns outside the table's schema, by name after the
    /// table's columns (null where a file lacks them).
    pub(crate) fn with_hidden(mut self, hidden: Vec<StructField>) -> Self {
        self.hidden = hidden;
        self.row_ids = false;
        self
    }

    /// Also reads the materialized row-id columns `fields` (none: the table keeps no
    /// ids), so whole-file reads give each row's stable id ([`FileRows::ids`]).
    pub(crate) fn with_row_ids(mut self, fields: Vec<StructField>) -> Self {
        self.row_ids = !fields.is_empty();
        self.hidden = fields;
        self
    }

    fn context(&self) -> Result<ScanContext> {
        let mut ctx = self.table_context()?;
        if !self.hidden.is_empty() {
            ctx.read_fields.extend(self.hidden.iter().cloned());
            let extra: Vec<arrow::datatypes::FieldRef> = self
                .hidden
                .iter()
                .map(|f| {
                    Arc::new(arrow::datatypes::Field::new(
                        &f.name,
                        f.data_type.to_arrow(),
                        true,
                    ))
                })
                .collect();
            let widen = |schema: &SchemaRef| {
                let fields: Vec<_> = schema
                    .fields()
                    .iter()
                    .cloned()
                    .chain(extra.clone())
                    .collect();
                Arc::new(Schema::new(fields))
            };
            ctx.read_schema = widen(&ctx.read_schema);
            ctx.output_schema = widen(&ctx.output_schema);
            ctx.output
                .extend(self.hidden.iter().map(|f| f.name.clone()));
        }
        Ok(ctx)
    }

    fn table_context(&self) -> Result<ScanContext> {
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
            .map(|p| bind_predicate(snapshot, p))
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
        // Columns the predicate reads are decoded as the evaluator takes them, and made
        // views after filtering.
        let in_predicate = |name: &str| {
            predicate
                .as_ref()
                .is_some_and(|p| p.columns().iter().any(|c| c.root() == name))
        };
        let field_of = |name: &str, view: bool| {
            full.field_with_name(name).ok().map(|f| match view {
                true => as_view(f),
                false => f.clone(),
            })
        };
        let output_schema = Arc::new(Schema::new(
            output
                .iter()
                .filter_map(|name| field_of(name, self.views))
                .collect::<Vec<_>>(),
        ));
        let read_schema = Arc::new(Schema::new(
            read_fields
                .iter()
                .filter_map(|f| field_of(&f.name, self.views && !in_predicate(&f.name)))
                .collect::<Vec<_>>(),
        ));
        // The predicate's columns on their own, for the decoder-side filter.
        let (filter_fields, filter_schema): (Vec<StructField>, Vec<_>) = read_fields
            .iter()
            .zip(read_schema.fields())
            .filter(|(f, _)| in_predicate(&f.name))
            .map(|(f, read)| (f.clone(), Arc::clone(read)))
            .unzip();
        Ok(ScanContext {
            snapshot: snapshot.clone(),
            predicate,
            columns,
            read_fields,
            read_schema,
            filter_fields,
            filter_schema: Arc::new(Schema::new(filter_schema)),
            output,
            output_schema,
            batch_size: self.batch_size,
        })
    }

    /// Plans the scan: checks the projection and predicate against the schema, prunes
    /// files by partition values and statistics (no IO), then asks the table's indices
    /// for the parts of the predicate they cover (reading only their lookups and the
    /// pages or bitmaps that may match).
    ///
    /// Fails with [`Error::UnknownColumn`] or [`Error::TypeMismatch`] for a projection or
    /// predicate that does not fit the schema, [`Error::InvalidPartitionValue`] when a
    /// file's partition value does not parse as its column's type,
    /// [`Error::TextMatchWithoutIndex`] for `text_match` on a column with no full-text
    /// index, and [`Error::Index`] / [`Error::UnsupportedIndexFormat`] when an index it
    /// would use cannot be read (`use_indices(false)` avoids them).
    pub async fn plan(&self) -> Result<ScanPlan> {
        let ctx = Arc::new(self.context()?);
        let (files, plan) = self.plan_files(&ctx).await?;
        Ok(ScanPlan {
            files: files.iter().map(|f| Add::clone(&f.add)).collect(),
            partitions: files.into_iter().map(|f| (f.add, f.partitions)).collect(),
            ..plan
        })
    }

    async fn plan_files(&self, ctx: &Arc<ScanContext>) -> Result<(Vec<PlannedFile>, ScanPlan)> {
        let (mut files, by_partition, by_stats) = match (self.limit, &ctx.predicate) {
            (Some(limit), None) => (ctx.first_files(limit)?, 0, 0),
            (None, None) => (ctx.all_files().await?, 0, 0),
            (_, Some(_)) => {
                let stats = plan_stats(&ctx.snapshot, &ctx.columns).await?;
                if ctx.snapshot.file_count() < PARALLEL_FILES {
                    ctx.prune_files(&stats)?
                } else {
                    let ctx = Arc::clone(ctx);
                    crate::tasks::blocking("pruning files", move || ctx.prune_files(&stats)).await?
                }
            }
        };
        let mut plan = ScanPlan {
            files: Vec::new(),
            total_files: self.snapshot.file_count(),
            skipped_by_partition: by_partition,
            skipped_by_stats: by_stats,
            skipped_by_index: 0,
            indices: Vec::new(),
            schema: Arc::clone(&ctx.output_schema),
            rows: HashMap::new(),
            exact: false,
            partitions: Vec::new(),
        };
        let Some(predicate) = ctx.predicate.as_ref().filter(|_| self.use_indices) else {
            return Ok((files, plan));
        };
        let indices = table_indices(&self.snapshot)?;
        let location = self.snapshot.location();
        let candidates: Vec<String> = files
            .iter()
            .map(|f| crate::paths::canonical(location, &f.add.path))
            .collect();
        let Some(selection) = select_rows(&self.snapshot, &indices, predicate, &candidates).await?
        else {
            return Ok((files, plan));
        };
        let before = files.len();
        files = files
            .into_iter()
            .zip(candidates)
            .filter_map(|(mut file, path)| match selection.rows.get(&path) {
                Some(rows) if rows.is_empty() => None,
                Some(rows) => {
                    file.rows = Some(rows.clone());
                    Some(file)
                }
                None => Some(file),
            })
            .collect();
        plan.skipped_by_index = before - files.len();
        plan.indices = selection.uses;
        plan.rows = selection.rows;
        plan.exact = selection.exact;
        Ok((files, plan))
    }

    /// Runs the scan: a stream of batches in the output schema. Batches of different
    /// files arrive in no particular order.
    ///
    /// Fails as [`plan`](Self::plan) does; the stream then yields typed errors for files
    /// that cannot be read ([`Error::Parquet`], [`Error::DataFileNotFound`],
    /// [`Error::InvalidDeletionVector`], [`Error::InvalidPath`], [`Error::Store`]).
    pub async fn execute(self) -> Result<RecordBatchStream> {
        let ctx = Arc::new(self.context()?);
        let (files, plan) = self.plan_files(&ctx).await?;
        let concurrency = self.concurrency_of(&files, &plan);
        Ok(self.read_files(ctx, files, concurrency, crate::tasks::cores()))
    }

    /// Reads the planned `files`, `concurrency` at once, on `cores` cores: each file's
    /// row groups in as many runs as `file::shares_of` gives it, up to the scan's limit.
    fn read_files(
        &self,
        ctx: Arc<ScanContext>,
        files: Vec<PlannedFile>,
        concurrency: usize,
        cores: usize,
    ) -> RecordBatchStream {
        let shares = file::shares_of(files.iter().map(|f| f.add.as_ref()), cores);
        // Each file decodes on a task of its own: files in flight use every core; with
        // fewer files than cores, or one file much larger than the others, a file's row
        // groups decode in several runs at once. With one core to this stream (a part of
        // a scan an engine runs on each core), a task would run on no other core: the
        // file decodes where the stream is polled, saving a task, a channel and a
        // wake-up per file. Reads that wait (a cloud store's) still overlap with the
        // other files' in flight; a panic is the file's error, as a task's would be.
        let spawn = cores > 1;
        let stream = futures::stream::iter(files.into_iter().zip(shares))
            .map(move |(file, shares)| {
                let add = Arc::clone(&file.add);
                let read = file::read_file(Arc::clone(&ctx), file, shares);
                match spawn || shares > 1 {
                    true => crate::tasks::spawn_stream("reading a data file", read),
                    false => {
                        std::panic::AssertUnwindSafe(futures::stream::once(read).try_flatten())
                            .catch_unwind()
                            .map(move |item| {
                                item.unwrap_or_else(|panic| {
                                    Err(Error::Parquet {
                                        path: add.path.clone(),
                                        source: crate::reader::decoder_panic(&panic),
                                    })
                                })
                            })
                            .boxed()
                    }
                }
            })
            .flatten_unordered(concurrency)
            .boxed();
        match self.limit {
            Some(limit) => limited(stream, limit),
            None => stream,
        }
    }

    /// Runs the scan and collects every batch.
    pub async fn collect(self) -> Result<Vec<RecordBatch>> {
        self.execute().await?.try_collect().await
    }
}

/// A file chosen by planning, with its parsed partition values and, when an index
/// covers it, the rows that may match.
struct PlannedFile {
    add: Arc<Add>,
    partitions: ParsedPartitions,
    rows: Option<RoaringTreemap>,
    /// For a file split between a scan's parts: the part of its extent
    /// ([`parts::extent`]) this read covers, as `[from, to)`. Only the row groups whose
    /// middle falls in it are read, each row group's place on the extent being in
    /// proportion to its compressed bytes.
    span: Option<(u64, u64)>,
}

struct ScanContext {
    snapshot: Snapshot,
    predicate: Option<Expr>,
    columns: HashMap<ColumnName, ColumnInfo>,
    read_fields: Vec<StructField>,
    read_schema: SchemaRef,
    /// The predicate's columns of `read_fields`, and their types in `read_schema`.
    filter_fields: Vec<StructField>,
    filter_schema: SchemaRef,
    output: Vec<String>,
    output_schema: SchemaRef,
    batch_size: usize,
}

impl ScanContext {
    fn partition_values(&self, add: &Add) -> Result<HashMap<ColumnName, Scalar>> {
        file_partition_values(&self.snapshot, add)
    }

    /// The first live files whose live row counts in the log (`numRecords` minus
    /// deletion vectors; a file without one counts as none) reach `limit`: what a
    /// `LIMIT` without a predicate reads, planned without looking at the other files.
    fn first_files(&self, limit: usize) -> Result<Vec<PlannedFile>> {
        let mut files = Vec::new();
        let mut rows = 0u64;
        for add in self.snapshot.shared_files() {
            if rows >= limit as u64 {
                break;
            }
            rows += crate::stats::live_rows(add).unwrap_or(0);
            files.push(PlannedFile {
                partitions: Arc::new(self.partition_values(add)?),
                add: Arc::clone(add),
                rows: None,
                span: None,
            });
        }
        Ok(files)
    }

    /// Every live file: what a scan without a predicate or a limit reads. Partition
    /// values come parsed once per version.
    async fn all_files(&self) -> Result<Vec<PlannedFile>> {
        let partitions = partition_values_of(&self.snapshot).await?;
        self.snapshot
            .shared_files()
            .enumerate()
            .map(|(i, add)| {
                Ok(PlannedFile {
                    add: Arc::clone(add),
                    // Parsed per version for these files; parsed here if that ever differs.
                    partitions: match partitions.get(i) {
                        Some(parsed) => Arc::clone(parsed),
                        None => Arc::new(self.partition_values(add)?),
                    },
                    rows: None,
                    span: None,
                })
            })
            .collect()
    }

    /// The files to read, and how many partition values and statistics ruled out, from the
    /// statistics of every file (`stats`, in [`Snapshot::files`] order).
    /// Runs on every core for large tables.
    fn prune_files(&self, stats: &PlanStats) -> Result<(Vec<PlannedFile>, usize, usize)> {
        let indexed: Vec<(usize, &Arc<Add>)> = self.snapshot.shared_files().enumerate().collect();
        let runs =
            crate::tasks::on_cores(&indexed, PARALLEL_FILES, |run| self.prune_run(run, stats));
        let (mut files, mut by_partition, mut by_stats) = (Vec::new(), 0, 0);
        for run in runs {
            let (kept, partition, stat) = run?;
            files.extend(kept);
            by_partition += partition;
            by_stats += stat;
        }
        Ok((files, by_partition, by_stats))
    }

    /// [`Self::prune_files`] over some of the files, given with their indices.
    fn prune_run(
        &self,
        run: &[(usize, &Arc<Add>)],
        stats: &PlanStats,
    ) -> Result<(Vec<PlannedFile>, usize, usize)> {
        let mut files = Vec::new();
        let (mut by_partition, mut by_stats) = (0, 0);
        let no_columns = HashMap::new();
        for &(i, add) in run {
            let Some(partitions) = stats.partitions.get(i) else {
                // Statistics of another file list (cannot happen: they are per version):
                // keep the file rather than risk dropping rows.
                files.push(PlannedFile {
                    partitions: Arc::new(self.partition_values(add)?),
                    add: Arc::clone(add),
                    rows: None,
                    span: None,
                });
                continue;
            };
            if let Some(p) = &self.predicate {
                let partition_only = FileStatsView {
                    stats: None,
                    columns: &no_columns,
                    partitions,
                };
                if !partitions.is_empty() && !may_match(p, &partition_only) {
                    by_partition += 1;
                    continue;
                }
                if !may_match(p, &stats.view(i)) {
                    by_stats += 1;
                    continue;
                }
            }
            files.push(PlannedFile {
                add: Arc::clone(add),
                partitions: Arc::clone(partitions),
                rows: None,
                span: None,
            });
        }
        Ok((files, by_partition, by_stats))
    }
}

/// The first `limit` rows of `stream`; it is dropped (its reads stopped) once they are
/// out.
fn limited(stream: RecordBatchStream, limit: usize) -> RecordBatchStream {
    futures::stream::unfold((stream, limit), |(mut stream, left)| async move {
        if left == 0 {
            return None;
        }
        match stream.next().await? {
            Ok(batch) => {
                let rows = batch.num_rows().min(left);
                Some((Ok(batch.slice(0, rows)), (stream, left - rows)))
            }
            Err(e) => Some((Err(e), (stream, 0))),
        }
    })
    // Fused: a consumer that asks again after the end gets the end again.
    .fuse()
    .boxed()
}
