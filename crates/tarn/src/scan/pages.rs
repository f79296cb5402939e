//! Page pruning: the column index's bounds of the predicate's columns, page by page,
//! become a row selection of the pages that may hold a match in each row group, so the
//! decoder neither fetches nor decodes the others.

use std::collections::HashMap;

use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::OffsetIndexMetaData;

use super::ScanContext;
use super::row_groups::RowGroupStats;
use crate::expr::{ColumnName, Expr, Scalar, may_match};

/// For each of `row_groups` where the page index rules out some pages, the selection of
/// its rows (relative to the row group) in pages that may match `predicate`: for each
/// predicate column with a page index, its pages that may match, intersected over the
/// columns. A column is used only when its bounds alone can rule a page out; every other
/// column then counts as unknown, so the selection never drops a matching row. A page
/// index that does not add up (or that the statistics reader panics on) prunes nothing.
pub(super) fn page_selections(
    ctx: &ScanContext,
    predicate: &Expr,
    file_schema: &Schema,
    metadata: &ParquetMetaData,
    partitions: &HashMap<ColumnName, Scalar>,
    row_groups: &[usize],
) -> HashMap<usize, RowSelection> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        row_group_selections(
            ctx,
            predicate,
            file_schema,
            metadata,
            partitions,
            row_groups,
        )
    }))
    .unwrap_or_default()
}

fn row_group_selections(
    ctx: &ScanContext,
    predicate: &Expr,
    file_schema: &Schema,
    metadata: &ParquetMetaData,
    partitions: &HashMap<ColumnName, Scalar>,
    row_groups: &[usize],
) -> HashMap<usize, RowSelection> {
    let (Some(column_index), Some(offset_index)) =
        (metadata.column_index(), metadata.offset_index())
    else {
        return HashMap::new();
    };
    let descr = metadata.file_metadata().schema_descr();
    let mut selections = HashMap::new();
    for &rg in row_groups {
        let mut selection: Option<RowSelection> = None;
        for (column, info) in &ctx.columns {
            let [physical] = info.physical.as_slice() else {
                continue;
            };
            if partitions.contains_key(column) {
                continue;
            }
            let Ok(converter) = StatisticsConverter::try_new(physical, file_schema, descr) else {
                continue;
            };
            let converter = converter.with_missing_null_counts_as_zero(false);
            let Some(leaf) = converter.parquet_column_index() else {
                continue;
            };
            // INT96 bounds are not ordered by time in files written by Spark.
            if descr.column(leaf).physical_type() == PhysicalType::INT96 {
                continue;
            }
            let Some(locations) = offset_index.get(rg).and_then(|columns| columns.get(leaf)) else {
                continue;
            };
            let Some(rows) = page_rows(locations, metadata.row_group(rg).num_rows()) else {
                continue;
            };
            let bounded = column_index
                .get(rg)
                .and_then(|columns| columns.get(leaf))
                .is_some_and(|c| {
                    !matches!(c, ColumnIndexMetaData::NONE) && c.num_pages() == rows.len() as u64
                });
            if !bounded {
                continue;
            }
            let group = [rg];
            let bounds = (
                converter.data_page_mins(column_index, offset_index, &group),
                converter.data_page_maxes(column_index, offset_index, &group),
                converter.data_page_null_counts(column_index, offset_index, &group),
            );
            let (Ok(mins), Ok(maxes), Ok(nulls)) = bounds else {
                continue;
            };
            if [mins.len(), maxes.len(), nulls.len()] != [rows.len(); 3] {
                continue;
            }
            let stats = (mins, maxes, nulls);
            let pages = RowGroupStats::of_pages(ctx, partitions, column, stats, rows);
            let selectors: Vec<RowSelector> = (0..pages.units())
                .map(|page| {
                    let rows = pages.rows_of(page) as usize;
                    match may_match(predicate, &pages.at(page)) {
                        true => RowSelector::select(rows),
                        false => RowSelector::skip(rows),
                    }
                })
                .collect();
            if selectors.iter().all(|s| !s.skip) {
                continue;
            }
            let pages = RowSelection::from(selectors);
            selection = Some(match selection {
                Some(before) => before.intersection(&pages),
                None => pages,
            });
        }
        if let Some(selection) = selection {
            selections.insert(rg, selection);
        }
    }
    selections
}

/// The rows of each page of a column chunk, from its offset index, or none unless the
/// pages start at row 0, strictly ascend and end within the row group's `rows`: a wrong
/// count would shift the selection onto other rows.
fn page_rows(locations: &OffsetIndexMetaData, rows: i64) -> Option<Vec<u64>> {
    let starts: Vec<i64> = locations
        .page_locations()
        .iter()
        .map(|p| p.first_row_index)
        .collect();
    if starts.first() != Some(&0) || starts.windows(2).any(|w| w[0] >= w[1]) {
        return None;
    }
    let last = *starts.last()?;
    if last >= rows {
        return None;
    }
    let mut counts: Vec<u64> = starts.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
    counts.push((rows - last) as u64);
    Some(counts)
}

/// The selection over the row groups of `share` (each `(first row, rows)` in `kept`, in
/// order) that reads only the pages `pages` keeps, or none when no row group of the share
/// has pages ruled out.
pub(super) fn share_selection(
    pages: &HashMap<usize, RowSelection>,
    share: &[usize],
    kept: &[(u64, u64)],
) -> Option<RowSelection> {
    if !share.iter().any(|rg| pages.contains_key(rg)) {
        return None;
    }
    let mut selectors = Vec::new();
    for (rg, (_, rows)) in share.iter().zip(kept) {
        match pages.get(rg) {
            Some(selection) => selectors.extend(selection.iter().copied()),
            None => selectors.push(RowSelector::select(*rows as usize)),
        }
    }
    Some(RowSelection::from(selectors))
}
