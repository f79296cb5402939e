//! File statistics: reading the `stats` JSON of `add` actions for data skipping, and
//! writing it for the files Tarn creates.

pub(crate) mod lazy;
pub(crate) mod parsed;

use std::collections::HashMap;
use std::fmt::Write as _;

use arrow::array::Array;
use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::expr::{ColumnName, Scalar, StatsView, resolve_column};
use crate::protocol::stats::StatsRows;
use crate::protocol::{DataType, PrimitiveType, StructType};
use crate::stats::parsed::ParsedRows;

/// The `stats` of a file, as written in its `add` action.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileStats {
    pub(crate) num_records: Option<u64>,
    #[serde(default)]
    pub(crate) min_values: Map<String, Value>,
    #[serde(default)]
    pub(crate) max_values: Map<String, Value>,
    #[serde(default)]
    pub(crate) null_count: Map<String, Value>,
    tight_bounds: Option<bool>,
}

impl FileStats {
    /// Parses stats JSON; malformed stats count as absent (they only help skipping).
    pub(crate) fn parse(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }
}

/// The value at `path` (nested keys) of a statistics map.
pub(crate) fn lookup<'a>(map: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let value = map.get(first)?;
    if rest.is_empty() {
        Some(value)
    } else {
        lookup(value.as_object()?, rest)
    }
}

/// How a logical column appears in stats and partition values.
#[derive(Debug, Clone)]
pub(crate) struct ColumnInfo {
    /// The path of physical names.
    pub(crate) physical: Vec<String>,
    /// The column's type.
    pub(crate) ty: PrimitiveType,
}

/// Resolves the primitive columns of a predicate to their physical paths and types.
/// Columns whose type was widened are left out: statistics of files written before the
/// change hold the narrower type's values, which need not bound the widened ones.
pub(crate) fn column_infos(
    schema: &StructType,
    columns: impl IntoIterator<Item = ColumnName>,
) -> HashMap<ColumnName, ColumnInfo> {
    let mut out = HashMap::new();
    for column in columns {
        // Variants have no bounds to prune by.
        let Ok(DataType::Primitive(ty)) = resolve_column(schema, &column) else {
            continue;
        };
        if *ty == PrimitiveType::Variant {
            continue;
        }
        let mut physical = Vec::new();
        let mut widened = false;
        let mut fields = schema;
        for segment in column.path() {
            let Some(field) = fields.field(segment) else {
                break;
            };
            if crate::protocol::widening::widened(field) {
                widened = true;
            }
            physical.push(field.physical_name().to_string());
            if let DataType::Struct(s) = &field.data_type {
                fields = s;
            }
        }
        if !widened {
            out.insert(column, ColumnInfo { physical, ty: *ty });
        }
    }
    out
}

/// One file's statistics for pruning: a row of a checkpoint's typed `stats_parsed`,
/// read in place, or its JSON, parsed.
pub(crate) enum AnyStats<'a> {
    Json(FileStats),
    Typed(&'a ParsedRows, usize),
}

impl<'a> AnyStats<'a> {
    /// The statistics of `add`, if it has any that read.
    pub(crate) fn of(add: &'a crate::protocol::Add) -> Option<Self> {
        let stats = add.stats.as_ref()?;
        match typed_row(stats) {
            Some((rows, row)) => Some(Self::Typed(rows, row)),
            None => FileStats::parse(&stats.json()).map(Self::Json),
        }
    }

    fn bound(&self, info: &ColumnInfo, max: bool) -> Option<Scalar> {
        match self {
            Self::Json(stats) => {
                let map = if max {
                    &stats.max_values
                } else {
                    &stats.min_values
                };
                Scalar::from_stats_json(lookup(map, &info.physical)?, info.ty)
            }
            Self::Typed(rows, row) => {
                let array = rows.bounds(max, &info.physical)?;
                Scalar::from_array(array.as_ref(), *row, info.ty).filter(|v| !v.is_null())
            }
        }
    }

    /// The null count, unless loose bounds (`tightBounds: false`, after a deletion
    /// vector) make it unsafe: they may overcount nulls too.
    fn null_count(&self, info: &ColumnInfo) -> Option<u64> {
        match self {
            Self::Json(stats) => {
                if stats.tight_bounds == Some(false) {
                    return None;
                }
                lookup(&stats.null_count, &info.physical)?.as_u64()
            }
            Self::Typed(rows, row) => {
                if rows.tight_bounds(*row) == Some(false) {
                    return None;
                }
                ParsedRows::count_at(rows.null_counts(&info.physical)?, *row)
            }
        }
    }

    fn num_records(&self) -> Option<u64> {
        match self {
            Self::Json(stats) => stats.num_records,
            Self::Typed(rows, row) => StatsRows::num_records(*rows, *row),
        }
    }
}

