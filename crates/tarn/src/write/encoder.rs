//! Encoding one write's batches into Parquet files on a blocking thread: batches split
//! into Hive-style partitions, a partition's rows gathered before its file opens, files
//! rolled at a target size and sent to the uploader as they finish.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use tarn_store::StoreLocation;

use crate::error::{Error, Result};
use crate::protocol::{PartitionValues, StructField, StructType};
use crate::snapshot::PartitionColumn;
use crate::stats::stats_json;

use super::encoding::{FileSettings, Input};
use super::files::{EncodedFile, FileWriteOptions};
use super::partitions::{file_name, split_partitions};
use super::physical::physical_schema;
use super::spill::Spill;
use super::upload::FileSink;

/// Most rows handed to the Parquet writer at a time.
const SLICE_ROWS: usize = 8 * 1024;
/// Rows of the first slice of a file, before its bytes per row are known.
const PROBE_ROWS: usize = 256;

/// How many rows to write next into `file` so that it lands near `target` bytes: a probe
/// slice for a new file, then what the bytes per row so far say still fits.
fn slice_rows(file: Option<&OpenFile>, target: u64) -> usize {
    let Some(file) = file.filter(|f| f.rows > 0) else {
        return PROBE_ROWS;
    };
    let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as f64;
    let per_row = (size / file.rows as f64).max(1e-3);
    let room = (target as f64 - size).max(0.0);
    ((room / per_row).ceil() as usize).clamp(1, SLICE_ROWS)
}
/// An open data file of one partition.
struct OpenFile {
    writer: ArrowWriter<FileSink>,
    relative: String,
    partition_values: PartitionValues,
    rows: usize,
    /// The encoder's input rows seen when rows were last written to it.
    last_written: usize,
    /// Per captured column, the slices written so far.
    captured: Vec<Vec<ArrayRef>>,
}

/// Where large files stream to while they encode: the table's store and root.
pub(super) struct Destination {
    store: Arc<dyn ObjectStore>,
    root: Path,
}

impl Destination {
    pub(super) fn of(location: &StoreLocation) -> Destination {
        Destination {
            store: Arc::clone(location.store()),
            root: location.root().clone(),
        }
    }
}

