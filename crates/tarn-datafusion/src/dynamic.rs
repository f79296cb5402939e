//! Files skipped at run time by the filters DataFusion fills while a query runs: a hash
//! join's build side bounds its probe side's keys (and a TopK its sort key), so once the
//! build side is read, a fact table's scan opens only the partitions those bounds allow
//! (TPC-DS's `store_sales` joined to a month of `date_dim`, say).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt64Array, new_null_array,
};
use arrow::compute::concat;
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr_common::physical_expr::snapshot_physical_expr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use tarn::expr::Scalar;
use tarn::protocol::{Add, PrimitiveType};

/// A partition column: its logical name (the scan's) and its key in `partitionValues`.
#[derive(Debug, Clone)]
pub(crate) struct PartitionKey {
    pub(crate) name: String,
    pub(crate) physical_name: String,
    pub(crate) data_type: PrimitiveType,
}

/// Which of `files` the `filters` (as they stand now) may match, judged by partition
/// values alone: `true` keeps a file. A filter that reads partition columns only is
/// evaluated on each file's values (so a join's hash lookup counts too); any other is
/// judged by pruning on them as bounds. A filter that cannot be judged keeps every file.
pub(crate) fn keep(
    files: &[&Add],
    filters: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
    partitions: &[PartitionKey],
) -> Vec<bool> {
    let mut kept = vec![true; files.len()];
    let statistics = PartitionStatistics {
        files,
        schema,
        partitions,
    };
    for filter in filters {
        // A dynamic filter's current expression; `true` until its producer fills it.
        let Ok(now) = snapshot_physical_expr(Arc::clone(filter)) else {
            continue;
        };
        if let Some(passes) = on_partition_values(&statistics, &now) {
            for (keep, pass) in kept.iter_mut().zip(passes) {
                *keep &= pass;
            }
            continue;
        }
        // None when it cannot prune (always true, or not a form pruning understands).
        let Some(predicate) = PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(schema))
            .build(now)
        else {
            continue;
        };
        if let Ok(may_match) = predicate.prune(&statistics) {
            for (keep, may) in kept.iter_mut().zip(may_match) {
                *keep &= may;
            }
        }
    }
    kept
}

/// `filter` evaluated on one row per file holding its partition values, when it reads
/// partition columns only: `true` where that row may pass. A value that does not parse
/// (or is missing) passes. `None` when the filter reads another column or cannot be
/// evaluated.
fn on_partition_values(
    statistics: &PartitionStatistics<'_>,
    filter: &Arc<dyn PhysicalExpr>,
) -> Option<Vec<bool>> {
    let columns = collect_columns(filter);
    let partition = |name: &str| statistics.partitions.iter().any(|p| p.name == name);
    if columns.is_empty() || !columns.iter().all(|c| partition(c.name())) {
        return None;
    }
    let files = statistics.files.len();
    let mut unparsed = vec![false; files];
    let mut arrays = Vec::new();
    for field in statistics.schema.fields() {
        let column = Column::from_name(field.name());
        let array = match statistics.parsed(&column) {
            Some(parsed) => {
                for (unparsed, unknown) in unparsed.iter_mut().zip(&parsed.unknown) {
                    *unparsed |= unknown;
                }
                parsed.values
            }
            // A partition column the filter reads must have values (else pruning judges).
            None if columns.iter().any(|c| c.name() == field.name()) => return None,
            None => new_null_array(field.data_type(), files),
        };
        arrays.push(array);
    }
    // Nulls stand in for the columns the filter does not read.
    let fields: Vec<Field> = statistics
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).ok()?;
    let result = filter.evaluate(&batch).ok()?.into_array(files).ok()?;
    let passes = result.as_boolean_opt()?;
    Some(
        (0..files)
            .map(|i| unparsed[i] || (passes.is_valid(i) && passes.value(i)))
            .collect(),
    )
}

/// The rows in a file (deleted ones too), when its statistics say.
fn rows(add: &Add) -> Option<u64> {
    add.stats.as_ref()?.num_records()
}

