//! MERGE: match source rows to target rows on key columns and apply ordered clauses.
//!
//! Conditions and values name columns as `target.x` and `source.x` ([`target_col`],
//! [`source_col`]). Matching is a hash join on the keys (nulls never match). A target row
//! matched by two source rows, or a source row matching two target rows, is an
//! [`Error::MergeDuplicateMatch`] and nothing is committed. Target files are pruned with
//! the source's keys (an IN list, or their range) before any is read.
//!
//! [`target_col`]: crate::expr::target_col
//! [`source_col`]: crate::expr::source_col

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, RecordBatch, StructArray, UInt32Array, new_null_array,
};
use arrow::compute::{and, concat_batches, filter_record_batch, not, take};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use roaring::RoaringTreemap;

use super::update::{Assignment, assign, bind_assignment, check_partition_moves};
use super::{
    ChangeStrategy, DmlMetrics, DmlOutcome, FileChange, apply_changes, finish, now,
    read_candidates, read_selected, resolve_strategy, start, true_mask,
};
use crate::conform::{Source, conform};
use crate::error::{Error, Result};
use crate::expr::{Expr, Scalar, col, evaluate_predicate};
use crate::protocol::{DataType, StructField, StructType};
use crate::table::Table;

/// Source keys up to this many distinct values prune target files with an IN list;
/// more with their range.
const IN_LIST_LIMIT: usize = 1000;

/// One clause of a MERGE, in the order given.
#[derive(Debug, Clone)]
enum Clause {
    MatchedUpdate(Option<Expr>, Vec<(String, Expr)>),
    MatchedUpdateAll(Option<Expr>),
    MatchedDelete(Option<Expr>),
    NotMatchedInsert(Option<Expr>, Vec<(String, Expr)>),
    NotMatchedInsertAll(Option<Expr>),
    BySourceUpdate(Option<Expr>, Vec<(String, Expr)>),
    BySourceDelete(Option<Expr>),
}

/// A MERGE being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct MergeBuilder<'a> {
    table: &'a mut Table,
    source: Vec<RecordBatch>,
    keys: Vec<(String, String)>,
    condition: Option<Expr>,
    clauses: Vec<Clause>,
    strategy: Option<ChangeStrategy>,
    allow_partition_moves: bool,
}

impl Table {
    /// Starts a MERGE of `source` into the table.
    pub fn merge(&mut self, source: impl IntoIterator<Item = RecordBatch>) -> MergeBuilder<'_> {
        MergeBuilder {
            table: self,
            source: source.into_iter().collect(),
            keys: Vec::new(),
            condition: None,
            clauses: Vec::new(),
            strategy: None,
            allow_partition_moves: false,
        }
    }
}

