//! A MERGE source given as a stream: held in memory while it fits the merge's memory
//! limit, else spilled to local Arrow IPC files and cut into key ranges, each about the
//! size of the limit, that the merge then matches one at a time.
//!
//! Spilling takes two passes over local disk: the stream goes to one file while a
//! reservoir sample of its (row-encoded) keys is kept; the sample's quantiles cut the key
//! space into ranges; the file is then read back and each row goes to its range's file.
//! Row-encoded keys sort as the keys do, so a range is a run of keys and every row with a
//! given key lands in the same range (rows with a null key, which match nothing, go to
//! the first).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
// The stream format, not the file format: it takes a new dictionary in every batch, as
// sources read from Parquet or another engine bring.
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::row::{RowConverter, Rows, SortField};
use futures::StreamExt;

use crate::conform::{Source, conform};
use crate::error::{Error, Result};
use crate::protocol::StructField;
use crate::snapshot::Snapshot;
use crate::write::{BatchStream, SpillDir, arrow_spill_error, spill_error};

/// Keys kept in the reservoir sample the ranges are cut from.
const SAMPLE_SIZE: usize = 64 * 1024;

/// The share of the memory limit a range's source rows take (one in this many bytes):
/// matching a range also holds its hash table, the target rows it matches and the rows
/// it writes.
const RANGE_SHARE: usize = 4;

/// Most ranges a source is cut into, each an open file while the source is cut: a source
/// larger than this many ranges of the limit's share gets larger ranges.
const MAX_RANGES: usize = 512;

/// The source of a merge, gathered.
pub(super) enum Gathered {
    /// It fitted the limit: all of it.
    InMemory(Vec<RecordBatch>),
    /// It did not: spilled, in key ranges.
    Ranges(SpilledRanges),
}

/// Row-encodes a merge source's keys, converted to the target's key types.
#[derive(Clone)]
pub(super) struct KeyEncoder {
    /// (source column, target field) per key.
    keys: Vec<(String, StructField)>,
    converter: Arc<RowConverter>,
}

