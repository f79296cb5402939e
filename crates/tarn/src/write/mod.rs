//! Writes: appends and overwrites of a table ([`WriteBuilder`]), and the machinery they
//! share with row-level changes and optimize: checking batches against the table schema
//! (`prepare_batches`) and encoding them into data files (`files`).

mod builder;
mod clustering;
mod constraints;
mod encoder;
mod encoding;
mod files;
mod generated;
mod identity;
mod lanes;
mod low_level;
mod partitions;
mod physical;
mod spill;
mod stream;
mod streamed;
mod upload;

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};

pub use builder::{WriteBuilder, WriteOutcome};
pub(crate) use clustering::StatsColumns;
pub(crate) use constraints::Checks;
pub(crate) use files::{FileWriteOptions, WrittenFiles, write_files};
pub(crate) use generated::without_generated;
pub(crate) use identity::{Identity, fill_identity, identity_columns, keep_high_water_marks};
pub(crate) use spill::{SpillDir, arrow_spill_error, spill_error};
pub(crate) use stream::StreamWriter;
pub(crate) use streamed::{BatchStream, Input, from_reader, from_stream, write_new_table};

use crate::conform::{Source, conform};
use crate::error::{Error, Result};
use crate::expr::{Expr, evaluate_predicate};
use crate::paths::validate_name;
use crate::protocol::{DataType, StructType};
use crate::snapshot::PartitionColumn;
use generated::{Generated, relaxed_schema};

/// How a write treats the data already in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Add the new rows.
    #[default]
    Append,
    /// Replace the table's rows (or, with a predicate, the partitions it names).
    Overwrite,
}

/// Whether a write may change the table schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaMode {
    /// Batches must fit the schema.
    #[default]
    Strict,
    /// Columns the batches have and the table lacks are added (nullable) to the schema.
    AddColumns,
}

