//! What a table is, in one value and one batch: [`Table::describe`] (Spark's `DESCRIBE
//! DETAIL`, with deletion vectors and indices beside) and [`Snapshot::files_batch`], the
//! live files as Arrow rows (delta-rs's `get_add_actions`).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use crate::error::{Error, Result};
use crate::indexing::IndexInfo;
use crate::protocol::{Protocol, StructType};
use crate::snapshot::Snapshot;
use crate::table::Table;

/// A table at one version, described: its definition, protocol, files, rows, deletion
/// vectors and indices.
#[derive(Debug, Clone)]
pub struct TableDetail {
    /// Where it lives.
    pub location: String,
    /// The version described.
    pub version: i64,
    /// That version's commit timestamp, in milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// The table's id (`metaData.id`).
    pub id: String,
    /// Its name, when it has one.
    pub name: Option<String>,
    /// Its description, when it has one.
    pub description: Option<String>,
    /// When it was created, in milliseconds since the epoch, when recorded.
    pub created_time: Option<i64>,
    /// Its schema.
    pub schema: StructType,
    /// Its partition columns, in order.
    pub partition_columns: Vec<String>,
    /// Its properties (`delta.*` and the user's).
    pub properties: BTreeMap<String, String>,
    /// Its protocol: reader and writer versions and table features.
    pub protocol: Protocol,
    /// Live data files.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Live rows (records less rows deleted by deletion vectors); `None` when a file has
    /// no record count in its statistics.
    pub rows: Option<u64>,
    /// Live files that carry a deletion vector.
    pub files_with_deletion_vectors: usize,
    /// Rows those deletion vectors delete.
    pub deleted_rows: u64,
    /// Tombstones still in the log (files removed, kept for time travel and vacuum).
    pub tombstones: usize,
    /// The table's indices, with their coverage.
    pub indices: Vec<IndexInfo>,
}

impl Table {
    /// Describes the table at this handle's version. Reads nothing: the snapshot holds
    /// all of it.
    ///
    /// Fails with [`Error::InvalidIndexMetadata`] when the index records do not parse.
    pub fn describe(&self) -> Result<TableDetail> {
        let snapshot = self.snapshot();
        let metadata = snapshot.metadata();
        let mut rows = Some(0u64);
        let (mut bytes, mut with_dv, mut deleted) = (0u64, 0usize, 0u64);
        for add in snapshot.files() {
            bytes += add.size.max(0) as u64;
            rows = rows.zip(crate::stats::live_rows(add)).map(|(a, b)| a + b);
            if let Some(dv) = &add.deletion_vector {
                with_dv += 1;
                deleted += dv.cardinality.max(0) as u64;
            }
        }
        Ok(TableDetail {
            location: snapshot.location().url().to_string(),
            version: snapshot.version(),
            timestamp_ms: snapshot.timestamp_ms(),
            id: metadata.id.clone(),
            name: metadata.name.clone(),
            description: metadata.description.clone(),
            created_time: metadata.created_time,
            schema: snapshot.schema().clone(),
            partition_columns: metadata.partition_columns.clone(),
            properties: metadata
                .configuration
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                .collect(),
            protocol: snapshot.protocol().clone(),
            files: snapshot.file_count(),
            bytes,
            rows,
            files_with_deletion_vectors: with_dv,
            deleted_rows: deleted,
            tombstones: snapshot.tombstones().len(),
            indices: self.indices()?,
        })
    }
}

impl Snapshot {
    /// The live files as one Arrow batch, a row per file sorted by path: `path`,
    /// `size_bytes`, `modification_time`, `num_records` (null without statistics),
    /// `deleted_rows` (by its deletion vector, 0 without one), `deletion_vector` (where
    /// the DV is, null without one), `stats` (the statistics JSON), then a
    /// `partition.<column>` string column per partition column (null for a null value).
    ///
    /// Fails with [`Error::Arrow`] only if the batch cannot be assembled.
    pub fn files_batch(&self) -> Result<RecordBatch> {
        let mut files: Vec<_> = self.files().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let n = files.len();
        let mut path = StringBuilder::with_capacity(n, n * 64);
        let mut size = Int64Builder::with_capacity(n);
        let mut modified = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
        let mut records = Int64Builder::with_capacity(n);
        let mut deleted = Int64Builder::with_capacity(n);
        let mut dv = StringBuilder::new();
        let mut stats = StringBuilder::new();
        let partitions = self.partition_columns();
        let mut parts: Vec<StringBuilder> =
            partitions.iter().map(|_| StringBuilder::new()).collect();
        for add in files {
            path.append_value(&add.path);
            size.append_value(add.size);
            modified.append_value(add.modification_time);
            records.append_option(
                add.stats
                    .as_ref()
                    .and_then(|s| s.num_records())
                    .map(|r| i64::try_from(r).unwrap_or(i64::MAX)),
            );
            let descriptor = add.deletion_vector.as_ref();
            deleted.append_value(descriptor.map_or(0, |d| d.cardinality));
            dv.append_option(descriptor.map(|d| d.describe()));
            stats.append_option(add.stats.as_ref().map(|s| s.json()));
            for (column, builder) in partitions.iter().zip(&mut parts) {
                builder.append_option(
                    add.partition_values
                        .get(&column.physical_name)
                        .and_then(Option::as_deref),
                );
            }
        }
        let mut fields = vec![
            Field::new("path", DataType::Utf8, false),
            Field::new("size_bytes", DataType::Int64, false),
            Field::new(
                "modification_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            Field::new("num_records", DataType::Int64, true),
            Field::new("deleted_rows", DataType::Int64, false),
            Field::new("deletion_vector", DataType::Utf8, true),
            Field::new("stats", DataType::Utf8, true),
        ];
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(path.finish()),
            Arc::new(size.finish()),
            Arc::new(modified.finish()),
            Arc::new(records.finish()),
            Arc::new(deleted.finish()),
            Arc::new(dv.finish()),
            Arc::new(stats.finish()),
        ];
        for (column, mut builder) in partitions.iter().zip(parts) {
            fields.push(Field::new(
                format!("partition.{}", column.name),
                DataType::Utf8,
                true,
            ));
            columns.push(Arc::new(builder.finish()));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|source| {
            Error::Arrow {
                context: format!("listing the files of version {}", self.version()),
                source,
            }
        })
    }
}