/// Each file as a container whose partition columns hold one value (minimum = maximum);
/// other columns are unknown, so they never skip a file. A null partition value is a
/// file of nulls in that column.
struct PartitionStatistics<'a> {
    files: &'a [&'a Add],
    schema: &'a SchemaRef,
    partitions: &'a [PartitionKey],
}

impl PartitionStatistics<'_> {
    /// The column's partition value per file, in its Arrow type (null where unknown,
    /// which prunes nothing).
    fn values(&self, column: &Column) -> Option<ArrayRef> {
        self.parsed(column).map(|parsed| parsed.values)
    }

    /// The column's partition value per file, read as Tarn's reader reads it (`""` is
    /// null, decimals truncate), in its Arrow type; `None` for a column that is not a
    /// partition column.
    fn parsed(&self, column: &Column) -> Option<Parsed> {
        let key = self.partitions.iter().find(|p| p.name == column.name)?;
        let ty = self.schema.field_with_name(&column.name).ok()?.data_type();
        let mut unknown = Vec::with_capacity(self.files.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.files.len());
        for add in self.files {
            let array = add
                .partition_values
                .get(&key.physical_name)
                .and_then(|value| Scalar::parse_partition(value.as_deref(), key.data_type).ok())
                .and_then(|scalar| scalar.to_array(ty, 1).ok());
            unknown.push(array.is_none());
            arrays.push(array.unwrap_or_else(|| new_null_array(ty, 1)));
        }
        let arrays: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        let values = concat(&arrays).ok()?;
        Some(Parsed { values, unknown })
    }
}

/// A partition column's values, one per file, and which of them are unknown (a missing
/// key, or text that does not parse).
struct Parsed {
    values: ArrayRef,
    unknown: Vec<bool>,
}

impl PruningStatistics for PartitionStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    /// A null partition value makes every row of its file null in that column, so a
    /// join key's bounds rule the file out.
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let parsed = self.parsed(column)?;
        let counts: UInt64Array = self
            .files
            .iter()
            .enumerate()
            .map(
                |(i, add)| match (parsed.unknown[i], parsed.values.is_null(i)) {
                    (true, _) => None,
                    (false, true) => rows(add),
                    (false, false) => Some(0),
                },
            )
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self.files.iter().map(|add| rows(add)).collect();
        Some(Arc::new(counts))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::PhysicalExpr;
    use datafusion::physical_expr::expressions::{binary, col, is_null, lit};
    use tarn::protocol::{Add, PrimitiveType};

    use super::{PartitionKey, keep};

    fn file(value: Option<&str>) -> Add {
        let value = serde_json::to_string(&value).unwrap();
        serde_json::from_str(&format!(
            r#"{{"path":"p","partitionValues":{{"k":{value}}},"size":1,
                "modificationTime":0,"dataChange":true,"stats":"{{\"numRecords\":3}}"}}"#
        ))
        .unwrap()
    }

    fn setup() -> (Vec<Add>, SchemaRef, Vec<PartitionKey>) {
        // Spark writes a NULL string partition as "", which Tarn's reader reads as null.
        let files = vec![file(Some("a")), file(Some("")), file(None), file(Some("b"))];
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        let key = PartitionKey {
            name: "k".into(),
            physical_name: "k".into(),
            data_type: PrimitiveType::String,
        };
        (files, schema, vec![key])
    }

    #[test]
    fn an_empty_partition_value_is_null_as_the_reader_reads_it() {
        let (files, schema, keys) = setup();
        let files: Vec<&Add> = files.iter().collect();
        // Evaluated on the values: `k IS NULL` keeps the "" and the null files.
        let null: Arc<dyn PhysicalExpr> = is_null(col("k", &schema).unwrap()).unwrap();
        assert_eq!(
            keep(&files, &[null], &schema, &keys),
            [false, true, true, false]
        );
        // `k >= 'b'` rules out "a" and both nulls ("" is not a string below "b").
        let at_least_b = binary(
            col("k", &schema).unwrap(),
            Operator::GtEq,
            lit("b"),
            &schema,
        )
        .unwrap();
        assert_eq!(
            keep(&files, &[at_least_b], &schema, &keys),
            [false, false, false, true]
        );
    }
}
