//! Typed statistics in checkpoints: the `add.stats_parsed` and `add.partitionValues_parsed`
//! columns Spark writes beside the JSON `stats`, their schema for a table, and the rows of
//! `stats_parsed` read back ([`ParsedRows`]), which `add` actions point into instead of
//! holding JSON text.

use std::any::Any;
use std::fmt::Write as _;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StructArray};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, Int32Type, Int64Type};

use super::lazy::{LazySections, SECTIONS, descend};
use crate::expr::Scalar;
use crate::protocol::stats::StatsRows;
use crate::protocol::{DataType, PrimitiveType, StructField, StructType};

/// The columns a checkpoint of a table holds beyond the classic ones.
#[derive(Debug, Clone)]
pub(crate) struct CheckpointLayout {
    /// Whether `add.stats` (JSON text) is written.
    pub(crate) stats_as_json: bool,
    /// The fields of `add.stats_parsed`, when it is written.
    pub(crate) stats_parsed: Option<Fields>,
    /// The partition columns (physical name, type) of `add.partitionValues_parsed`; empty
    /// when it is not written.
    pub(crate) partitions: Vec<(String, PrimitiveType)>,
    /// Whether the checkpoint follows the V2 spec: a `checkpointMetadata` row, for tables
    /// with the `v2Checkpoint` feature.
    pub(crate) v2: bool,
}

impl CheckpointLayout {
    /// Classic columns only: statistics as JSON text.
    pub(crate) fn classic() -> Self {
        Self {
            stats_as_json: true,
            stats_parsed: None,
            partitions: Vec::new(),
            v2: false,
        }
    }

    /// The layout, following the V2 spec when `v2`.
    pub(crate) fn with_v2(self, v2: bool) -> Self {
        Self { v2, ..self }
    }

    /// The layout of a table's checkpoints: typed statistics of the columns that get
    /// statistics (`num_indexed` leading leaves, partition columns aside) and typed
    /// partition values when `as_struct`, JSON statistics when `as_json`.
    pub(crate) fn of(
        schema: &StructType,
        partitions: &[(String, String, PrimitiveType)],
        num_indexed: i64,
        as_json: bool,
        as_struct: bool,
    ) -> Self {
        if !as_struct {
            return Self {
                stats_as_json: true,
                ..Self::classic()
            };
        }
        let skip: Vec<&str> = partitions.iter().map(|(l, _, _)| l.as_str()).collect();
        let mut budget = usize::try_from(num_indexed).unwrap_or(usize::MAX);
        let (bounds, nulls) = sections(&schema.fields, &skip, &mut budget);
        let mut fields = vec![Field::new("numRecords", ArrowType::Int64, true)];
        if !bounds.is_empty() {
            let bounds = ArrowType::Struct(Fields::from(bounds));
            fields.push(Field::new("minValues", bounds.clone(), true));
            fields.push(Field::new("maxValues", bounds, true));
        }
        if !nulls.is_empty() {
            fields.push(Field::new(
                "nullCount",
                ArrowType::Struct(Fields::from(nulls)),
                true,
            ));
        }
        fields.push(Field::new("tightBounds", ArrowType::Boolean, true));
        Self {
            stats_as_json: as_json,
            stats_parsed: Some(Fields::from(fields)),
            partitions: partitions
                .iter()
                .map(|(_, physical, ty)| (physical.clone(), *ty))
                .collect(),
            v2: false,
        }
    }

    /// The extra fields of the `add` struct, in order.
    pub(crate) fn add_fields(&self) -> Vec<Field> {
        let mut out = Vec::new();
        if let Some(fields) = &self.stats_parsed {
            out.push(Field::new(
                "stats_parsed",
                ArrowType::Struct(fields.clone()),
                true,
            ));
        }
        if !self.partitions.is_empty() {
            let fields: Vec<Field> = self
                .partitions
                .iter()
                .map(|(name, ty)| Field::new(name, ty.to_arrow(), true))
                .collect();
            out.push(Field::new(
                "partitionValues_parsed",
                ArrowType::Struct(Fields::from(fields)),
                true,
            ));
        }
        out
    }
}

