//! A MERGE's inputs, checked and bound: the source with its keys converted to the
//! target's types and hashed for matching, the clauses bound to the combined
//! `{target, source}` schema, and the predicate that prunes target files by key.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, RecordBatch, StructArray, UInt32Array, new_null_array,
};
use arrow::compute::{and, concat_batches, take};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};

use super::super::true_mask;
use super::super::update::{Assignment, bind_assignment};
use super::Clause;
use super::int_lookup::IntLookup;
use crate::conform::{Source, conform};
use crate::error::{Error, Result};
use crate::expr::{Expr, Scalar, col, evaluate_predicate};
use crate::protocol::{DataType, StructField, StructType};
use crate::snapshot::Snapshot;

/// Source keys up to this many distinct values prune target files with an IN list;
/// more with their range.
const IN_LIST_LIMIT: usize = 1000;

/// A clause bound for execution: a condition (on the combined batch) and assignments
/// (`None` for a delete).
pub(super) struct BoundClause {
    pub(super) condition: Option<Expr>,
    pub(super) assignments: Option<Vec<Assignment>>,
}

impl BoundClause {
    /// The rows still undecided for which the condition holds.
    pub(super) fn mask(
        &self,
        batch: &RecordBatch,
        remaining: &BooleanArray,
    ) -> Result<BooleanArray> {
        let hit = match &self.condition {
            Some(c) => true_mask(evaluate_predicate(c, batch)?),
            None => BooleanArray::from(vec![true; batch.num_rows()]),
        };
        and(&hit, remaining).map_err(Error::arrow("evaluating a merge clause"))
    }
}

/// Everything the MERGE needs once its inputs are checked.
pub(super) struct MergePlan {
    pub(super) source: RecordBatch,
    pub(super) target_schema: SchemaRef,
    pub(super) target_keys: Vec<usize>,
    pub(super) source_keys: Vec<ArrayRef>,
    pub(super) converter: RowConverter,
    pub(super) lookup: HashMap<Vec<u8>, Vec<u32>>,
    /// With one integer key: the source rows by key and the keys' range, probed on the
    /// target's values directly (no row encoding of every target row).
    pub(super) int_lookup: Option<IntLookup>,
    pub(super) condition: Option<Expr>,
    pub(super) key_filter: Option<Expr>,
    pub(super) matched: Vec<BoundClause>,
    pub(super) not_matched: Vec<BoundClause>,
    pub(super) by_source: Vec<BoundClause>,
    pub(super) key_names: Vec<String>,
}

/// `batch` with its dictionary-encoded columns (as Parquet readers and other engines
/// hand out) decoded to their values, which Delta types describe.
///
/// Fails when a column cannot be decoded.
fn without_dictionaries(batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), ArrowType::Dictionary(..)))
    {
        return Ok(batch.clone());
    }
    let (mut fields, mut columns) = (Vec::new(), Vec::new());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            ArrowType::Dictionary(_, values) => {
                let decoded = arrow::compute::cast(column, values).map_err(Error::arrow(
                    format!("decoding source column {:?}", field.name()),
                ))?;
                fields.push(
                    field
                        .as_ref()
                        .clone()
                        .with_data_type(values.as_ref().clone()),
                );
                columns.push(decoded);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(Arc::clone(column));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(Error::arrow("decoding source dictionaries"))
}

/// `{ target: struct, source: struct }`, the schema conditions and values are bound to.
fn combined_schema(target: &StructType, source: &StructType) -> StructType {
    let nullable = |s: &StructType| {
        StructType::new(
            s.fields
                .iter()
                .map(|f| StructField::new(f.name.clone(), f.data_type.clone(), true))
                .collect(),
        )
    };
    StructType::new(vec![
        StructField::new("target", DataType::Struct(nullable(target)), true),
        StructField::new("source", DataType::Struct(nullable(source)), true),
    ])
}