/// Encodes batches into Parquet files, partition by partition, sending each finished file
/// to the uploader; with a destination, a file that grows large uploads in parts while it
/// encodes. Partitions' waiting rows stay under `waiting_budget` Arrow bytes. Runs on a
/// blocking thread.
pub(super) fn encode(
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: impl IntoIterator<Item = RecordBatch>,
    options: &FileWriteOptions,
    destination: Option<&Destination>,
    tx: &tokio::sync::mpsc::Sender<Result<EncodedFile>>,
    waiting_budget: usize,
) -> Result<()> {
    let partition_names: Vec<String> = partition_columns.iter().map(|p| p.name.clone()).collect();
    let data_fields: Vec<StructField> = schema
        .fields
        .iter()
        .filter(|f| !partition_names.contains(&f.name))
        .cloned()
        .collect();
    let data_struct = StructType::new(data_fields);
    let file_struct = StructType::new(
        data_struct
            .fields
            .iter()
            .chain(&options.hidden)
            .cloned()
            .collect(),
    );
    // Under column mapping, files hold physical names (and field ids).
    let data_schema: SchemaRef = Arc::new(physical_schema(&file_struct));
    let capture: Vec<String> = options
        .capture
        .iter()
        .map(|name| match schema.field(name) {
            Some(field) => field.physical_name().to_string(),
            None => name.clone(),
        })
        .collect();
    let mut files = Files {
        partition_columns,
        data_schema: Arc::clone(&data_schema),
        data_struct,
        capture,
        options,
        destination,
        tx,
        open: HashMap::new(),
        counter: 0,
        settings: FileSettings::new(options.compression),
        input_rows: 0,
    };
    let mut waiting: HashMap<Vec<Option<String>>, Waiting> = HashMap::new();
    let mut waiting_bytes = 0;
    let mut spill: Option<Spill> = None;
    // Gathered rows are far below a file's target, so files still end near it (a few
    // rows either way, as their rows now come in larger slices).
    let gather =
        !partition_columns.is_empty() && options.target_file_size >= 2 * WAITING_BYTES as u64;
    let mut input = Input::new(batches);
    while let Some(batch) = input.next() {
        options.checks.verify(&batch)?;
        files.input_rows += batch.num_rows();
        for (key, values, part) in
            split_partitions(&batch, partition_columns, &file_struct, &data_schema)?
        {
            // A partition without an open file gathers rows before it opens one.
            let part = if !gather || files.open.contains_key(&key) {
                part
            } else {
                let entry = waiting.entry(key.clone()).or_insert_with(|| Waiting {
                    values: values.clone(),
                    parts: Vec::new(),
                    bytes: 0,
                });
                let part = own_rows(&part)?;
                let bytes = part.get_array_memory_size();
                entry.bytes += bytes;
                waiting_bytes += bytes;
                entry.parts.push(part);
                // A partition with spilled rows waits to the end, so they share its file.
                let spilled = spill.as_ref().is_some_and(|s| s.holds(&key));
                if entry.bytes >= WAITING_BYTES && files.open.len() >= MAX_OPEN_FILES {
                    files.close_idle()?;
                }
                if entry.bytes < WAITING_BYTES || files.open.len() >= MAX_OPEN_FILES || spilled {
                    if waiting_bytes > waiting_budget {
                        waiting_bytes = spill_largest(
                            &mut waiting,
                            &mut spill,
                            &data_schema,
                            waiting_budget / 2,
                        )?;
                    }
                    continue;
                }
                match waiting.remove(&key) {
                    Some(entry) => {
                        waiting_bytes -= entry.bytes;
                        entry.rows(&data_schema)?
                    }
                    None => continue,
                }
            };
            let after = || {
                let split = |b| split_partitions(b, partition_columns, &file_struct, &data_schema);
                input
                    .peek()
                    .iter()
                    .filter_map(|b| split(b).ok())
                    .flatten()
                    .filter(|(k, _, _)| *k == key)
                    .map(|(_, _, part)| part)
                    .collect()
            };
            let props = if files.open.contains_key(&key) {
                None
            } else {
                files.properties(&part, after)
            };
            files.write(&key, &values, &part, props)?;
        }
        if options.file_per_batch {
            // Every file of the batch finishes in the order of its name, as before.
            files.write_waiting(std::mem::take(&mut waiting), spill.take(), false)?;
            waiting_bytes = 0;
            files.finish_open()?;
        }
    }
    files.write_waiting(waiting, spill, true)?;
    files.finish_open()
}

/// Arrow bytes a partition's rows gather before its file opens. An open Parquet writer
/// holds encoder state for every column (a dictionary's hash table alone is 72 KiB), and
/// a write met thousands of small partitions in every run of its input: TPC-DS's
/// `store_sales`, 2.9M rows over 1,824 dates in 8 Ki-row batches, took 19 GiB. Their
/// rows wait here, and each file opens, takes them and closes in turn at the end.
const WAITING_BYTES: usize = 1024 * 1024;

/// Files one encoder keeps open at once; a partition with enough rows for a file of its
/// own waits on while this many are open.
const MAX_OPEN_FILES: usize = 64;

/// Input rows an open file may go without rows of its own before it is closed to make
/// room for another (input sorted by partition leaves each behind for good).
const IDLE_ROWS: usize = 1024 * 1024;

/// Arrow bytes of waiting rows one write holds in all, shared among its encoders. Past
/// its share, an encoder spills its largest waiting partitions to local disk until half
/// its share is left ([`Spill`]); they are read back into their files at the end.
pub(super) const WAITING_BUDGET: usize = 1024 * 1024 * 1024;

/// Spills the largest `waiting` partitions, one batch each, until at most `keep` bytes
/// wait; returns the bytes still waiting.
///
/// Fails with [`Error::Spill`] when the spill cannot be written.
fn spill_largest(
    waiting: &mut HashMap<Vec<Option<String>>, Waiting>,
    spill: &mut Option<Spill>,
    schema: &SchemaRef,
    keep: usize,
) -> Result<usize> {
    let mut sizes: Vec<(usize, Vec<Option<String>>)> =
        waiting.iter().map(|(k, w)| (w.bytes, k.clone())).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut left: usize = sizes.iter().map(|(bytes, _)| bytes).sum();
    let mut round = Vec::new();
    for (bytes, key) in sizes {
        if left <= keep {
            break;
        }
        if let Some(entry) = waiting.remove(&key) {
            let values = entry.values.clone();
            round.push((key, values, entry.rows(schema)?));
            left -= bytes;
        }
    }
    let spill = match spill {
        Some(spill) => spill,
        None => spill.insert(Spill::new(Arc::clone(schema))?),
    };
    spill.round(round)?;
    Ok(left)
}