/// The `minValues`/`maxValues` and `nullCount` fields of the columns in `fields` that get
/// statistics, by physical name, nested structs included, within `budget` leaves.
/// Booleans and binary have null counts but no bounds, as in Spark.
fn sections(fields: &[StructField], skip: &[&str], budget: &mut usize) -> (Vec<Field>, Vec<Field>) {
    let (mut bounds, mut nulls) = (Vec::new(), Vec::new());
    for field in fields.iter().filter(|f| !skip.contains(&f.name.as_str())) {
        if *budget == 0 {
            break;
        }
        let name = field.physical_name();
        match &field.data_type {
            DataType::Primitive(ty) => {
                *budget -= 1;
                nulls.push(Field::new(name, ArrowType::Int64, true));
                if !matches!(
                    ty,
                    PrimitiveType::Boolean | PrimitiveType::Binary | PrimitiveType::Variant
                ) {
                    bounds.push(Field::new(name, ty.to_arrow(), true));
                }
            }
            DataType::Struct(inner) => {
                let (b, n) = sections(&inner.fields, &[], budget);
                if !b.is_empty() {
                    bounds.push(Field::new(name, ArrowType::Struct(b.into()), true));
                }
                if !n.is_empty() {
                    nulls.push(Field::new(name, ArrowType::Struct(n.into()), true));
                }
            }
            other => *budget = budget.saturating_sub(other.leaf_count()),
        }
    }
    (bounds, nulls)
}

/// One batch of a checkpoint's `add.stats_parsed` column. Children of an unexpected type
/// are left out (those statistics count as absent, which only costs skipping).
#[derive(Debug)]
pub(crate) struct ParsedRows {
    all: StructArray,
    num_records: Option<ArrayRef>,
    tight_bounds: Option<BooleanArray>,
    sections: Sections,
}

/// `minValues`, `maxValues` and `nullCount`: decoded with the batch, or leaf by leaf
/// when first read.
#[derive(Debug)]
enum Sections {
    Decoded([Option<StructArray>; 3]),
    Lazy(LazySections),
}

impl ParsedRows {
    /// The statistics of a batch whose `stats_parsed` column `all` holds every section.
    pub(crate) fn new(all: &StructArray) -> Self {
        let section = |name: &str| {
            all.column_by_name(name)
                .and_then(|c| c.as_struct_opt())
                .cloned()
        };
        let sections = Sections::Decoded(SECTIONS.map(section));
        Self::with_sections(all, sections)
    }

    /// The statistics of a row group whose `stats_parsed` column `all` holds the row
    /// counts, with the sections read from `lazy` when asked for.
    pub(crate) fn lazy(all: &StructArray, lazy: LazySections) -> Self {
        Self::with_sections(all, Sections::Lazy(lazy))
    }

    fn with_sections(all: &StructArray, sections: Sections) -> Self {
        Self {
            num_records: all
                .column_by_name("numRecords")
                .filter(|c| matches!(c.data_type(), ArrowType::Int64 | ArrowType::Int32))
                .cloned(),
            tight_bounds: all
                .column_by_name("tightBounds")
                .and_then(|c| c.as_boolean_opt())
                .cloned(),
            sections,
            all: all.clone(),
        }
    }

    /// Whether row `row` holds statistics at all.
    pub(crate) fn is_valid(&self, row: usize) -> bool {
        self.all.is_valid(row)
    }

    fn leaf(&self, section: usize, path: &[String]) -> Option<&ArrayRef> {
        match &self.sections {
            Sections::Decoded(sections) => descend(sections[section].as_ref()?, path),
            Sections::Lazy(lazy) => lazy.leaf(section, path),
        }
    }

    /// How many lazy leaves have been decoded so far.
    #[cfg(test)]
    fn decoded_leaves(&self) -> Option<usize> {
        match &self.sections {
            Sections::Decoded(_) => None,
            Sections::Lazy(lazy) => Some(lazy.decoded()),
        }
    }