impl MergePlan {
    // Long by design: one pass that binds every clause against the source and target
    // schemas in order, so each binding rule reads beside the others.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        snapshot: &Snapshot,
        source: Vec<RecordBatch>,
        keys: &[(String, String)],
        condition: Option<&Expr>,
        clauses: &[Clause],
    ) -> Result<Self> {
        let mismatch = |reason: String| Error::SchemaMismatch { reason };
        let source = source
            .iter()
            .map(without_dictionaries)
            .collect::<Result<Vec<_>>>()?;
        let source_schema =
            source
                .first()
                .map(RecordBatch::schema)
                .ok_or_else(|| Error::InvalidArgument {
                    name: "source",
                    reason: "a merge needs at least one source batch (it may be empty)".into(),
                })?;
        // Concatenation pairs columns by position: batches must agree on them first.
        if let Some(other) = source
            .iter()
            .find(|b| b.schema().fields() != source_schema.fields())
        {
            return Err(mismatch(format!(
                "the source batches differ in schema: {:?} after {:?}",
                other.schema().fields(),
                source_schema.fields()
            )));
        }
        let source = concat_batches(&source_schema, &source)
            .map_err(|e| mismatch(format!("the source batches differ in schema: {e}")))?;
        let target = snapshot.schema();
        let source_delta = StructType::try_from_arrow(&source_schema)?;
        let combined = combined_schema(target, &source_delta);
        let target_only = StructType::new(vec![combined.fields[0].clone()]);
        let source_only = StructType::new(vec![combined.fields[1].clone()]);

        // Keys: source values converted to the target's key types, losslessly.
        let mut target_keys = Vec::new();
        let mut source_keys = Vec::new();
        let mut sort_fields = Vec::new();
        for (t, s) in keys {
            let index = target
                .fields
                .iter()
                .position(|f| &f.name == t)
                .ok_or_else(|| Error::UnknownColumn {
                    column: t.clone(),
                    available: target.field_names(),
                })?;
            let field = &target.fields[index];
            let column = source
                .column_by_name(s)
                .ok_or_else(|| mismatch(format!("the source has no key column {s:?}")))?;
            let converted = conform(column, field, Source::Input).map_err(mismatch)?;
            sort_fields.push(SortField::new(field.data_type.to_arrow()));
            target_keys.push(index);
            source_keys.push(converted);
        }
        let converter =
            RowConverter::new(sort_fields).map_err(Error::arrow("preparing merge keys"))?;
        // One integer key is probed on its values; others on their row encoding.
        let int_lookup = IntLookup::of(&source_keys);
        let mut lookup: HashMap<Vec<u8>, Vec<u32>> = HashMap::new();
        if int_lookup.is_none() {
            let rows = converter
                .convert_columns(&source_keys)
                .map_err(Error::arrow("preparing merge keys"))?;
            for i in 0..source.num_rows() {
                if source_keys.iter().any(|k| k.is_null(i)) {
                    continue;
                }
                lookup
                    .entry(rows.row(i).as_ref().to_vec())
                    .or_default()
                    .push(i as u32);
            }
        }

        let bind_all = |sets: &[(String, Expr)], values: &StructType| -> Result<Vec<Assignment>> {
            sets.iter()
                .map(|(c, e)| bind_assignment(target, values, c, e))
                .collect()
        };
        let by_name = |prefix: &str| -> Result<Vec<Assignment>> {
            target
                .fields
                .iter()
                .filter(|f| source_delta.field(&f.name).is_some())
                .map(|f| {
                    let value = crate::expr::nested_col([prefix.to_string(), f.name.clone()]);
                    bind_assignment(target, &combined, &f.name, &value)
                        .map_err(|e| mismatch(format!("source column {:?}: {e}", f.name)))
                })
                .collect()
        };
        let bind_condition =
            |c: &Option<Expr>, schema: &StructType| c.as_ref().map(|c| c.bind(schema)).transpose();
        let (mut matched, mut not_matched, mut by_source) = (Vec::new(), Vec::new(), Vec::new());
        for clause in clauses {
            match clause {
                Clause::MatchedUpdate(c, sets) => matched.push(BoundClause {
                    condition: bind_condition(c, &combined)?,
                    assignments: Some(bind_all(sets, &combined)?),
                }),
                Clause::MatchedUpdateAll(c) => matched.push(BoundClause {
                    condition: bind_condition(c, &combined)?,
                    assignments: Some(by_name("source")?),
                }),
                Clause::MatchedDelete(c) => matched.push(BoundClause {
                    condition: bind_condition(c, &combined)?,
                    assignments: None,
                }),
                Clause::NotMatchedInsert(c, sets) => not_matched.push(BoundClause {
                    condition: bind_condition(c, &source_only)?,
                    assignments: Some(bind_all(sets, &source_only)?),
                }),
                Clause::NotMatchedInsertAll(c) => {
                    let missing: Vec<&str> = target
                        .fields
                        .iter()
                        // Generated and identity columns get their values when the rows
                        // are written.
                        .filter(|f| !f.nullable && source_delta.field(&f.name).is_none())
                        .filter(|f| !f.is_generated() && !f.is_identity())
                        .map(|f| f.name.as_str())
                        .collect();
                    if !missing.is_empty() {
                        return Err(mismatch(format!(
                            "the source lacks non-nullable columns {missing:?} to insert"
                        )));
                    }
                    not_matched.push(BoundClause {
                        condition: bind_condition(c, &source_only)?,
                        assignments: Some(by_name("source")?),
                    })
                }
                Clause::BySourceUpdate(c, sets) => by_source.push(BoundClause {
                    condition: bind_condition(c, &target_only)?,
                    assignments: Some(bind_all(sets, &target_only)?),
                }),
                Clause::BySourceDelete(c) => by_source.push(BoundClause {
                    condition: bind_condition(c, &target_only)?,
                    assignments: None,
                }),
            }
        }
        let key_names: Vec<String> = keys.iter().map(|(t, _)| t.clone()).collect();
        let key_filter = key_filter(target, &target_keys, &source_keys);
        Ok(Self {
            source,
            target_schema: Arc::clone(snapshot.arrow_schema()),
            target_keys,
            source_keys,
            converter,
            lookup,
            int_lookup,
            condition: condition.map(|c| c.bind(&combined)).transpose()?,
            key_filter,
            matched,
            not_matched,
            by_source,
            key_names,
        })
    }

    pub(super) fn duplicate(&self, source_row: usize, what: &str) -> Error {
        let key: Vec<String> = self
            .source_keys
            .iter()
            .map(|k| arrow::util::display::array_value_to_string(k, source_row).unwrap_or_default())
            .collect();
        Error::MergeDuplicateMatch {
            key: format!("{} = {}", self.key_names.join(", "), key.join(", ")),
            reason: format!("the source row with this key {what}"),
        }
    }

    /// The (target row, source row) pairs whose keys match (and that meet the extra
    /// condition).
    /// Whether the matched clauses need the target rows' own values beyond their keys: a
    /// condition or value that reads a target column, a target column no update sets, or
    /// clauses on rows the source does not match. When they do not, a merge-on-read
    /// merge reads only the key columns.
    pub(super) fn needs_target_values(&self) -> bool {
        let reads_target = |e: &Expr| e.columns().iter().any(|c| c.root() == "target");
        if self.condition.as_ref().is_some_and(reads_target) || !self.by_source.is_empty() {
            return true;
        }
        let columns = self.target_schema.fields().len();
        self.matched.iter().any(|clause| {
            clause.condition.as_ref().is_some_and(reads_target)
                || clause.assignments.as_ref().is_some_and(|sets| {
                    sets.iter().any(|a| reads_target(&a.value))
                        || (0..columns).any(|i| !sets.iter().any(|a| a.index == i))
                })
        })
    }

    /// Target rows in the table's schema (every field nullable) that hold only their
    /// key columns, taken from `keys`, and nulls elsewhere: enough for a merge that does
    /// not need the target's values.
    ///
    /// Fails when `keys` lacks a key column.
    pub(super) fn keys_only_target(&self, keys: &RecordBatch) -> Result<RecordBatch> {
        let rows = keys.num_rows();
        let key_names = self.key_names();
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for field in self.target_schema.fields() {
            let column = if key_names.contains(field.name()) {
                Arc::clone(keys.column_by_name(field.name()).ok_or_else(|| {
                    Error::UnknownColumn {
                        column: field.name().clone(),
                        available: key_names.clone(),
                    }
                })?)
            } else {
                new_null_array(field.data_type(), rows)
            };
            fields.push(field.as_ref().clone().with_nullable(true));
            columns.push(column);
        }
        RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(Error::arrow("preparing merge keys"))
    }

    /// The names of the target's key columns, to read them alone.
    pub(super) fn key_names(&self) -> Vec<String> {
        self.target_keys
            .iter()
            .map(|i| self.target_schema.field(*i).name().clone())
            .collect()
    }

    /// (target row, source row) pairs whose keys are equal, for target key columns.
    pub(super) fn key_pairs(&self, keys: &[ArrayRef]) -> Result<(Vec<u32>, Vec<u32>)> {
        if let (Some(int), [key]) = (&self.int_lookup, keys)
            && let Some(pairs) = int.pairs(key)
        {
            return Ok(pairs);
        }
        let rows = self
            .converter
            .convert_columns(keys)
            .map_err(Error::arrow("matching merge keys"))?;
        let (mut t_idx, mut s_idx) = (Vec::new(), Vec::new());
        let len = keys.first().map_or(0, |k| k.len());
        for i in 0..len {
            if keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            if let Some(sources) = self.lookup.get(rows.row(i).as_ref()) {
                for s in sources {
                    t_idx.push(i as u32);
                    s_idx.push(*s);
                }
            }
        }
        Ok((t_idx, s_idx))
    }

    /// Rows of a batch of the target's key columns (read alone) whose key a source row
    /// has: a superset of the matches, which the merge condition narrows on whole rows.
    pub(super) fn key_hits(&self, keys: &RecordBatch, names: &[String]) -> Result<Vec<u32>> {
        let columns = names
            .iter()
            .map(|n| {
                keys.column_by_name(n)
                    .cloned()
                    .ok_or_else(|| Error::UnknownColumn {
                        column: n.clone(),
                        available: keys
                            .schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().clone())
                            .collect(),
                    })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let (mut hits, _) = self.key_pairs(&columns)?;
        hits.dedup();
        Ok(hits)
    }

    pub(super) fn matches(&self, target: &RecordBatch) -> Result<(Vec<u32>, Vec<u32>)> {
        let keys: Vec<ArrayRef> = self
            .target_keys
            .iter()
            .map(|i| Arc::clone(target.column(*i)))
            .collect();
        let (mut t_idx, mut s_idx) = self.key_pairs(&keys)?;
        if let Some(condition) = &self.condition {
            let pairs = self.pairs(target, &t_idx, &s_idx)?;
            let keep = true_mask(evaluate_predicate(condition, &pairs)?);
            t_idx = selected(&t_idx, &keep);
            s_idx = selected(&s_idx, &keep);
        }
        // A target row matched by two source rows is ambiguous.
        for w in t_idx.windows(2) {
            if w[0] == w[1] {
                let pos = t_idx.iter().position(|t| *t == w[0]).unwrap_or(0);
                return Err(self.duplicate(
                    s_idx[pos] as usize,
                    "is matched by more than one source row",
                ));
            }
        }
        Ok((t_idx, s_idx))
    }

    /// `{target, source}` rows of matched pairs.
    pub(super) fn pairs(
        &self,
        target: &RecordBatch,
        t_idx: &[u32],
        s_idx: &[u32],
    ) -> Result<RecordBatch> {
        let t = struct_of(&take_rows(target, t_idx)?);
        let s = struct_of(&take_rows(&self.source, s_idx)?);
        combined(t, s)
    }

    /// `{target, source: null}` rows of target rows no source row matched.
    pub(super) fn target_only(&self, target: &RecordBatch, t_idx: &[u32]) -> Result<RecordBatch> {
        let t = struct_of(&take_rows(target, t_idx)?);
        let s = new_null_array(&struct_type(&self.source.schema()), t_idx.len());
        combined(t, s)
    }

    /// `{target: null, source}` rows of source rows no target row matched.
    pub(super) fn source_only(&self, s_idx: &[u32]) -> Result<RecordBatch> {
        let s = struct_of(&take_rows(&self.source, s_idx)?);
        let t = new_null_array(&struct_type(&self.target_schema), s_idx.len());
        combined(t, s)
    }
}