impl KeyEncoder {
    /// The encoder of `keys` ((target column, source column) pairs).
    ///
    /// Fails with [`Error::UnknownColumn`] for a key the target lacks.
    pub(super) fn new(snapshot: &Snapshot, keys: &[(String, String)]) -> Result<Self> {
        let target = snapshot.schema();
        let keys = keys
            .iter()
            .map(|(t, s)| {
                let field = target.field(t).ok_or_else(|| Error::UnknownColumn {
                    column: t.clone(),
                    available: target.field_names(),
                })?;
                Ok((s.clone(), field.clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        let fields = keys
            .iter()
            .map(|(_, f)| SortField::new(f.data_type.to_arrow()))
            .collect();
        let converter = RowConverter::new(fields).map_err(Error::arrow("preparing merge keys"))?;
        Ok(Self {
            keys,
            converter: Arc::new(converter),
        })
    }

    /// An empty source of just the key columns, in the target's types: what a source
    /// stream that brought no batch stands for.
    pub(super) fn empty_source(&self) -> RecordBatch {
        let fields: Vec<arrow::datatypes::Field> = self
            .keys
            .iter()
            .map(|(s, f)| arrow::datatypes::Field::new(s, f.data_type.to_arrow(), true))
            .collect();
        RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::new(fields)))
    }

    /// The batch's keys, row-encoded, and per row whether any key is null.
    ///
    /// Fails with [`Error::SchemaMismatch`] when the batch lacks a key column or its
    /// values do not convert to the target's type.
    fn encode(&self, batch: &RecordBatch) -> Result<(Rows, Vec<bool>)> {
        let columns = self
            .keys
            .iter()
            .map(|(s, field)| {
                let column = batch
                    .column_by_name(s)
                    .ok_or_else(|| Error::SchemaMismatch {
                        reason: format!("the source has no key column {s:?}"),
                    })?;
                conform(column, field, Source::Input)
                    .map_err(|reason| Error::SchemaMismatch { reason })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let nulls = (0..batch.num_rows())
            .map(|i| columns.iter().any(|c| c.is_null(i)))
            .collect();
        let rows = self
            .converter
            .convert_columns(&columns)
            .map_err(Error::arrow("encoding merge keys"))?;
        Ok((rows, nulls))
    }
}

fn spill_arrow_error(path: &Path) -> impl FnOnce(arrow::error::ArrowError) -> Error + '_ {
    arrow_spill_error(path, "the merge source")
}

/// The spilled source, one IPC file per key range, in key order.
pub(super) struct SpilledRanges {
    dir: SpillDir,
    ranges: usize,
    schema: SchemaRef,
}

impl SpilledRanges {
    /// How many ranges there are.
    pub(super) fn len(&self) -> usize {
        self.ranges
    }

    /// The source's schema.
    pub(super) fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The source rows of range `index`, read back from disk.
    ///
    /// Fails with [`Error::Spill`] when its file cannot be read.
    pub(super) async fn read(&self, index: usize) -> Result<Vec<RecordBatch>> {
        let path = self.dir.file(&format!("range-{index}.arrow"));
        crate::tasks::blocking("reading a merge spill file", move || {
            // A range no row fell into has no file.
            if !path.exists() {
                return Ok(Vec::new());
            }
            let file = File::open(&path).map_err(spill_error(&path))?;
            let reader = StreamReader::try_new(BufReader::new(file), None)
                .map_err(spill_arrow_error(&path))?;
            reader
                .map(|b| b.map_err(spill_arrow_error(&path)))
                .collect()
        })
        .await
    }

    /// Removes the spill files, off the async threads.
    pub(super) async fn remove(self) {
        let _ = crate::tasks::blocking("removing merge spill files", move || {
            drop(self);
            Ok(())
        })
        .await;
    }
}

/// Reads `stream` whole when its batches fit in a [`RANGE_SHARE`] of `limit` bytes; else
/// spills it under `parent` and cuts it into ranges of about that size each.
///
/// Fails with the stream's error, [`Error::Spill`] when local disk fails, and
/// [`Error::SchemaMismatch`] for batches that differ in schema or lack a key.
pub(super) async fn gather(
    mut stream: BatchStream,
    encoder: &KeyEncoder,
    limit: usize,
    parent: &Path,
) -> Result<Gathered> {
    let limit = (limit / RANGE_SHARE).max(1);
    let mut held = Vec::new();
    let mut bytes = 0usize;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        bytes += batch.get_array_memory_size();
        held.push(batch);
        if bytes > limit {
            break;
        }
    }
    if bytes <= limit {
        return Ok(Gathered::InMemory(held));
    }
    let (parent, schema, encoder) = (parent.to_path_buf(), held[0].schema(), encoder.clone());
    let mut spiller = crate::tasks::blocking("starting a merge spill", move || {
        Spiller::start(SpillDir::new(&parent, "tarn-merge")?, schema, encoder)
    })
    .await?;
    for batch in held {
        spiller = spiller.push(batch).await?;
    }
    while let Some(batch) = stream.next().await {
        match batch {
            Ok(batch) => spiller = spiller.push(batch).await?,
            Err(e) => {
                // The spill is removed off the async threads.
                let _ = crate::tasks::blocking("removing a merge spill", move || {
                    drop(spiller);
                    Ok(())
                })
                .await;
                return Err(e);
            }
        }
    }
    let ranges = (spiller.total_bytes.div_ceil(limit as u64) as usize).clamp(2, MAX_RANGES);
    let spilled = crate::tasks::blocking("cutting a merge source into key ranges", move || {
        spiller.cut(ranges)
    })
    .await?;
    Ok(Gathered::Ranges(spilled))
}

/// The first pass: the stream to one file, with a sample of its keys.
struct Spiller {
    dir: SpillDir,
    path: PathBuf,
    writer: StreamWriter<BufWriter<File>>,
    schema: SchemaRef,
    encoder: KeyEncoder,
    /// Reservoir sample of non-null row-encoded keys.
    sample: Vec<Vec<u8>>,
    seen: u64,
    random: u64,
    total_bytes: u64,
}

impl Spiller {
    fn start(dir: SpillDir, schema: SchemaRef, encoder: KeyEncoder) -> Result<Self> {
        let path = dir.file("source.arrow");
        let file = File::create(&path).map_err(spill_error(&path))?;
        let writer = StreamWriter::try_new(BufWriter::new(file), &schema)
            .map_err(spill_arrow_error(&path))?;
        Ok(Self {
            dir,
            path,
            writer,
            schema,
            encoder,
            sample: Vec::new(),
            seen: 0,
            random: 0x2545_F491_4F6C_DD1D,
            total_bytes: 0,
        })
    }

    /// Spills `batch` and samples its keys, off the async threads.
    async fn push(self, batch: RecordBatch) -> Result<Self> {
        crate::tasks::blocking("spilling a merge source", move || {
            let mut this = self;
            this.push_blocking(&batch)?;
            Ok(this)
        })
        .await
    }

    fn push_blocking(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.schema().fields() != self.schema.fields() {
            return Err(Error::SchemaMismatch {
                reason: format!(
                    "the merge source's batches differ in schema: {:?} after {:?}",
                    batch.schema().fields(),
                    self.schema.fields()
                ),
            });
        }
        let (rows, nulls) = self.encoder.encode(batch)?;
        for (i, null) in nulls.iter().enumerate() {
            if *null {
                continue;
            }
            self.seen += 1;
            if self.sample.len() < SAMPLE_SIZE {
                self.sample.push(rows.row(i).as_ref().to_vec());
            } else {
                // Algorithm R: keep the new key with probability SAMPLE_SIZE / seen.
                let slot = self.next_random() % self.seen;
                if (slot as usize) < SAMPLE_SIZE {
                    self.sample[slot as usize] = rows.row(i).as_ref().to_vec();
                }
            }
        }
        self.total_bytes += batch.get_array_memory_size() as u64;
        self.writer
            .write(batch)
            .map_err(spill_arrow_error(&self.path))
    }

    /// xorshift64: the sample needs spread, not secrecy.
    fn next_random(&mut self) -> u64 {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x
    }

    /// The second pass: every spilled row to the file of its key's range.
    fn cut(mut self, ranges: usize) -> Result<SpilledRanges> {
        self.writer
            .finish()
            .map_err(spill_arrow_error(&self.path))?;
        let mut sample = std::mem::take(&mut self.sample);
        sample.sort_unstable();
        // Upper bounds of the ranges but the last: a key goes to the first range whose
        // bound exceeds it. Repeated bounds (a key most rows share) make one range.
        let mut bounds: Vec<Vec<u8>> = (1..ranges)
            .filter(|_| !sample.is_empty())
            .map(|r| sample[(r * sample.len() / ranges).min(sample.len() - 1)].clone())
            .collect();
        bounds.dedup();
        let ranges = bounds.len() + 1;
        let file = File::open(&self.path).map_err(spill_error(&self.path))?;
        let reader = StreamReader::try_new(BufReader::new(file), None)
            .map_err(spill_arrow_error(&self.path))?;
        let schema = reader.schema();
        // Opened when a first row falls into the range.
        let mut writers: Vec<Option<(PathBuf, StreamWriter<BufWriter<File>>)>> =
            (0..ranges).map(|_| None).collect();
        for batch in reader {
            let batch = batch.map_err(spill_arrow_error(&self.path))?;
            let (rows, nulls) = self.encoder.encode(&batch)?;
            let mut by_range: Vec<Vec<u32>> = vec![Vec::new(); ranges];
            for (i, null) in nulls.iter().enumerate() {
                let range = match null {
                    true => 0,
                    false => {
                        let key = rows.row(i);
                        bounds.partition_point(|b| b.as_slice() <= key.as_ref())
                    }
                };
                by_range[range].push(i as u32);
            }
            for (range, indices) in by_range.into_iter().enumerate() {
                if indices.is_empty() {
                    continue;
                }
                let part = take_record_batch(&batch, &UInt32Array::from(indices))
                    .map_err(Error::arrow("cutting a merge source into key ranges"))?;
                let (path, writer) = match &mut writers[range] {
                    Some(open) => open,
                    slot => {
                        let path = self.dir.file(&format!("range-{range}.arrow"));
                        let file = File::create(&path).map_err(spill_error(&path))?;
                        let writer = StreamWriter::try_new(BufWriter::new(file), &schema)
                            .map_err(spill_arrow_error(&path))?;
                        slot.insert((path, writer))
                    }
                };
                writer.write(&part).map_err(spill_arrow_error(path))?;
            }
        }
        for (path, writer) in writers.iter_mut().flatten() {
            writer.finish().map_err(spill_arrow_error(path))?;
        }
        drop(writers);
        // The first pass's file is no longer needed.
        let _ = std::fs::remove_file(&self.path);
        Ok(SpilledRanges {
            dir: self.dir,
            ranges,
            schema: self.schema,
        })
    }
}