/// A copy of `part` holding only its own rows. Parts are slices of one sorted copy of
/// their batch, so a slice kept waiting would keep the whole batch alive (and a
/// single encoder's stream whole), and would be sized by all of it.
fn own_rows(part: &RecordBatch) -> Result<RecordBatch> {
    let all = arrow::array::UInt32Array::from_iter_values(0..part.num_rows() as u32);
    arrow::compute::take_record_batch(part, &all)
        .map_err(Error::arrow("copying a partition's waiting rows"))
}

/// Rows of one partition waiting for its file.
struct Waiting {
    values: PartitionValues,
    parts: Vec<RecordBatch>,
    bytes: usize,
}

impl Waiting {
    /// The waiting rows as one batch (of `schema` when none wait).
    fn rows(self, schema: &SchemaRef) -> Result<RecordBatch> {
        match self.parts.as_slice() {
            [only] => Ok(only.clone()),
            parts => {
                let schema = parts
                    .first()
                    .map_or_else(|| Arc::clone(schema), RecordBatch::schema);
                arrow::compute::concat_batches(&schema, parts)
                    .map_err(Error::arrow("gathering a partition's rows"))
            }
        }
    }
}

/// The files one encoder has open, one per partition, and what opening more takes.
struct Files<'a> {
    partition_columns: &'a [PartitionColumn],
    data_schema: SchemaRef,
    data_struct: StructType,
    capture: Vec<String>,
    options: &'a FileWriteOptions,
    destination: Option<&'a Destination>,
    tx: &'a tokio::sync::mpsc::Sender<Result<EncodedFile>>,
    open: HashMap<Vec<Option<String>>, OpenFile>,
    counter: usize,
    settings: FileSettings,
    /// Input rows the encoder has taken so far.
    input_rows: usize,
}

