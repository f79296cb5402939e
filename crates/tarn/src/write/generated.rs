//! Generated columns (`delta.generationExpression` in a field's metadata): a write that
//! leaves such a column out gets it computed from the row; one that brings it must bring
//! exactly the computed value (null-safe), as Spark checks. Rows that UPDATE and MERGE
//! rewrite get theirs computed again from their new values.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::compute::kernels::cmp::not_distinct;
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{Field, Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::expr::{Expr, evaluate_value, parse_sql};
use crate::protocol::StructType;

/// Field metadata key of a generated column's SQL.
pub(crate) const GENERATION_KEY: &str = "delta.generationExpression";

#[derive(Debug)]
struct Column {
    index: usize,
    name: String,
    expression: String,
    value: Expr,
}

/// The generated columns of a table, their expressions bound to its schema.
#[derive(Debug, Default)]
pub(crate) struct Generated(Vec<Column>);

impl Generated {
    /// The generated top-level columns of `schema`.
    ///
    /// Fails with [`Error::InvalidExpression`] for an expression Tarn cannot read (a
    /// function such as `CAST` or `year`) or one reading another generated column: the
    /// column could not be computed, so nothing may be written; and as [`Expr::bind`]
    /// does when it does not fit the schema.
    pub(crate) fn of(schema: &StructType) -> Result<Generated> {
        let mut out = Vec::new();
        let generated = |name: &str| {
            schema
                .field(name)
                .is_some_and(|f| f.metadata.contains_key(GENERATION_KEY))
        };
        for (index, field) in schema.fields.iter().enumerate() {
            let Some(text) = field.metadata.get(GENERATION_KEY).and_then(|v| v.as_str()) else {
                continue;
            };
            let (value, _) = parse_sql(text)?.bind_value(schema)?;
            // As in Spark: every generated value comes from columns the writer gives.
            if let Some(other) = value.columns().iter().find(|c| generated(c.root())) {
                return Err(Error::InvalidExpression {
                    expression: text.to_string(),
                    reason: format!("it reads generated column {other}"),
                });
            }
            out.push(Column {
                index,
                name: field.name.clone(),
                expression: text.to_string(),
                value,
            });
        }
        Ok(Generated(out))
    }

    /// Whether the table has no generated column.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `name` is a generated column.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|c| c.name == name)
    }

    /// `batch` (conformed, generated columns it lacked null and nullable in its schema)
    /// with those columns computed, and the ones it brought checked, in the schema
    /// `target`.
    ///
    /// Fails with [`Error::ConstraintViolated`] when a brought value differs from the
    /// computed one, and [`Error::SchemaMismatch`] when a computed value is null in a
    /// non-nullable column.
    pub(crate) fn apply(
        &self,
        batch: RecordBatch,
        absent: &[&str],
        target: &SchemaRef,
    ) -> Result<RecordBatch> {
        let mut columns = batch.columns().to_vec();
        for column in &self.0 {
            let ty = target.field(column.index).data_type();
            let computed = evaluate_value(&column.value, &batch)?;
            let computed = cast_with_options(
                &computed,
                ty,
                &CastOptions {
                    safe: false,
                    ..Default::default()
                },
            )
            .map_err(Error::arrow("computing a generated column"))?;
            if absent.contains(&column.name.as_str()) {
                columns[column.index] = computed;
                continue;
            }
            let same = not_distinct(&columns[column.index], &computed)
                .map_err(Error::arrow("checking a generated column"))?;
            let differ = same.len() - same.true_count();
            if differ > 0 {
                return Err(Error::ConstraintViolated {
                    constraint: format!("generated column {}", column.name),
                    expression: column.expression.clone(),
                    rows: differ,
                });
            }
        }
        RecordBatch::try_new_with_options(
            Arc::clone(target),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| Error::SchemaMismatch {
            reason: e.to_string(),
        })
    }
}

/// `schema` with the columns named in `relaxed` nullable: the shape of a batch whose
/// generated columns are still to be computed.
pub(crate) fn relaxed_schema(schema: &SchemaRef, relaxed: &[&str]) -> SchemaRef {
    if relaxed.is_empty() {
        return Arc::clone(schema);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match relaxed.contains(&f.name().as_str()) {
            true => f.as_ref().clone().with_nullable(true),
            false => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The batches without the table's generated columns, so that rows UPDATE and MERGE
/// write get them computed from their new values.
pub(crate) fn without_generated(schema: &StructType, batches: &[RecordBatch]) -> Vec<RecordBatch> {
    let generated: Vec<&str> = schema
        .fields
        .iter()
        .filter(|f| f.metadata.contains_key(GENERATION_KEY))
        .map(|f| f.name.as_str())
        .collect();
    if generated.is_empty() {
        return batches.to_vec();
    }
    batches
        .iter()
        .map(|b| {
            let keep: Vec<usize> = (0..b.num_columns())
                .filter(|i| !generated.contains(&b.schema().field(*i).name().as_str()))
                .collect();
            // Projecting existing columns of a valid batch cannot fail.
            b.project(&keep).unwrap_or_else(|_| b.clone())
        })
        .collect()
}
