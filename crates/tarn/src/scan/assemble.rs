//! Turning the batches a Parquet decoder gives into a scan's rows: the file's columns
//! in the table's logical types, partition values and added columns filled in, the
//! residual predicate applied and the projection taken.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{filter_record_batch, prep_null_mask_filter};
use arrow::datatypes::SchemaRef;

use super::ScanContext;
use super::views::{compact, is_view, to_type};
use crate::conform::{Source, conform, find_field};
use crate::error::{Error, Result};
use crate::expr::{ColumnName, Scalar, evaluate_predicate};
use crate::protocol::StructField;
use crate::protocol::properties::ColumnMappingMode;
use crate::reader::DataFileErrors;

/// Turns a batch read from a file into an output batch: logical columns, partition
/// values, the residual predicate, the projection.
pub(super) fn assemble(
    ctx: &ScanContext,
    batch: &RecordBatch,
    partitions: &HashMap<ColumnName, Scalar>,
    mode: ColumnMappingMode,
    file: &DataFileErrors,
) -> Result<RecordBatch> {
    let read = logical_rows(
        &ctx.read_fields,
        &ctx.read_schema,
        batch,
        partitions,
        mode,
        file,
    )?;
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
    // Predicate columns asked for as views become views now; views let go of the pages
    // they no longer point into.
    let projected_columns = projected
        .columns()
        .iter()
        .zip(ctx.output_schema.fields())
        .map(|(column, field)| match is_view(field.data_type()) {
            true => to_type(Arc::clone(column), field.data_type()).map(compact),
            false => Ok(Arc::clone(column)),
        })
        .collect::<Result<Vec<_>>>()?;
    // `project` keeps the row count even with no columns (COUNT(*) scans).
    RecordBatch::try_new_with_options(
        Arc::clone(&ctx.output_schema),
        projected_columns,
        &RecordBatchOptions::new().with_row_count(Some(projected.num_rows())),
    )
    .map_err(Error::arrow("projecting columns"))
}

/// The `fields` (of the table's schema, read as `schema` says) of a batch a decoder gave:
/// each found in the file by its physical name and conformed to its logical type, a
/// partition column as its value, a column the file lacks as nulls.
///
/// Fails when a file's column does not conform to its field's type or a partition value
/// does not parse.
pub(super) fn logical_rows(
    fields: &[StructField],
    schema: &SchemaRef,
    batch: &RecordBatch,
    partitions: &HashMap<ColumnName, Scalar>,
    mode: ColumnMappingMode,
    file: &DataFileErrors,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let batch_schema = batch.schema();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.len());
    for (field, read) in fields.iter().zip(schema.fields()) {
        let view = is_view(read.data_type());
        let column = match partition_value(partitions, &field.name) {
            Some(value) => value
                .to_array(&field.data_type.to_arrow(), rows)
                .map_err(|reason| Error::InvalidPartitionValue {
                    column: field.name.clone(),
                    value: value.to_string(),
                    reason: reason.to_string(),
                })?,
            None => match find_field(batch_schema.fields(), field, Source::File(mode)) {
                // Decoded as views, as asked.
                Some(i) if view && batch.column(i).data_type() == read.data_type() => {
                    Arc::clone(batch.column(i))
                }
                Some(i) => {
                    conform(batch.column(i), field, Source::File(mode)).map_err(|reason| {
                        Error::SchemaMismatch {
                            reason: format!("data file {}: {reason}", file.url()),
                        }
                    })?
                }
                // A column added after this file was written.
                None => arrow::array::new_null_array(&field.data_type.to_arrow(), rows),
            },
        };
        columns.push(match view {
            true => to_type(column, read.data_type())?,
            false => column,
        });
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)
        .map_err(|e| Error::arrow(format!("assembling rows of {}", file.url()))(e))
}

/// The value of top-level partition column `name` in `partitions`, found without building
/// a [`ColumnName`] for every column of every batch.
pub(super) fn partition_value<'a>(
    partitions: &'a HashMap<ColumnName, Scalar>,
    name: &str,
) -> Option<&'a Scalar> {
    partitions
        .iter()
        .find(|(column, _)| matches!(column.path(), [only] if only == name))
        .map(|(_, value)| value)
}