/// Checks batches against the table schema (evolving it when allowed) and returns them
/// conformed to the resulting schema, with that schema if it changed.
///
/// Fails with [`Error::SchemaMismatch`] naming the column for unknown columns, types that
/// do not fit, missing non-nullable columns and nulls in non-nullable columns.
pub(crate) fn prepare_batches(
    table: &StructType,
    partition_columns: &[PartitionColumn],
    batches: &[RecordBatch],
    mode: SchemaMode,
) -> Result<(Vec<RecordBatch>, Option<StructType>)> {
    let mut schema = table.clone();
    let mut evolved = false;
    for batch in batches {
        let batch_schema = batch.schema();
        let mut seen = std::collections::HashSet::new();
        for field in batch_schema.fields() {
            if !seen.insert(field.name().as_str()) {
                return Err(Error::SchemaMismatch {
                    reason: format!("the batch has column {:?} twice", field.name()),
                });
            }
            if schema.field(field.name()).is_some() {
                continue;
            }
            match mode {
                SchemaMode::Strict => {
                    return Err(Error::SchemaMismatch {
                        reason: format!(
                            "column {:?} is not in the table (columns: {:?}); write with \
                             SchemaMode::AddColumns to add it",
                            field.name(),
                            schema.field_names()
                        ),
                    });
                }
                SchemaMode::AddColumns => {
                    validate_name("column", field.name())?;
                    let mut added =
                        StructType::try_from_arrow(&Schema::new(vec![field.as_ref().clone()]))?
                            .fields
                            .remove(0);
                    added.nullable = true;
                    schema.fields.push(added);
                    evolved = true;
                }
            }
        }
    }
    let arrow_schema: SchemaRef = Arc::new(schema.to_arrow());
    let partition_names: Vec<&str> = partition_columns.iter().map(|p| p.name.as_str()).collect();
    let rows: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
    // Read only when rows are written: a rewrite that only drops rows computes nothing.
    let generated = match rows.is_empty() {
        true => Generated::default(),
        false => Generated::of(&schema)?,
    };
    let conformed = rows
        .into_iter()
        .map(|batch| {
            if generated.is_empty() {
                return conform_batch(batch, &schema, &arrow_schema, &partition_names, &[]);
            }
            let absent: Vec<&str> = schema
                .fields
                .iter()
                .map(|f| f.name.as_str())
                .filter(|n| generated.contains(n) && batch.column_by_name(n).is_none())
                .collect();
            let relaxed = relaxed_schema(&arrow_schema, &absent);
            let batch = conform_batch(batch, &schema, &relaxed, &partition_names, &absent)?;
            generated.apply(batch, &absent, &arrow_schema)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((conformed, evolved.then_some(schema)))
}

/// `batch` in the table's schema; columns in `to_compute` (generated ones it lacks) come
/// back null, for the caller to fill.
fn conform_batch(
    batch: &RecordBatch,
    schema: &StructType,
    arrow_schema: &SchemaRef,
    partitions: &[&str],
    to_compute: &[&str],
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mismatch = |reason: String| Error::SchemaMismatch { reason };
    let columns = schema
        .fields
        .iter()
        .map(|field| match batch.column_by_name(&field.name) {
            Some(column) => conform(column, field, Source::Input).map_err(mismatch),
            None if partitions.contains(&field.name.as_str()) => Err(mismatch(format!(
                "the batch lacks partition column {:?}",
                field.name
            ))),
            None if field.nullable || to_compute.contains(&field.name.as_str()) => Ok(
                arrow::array::new_null_array(&field.data_type.to_arrow(), rows),
            ),
            None => Err(mismatch(format!(
                "the batch lacks non-nullable column {:?}",
                field.name
            ))),
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    for (field, column) in schema.fields.iter().zip(&columns) {
        if !field.nullable && column.null_count() > 0 && !to_compute.contains(&field.name.as_str())
        {
            return Err(mismatch(format!(
                "column {:?} is not nullable but the batch holds {} nulls in it",
                field.name,
                column.null_count()
            )));
        }
    }
    RecordBatch::try_new_with_options(
        Arc::clone(arrow_schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| mismatch(e.to_string()))
}

/// `batch` with one more column at the end.
///
/// Fails with [`Error::Arrow`] (naming `context`) when `values` has another length.
pub(crate) fn with_column(
    batch: &RecordBatch,
    field: arrow::datatypes::Field,
    values: ArrayRef,
    context: &'static str,
) -> Result<RecordBatch> {
    let mut fields: Vec<arrow::datatypes::Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(field);
    let mut columns = batch.columns().to_vec();
    columns.push(values);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(Error::arrow(context))
}

/// Fails unless every row satisfies `predicate` (for overwrites of the partitions a
/// predicate names: data outside them would be lost on the next such overwrite).
pub(crate) fn ensure_rows_match(batches: &[RecordBatch], predicate: &Expr) -> Result<()> {
    for batch in batches {
        let mask = evaluate_predicate(predicate, batch)?;
        let matching = mask.true_count();
        if matching != batch.num_rows() {
            return Err(Error::InvalidArgument {
                name: "replace_where",
                reason: format!(
                    "{} of {} rows written do not satisfy the overwrite predicate {predicate}",
                    batch.num_rows() - matching,
                    batch.num_rows()
                ),
            });
        }
    }
    Ok(())
}

/// Validates the partition columns given at create: each must be a primitive column of
/// the schema, named once.
pub(crate) fn validate_partition_columns(schema: &StructType, columns: &[String]) -> Result<()> {
    for (i, name) in columns.iter().enumerate() {
        validate_name("partition column", name)?;
        let field = schema.field(name).ok_or_else(|| Error::UnknownColumn {
            column: name.clone(),
            available: schema.field_names(),
        })?;
        if !matches!(field.data_type, DataType::Primitive(_)) {
            return Err(Error::InvalidArgument {
                name: "partition_columns",
                reason: format!(
                    "{name:?} has type {}, partition columns must be primitive",
                    field.data_type
                ),
            });
        }
        if columns[..i].contains(name) {
            return Err(Error::InvalidArgument {
                name: "partition_columns",
                reason: format!("{name:?} is listed twice"),
            });
        }
    }
    if !columns.is_empty() && columns.len() == schema.fields.len() {
        return Err(Error::InvalidArgument {
            name: "partition_columns",
            reason: "at least one column must not be a partition column".into(),
        });
    }
    Ok(())
}