impl MergeBuilder<'_> {
    /// Matches on these columns, named the same in target and source.
    pub fn on(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.keys = keys
            .into_iter()
            .map(|k| {
                let k = k.into();
                (k.clone(), k)
            })
            .collect();
        self
    }

    /// Matches on (target column, source column) pairs.
    pub fn on_columns(
        mut self,
        keys: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
    ) -> Self {
        self.keys = keys
            .into_iter()
            .map(|(t, s)| (t.into(), s.into()))
            .collect();
        self
    }

    /// A further condition a match must meet (on `target.x` and `source.x`).
    pub fn condition(mut self, condition: Expr) -> Self {
        self.condition = Some(condition);
        self
    }

    /// WHEN MATCHED [AND cond] THEN UPDATE SET the assignments.
    pub fn when_matched_update(
        mut self,
        condition: Option<Expr>,
        assignments: impl IntoIterator<Item = (impl Into<String>, Expr)>,
    ) -> Self {
        let sets = assignments
            .into_iter()
            .map(|(c, e)| (c.into(), e))
            .collect();
        self.clauses.push(Clause::MatchedUpdate(condition, sets));
        self
    }

    /// WHEN MATCHED [AND cond] THEN UPDATE SET every target column to the source column of
    /// the same name.
    pub fn when_matched_update_all(mut self, condition: Option<Expr>) -> Self {
        self.clauses.push(Clause::MatchedUpdateAll(condition));
        self
    }

    /// WHEN MATCHED [AND cond] THEN DELETE.
    pub fn when_matched_delete(mut self, condition: Option<Expr>) -> Self {
        self.clauses.push(Clause::MatchedDelete(condition));
        self
    }

    /// WHEN NOT MATCHED [AND cond] THEN INSERT with these values (on `source.x`); other
    /// columns are null.
    pub fn when_not_matched_insert(
        mut self,
        condition: Option<Expr>,
        values: impl IntoIterator<Item = (impl Into<String>, Expr)>,
    ) -> Self {
        let values = values.into_iter().map(|(c, e)| (c.into(), e)).collect();
        self.clauses
            .push(Clause::NotMatchedInsert(condition, values));
        self
    }

    /// WHEN NOT MATCHED [AND cond] THEN INSERT the source row, columns by name.
    pub fn when_not_matched_insert_all(mut self, condition: Option<Expr>) -> Self {
        self.clauses.push(Clause::NotMatchedInsertAll(condition));
        self
    }

    /// WHEN NOT MATCHED BY SOURCE [AND cond] THEN UPDATE SET the assignments (on
    /// `target.x`).
    pub fn when_not_matched_by_source_update(
        mut self,
        condition: Option<Expr>,
        assignments: impl IntoIterator<Item = (impl Into<String>, Expr)>,
    ) -> Self {
        let sets = assignments
            .into_iter()
            .map(|(c, e)| (c.into(), e))
            .collect();
        self.clauses.push(Clause::BySourceUpdate(condition, sets));
        self
    }

    /// WHEN NOT MATCHED BY SOURCE [AND cond] THEN DELETE.
    pub fn when_not_matched_by_source_delete(mut self, condition: Option<Expr>) -> Self {
        self.clauses.push(Clause::BySourceDelete(condition));
        self
    }

    /// Copy-on-write or merge-on-read, overriding the table's choice.
    pub fn strategy(mut self, strategy: ChangeStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Whether updates may assign partition columns (moving rows between partitions).
    pub fn allow_partition_moves(mut self, allow: bool) -> Self {
        self.allow_partition_moves = allow;
        self
    }

    /// Runs the MERGE and commits.
    ///
    /// Fails with [`Error::InvalidArgument`] without keys or clauses,
    /// [`Error::SchemaMismatch`] when the source's keys or inserted columns do not fit the
    /// table, [`Error::UnknownColumn`] / [`Error::TypeMismatch`] for conditions and values,
    /// [`Error::MergeDuplicateMatch`] for ambiguous matches, and as
    /// [`crate::Transaction::commit`] does. Nothing is committed on failure.
    pub async fn execute(self) -> Result<DmlOutcome> {
        let MergeBuilder {
            table,
            source,
            keys,
            condition,
            clauses,
            strategy,
            allow_partition_moves,
        } = self;
        let (started, mut txn) = start(table, "MERGE");
        let snapshot = txn.snapshot().clone();
        let strategy = resolve_strategy(&snapshot, strategy)?;
        if keys.is_empty() || clauses.is_empty() {
            return Err(Error::InvalidArgument {
                name: "merge",
                reason: "a merge needs key columns and at least one clause".into(),
            });
        }
        let plan = MergePlan::new(&snapshot, source, &keys, condition.as_ref(), &clauses)?;
        let mut metrics = DmlMetrics::default();

        // Target files that may hold a matching key (all of them when rows unmatched by
        // the source can change).
        let by_source = clauses
            .iter()
            .any(|c| matches!(c, Clause::BySourceUpdate(..) | Clause::BySourceDelete(..)));
        let scan = match (&plan.key_filter, by_source) {
            (Some(filter), false) => snapshot.scan().filter(filter.clone()),
            _ => snapshot.scan(),
        };
        let files = scan.plan()?;
        metrics.files_skipped = files.total_files - files.files.len();
        match (&plan.key_filter, by_source) {
            (Some(filter), false) => txn.record_read_predicate(filter)?,
            _ => txn.record_read_whole_table(),
        }
        txn.record_read_files(&files.files);
        txn = txn.with_parameter("strategy", format!("{strategy:?}"));

        metrics.files_scanned = files.files.len();
        let targets = if by_source || strategy == ChangeStrategy::CopyOnWrite {
            // Every target row may change, or every hit file is rewritten whole: read the
            // candidates whole, once.
            read_candidates(&snapshot, &files.files).await?
        } else {
            // Merge-on-read: keys first, then just the rows a source key hits.
            let names = plan.key_names();
            let all = files.files.iter().cloned().map(|a| (a, None)).collect();
            let keyed = read_selected(&snapshot.scan().select(names.clone()), all).await?;
            let mut wanted = Vec::new();
            for (add, rows) in keyed {
                let hits = plan.key_hits(&rows.batch, &names)?;
                if hits.is_empty() {
                    continue;
                }
                let only: RoaringTreemap =
                    hits.iter().map(|h| rows.positions[*h as usize]).collect();
                wanted.push((add, Some(only)));
            }
            read_selected(&snapshot.scan(), wanted).await?
        };
        let mut source_matches = vec![0u32; plan.source.num_rows()];
        let mut changes = Vec::new();
        let mut new_rows = Vec::new();
        for (add, rows) in targets {
            let target = &rows.batch;
            let (t_idx, s_idx) = plan.matches(target)?;
            for s in &s_idx {
                source_matches[*s as usize] += 1;
                if source_matches[*s as usize] > 1 {
                    return Err(plan.duplicate(*s as usize, "matches more than one target row"));
                }
            }
            let mut deleted = RoaringTreemap::new();
            // Matched pairs: the first clause whose condition holds applies.
            let pairs = plan.pairs(target, &t_idx, &s_idx)?;
            let mut remaining = BooleanArray::from(vec![true; t_idx.len()]);
            for clause in &plan.matched {
                let hit = clause.mask(&pairs, &remaining)?;
                remaining = and(&remaining, &not(&hit).map_err(Error::arrow("merge"))?)
                    .map_err(Error::arrow("merge"))?;
                let chosen: Vec<u32> = selected(&t_idx, &hit);
                for t in &chosen {
                    deleted.insert(rows.positions[*t as usize]);
                }
                if let Some(assignments) = &clause.assignments {
                    let old = take_rows(target, &chosen)?;
                    let inputs =
                        filter_record_batch(&pairs, &hit).map_err(Error::arrow("merge"))?;
                    let new = assign(&old, &inputs, assignments)?;
                    check_partition_moves(table, &old, &new, assignments, allow_partition_moves)?;
                    new_rows.push(new);
                    metrics.rows_updated += chosen.len() as u64;
                } else {
                    metrics.rows_deleted += chosen.len() as u64;
                }
            }
            // Target rows no source row matched.
            if !plan.by_source.is_empty() {
                let unmatched: Vec<u32> = (0..target.num_rows() as u32)
                    .filter(|i| !t_idx.contains(i))
                    .collect();
                let lonely = plan.target_only(target, &unmatched)?;
                let mut remaining = BooleanArray::from(vec![true; unmatched.len()]);
                for clause in &plan.by_source {
                    let hit = clause.mask(&lonely, &remaining)?;
                    remaining = and(&remaining, &not(&hit).map_err(Error::arrow("merge"))?)
                        .map_err(Error::arrow("merge"))?;
                    let chosen = selected(&unmatched, &hit);
                    for t in &chosen {
                        deleted.insert(rows.positions[*t as usize]);
                    }
                    if let Some(assignments) = &clause.assignments {
                        let old = take_rows(target, &chosen)?;
                        let inputs =
                            filter_record_batch(&lonely, &hit).map_err(Error::arrow("merge"))?;
                        let new = assign(&old, &inputs, assignments)?;
                        check_partition_moves(
                            table,
                            &old,
                            &new,
                            assignments,
                            allow_partition_moves,
                        )?;
                        new_rows.push(new);
                        metrics.rows_updated += chosen.len() as u64;
                    } else {
                        metrics.rows_deleted += chosen.len() as u64;
                    }
                }
            }
            changes.push(FileChange { add, rows, deleted });
        }

        // Source rows no target row matched.
        let unmatched: Vec<u32> = (0..plan.source.num_rows() as u32)
            .filter(|s| source_matches[*s as usize] == 0)
            .collect();
        if !unmatched.is_empty() && !plan.not_matched.is_empty() {
            let lonely = plan.source_only(&unmatched)?;
            let mut remaining = BooleanArray::from(vec![true; unmatched.len()]);
            for clause in &plan.not_matched {
                let hit = clause.mask(&lonely, &remaining)?;
                remaining = and(&remaining, &not(&hit).map_err(Error::arrow("merge"))?)
                    .map_err(Error::arrow("merge"))?;
                let inputs = filter_record_batch(&lonely, &hit).map_err(Error::arrow("merge"))?;
                if inputs.num_rows() == 0 {
                    continue;
                }
                let empty = RecordBatch::new_empty(Arc::clone(snapshot.arrow_schema()));
                let nulls = null_rows(&empty, inputs.num_rows())?;
                new_rows.push(assign(
                    &nulls,
                    &inputs,
                    clause.assignments.as_deref().unwrap_or(&[]),
                )?);
                metrics.rows_inserted += inputs.num_rows() as u64;
            }
        }
        apply_changes(
            &mut txn,
            &snapshot,
            strategy,
            changes,
            new_rows,
            now(table),
            &mut metrics,
        )
        .await?;
        finish(table, txn, started, metrics).await
    }
}