/// The typed statistics (a checkpoint's `stats_parsed` row) a file's stats point at.
pub(crate) fn typed_row(stats: &crate::protocol::Stats) -> Option<(&ParsedRows, usize)> {
    let (rows, row) = stats.typed()?;
    Some((rows.as_any().downcast_ref::<ParsedRows>()?, row))
}

/// Statistics of one file: its statistics plus its partition values, which are exact.
pub(crate) struct FileStatsView<'a> {
    pub(crate) stats: Option<&'a AnyStats<'a>>,
    pub(crate) columns: &'a HashMap<ColumnName, ColumnInfo>,
    pub(crate) partitions: &'a HashMap<ColumnName, Scalar>,
}

impl FileStatsView<'_> {
    fn bound(&self, column: &ColumnName, max: bool) -> Option<Scalar> {
        if let Some(v) = self.partitions.get(column) {
            return Some(v.clone());
        }
        let info = self.columns.get(column)?;
        self.stats?.bound(info, max)
    }
}

impl StatsView for FileStatsView<'_> {
    fn min(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, false)
    }

    fn max(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, true)
    }

    fn null_count(&self, column: &ColumnName) -> Option<u64> {
        if let Some(v) = self.partitions.get(column) {
            return match v {
                Scalar::Null => self.row_count(),
                _ => Some(0),
            };
        }
        let info = self.columns.get(column)?;
        self.stats?.null_count(info)
    }

    fn row_count(&self) -> Option<u64> {
        self.stats?.num_records()
    }

    fn all_null(&self, column: &ColumnName) -> bool {
        match self.partitions.get(column) {
            Some(v) => v.is_null(),
            None => {
                matches!((self.null_count(column), self.row_count()), (Some(n), Some(r)) if n == r)
            }
        }
    }
}

/// A file's live rows from the log: its `numRecords` statistic minus its deletion
/// vector's cardinality; `None` without the statistic.
pub(crate) fn live_rows(add: &crate::protocol::Add) -> Option<u64> {
    let records = add.stats.as_ref()?.num_records()?;
    let deleted = add
        .deletion_vector
        .as_ref()
        .map_or(0, |dv| dv.cardinality.max(0) as u64);
    Some(records.saturating_sub(deleted))
}

/// Longest string prefix kept in statistics, as Spark does.
const STRING_PREFIX: usize = 32;