    fn section(&self, section: usize) -> Option<&StructArray> {
        match &self.sections {
            Sections::Decoded(sections) => sections[section].as_ref(),
            Sections::Lazy(lazy) => lazy.section(section),
        }
    }

    /// The `minValues` (or `maxValues`) array of the column at `path` (physical names).
    pub(crate) fn bounds(&self, max: bool, path: &[String]) -> Option<&ArrayRef> {
        self.leaf(usize::from(max), path)
    }

    /// The `nullCount` array of the column at `path`.
    pub(crate) fn null_counts(&self, path: &[String]) -> Option<&ArrayRef> {
        self.leaf(2, path)
    }

    /// `tightBounds` of a row, when recorded.
    pub(crate) fn tight_bounds(&self, row: usize) -> Option<bool> {
        let a = self.tight_bounds.as_ref()?;
        a.is_valid(row).then(|| a.value(row))
    }

    /// An integer count (`numRecords` or a null count) at `row`.
    pub(crate) fn count_at(array: &ArrayRef, row: usize) -> Option<u64> {
        if !array.is_valid(row) {
            return None;
        }
        let n = match array.data_type() {
            ArrowType::Int64 => array.as_primitive::<Int64Type>().value(row),
            ArrowType::Int32 => i64::from(array.as_primitive::<Int32Type>().value(row)),
            _ => return None,
        };
        u64::try_from(n).ok()
    }
}

impl StatsRows for ParsedRows {
    fn json(&self, row: usize) -> Option<String> {
        if !self.is_valid(row) {
            return None;
        }
        let mut out = String::with_capacity(256);
        out.push('{');
        let mut first = true;
        if let Some(n) = self
            .num_records
            .as_ref()
            .and_then(|a| Self::count_at(a, row))
        {
            push_key(&mut out, &mut first, "numRecords");
            let _ = write!(out, "{n}");
        }
        for (i, name) in SECTIONS.iter().enumerate() {
            let Some(section) = self.section(i) else {
                continue;
            };
            let (mark, was_first) = (out.len(), first);
            push_key(&mut out, &mut first, name);
            if !render_struct(&mut out, section, row) {
                out.truncate(mark);
                first = was_first;
            }
        }
        if let Some(tight) = self.tight_bounds(row) {
            push_key(&mut out, &mut first, "tightBounds");
            out.push_str(if tight { "true" } else { "false" });
        }
        out.push('}');
        Some(out)
    }

