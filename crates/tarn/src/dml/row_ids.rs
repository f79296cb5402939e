//! Row tracking through copy-on-write rewrites: the rows a rewrite copies keep their
//! stable row ids and commit versions, and the rows it updates keep their ids, written to
//! the table's materialized columns (`delta.rowTracking.materialized*ColumnName`) of the
//! file's new version. A row's stable id is its materialized id when the old file has
//! one, else the file's `baseRowId` plus the row's position; its stable commit version
//! likewise falls back to the file's `defaultRowCommitVersion`. Updated rows get a null
//! commit version: they take the version of the commit that writes them.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, new_null_array};
use arrow::compute::{filter, take};
use arrow::datatypes::{DataType as ArrowType, Field, Int64Type, Schema};

use crate::error::{Error, Result};
use crate::protocol::{Add, StructField};
use crate::scan::load_deletion_vector_of;
use crate::snapshot::Snapshot;

/// The stable ids and commit versions of the rows of one file, as a rewrite reads them.
pub(crate) struct RowIds {
    /// The materialized id and commit-version columns.
    fields: Vec<StructField>,
    base_row_id: i64,
    default_version: i64,
    /// The file's live row positions still to come, in file order.
    live: Box<dyn Iterator<Item = u64> + Send>,
}

/// One chunk's stable ids and commit versions, row for row.
pub(crate) struct ChunkIds {
    ids: Int64Array,
    versions: Int64Array,
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
        let (Some(base_row_id), Some(default_version)) =
            (add.base_row_id, add.default_row_commit_version)
        else {
            return Ok(None);
        };
        let deleted = load_deletion_vector_of(snapshot, add).await?;
        let live: Box<dyn Iterator<Item = u64> + Send> = match deleted {
            Some(deleted) => Box::new((0u64..).filter(move |p| !deleted.contains(*p))),
            None => Box::new(0u64..),
        };
        Ok(Some(RowIds {
            fields,
            base_row_id,
            default_version,
            live,
        }))
    }

    /// The materialized columns, as the rewrite reads and writes them.
    pub(crate) fn fields(&self) -> &[StructField] {
        &self.fields
    }

    /// Splits the materialized columns (the last two, as [`stream_file`] reads them) off
    /// the next chunk of the file, giving the chunk in the table's schema and its rows'
    /// stable ids and commit versions.
    ///
    /// [`stream_file`]: crate::scan::stream_file
    pub(crate) fn split(&mut self, chunk: RecordBatch) -> Result<(RecordBatch, ChunkIds)> {
        let width = chunk.num_columns();
        let (Some(ids), Some(versions)) = (
            chunk.column(width - 2).as_primitive_opt::<Int64Type>(),
            chunk.column(width - 1).as_primitive_opt::<Int64Type>(),
        ) else {
            return Err(Error::SchemaMismatch {
                reason: "materialized row ids are not 64-bit integers".into(),
            });
        };
        let positions = self.live.by_ref().take(chunk.num_rows());
        let ids: Int64Array = positions
            .zip(ids.iter())
            .map(|(position, id)| Some(id.unwrap_or(self.base_row_id + position as i64)))
            .collect();
        let versions: Int64Array = versions
            .iter()
            .map(|v| Some(v.unwrap_or(self.default_version)))
            .collect();
        let table = chunk
            .project(&(0..width - 2).collect::<Vec<_>>())
            .map_err(Error::arrow("reading row ids"))?;
        Ok((table, ChunkIds { ids, versions }))
    }
}

impl ChunkIds {
    /// Rows kept by `keep`, with their ids and commit versions appended.
    pub(crate) fn kept(
        &self,
        rows: &RecordBatch,
        keep: Option<&arrow::array::BooleanArray>,
        fields: &[StructField],
    ) -> Result<RecordBatch> {
        let (ids, versions): (ArrayRef, ArrayRef) = match keep {
            Some(keep) => (
                filter(&self.ids, keep).map_err(Error::arrow("keeping row ids"))?,
                filter(&self.versions, keep).map_err(Error::arrow("keeping row ids"))?,
            ),
            None => (Arc::new(self.ids.clone()), Arc::new(self.versions.clone())),
        };
        with_columns(rows, fields, ids, versions)
    }

    /// Updated rows, each replacing the chunk row `replaced` names: its id, and a null
    /// commit version. Rows without a known origin (`replaced` of another length) get
    /// fresh ids (null), never a wrong one.
    pub(crate) fn updated(
        &self,
        rows: &RecordBatch,
        replaced: &[u32],
        fields: &[StructField],
    ) -> Result<RecordBatch> {
        let n = rows.num_rows();
        let ids = match replaced.len() == n {
            true => take(
                &self.ids,
                &arrow::array::UInt32Array::from(replaced.to_vec()),
                None,
            )
            .map_err(Error::arrow("keeping row ids"))?,
            false => new_null_array(&ArrowType::Int64, n),
        };
        with_columns(rows, fields, ids, new_null_array(&ArrowType::Int64, n))
    }
}

/// `rows` with the id and commit-version columns appended.
fn with_columns(
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