/// A clause bound for execution: a condition (on the combined batch) and assignments
/// (`None` for a delete).
struct BoundClause {
    condition: Option<Expr>,
    assignments: Option<Vec<Assignment>>,
}

impl BoundClause {
    /// The rows still undecided for which the condition holds.
    fn mask(&self, batch: &RecordBatch, remaining: &BooleanArray) -> Result<BooleanArray> {
        let hit = match &self.condition {
            Some(c) => true_mask(evaluate_predicate(c, batch)?),
            None => BooleanArray::from(vec![true; batch.num_rows()]),
        };
        and(&hit, remaining).map_err(Error::arrow("evaluating a merge clause"))
    }
}

/// Everything the MERGE needs once its inputs are checked.
struct MergePlan {
    source: RecordBatch,
    target_schema: SchemaRef,
    target_keys: Vec<usize>,
    source_keys: Vec<ArrayRef>,
    converter: RowConverter,
    lookup: HashMap<Vec<u8>, Vec<u32>>,
    condition: Option<Expr>,
    key_filter: Option<Expr>,
    matched: Vec<BoundClause>,
    not_matched: Vec<BoundClause>,
    by_source: Vec<BoundClause>,
    key_names: Vec<String>,
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
    #[allow(clippy::too_many_arguments)]
    fn new(
        snapshot: &crate::snapshot::Snapshot,
        source: Vec<RecordBatch>,
        keys: &[(String, String)],
        condition: Option<&Expr>,
        clauses: &[Clause],
    ) -> Result<Self> {
        let mismatch = |reason: String| Error::SchemaMismatch { reason };
        let source_schema =
            source
                .first()
                .map(RecordBatch::schema)
                .ok_or_else(|| Error::InvalidArgument {
                    name: "source",
                    reason: "a merge needs at least one source batch (it may be empty)".into(),
                })?;
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
        let rows = converter
            .convert_columns(&source_keys)
            .map_err(Error::arrow("preparing merge keys"))?;
        let mut lookup: HashMap<Vec<u8>, Vec<u32>> = HashMap::new();
        for i in 0..source.num_rows() {
            if source_keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            lookup
                .entry(rows.row(i).as_ref().to_vec())
                .or_default()
                .push(i as u32);
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
                        .filter(|f| !f.nullable && source_delta.field(&f.name).is_none())
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
            condition: condition.map(|c| c.bind(&combined)).transpose()?,
            key_filter,
            matched,
            not_matched,
            by_source,
            key_names,
        })
    }

    fn duplicate(&self, source_row: usize, what: &str) -> Error {
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
    /// The names of the target's key columns, to read them alone.
    fn key_names(&self) -> Vec<String> {
        self.target_keys
            .iter()
            .map(|i| self.target_schema.field(*i).name().clone())
            .collect()
    }

    /// (target row, source row) pairs whose keys are equal, for target key columns.
    fn key_pairs(&self, keys: &[ArrayRef]) -> Result<(Vec<u32>, Vec<u32>)> {
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
    fn key_hits(&self, keys: &RecordBatch, names: &[String]) -> Result<Vec<u32>> {
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

    fn matches(&self, target: &RecordBatch) -> Result<(Vec<u32>, Vec<u32>)> {
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
    fn pairs(&self, target: &RecordBatch, t_idx: &[u32], s_idx: &[u32]) -> Result<RecordBatch> {
        let t = struct_of(&take_rows(target, t_idx)?);
        let s = struct_of(&take_rows(&self.source, s_idx)?);
        combined(t, s)
    }

    /// `{target, source: null}` rows of target rows no source row matched.
    fn target_only(&self, target: &RecordBatch, t_idx: &[u32]) -> Result<RecordBatch> {
        let t = struct_of(&take_rows(target, t_idx)?);
        let s = new_null_array(&struct_type(&self.source.schema()), t_idx.len());
        combined(t, s)
    }

    /// `{target: null, source}` rows of source rows no target row matched.
    fn source_only(&self, s_idx: &[u32]) -> Result<RecordBatch> {
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

fn take_rows(batch: &RecordBatch, rows: &[u32]) -> Result<RecordBatch> {
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
fn selected(items: &[u32], mask: &BooleanArray) -> Vec<u32> {
    items
        .iter()
        .enumerate()
        .filter(|(i, _)| mask.is_valid(*i) && mask.value(*i))
        .map(|(_, v)| *v)
        .collect()
}

/// `rows` rows of nulls in `empty`'s schema, for inserts to fill.
fn null_rows(empty: &RecordBatch, rows: usize) -> Result<RecordBatch> {
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