impl Files<'_> {
    /// Writer settings for a file whose first rows are `part`, unless the options fix them
    /// or the partition already has a file.
    fn properties(
        &mut self,
        part: &RecordBatch,
        after: impl FnOnce() -> Vec<RecordBatch>,
    ) -> Option<WriterProperties> {
        if self.options.writer_properties.is_some() || part.num_rows() == 0 {
            return None;
        }
        Some(self.settings.of(part, after))
    }

    /// Writes `part` into its partition's file, opening one when there is none and
    /// finishing each that reaches the target size.
    fn write(
        &mut self,
        key: &Vec<Option<String>>,
        values: &PartitionValues,
        part: &RecordBatch,
        mut props: Option<WriterProperties>,
    ) -> Result<()> {
        let options = self.options;
        let mut offset = 0;
        while offset < part.num_rows() {
            let len = slice_rows(self.open.get(key), options.target_file_size)
                .min(part.num_rows() - offset);
            let slice = part.slice(offset, len);
            let rest = part.slice(offset, part.num_rows() - offset);
            offset += len;
            if !self.open.contains_key(key) {
                let props = match (&options.writer_properties, props.take()) {
                    (Some(fixed), _) => fixed.clone(),
                    (None, Some(first)) => first,
                    // A file the target size closed: its successor is judged by what is left.
                    (None, None) => self.settings.of(&rest, Vec::new),
                };
                let file = self.open_file(key, values, props)?;
                self.open.insert(key.clone(), file);
            }
            let Some(file) = self.open.get_mut(key) else {
                continue;
            };
            if let Err(e) = file.writer.write(&slice) {
                return Err(file
                    .writer
                    .inner_mut()
                    .upload_error()
                    .unwrap_or_else(|| Error::parquet(&file.relative)(e)));
            }
            file.rows += slice.num_rows();
            file.last_written = self.input_rows;
            for (name, slices) in self.capture.iter().zip(&mut file.captured) {
                if let Some(column) = slice.column_by_name(name) {
                    slices.push(Arc::clone(column));
                }
            }
            let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as u64;
            if size >= options.target_file_size
                && let Some(full) = self.open.remove(key)
            {
                self.close(full)?;
            }
        }
        Ok(())
    }

    fn open_file(
        &mut self,
        key: &[Option<String>],
        values: &PartitionValues,
        props: WriterProperties,
    ) -> Result<OpenFile> {
        // Named after the codec the file is written with, as Spark does.
        let codec = props.compression(&ColumnPath::new(Vec::new()));
        let relative = file_name(
            self.partition_columns,
            key,
            self.counter,
            self.options.change_data,
            codec,
        );
        self.counter += 1;
        let sink = FileSink::new(match self.destination {
            Some(d) => Some((
                Arc::clone(&d.store),
                crate::paths::join_relative(&d.root, &relative)?,
            )),
            None => None,
        });
        let writer = ArrowWriter::try_new(sink, Arc::clone(&self.data_schema), Some(props))
            .map_err(Error::parquet(&relative))?;
        Ok(OpenFile {
            writer,
            relative,
            partition_values: values.clone(),
            rows: 0,
            last_written: self.input_rows,
            captured: vec![Vec::new(); self.capture.len()],
        })
    }

    /// Writes each waiting partition's rows, its spilled ones first, into a file of its
    /// own, in the order of their keys; with `close`, each file closes before the next
    /// opens.
    fn write_waiting(
        &mut self,
        mut waiting: HashMap<Vec<Option<String>>, Waiting>,
        mut spill: Option<Spill>,
        close: bool,
    ) -> Result<()> {
        let mut keys: Vec<Vec<Option<String>>> = waiting.keys().cloned().collect();
        if let Some(spill) = &spill {
            keys.extend(spill.keys().filter(|k| !waiting.contains_key(*k)).cloned());
        }
        keys.sort();
        for key in keys {
            if let Some((values, positions)) = spill.as_mut().and_then(|s| s.take(&key)) {
                for position in positions {
                    let Some(spill) = spill.as_mut() else { break };
                    let rows = spill.read(position)?;
                    self.write_rows(&key, &values, &rows)?;
                }
            }
            if let Some(entry) = waiting.remove(&key) {
                let values = entry.values.clone();
                let rows = entry.rows(&self.data_schema)?;
                self.write_rows(&key, &values, &rows)?;
            }
            if close && let Some(file) = self.open.remove(&key) {
                self.close(file)?;
            }
        }
        Ok(())
    }

    /// Writes `rows` into the partition's file, opening one judged by them if none is open.
    fn write_rows(
        &mut self,
        key: &Vec<Option<String>>,
        values: &PartitionValues,
        rows: &RecordBatch,
    ) -> Result<()> {
        let props = if self.open.contains_key(key) {
            None
        } else {
            self.properties(rows, Vec::new)
        };
        self.write(key, values, rows, props)
    }

    /// Closes the open files that took no rows in the last [`IDLE_ROWS`] input rows.
    fn close_idle(&mut self) -> Result<()> {
        let now = self.input_rows;
        let mut idle: Vec<Vec<Option<String>>> = self
            .open
            .iter()
            .filter(|(_, f)| now.saturating_sub(f.last_written) > IDLE_ROWS)
            .map(|(k, _)| k.clone())
            .collect();
        idle.sort();
        for key in idle {
            if let Some(file) = self.open.remove(&key) {
                self.close(file)?;
            }
        }
        Ok(())
    }

    /// Finishes `file` and sends it to the uploader.
    fn close(&self, file: OpenFile) -> Result<()> {
        finish(
            file,
            &self.data_schema,
            &self.data_struct,
            self.options,
            self.tx,
        )
    }

    /// Finishes every open file, in the order of their names.
    fn finish_open(&mut self) -> Result<()> {
        let mut rest: Vec<_> = self.open.drain().map(|(_, f)| f).collect();
        rest.sort_by(|a, b| a.relative.cmp(&b.relative));
        for file in rest {
            self.close(file)?;
        }
        Ok(())
    }
}

