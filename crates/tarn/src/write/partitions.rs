//! How a write's rows are divided among files: one group per partition, in the files'
//! physical schema, and the names those files take.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{SortColumn, lexsort_to_indices, partition, take_record_batch};
use arrow::datatypes::SchemaRef;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::expr::Scalar;
use crate::paths::{NULL_PARTITION, hive_escape};
use crate::protocol::{PartitionValues, StructType};
use parquet::basic::Compression;

use crate::snapshot::PartitionColumn;

use super::physical::relabel;

/// `[p1=v1/p2=v2/]part-<n>-<uuid>-c000.<codec>.parquet`, or for change data
/// `_change_data/[p1=v1/]cdc-<n>-<uuid>.c000.<codec>.parquet`, as Spark names them (codec
/// `lz4raw`, `snappy`, `zstd`, or none for uncompressed files).
pub(super) fn file_name(
    partition_columns: &[PartitionColumn],
    key: &[Option<String>],
    counter: usize,
    change_data: bool,
    compression: Compression,
) -> String {
    let mut path = String::new();
    if change_data {
        path.push_str("_change_data/");
    }
    for (column, value) in partition_columns.iter().zip(key) {
        let value = match value {
            Some(v) => hive_escape(v),
            None => NULL_PARTITION.to_string(),
        };
        path.push_str(&format!("{}={value}/", hive_escape(&column.physical_name)));
    }
    let codec = match compression {
        Compression::LZ4_RAW => ".lz4raw",
        Compression::SNAPPY => ".snappy",
        Compression::ZSTD(_) => ".zstd",
        Compression::GZIP(_) => ".gz",
        Compression::LZ4 => ".lz4hadoop",
        Compression::BROTLI(_) => ".br",
        Compression::UNCOMPRESSED | Compression::LZO => "",
    };
    let name = match change_data {
        true => format!("cdc-{counter:05}-{}.c000{codec}.parquet", Uuid::new_v4()),
        false => format!("part-{counter:05}-{}-c000{codec}.parquet", Uuid::new_v4()),
    };
    path.push_str(&name);
    path
}

/// The partition of row `row` of the partition columns' `keys`: each value as the string
/// `partitionValues` holds, an empty string as null (as Spark writes it).
pub(super) fn partition_key(
    partition_columns: &[PartitionColumn],
    keys: &[ArrayRef],
    row: usize,
) -> Vec<Option<String>> {
    partition_columns
        .iter()
        .zip(keys)
        .map(|(column, array)| {
            Scalar::from_array(array.as_ref(), row, column.data_type)
                .unwrap_or(Scalar::Null)
                .to_partition_string()
                .filter(|s| !s.is_empty())
        })
        .collect()
}

pub(super) type PartitionGroup = (Vec<Option<String>>, PartitionValues, RecordBatch);

/// Splits a batch (in table schema) into one batch per partition, each without the
/// partition columns and in the files' physical schema, with the partition's serialized
/// values.
pub(super) fn split_partitions(
    batch: &RecordBatch,
    partition_columns: &[PartitionColumn],
    data_struct: &StructType,
    data_schema: &SchemaRef,
) -> Result<Vec<PartitionGroup>> {
    let data_indices: Vec<Option<usize>> = data_struct
        .fields
        .iter()
        .map(|f| batch.schema().index_of(&f.name).ok())
        .collect();
    let project = |b: &RecordBatch| -> Result<RecordBatch> {
        let columns = data_indices
            .iter()
            .zip(data_schema.fields())
            .map(|(i, field)| match i {
                Some(i) => relabel(b.column(*i), field.data_type()),
                // Only hidden columns may be missing: the batch was conformed.
                None => Ok(arrow::array::new_null_array(
                    field.data_type(),
                    b.num_rows(),
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new_with_options(
            Arc::clone(data_schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
        )
        .map_err(Error::arrow("splitting partitions"))
    };
    if partition_columns.is_empty() {
        return Ok(vec![(Vec::new(), PartitionValues::new(), project(batch)?)]);
    }
    let keys: Vec<ArrayRef> = partition_columns
        .iter()
        .map(|p| {
            batch
                .column_by_name(&p.name)
                .cloned()
                .ok_or_else(|| Error::SchemaMismatch {
                    reason: format!("the batch lacks partition column {:?}", p.name),
                })
        })
        .collect::<Result<_>>()?;
    let sort: Vec<SortColumn> = keys
        .iter()
        .map(|values| SortColumn {
            values: Arc::clone(values),
            options: None,
        })
        .collect();
    let indices = lexsort_to_indices(&sort, None).map_err(Error::arrow("sorting by partition"))?;
    let sorted =
        take_record_batch(batch, &indices).map_err(Error::arrow("sorting by partition"))?;
    let sorted_keys: Vec<ArrayRef> = partition_columns
        .iter()
        .filter_map(|p| sorted.column_by_name(&p.name).cloned())
        .collect();
    let ranges = partition(&sorted_keys).map_err(Error::arrow("splitting partitions"))?;
    let mut groups = Vec::new();
    for range in ranges.ranges() {
        let part = sorted.slice(range.start, range.end - range.start);
        let key = partition_key(partition_columns, &sorted_keys, range.start);
        let mut values = PartitionValues::new();
        for (column, value) in partition_columns.iter().zip(&key) {
            values.insert(column.physical_name.clone(), value.clone());
        }
        groups.push((key, values, project(&part)?));
    }
    Ok(groups)
}