fn struct_type(schema: &Schema) -> ArrowType {
    ArrowType::Struct(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Fields>(),
    )
}

fn struct_of(batch: &RecordBatch) -> ArrayRef {
    let ArrowType::Struct(fields) = struct_type(&batch.schema()) else {
        return new_null_array(&ArrowType::Null, batch.num_rows());
    };
    Arc::new(StructArray::new(fields, batch.columns().to_vec(), None))
}

fn combined(target: ArrayRef, source: ArrayRef) -> Result<RecordBatch> {
    let schema = Schema::new(vec![
        Field::new("target", target.data_type().clone(), true),
        Field::new("source", source.data_type().clone(), true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![target, source])
        .map_err(Error::arrow("pairing merge rows"))
}

pub(super) fn take_rows(batch: &RecordBatch, rows: &[u32]) -> Result<RecordBatch> {
    let indices = UInt32Array::from(rows.to_vec());
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow("taking merge rows"))?;
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(Error::arrow("taking merge rows"))
}

/// The entries of `items` where `mask` holds.
pub(super) fn selected(items: &[u32], mask: &BooleanArray) -> Vec<u32> {
    items
        .iter()
        .enumerate()
        .filter(|(i, _)| mask.is_valid(*i) && mask.value(*i))
        .map(|(_, v)| *v)
        .collect()
}

/// `rows` rows of nulls in `empty`'s schema, for inserts to fill.
pub(super) fn null_rows(empty: &RecordBatch, rows: usize) -> Result<RecordBatch> {
    let columns = empty
        .schema()
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), rows))
        .collect();
    let schema = Arc::new(Schema::new(
        empty
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    let nulls = RecordBatch::try_new(schema, columns).map_err(Error::arrow("preparing inserts"))?;
    // Back to the table's schema once values are assigned; nullability is checked when
    // the rows are written.
    Ok(nulls)
}

/// A predicate that prunes target files to those that may hold a source key: the keys
/// themselves when few, else their range, per key column.
fn key_filter(
    target: &StructType,
    target_keys: &[usize],
    source_keys: &[ArrayRef],
) -> Option<Expr> {
    let mut filter: Option<Expr> = None;
    for (index, keys) in target_keys.iter().zip(source_keys) {
        let field = &target.fields[*index];
        let ty = field.data_type.as_primitive()?;
        let mut values: Vec<Scalar> = (0..keys.len())
            .filter_map(|i| Scalar::from_array(keys.as_ref(), i, ty))
            .filter(|v| !v.is_null())
            .collect();
        values.sort_by(|a, b| a.compare(b).unwrap_or(std::cmp::Ordering::Equal));
        values.dedup();
        let column = col(field.name.clone());
        let this = if values.is_empty() {
            // No key can match anything.
            Expr::Literal(Scalar::Boolean(false))
        } else if values.len() <= IN_LIST_LIMIT {
            column.is_in(values)
        } else {
            let (min, max) = (values[0].clone(), values[values.len() - 1].clone());
            column
                .clone()
                .gt_eq(Expr::Literal(min))
                .and(column.lt_eq(Expr::Literal(max)))
        };
        filter = Some(match filter {
            Some(f) => f.and(this),
            None => this,
        });
    }
    filter
}