fn finish(
    file: OpenFile,
    data_schema: &SchemaRef,
    data_struct: &StructType,
    options: &FileWriteOptions,
    tx: &tokio::sync::mpsc::Sender<Result<EncodedFile>>,
) -> Result<()> {
    let OpenFile {
        writer,
        relative,
        partition_values,
        rows,
        captured,
        ..
    } = file;
    let captured = captured
        .into_iter()
        .map(|slices| {
            let refs: Vec<&dyn arrow::array::Array> = slices.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs).map_err(Error::arrow("capturing indexed columns"))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let mut writer = writer;
    let metadata = match writer.finish() {
        Ok(metadata) => metadata,
        Err(e) => {
            return Err(writer
                .inner_mut()
                .upload_error()
                .unwrap_or_else(|| Error::parquet(&relative)(e)));
        }
    };
    // `finish` has written the footer: the sink has the whole file.
    let sink = std::mem::replace(writer.inner_mut(), FileSink::new(None));
    let size = sink.len();
    let body = sink.finish();
    let stats = stats_json(
        &metadata,
        data_schema,
        data_struct,
        &[],
        options.stats_columns.budget,
        &options.stats_columns.always,
    );
    // A closed channel means the uploader failed; its error is the one reported.
    let _ = tx.blocking_send(Ok(EncodedFile {
        relative,
        partition_values,
        body,
        size,
        stats,
        rows,
        captured,
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn ids(range: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(range))]).unwrap()
    }

    /// Encodes `batches` of `(id, part)` rows partitioned by `part` with `budget`,
    /// returning each file's partition and ids.
    fn encode_parts(batches: Vec<RecordBatch>, budget: usize) -> Vec<(String, Vec<i64>)> {
        use crate::protocol::{DataType as DeltaType, PrimitiveType};
        let schema = StructType::new(vec![
            StructField::new("id", DeltaType::Primitive(PrimitiveType::Long), false),
            StructField::new("part", DeltaType::Primitive(PrimitiveType::String), true),
        ]);
        let partition_columns = vec![PartitionColumn {
            name: "part".into(),
            physical_name: "part".into(),
            data_type: PrimitiveType::String,
        }];
        let options = FileWriteOptions {
            target_file_size: 128 << 20,
            stats_columns: Default::default(),
            writer_properties: None,
            compression: parquet::basic::Compression::UNCOMPRESSED,
            modification_time: 0,
            capture: Vec::new(),
            file_per_batch: false,
            checks: Default::default(),
            change_data: false,
            hidden: Vec::new(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(10_000);
        encode(
            &schema,
            &partition_columns,
            batches,
            &options,
            None,
            &tx,
            budget,
        )
        .unwrap();
        drop(tx);
        let mut files = Vec::new();
        while let Ok(file) = rx.try_recv() {
            let file = file.unwrap();
            let super::super::upload::Body::Bytes(payload) = file.body else {
                panic!("a file encoded without a destination is whole");
            };
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(
                bytes::Bytes::from(payload),
                1 << 20,
            )
            .unwrap();
            let ids = reader
                .flat_map(|b| {
                    b.unwrap()
                        .column(0)
                        .as_primitive::<Int64Type>()
                        .values()
                        .to_vec()
                })
                .collect();
            let part = file.partition_values.into_map().remove("part").flatten();
            files.push((part.unwrap_or_default(), ids));
        }
        files
    }

    fn parted(ids: std::ops::Range<i64>, parts: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("part", DataType::Utf8, true),
        ]));
        let part: arrow::array::StringArray = ids
            .clone()
            .map(|i| Some(format!("p{}", i % parts)))
            .collect();
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from_iter_values(ids)), Arc::new(part)],
        )
        .unwrap()
    }

    #[test]
    fn waiting_rows_past_the_budget_spill_and_still_end_in_their_partitions_file() {
        // 20 partitions of 1,000 rows in 40 batches: far under a file's rows each.
        let batches = || {
            (0..40)
                .map(|b| parted(b * 500..(b + 1) * 500, 20))
                .collect()
        };
        let whole = encode_parts(batches(), usize::MAX);
        assert_eq!(whole.len(), 20, "one file per partition within the budget");
        // A budget of about a quarter of the rows: partitions spill, and still end in one
        // file each, every row in its partition's.
        let budgeted = encode_parts(batches(), 20_000 * 16 / 4);
        assert_eq!(budgeted.len(), 20);
        let mut ids: Vec<i64> = Vec::new();
        for (part, file_ids) in &budgeted {
            assert!(!file_ids.is_empty());
            for id in file_ids {
                assert_eq!(*part, format!("p{}", id % 20), "id {id} in {part}'s file");
            }
            ids.extend(file_ids);
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..20_000).collect::<Vec<i64>>());
    }

    #[test]
    fn a_waiting_part_holds_its_own_rows_not_its_batchs() {
        let whole = ids(0..100_000);
        let slice = whole.slice(10, 100);
        assert!(slice.get_array_memory_size() >= 100_000 * 8);
        let own = own_rows(&slice).unwrap();
        assert!(own.get_array_memory_size() < 100 * 8 * 2);
        assert_eq!(
            own.column(0).as_primitive::<Int64Type>().values().to_vec(),
            (10..110).collect::<Vec<i64>>()
        );
    }
}
