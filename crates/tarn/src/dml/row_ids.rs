//! Row tracking through copy-on-write rewrites: a rewrite streams a file chunk by chunk,
//! and each chunk's stable row ids (see [`StableIds`]) follow its rows into the file's new
//! version: copied rows keep their ids and commit versions, updated rows their ids.

use arrow::array::{ArrayRef, RecordBatch, new_null_array};

use crate::error::{Error, Result};
use crate::protocol::{Add, StructField};
use crate::scan::{FileRows, Scan, StableIds, load_deletion_vector_of, with_row_ids};
use crate::snapshot::Snapshot;

/// The materialized row-id columns of the table, when it keeps them (else none).
pub(crate) fn hidden_fields(snapshot: &Snapshot) -> Vec<StructField> {
    crate::txn::materialized_fields(snapshot.metadata()).unwrap_or_default()
}

/// A scan of every column that also reads the materialized row ids, when the table
/// keeps them, so changed rows can keep theirs.
pub(crate) fn scan_with_ids(snapshot: &Snapshot) -> Scan {
    snapshot.scan().with_row_ids(hidden_fields(snapshot))
}

/// The rows read of a file, copied whole (compaction): with their stable row ids and
/// commit versions appended as `fields` (nulls, so fresh ids, where the file has none),
/// and whether they kept them. Without `fields` (a table that keeps no ids), the rows.
pub(crate) fn copied_rows(rows: &FileRows, fields: &[StructField]) -> Result<(RecordBatch, bool)> {
    if fields.is_empty() {
        return Ok((rows.batch.clone(), false));
    }
    match &rows.ids {
        Some(ids) => Ok((ids.copied(&rows.batch, None, fields)?, true)),
        None => {
            let n = rows.batch.num_rows();
            let null = || new_null_array(&arrow::datatypes::DataType::Int64, n);
            Ok((with_row_ids(&rows.batch, fields, null(), null())?, false))
        }
    }
}

/// Rows to write, their materialized row-id columns (when they bring them) set aside:
/// the rows alone go through the checks of the table's schema.
pub(crate) fn set_aside(
    batch: RecordBatch,
    fields: &[StructField],
) -> Result<(RecordBatch, Option<Vec<ArrayRef>>)> {
    let schema = batch.schema();
    let found: Vec<usize> = fields
        .iter()
        .filter_map(|f| schema.index_of(&f.name).ok())
        .collect();
    if found.len() != fields.len() || fields.is_empty() {
        return Ok((batch, None));
    }
    let columns = found.iter().map(|i| batch.column(*i).clone()).collect();
    let rest: Vec<usize> = (0..batch.num_columns())
        .filter(|i| !found.contains(i))
        .collect();
    let rows = batch
        .project(&rest)
        .map_err(Error::arrow("setting row ids aside"))?;
    Ok((rows, Some(columns)))
}

/// Rows with the row-id columns [`set_aside`] took from them put back.
pub(crate) fn put_back(
    rows: &RecordBatch,
    fields: &[StructField],
    columns: Option<Vec<ArrayRef>>,
) -> Result<RecordBatch> {
    match columns.as_deref() {
        Some([ids, versions]) => with_row_ids(rows, fields, ids.clone(), versions.clone()),
        _ => Ok(rows.clone()),
    }
}

/// The stable ids of the rows of one file, chunk by chunk as a rewrite reads them.
pub(crate) struct RowIds {
    /// The materialized id and commit-version columns.
    fields: Vec<StructField>,
    add: Add,
    /// The file's live row positions still to come, in file order.
    live: Box<dyn Iterator<Item = u64> + Send>,
}

impl RowIds {
    /// The ids of `add`'s rows, when the table materializes row ids and the file has
    /// them (`baseRowId`); `None` otherwise (its copied rows then get fresh ids).
    ///
    /// Fails when the file's deletion vector cannot be read.
    pub(crate) async fn of(snapshot: &Snapshot, add: &Add) -> Result<Option<RowIds>> {
        let Some(fields) = crate::txn::materialized_fields(snapshot.metadata()) else {
            return Ok(None);
        };
        if add.base_row_id.is_none() || add.default_row_commit_version.is_none() {
            return Ok(None);
        }
        let deleted = load_deletion_vector_of(snapshot, add).await?;
        let live: Box<dyn Iterator<Item = u64> + Send> = match deleted {
            Some(deleted) => Box::new((0u64..).filter(move |p| !deleted.contains(*p))),
            None => Box::new(0u64..),
        };
        Ok(Some(RowIds {
            fields,
            add: add.clone(),
            live,
        }))
    }

    /// The materialized columns, as the rewrite reads and writes them.
    pub(crate) fn fields(&self) -> &[StructField] {
        &self.fields
    }

    /// Splits the materialized columns off the next chunk of the file (read with them
    /// last), giving the chunk in the table's schema and its rows' stable ids.
    pub(crate) fn split(&mut self, chunk: RecordBatch) -> Result<(RecordBatch, StableIds)> {
        let rows = chunk.num_rows();
        let (table, ids) = StableIds::split(chunk, &self.add, self.live.by_ref().take(rows))?;
        // `of` checked the file has ids.
        let ids = ids.ok_or_else(|| Error::SchemaMismatch {
            reason: format!("{} lost its row ids", self.add.path),
        })?;
        Ok((table, ids))
    }
}
