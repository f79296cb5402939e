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

use super::ScanContext;
use super::row_groups::RowGroupStats;
use crate::expr::{ColumnName, Expr, Scalar, may_match};

/// For each of `row_groups` where the page index rules out some pages, the selection of
/// its rows (relative to the row group) in pages that may match `predicate`: for each
/// predicate column with a page index, its pages that may match, intersected over the
/// columns. A column is used only when its bounds alone can rule a page out; every other
/// column then counts as unknown, so the selection never drops a matching row.
pub(super) fn page_selections(
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
            let Some(leaf) = converter.parquet_column_index() else {
                continue;
            };
            // INT96 bounds are not ordered by time in files written by Spark.
            if descr.column(leaf).physical_type() == PhysicalType::INT96 {
                continue;
            }
            let has_pages = offset_index
                .get(rg)
                .and_then(|columns| columns.get(leaf))
                .is_some_and(|o| !o.page_locations().is_empty());
            let has_bounds = column_index
                .get(rg)
                .and_then(|columns| columns.get(leaf))
                .is_some_and(|c| !matches!(c, ColumnIndexMetaData::NONE));
            if !has_pages || !has_bounds {
                continue;
            }
            let group = [rg];
            let bounds = (
                converter.data_page_mins(column_index, offset_index, &group),
                converter.data_page_maxes(column_index, offset_index, &group),
                converter.data_page_null_counts(column_index, offset_index, &group),
                converter.data_page_row_counts(offset_index, metadata.row_groups(), &group),
            );
            let (Ok(mins), Ok(maxes), Ok(nulls), Ok(Some(rows))) = bounds else {
                continue;
            };
            let rows = rows.values().to_vec();
            if [mins.len(), maxes.len(), nulls.len()] != [rows.len(); 3] {
                continue;
            }
            let pages =
                RowGroupStats::of_pages(ctx, partitions, column, (mins, maxes, nulls), rows);
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
