//! Stable row ids and commit versions (row tracking) of rows read from a data file: the
//! materialized columns (`delta.rowTracking.materialized*ColumnName`, read beside the
//! table's columns) where the file has a value, else the file's `baseRowId` plus the row's
//! position and its `defaultRowCommitVersion`. Writers that copy or update rows carry
//! them into the new files so the rows keep their ids.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, UInt32Array, new_null_array,
};
use arrow::compute::{filter, take};
use arrow::datatypes::{DataType as ArrowType, Field, Int64Type, Schema};

use crate::error::{Error, Result};
use crate::protocol::{Add, StructField};

/// The stable ids and commit versions of a run of rows, row for row.
#[derive(Debug, Clone)]
pub(crate) struct StableIds {
    ids: Int64Array,
    versions: Int64Array,
}

impl StableIds {
    /// Splits the materialized columns (the last two of `batch`, as a scan with hidden
    /// columns reads them) off rows of `add` at `positions`, giving the rows in the
    /// table's schema and, when the file has row ids (`baseRowId`), their stable ids.
    pub(crate) fn split(
        batch: RecordBatch,
        add: &Add,
        positions: impl Iterator<Item = u64>,
    ) -> Result<(RecordBatch, Option<StableIds>)> {
        let width = batch.num_columns();
        if width < 2 {
            return Err(Error::SchemaMismatch {
                reason: "rows read without their materialized row ids".into(),
            });
        }
        let table = batch
            .project(&(0..width - 2).collect::<Vec<_>>())
            .map_err(Error::arrow("reading row ids"))?;
        let (Some(base), Some(default_version)) = (add.base_row_id, add.default_row_commit_version)
        else {
            return Ok((table, None));
        };
        let (Some(ids), Some(versions)) = (
            batch.column(width - 2).as_primitive_opt::<Int64Type>(),
            batch.column(width - 1).as_primitive_opt::<Int64Type>(),
        ) else {
            return Err(Error::SchemaMismatch {
                reason: format!(
                    "materialized row ids of {} are not 64-bit integers",
                    add.path
                ),
            });
        };
        let ids: Int64Array = positions
            .zip(ids.iter())
            .map(|(position, id)| Some(id.unwrap_or(base + position as i64)))
            .collect();
        let versions: Int64Array = versions
            .iter()
            .map(|v| Some(v.unwrap_or(default_version)))
            .collect();
        Ok((table, Some(StableIds { ids, versions })))
    }

    /// The ids of the rows `mask` selects.
    pub(crate) fn filter(&self, mask: &BooleanArray) -> Result<StableIds> {
        self.select(|a| filter(a, mask))
    }

    /// The ids of the rows at `indices`.
    pub(crate) fn take(&self, indices: &[u32]) -> Result<StableIds> {
        let indices = UInt32Array::from(indices.to_vec());
        self.select(|a| take(a, &indices, None))
    }

    /// Both columns through the same selection kernel.
    fn select(
        &self,
        kernel: impl Fn(&Int64Array) -> std::result::Result<ArrayRef, arrow::error::ArrowError>,
    ) -> Result<StableIds> {
        let pick = |a: &Int64Array| -> Result<Int64Array> {
            Ok(kernel(a)
                .map_err(Error::arrow("selecting row ids"))?
                .as_primitive::<Int64Type>()
                .clone())
        };
        Ok(StableIds {
            ids: pick(&self.ids)?,
            versions: pick(&self.versions)?,
        })
    }

    /// Copied rows: `rows` (those `keep` selects of the ones these ids belong to, or all)
    /// with their ids and commit versions appended as `fields`.
    pub(crate) fn copied(
        &self,
        rows: &RecordBatch,
        keep: Option<&BooleanArray>,
        fields: &[StructField],
    ) -> Result<RecordBatch> {
        let kept = match keep {
            Some(keep) => self.filter(keep)?,
            None => self.clone(),
        };
        with_columns(rows, fields, Arc::new(kept.ids), Arc::new(kept.versions))
    }

    /// Updated rows, each replacing the row `replaced` names among those these ids belong
    /// to: its id and a null commit version (it takes the version of the commit that
    /// writes it). Rows without a known origin (`replaced` of another length) get null
    /// ids, that is fresh ones, never a wrong one.
    pub(crate) fn updated(
        &self,
        rows: &RecordBatch,
        replaced: &[u32],
        fields: &[StructField],
    ) -> Result<RecordBatch> {
        let n = rows.num_rows();
        let ids = match replaced.len() == n {
            true => take(&self.ids, &UInt32Array::from(replaced.to_vec()), None)
                .map_err(Error::arrow("keeping row ids"))?,
            false => new_null_array(&ArrowType::Int64, n),
        };
        with_columns(rows, fields, ids, new_null_array(&ArrowType::Int64, n))
    }
}

/// `rows` with the id and commit-version columns appended as `fields`.
pub(crate) fn with_columns(
    rows: &RecordBatch,
    fields: &[StructField],
    ids: ArrayRef,
    versions: ArrayRef,
) -> Result<RecordBatch> {
    let mut schema: Vec<Arc<Field>> = rows.schema().fields().iter().cloned().collect();
    schema.extend(
        fields
            .iter()
            .map(|f| Arc::new(Field::new(&f.name, ArrowType::Int64, true))),
    );
    let mut columns = rows.columns().to_vec();
    columns.extend([ids, versions]);
    RecordBatch::try_new(Arc::new(Schema::new(schema)), columns)
        .map_err(Error::arrow("writing row ids"))
}