    fn num_records(&self, row: usize) -> Option<u64> {
        if !self.is_valid(row) {
            return None;
        }
        Self::count_at(self.num_records.as_ref()?, row)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Appends a JSON string: as is when nothing in it needs escaping (column names and most
/// values), through serde otherwise.
fn push_json_string(out: &mut String, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::String(text.to_string()).to_string());
    }
}

/// Appends `"name":`, after a comma unless it is the object's first key.
fn push_key(out: &mut String, first: &mut bool, name: &str) {
    if !std::mem::take(first) {
        out.push(',');
    }
    push_json_string(out, name);
    out.push(':');
}

/// Appends a struct row as a JSON object of its non-null leaves; appends nothing and
/// returns false when it has none. Runs for every file when a checkpoint is rewritten
/// from typed statistics, so it writes into one buffer.
fn render_struct(out: &mut String, section: &StructArray, row: usize) -> bool {
    if section.is_null(row) {
        return false;
    }
    let start = out.len();
    out.push('{');
    let mut first = true;
    for (field, child) in section.fields().iter().zip(section.columns()) {
        let (mark, was_first) = (out.len(), first);
        push_key(out, &mut first, field.name());
        let written = match child.as_struct_opt() {
            Some(inner) => render_struct(out, inner, row),
            None => push_leaf(out, child, row),
        };
        if !written {
            out.truncate(mark);
            first = was_first;
        }
    }
    if first {
        out.truncate(start);
        return false;
    }
    out.push('}');
    true
}

/// Appends a leaf value as Delta's statistics JSON writes it; false for nulls and values
/// statistics do not record.
fn push_leaf(out: &mut String, array: &ArrayRef, row: usize) -> bool {
    if array.is_null(row) {
        return false;
    }
    match array.data_type() {
        ArrowType::Int64 => {
            let _ = write!(out, "{}", array.as_primitive::<Int64Type>().value(row));
        }
        ArrowType::Int32 => {
            let _ = write!(out, "{}", array.as_primitive::<Int32Type>().value(row));
        }
        ArrowType::Utf8 => push_json_string(out, array.as_string::<i32>().value(row)),
        ty => {
            let value = primitive_of(ty)
                .and_then(|p| Scalar::from_array(array.as_ref(), row, p))
                .and_then(|v| v.to_stats_json());
            match value {
                Some(text) => out.push_str(&text),
                None => return false,
            }
        }
    }
    true
}

/// The Delta type an Arrow statistics column holds.
fn primitive_of(ty: &ArrowType) -> Option<PrimitiveType> {
    use PrimitiveType as P;
    Some(match ty {
        ArrowType::Boolean => P::Boolean,
        ArrowType::Int8 => P::Byte,
        ArrowType::Int16 => P::Short,
        ArrowType::Int32 => P::Integer,
        ArrowType::Int64 => P::Long,
        ArrowType::Float32 => P::Float,
        ArrowType::Float64 => P::Double,
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => P::String,
        ArrowType::Date32 => P::Date,
        ArrowType::Timestamp(_, Some(_)) => P::Timestamp,
        ArrowType::Timestamp(_, None) => P::TimestampNtz,
        ArrowType::Decimal128(p, s) => P::Decimal(*p, *s),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use arrow::array::{AsArray, RecordBatch};
    use arrow::datatypes::{Date32Type, Decimal128Type, Int32Type, Int64Type};
    use bytes::Bytes;
    use object_store::path::Path;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::log::checkpoint::parse_checkpoint_parquet;
    use crate::log::checkpoint_write::encode_checkpoint;
    use crate::protocol::{Action, Add};

    fn schema() -> StructType {
        StructType::from_json(
            r#"{"type":"struct","fields":[
            {"name":"id","type":"long","nullable":true,"metadata":{}},
            {"name":"name","type":"string","nullable":true,"metadata":{}},
            {"name":"day","type":"date","nullable":true,"metadata":{}},
            {"name":"at","type":"timestamp","nullable":true,"metadata":{}},
            {"name":"price","type":"decimal(10,2)","nullable":true,"metadata":{}},
            {"name":"ok","type":"boolean","nullable":true,"metadata":{}},
            {"name":"p","type":"integer","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap()
    }

    const STATS: &str = r#"{"numRecords":3,"minValues":{"id":1,"name":"a\"b","day":"2024-01-02","at":"2024-01-02T03:04:05.000Z","price":1.25},"maxValues":{"id":9,"name":"z","day":"2024-02-03","at":"2024-02-03T00:00:00.000Z","price":99.5},"nullCount":{"id":0,"name":1,"day":0,"at":0,"price":0,"ok":2},"tightBounds":true}"#;

    fn add(path: &str, p: Option<&str>, stats: Option<&str>) -> Action {
        Action::Add(Add {
            path: path.into(),
            partition_values: [("p".to_string(), p.map(str::to_string))].into(),
            size: 1,
            modification_time: 0,
            data_change: false,
            stats: stats.map(Into::into),
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        })
    }

    fn layout(as_json: bool) -> CheckpointLayout {
        let partitions = [("p".to_string(), "p".to_string(), PrimitiveType::Integer)];
        CheckpointLayout::of(&schema(), &partitions, 32, as_json, true)
    }

    fn adds(bytes: Bytes) -> Vec<Add> {
        let mut adds: Vec<Add> = parse_checkpoint_parquet(bytes, &Path::from("cp"))
            .unwrap()
            .into_iter()
            .flatten()
            .filter_map(|a| match a {
                Action::Add(a) => Some(a),
                _ => None,
            })
            .collect();
        adds.sort_by(|a, b| a.path.cmp(&b.path));
        adds
    }

    fn add_column(bytes: Bytes) -> arrow::array::StructArray {
        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        batch.column_by_name("add").unwrap().as_struct().clone()
    }

    #[test]
    fn files_of_one_partition_share_their_decoded_values() {
        let parts = [Some("7"), None, Some("7"), Some("8"), None];
        let actions: Vec<Action> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| add(&format!("{i}.parquet"), *p, None))
            .collect();
        let read = adds(encode_checkpoint(&actions, &layout(false)).unwrap());
        let values: Vec<Option<&str>> = read
            .iter()
            .map(|a| a.partition_values.get("p").unwrap().as_deref())
            .collect();
        assert_eq!(values, parts);
        let shared = |a: usize, b: usize| {
            read[a]
                .partition_values
                .shares_map_with(&read[b].partition_values)
        };
        assert!(shared(0, 2) && shared(1, 4));
        assert!(!shared(0, 1) && !shared(0, 3));
    }

    #[test]
    fn checkpoints_carry_typed_statistics_and_partition_values() {
        let actions = vec![
            add("a.parquet", Some("7"), Some(STATS)),
            add("b.parquet", None, None),
        ];
        let bytes = encode_checkpoint(&actions, &layout(true)).unwrap();
        let add = add_column(bytes.clone());
        let parsed = add.column_by_name("stats_parsed").unwrap().as_struct();
        let rows = parsed.column_by_name("numRecords").unwrap();
        assert_eq!(rows.as_primitive::<Int64Type>().value(0), 3);
        assert!(parsed.is_null(1), "a file without statistics has none");
        let min = parsed.column_by_name("minValues").unwrap().as_struct();
        let max = parsed.column_by_name("maxValues").unwrap().as_struct();
        let col = |s: &arrow::array::StructArray, n: &str| s.column_by_name(n).unwrap().clone();
        assert_eq!(col(min, "id").as_primitive::<Int64Type>().value(0), 1);
        assert_eq!(col(max, "name").as_string::<i32>().value(0), "z");
        assert_eq!(col(min, "name").as_string::<i32>().value(0), "a\"b");
        assert_eq!(
            col(min, "day").as_primitive::<Date32Type>().value(0),
            19_724
        );
        assert_eq!(
            col(max, "price").as_primitive::<Decimal128Type>().value(0),
            9_950
        );
        assert!(
            min.column_by_name("ok").is_none(),
            "booleans have no bounds"
        );
        assert!(
            min.column_by_name("p").is_none(),
            "partition columns have none"
        );
        let nulls = parsed.column_by_name("nullCount").unwrap().as_struct();
        assert_eq!(col(nulls, "ok").as_primitive::<Int64Type>().value(0), 2);
        let parts = add
            .column_by_name("partitionValues_parsed")
            .unwrap()
            .as_struct();
        let p = col(parts, "p");
        assert_eq!(p.as_primitive::<Int32Type>().value(0), 7);
        assert!(p.is_null(1));
        // The JSON text is still there for readers that want it.
        let json = add.column_by_name("stats").unwrap().as_string::<i32>();
        assert_eq!(json.value(0), STATS);
    }

    #[test]
    fn typed_statistics_read_back_as_the_same_statistics() {
        for as_json in [true, false] {
            let actions = vec![
                add("a.parquet", Some("7"), Some(STATS)),
                add("b.parquet", None, None),
            ];
            let bytes = encode_checkpoint(&actions, &layout(as_json)).unwrap();
            let read = adds(bytes);
            let stats = read[0].stats.as_ref().unwrap();
            assert!(stats.typed().is_some(), "read from stats_parsed, not JSON");
            assert_eq!(stats.num_records(), Some(3));
            let back: serde_json::Value = serde_json::from_str(&stats.json()).unwrap();
            let want: serde_json::Value = serde_json::from_str(STATS).unwrap();
            assert_eq!(back, want, "as_json = {as_json}");
            assert!(read[1].stats.is_none());
        }
    }

    #[test]
    fn checkpoint_statistics_decode_leaf_by_leaf_when_first_read() {
        let actions = vec![
            add("a.parquet", Some("7"), Some(STATS)),
            add("b.parquet", None, None),
        ];
        let read = adds(encode_checkpoint(&actions, &layout(false)).unwrap());
        let (rows, row) = crate::stats::typed_row(read[0].stats.as_ref().unwrap()).unwrap();
        assert_eq!(rows.decoded_leaves(), Some(0), "nothing decoded at open");
        assert_eq!(rows.tight_bounds(row), Some(true));
        assert_eq!(StatsRows::num_records(rows, row), Some(3));
        let path = |name: &str| vec![name.to_string()];
        let min = rows.bounds(false, &path("id")).unwrap();
        assert_eq!(min.as_primitive::<Int64Type>().value(row), 1);
        assert_eq!(rows.decoded_leaves(), Some(1));
        let max = rows.bounds(true, &path("name")).unwrap();
        assert_eq!(max.as_string::<i32>().value(row), "z");
        let nulls = rows.null_counts(&path("ok")).unwrap();
        assert_eq!(ParsedRows::count_at(nulls, row), Some(2));
        assert!(rows.bounds(false, &path("absent")).is_none());
        assert_eq!(rows.decoded_leaves(), Some(3));
        // The same leaf again is the decoded one.
        assert!(std::ptr::eq(
            rows.bounds(false, &path("id")).unwrap(),
            rows.bounds(false, &path("id")).unwrap()
        ));
        assert_eq!(rows.decoded_leaves(), Some(3));
    }

    #[test]
    fn statistics_that_do_not_fit_their_types_stay_json() {
        let bad = r#"{"numRecords":1,"minValues":{"id":"not a number"}}"#;
        let actions = vec![add("a.parquet", Some("1"), Some(bad))];
        let bytes = encode_checkpoint(&actions, &layout(true)).unwrap();
        assert!(
            add_column(bytes.clone())
                .column_by_name("stats_parsed")
                .is_none()
        );
        let read = adds(bytes);
        let stats = read[0].stats.as_ref().unwrap();
        assert!(stats.typed().is_none());
        assert_eq!(stats.json(), bad);
    }

    #[test]
    fn leaves_beyond_the_indexed_count_get_no_typed_statistics() {
        let layout = CheckpointLayout::of(&schema(), &[], 2, true, true);
        let fields = layout.stats_parsed.unwrap();
        let ArrowType::Struct(min) = fields.find("minValues").unwrap().1.data_type() else {
            panic!("minValues is a struct");
        };
        let names: Vec<&str> = min.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name"]);
        let off = CheckpointLayout::of(&schema(), &[], 32, true, false);
        assert!(off.stats_parsed.is_none() && off.partitions.is_empty());
    }

    #[test]
    fn nested_statistics_render_back_without_their_absent_parts() {
        let schema = StructType::from_json(
            r#"{"type":"struct","fields":[
            {"name":"s","type":{"type":"struct","fields":[
                {"name":"a","type":"long","nullable":true,"metadata":{}},
                {"name":"b","type":"string","nullable":true,"metadata":{}}]},
             "nullable":true,"metadata":{}},
            {"name":"t","type":"string","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let layout = CheckpointLayout::of(&schema, &[], 32, true, true);
        // `b` has no bounds (all null) and `t` none at all: they stay absent.
        let stats = r#"{"numRecords":2,"minValues":{"s":{"a":-1}},"maxValues":{"s":{"a":7,"b":"x\ny"}},"nullCount":{"s":{"a":0,"b":2},"t":2}}"#;
        let bytes = encode_checkpoint(&[add("a.parquet", None, Some(stats))], &layout).unwrap();
        let read = adds(bytes);
        let back = read[0].stats.as_ref().unwrap();
        assert!(back.typed().is_some());
        let back: serde_json::Value = serde_json::from_str(&back.json()).unwrap();
        let want: serde_json::Value = serde_json::from_str(stats).unwrap();
        assert_eq!(back, want);
    }
}
