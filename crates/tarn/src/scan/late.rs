//! Late materialisation: a scan's predicate runs inside the Parquet decoder on the
//! predicate's own columns first, so the scan's other columns decode only the rows that
//! pass, and their pages that hold none of those rows are not fetched. Used where the
//! other columns are large enough to be worth a second round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};
use parquet::file::metadata::ParquetMetaData;

use super::ScanContext;
use super::assemble::{logical_rows, partition_value};
use crate::conform::{Source, find_field};
use crate::error::Error;
use crate::expr::{ColumnName, Scalar, evaluate_predicate};
use crate::reader::DataFileErrors;

/// Where a predicate that failed inside the decoder leaves its error, so the scan
/// reports Tarn's typed error rather than the decoder's text of it.
#[derive(Clone, Default)]
pub(super) struct FilterFailure(Arc<Mutex<Option<Error>>>);

impl FilterFailure {
    /// The error the predicate failed with, once.
    pub(super) fn take(&self) -> Option<Error> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }

    fn keep(&self, error: Error) -> ArrowError {
        let text = error.to_string();
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(error);
        }
        ArrowError::ComputeError(text)
    }
}

/// Compressed bytes per row group the filter must be able to spare before it is used:
/// filtering first fetches in two steps (the predicate's columns, then the rest), and on
/// an object store the second round trip costs about as much as reading a megabyte.
const SPARED_BYTES_MIN: i64 = 1024 * 1024;

/// Decoder-side filtering of one run of a file's row groups (`row_groups`), when it pays:
/// the predicate reads data columns the file has, and the scan reads other columns
/// (`read_roots`, the file's root columns the scan decodes) holding on average at least
/// [`SPARED_BYTES_MIN`] per row group. Without other columns the residual predicate does
/// the same work on rows already decoded.
#[allow(clippy::too_many_arguments)]
pub(super) fn row_filter(
    ctx: &Arc<ScanContext>,
    read_roots: &[usize],
    file_schema: &Schema,
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    partitions: &Arc<HashMap<ColumnName, Scalar>>,
    file: &DataFileErrors,
    failure: &FilterFailure,
) -> Option<RowFilter> {
    let predicate = ctx.predicate.clone()?;
    let mode = ctx.snapshot.column_mapping_mode();
    let mut filter_roots: Vec<usize> = ctx
        .filter_fields
        .iter()
        .filter(|f| partition_value(partitions, &f.name).is_none())
        .filter_map(|f| find_field(file_schema.fields(), f, Source::File(mode)))
        .collect();
    filter_roots.sort_unstable();
    filter_roots.dedup();
    let parquet_schema = metadata.file_metadata().schema_descr();
    let spared = |leaf: usize| {
        let root = parquet_schema.get_column_root_idx(leaf);
        read_roots.contains(&root) && !filter_roots.contains(&root)
    };
    let spared_bytes: i64 = row_groups
        .iter()
        .flat_map(|rg| metadata.row_group(*rg).columns().iter().enumerate())
        .filter(|(leaf, _)| spared(*leaf))
        .map(|(_, chunk)| chunk.compressed_size())
        .sum();
    if filter_roots.is_empty()
        || spared_bytes < SPARED_BYTES_MIN.saturating_mul(row_groups.len() as i64)
    {
        return None;
    }
    let mask = ProjectionMask::roots(parquet_schema, filter_roots);
    let (ctx, partitions, file, failure) = (
        Arc::clone(ctx),
        Arc::clone(partitions),
        file.clone(),
        failure.clone(),
    );
    let evaluate = ArrowPredicateFn::new(mask, move |batch| {
        logical_rows(
            &ctx.filter_fields,
            &ctx.filter_schema,
            &batch,
            &partitions,
            mode,
            &file,
        )
        .and_then(|rows| evaluate_predicate(&predicate, &rows))
        .map_err(|e| failure.keep(e))
    });
    Some(RowFilter::new(vec![Box::new(evaluate)]))
}