/// Builds the stats JSON of a written file from its Parquet footer: `numRecords`, and for
/// top-level primitive data columns among the first `num_indexed` leaves, and those in
/// `always` (a clustered table's columns), `minValues`, `maxValues` (not for booleans and
/// binary) and `nullCount`.
pub(crate) fn stats_json(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    table: &StructType,
    partition_columns: &[String],
    num_indexed: i64,
    always: &[String],
) -> String {
    let rows: i64 = metadata.row_groups().iter().map(|rg| rg.num_rows()).sum();
    let mut mins = Vec::new();
    let mut maxes = Vec::new();
    let mut nulls = Vec::new();
    let budget = if num_indexed < 0 {
        usize::MAX
    } else {
        num_indexed as usize
    };
    let mut used = 0usize;
    for field in table
        .fields
        .iter()
        .filter(|f| !partition_columns.contains(&f.name))
    {
        let within = used < budget;
        used = used.saturating_add(field.data_type.leaf_count());
        if !within && !always.contains(&field.name) {
            continue;
        }
        let DataType::Primitive(ty) = field.data_type else {
            continue;
        };
        // Files and statistics use physical names under column mapping.
        let Ok(converter) = StatisticsConverter::try_new(
            field.physical_name(),
            file_schema,
            metadata.file_metadata().schema_descr(),
        ) else {
            continue;
        };
        let groups = metadata.row_groups().iter();
        if let Ok(counts) = converter.row_group_null_counts(groups.clone())
            && counts.null_count() == 0
        {
            nulls.push((
                field.physical_name().to_string(),
                counts.values().iter().sum::<u64>().to_string(),
            ));
        }
        if matches!(
            ty,
            PrimitiveType::Boolean | PrimitiveType::Binary | PrimitiveType::Variant
        ) {
            continue;
        }
        let (Ok(min_array), Ok(max_array)) = (
            converter.row_group_mins(groups.clone()),
            converter.row_group_maxes(groups),
        ) else {
            continue;
        };
        let fold = |array: &dyn arrow::array::Array, want: std::cmp::Ordering| {
            let mut best: Option<Scalar> = None;
            for i in 0..array.len() {
                match Scalar::from_array(array, i, ty) {
                    Some(Scalar::Null) | None => continue,
                    Some(v) => {
                        if best.as_ref().is_none_or(|b| v.compare(b) == Some(want)) {
                            best = Some(v);
                        }
                    }
                }
            }
            best
        };
        // A row group whose column is all null has no bounds; the others still bound it.
        if let Some(min) = fold(min_array.as_ref(), std::cmp::Ordering::Less).and_then(lower_bound)
        {
            mins.push((field.physical_name().to_string(), min));
        }
        if let Some(max) =
            fold(max_array.as_ref(), std::cmp::Ordering::Greater).and_then(upper_bound)
        {
            maxes.push((field.physical_name().to_string(), max));
        }
    }
    let mut out = format!("{{\"numRecords\":{rows}");
    for (key, entries) in [
        ("minValues", mins),
        ("maxValues", maxes),
        ("nullCount", nulls),
    ] {
        if entries.is_empty() {
            continue;
        }
        let _ = write!(out, ",\"{key}\":{{");
        for (i, (name, value)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{value}", Value::String(name.clone()));
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// A minimum as stats JSON: strings are cut to a prefix, which stays a lower bound.
fn lower_bound(v: Scalar) -> Option<String> {
    match v {
        Scalar::String(s) if s.chars().count() > STRING_PREFIX => {
            Scalar::String(s.chars().take(STRING_PREFIX).collect()).to_stats_json()
        }
        other => other.to_stats_json(),
    }
}

/// A maximum as stats JSON: strings are cut to a prefix followed by the highest code point,
/// and timestamps (written in milliseconds) are rounded up, so the result stays an upper
/// bound.
fn upper_bound(v: Scalar) -> Option<String> {
    match v {
        Scalar::String(s) if s.chars().count() > STRING_PREFIX => {
            let mut cut: String = s.chars().take(STRING_PREFIX).collect();
            cut.push(char::MAX);
            Scalar::String(cut).to_stats_json()
        }
        Scalar::Timestamp(us) => Scalar::Timestamp(round_up_ms(us)).to_stats_json(),
        Scalar::TimestampNtz(us) => Scalar::TimestampNtz(round_up_ms(us)).to_stats_json(),
        other => other.to_stats_json(),
    }
}

/// The last microsecond Delta timestamps reach: 9999-12-31T23:59:59.999999.
const MAX_TIMESTAMP_US: i64 = 253_402_300_799_999_999;

/// A timestamp rounded up to the end of its millisecond, except in the last millisecond
/// of year 9999, where rounding would leave the range readers parse; readers extend a
/// maximum to the end of its millisecond anyway.
fn round_up_ms(us: i64) -> i64 {
    match us.checked_add(999) {
        Some(up) if up <= MAX_TIMESTAMP_US => up,
        _ => us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_views_read_nested_physical_paths_and_partitions() {
        let stats = FileStats::parse(
            r#"{"numRecords":4,"minValues":{"col-1":{"x":3}},"maxValues":{"col-1":{"x":9}},"nullCount":{"col-1":{"x":1}}}"#,
        )
        .unwrap();
        let column = ColumnName::new(["s", "x"]);
        let columns = HashMap::from([(
            column.clone(),
            ColumnInfo {
                physical: vec!["col-1".into(), "x".into()],
                ty: PrimitiveType::Long,
            },
        )]);
        let partitions = HashMap::from([(ColumnName::new(["p"]), Scalar::Null)]);
        let view = FileStatsView {
            stats: Some(&AnyStats::Json(stats)),
            columns: &columns,
            partitions: &partitions,
        };
        assert_eq!(view.min(&column), Some(Scalar::Long(3)));
        assert_eq!(view.max(&column), Some(Scalar::Long(9)));
        assert_eq!(view.null_count(&column), Some(1));
        assert_eq!(view.null_count(&ColumnName::new(["p"])), Some(4));
        assert!(FileStats::parse("{not json").is_none());
    }

    #[test]
    fn bounds_stay_bounds_after_truncation() {
        let long = "x".repeat(40);
        let lo = lower_bound(Scalar::String(long.clone())).unwrap();
        let hi = upper_bound(Scalar::String(long.clone())).unwrap();
        let lo: String = serde_json::from_str(&lo).unwrap();
        let hi: String = serde_json::from_str(&hi).unwrap();
        assert!(lo <= long && long <= hi);
        assert_eq!(
            upper_bound(Scalar::Timestamp(1_500)).unwrap(),
            "\"1970-01-01T00:00:00.002Z\""
        );
        assert_eq!(
            upper_bound(Scalar::Timestamp(2_000)).unwrap(),
            "\"1970-01-01T00:00:00.002Z\""
        );
        // The last millisecond of year 9999 stays in the range readers parse.
        assert_eq!(
            upper_bound(Scalar::Timestamp(MAX_TIMESTAMP_US)).unwrap(),
            "\"9999-12-31T23:59:59.999Z\""
        );
    }
}
