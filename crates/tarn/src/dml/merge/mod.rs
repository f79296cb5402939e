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

mod plan;

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{and, concat_batches, filter_record_batch, not};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

use super::rewrite::{ChunkChange, Decide, commit_rewrites};
use super::row_ids;
use super::update::{assign, check_partition_moves};
use super::{
    ChangeKind, ChangeStrategy, DmlMetrics, DmlOutcome, Feed, FileChange, apply_changes,
    copy_on_write, finish, now, positions_of, read_candidates, read_selected, records_feed,
    refuse_if_append_only, resolve_strategy, start, write_rows,
};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::protocol::{Add, StructType};
use crate::scan::FileRows;
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::Transaction;
use crate::write::{fill_identity, identity_columns};
use plan::{MergePlan, null_rows, selected, take_rows};

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
    pub fn with_strategy(mut self, strategy: ChangeStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Whether updates may assign partition columns (moving rows between partitions).
    pub fn with_partition_moves(mut self, allow: bool) -> Self {
        self.allow_partition_moves = allow;
        self
    }

    /// Runs the MERGE and commits.
    ///
    /// Fails with [`Error::InvalidArgument`] without keys or clauses,
    /// [`Error::AppendOnly`] for a matched or not-matched-by-source clause on an
    /// append-only table, [`Error::FeatureNotEnabled`] for merge-on-read without deletion
    /// vectors,
    /// [`Error::SchemaMismatch`] when the source's keys or inserted columns do not fit the
    /// table, [`Error::UnknownColumn`] / [`Error::TypeMismatch`] for conditions and values,
    /// [`Error::MergeDuplicateMatch`] for ambiguous matches,
    /// [`Error::SchemaMismatch`] when it inserts values for a `GENERATED ALWAYS` identity
    /// column (those it leaves out are drawn as appends draw them), and as
    /// [`crate::Transaction::commit`] does. Nothing is committed on failure.
    // Long by design: the statement's steps in order (plan, candidate files, each
    // strategy's changes, inserts, commit), each step a call of its own.
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
        // Inserting merges only append.
        if clauses.iter().any(|c| {
            !matches!(
                c,
                Clause::NotMatchedInsert(..) | Clause::NotMatchedInsertAll(..)
            )
        }) {
            refuse_if_append_only(&snapshot, "merge")?;
        }
        let brought = brought_identity(snapshot.schema(), &clauses, &source)?;
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
        let files = scan.plan().await?;
        metrics.files_skipped = files.total_files - files.files.len();
        match (&plan.key_filter, by_source) {
            (Some(filter), false) => txn.record_read_predicate(filter)?,
            _ => txn.record_read_whole_table(),
        }
        txn.record_read_files(&files.files);
        txn = txn.with_parameter("strategy", format!("{strategy:?}"));

        let now = now(table);
        let plan = Arc::new(plan);
        let source_rows = plan.source.num_rows();
        if strategy == ChangeStrategy::CopyOnWrite {
            let cow = CopyOnWriteMerge {
                plan: &plan,
                snapshot: &snapshot,
                brought: &brought,
                allow_partition_moves,
                now,
            };
            cow.run(&mut txn, files.files, &mut metrics).await?;
            return finish(table, txn, started, metrics).await;
        }

        metrics.files_scanned = files.files.len();
        let hidden = row_ids::hidden_fields(&snapshot);
        let targets = if by_source {
            // Every target row may change: read the candidates whole, once.
            read_candidates(&snapshot, &files.files).await?
        } else {
            // The rows a key index found, or else the keys first and then just the rows a
            // source key hits.
            let names = plan.key_names();
            let mut wanted = Vec::new();
            let mut unindexed = Vec::new();
            for add in &files.files {
                match files.rows_of(&snapshot, add) {
                    Some(rows) => wanted.push((add.clone(), Some(rows.clone()))),
                    None => unindexed.push((add.clone(), None)),
                }
            }
            // When the clauses need nothing of the target but its keys (an upsert setting
            // every column from the source), the keys are all that is read.
            let keys_only = !plan.needs_target_values() && snapshot.partition_columns().is_empty();
            if keys_only {
                unindexed.append(&mut wanted);
            }
            let keyed = read_selected(
                &snapshot
                    .scan()
                    .select(names.clone())
                    .with_row_ids(hidden.clone()),
                unindexed,
            )
            .await?;
            // Each file's keys are probed on a task of its own: every core probes.
            let cores = crate::tasks::cores();
            let probed: Vec<_> = futures::stream::iter(keyed)
                .map(|(add, rows)| {
                    let (plan, names) = (Arc::clone(&plan), names.clone());
                    crate::tasks::spawn("probing merge keys", async move {
                        let hits = plan.key_hits(&rows.batch, &names)?;
                        Ok((add, rows, hits))
                    })
                })
                .buffered(cores)
                .try_collect()
                .await?;
            let mut targets = Vec::new();
            for (add, rows, hits) in probed {
                if hits.is_empty() {
                    continue;
                }
                let positions: Vec<u64> =
                    hits.iter().map(|h| rows.positions[*h as usize]).collect();
                if keys_only {
                    let keys = take_rows(&rows.batch, &hits)?;
                    let batch = plan.keys_only_target(&keys)?;
                    let (physical_rows, deleted_before) = (rows.physical_rows, rows.deleted_before);
                    let ids = rows.ids.map(|ids| ids.take(&hits)).transpose()?;
                    targets.push((
                        add,
                        FileRows {
                            batch,
                            positions,
                            physical_rows,
                            deleted_before,
                            ids,
                        },
                    ));
                } else {
                    wanted.push((add, Some(positions.into_iter().collect())));
                }
            }
            if !keys_only {
                targets = read_selected(&row_ids::scan_with_ids(&snapshot), wanted).await?;
            }
            targets
        };
        let mut source_matches = vec![0u32; source_rows];
        let mut changes = Vec::new();
        let mut new_rows = Vec::new();
        let mut feed = Feed::new();
        for (add, rows) in targets {
            let change = change_target(&plan, &snapshot, &rows.batch, allow_partition_moves)?;
            count_matches(&plan, &mut source_matches, &change.matched_sources)?;
            metrics.rows_updated += change.rows_updated;
            metrics.rows_deleted += change.rows_deleted;
            let deleted = match &change.deleted {
                Some(mask) => positions_of(&rows, mask),
                None => RoaringTreemap::new(),
            };
            // Updated rows keep their row ids when the table keeps them.
            match (&rows.ids, change.replacement.is_empty()) {
                (Some(ids), false) => {
                    let updated =
                        concat_batches(&change.replacement[0].schema(), &change.replacement)
                            .map_err(Error::arrow("merge"))?;
                    txn.note_row_ids_kept(change.replaced.len() == updated.num_rows());
                    new_rows.push(ids.updated(&updated, &change.replaced, &hidden)?);
                }
                (None, false) => {
                    txn.note_row_ids_kept(false);
                    new_rows.extend(change.replacement);
                }
                (_, true) => {}
            }
            feed.extend(change.feed);
            changes.push(FileChange { add, rows, deleted });
        }
        let inserts = insert_rows(&plan, &snapshot, &source_matches, &mut metrics)?;
        let inserts = draw_identity(&mut txn, &snapshot, inserts, &brought)?;
        feed.extend(inserted_feed(&snapshot, &inserts));
        new_rows.extend(inserts);
        apply_changes(
            &mut txn,
            &snapshot,
            changes,
            new_rows,
            feed,
            now,
            &mut metrics,
        )
        .await?;
        finish(table, txn, started, metrics).await
    }
}

/// The change data feed of a merge's inserted rows, when the table records one.
fn inserted_feed(snapshot: &Snapshot, inserts: &[RecordBatch]) -> Feed {
    match records_feed(snapshot) {
        true => inserts
            .iter()
            .map(|b| (b.clone(), ChangeKind::Insert))
            .collect(),
        false => Feed::new(),
    }
}

/// Inserted rows with values for the identity columns the merge does not bring (the
/// commit moves their high-water marks); `brought` ones must allow explicit values.
///
/// Fails with [`Error::SchemaMismatch`] when the merge brings values for a `GENERATED
/// ALWAYS` identity column.
fn draw_identity(
    txn: &mut crate::txn::Transaction,
    snapshot: &Snapshot,
    inserts: Vec<RecordBatch>,
    brought: &[String],
) -> Result<Vec<RecordBatch>> {
    let schema = snapshot.schema();
    let mut drawn = Vec::new();
    for (name, identity) in identity_columns(schema)? {
        if brought.contains(&name) {
            if !identity.allows_explicit_insert() {
                return Err(Error::SchemaMismatch {
                    reason: format!(
                        "column {name:?} is GENERATED ALWAYS AS IDENTITY: the merge may not \
                         insert values for it"
                    ),
                });
            }
        } else {
            drawn.push(name);
        }
    }
    if drawn.is_empty() || inserts.is_empty() {
        return Ok(inserts);
    }
    let without: Vec<RecordBatch> = inserts
        .iter()
        .map(|b| {
            let keep: Vec<usize> = (0..b.num_columns())
                .filter(|i| !drawn.contains(b.schema().field(*i).name()))
                .collect();
            b.project(&keep).map_err(Error::arrow("merge"))
        })
        .collect::<Result<_>>()?;
    let (filled, marked) = fill_identity(schema, &without)?;
    if let Some(schema) = marked {
        let mut metadata = snapshot.metadata().clone();
        metadata.schema_string = schema.to_json();
        txn.set_metadata(metadata);
    }
    Ok(filled)
}

/// Counts the source rows a target chunk matched; a source row matching a second
/// target row is ambiguous.
fn count_matches(plan: &MergePlan, counts: &mut [u32], matched: &[u32]) -> Result<()> {
    for s in matched {
        counts[*s as usize] += 1;
        if counts[*s as usize] > 1 {
            return Err(plan.duplicate(*s as usize, "matches more than one target row"));
        }
    }
    Ok(())
}

/// What the merge does to a chunk of target rows: the first matched clause whose
/// condition holds applies to each matched row, the first not-matched-by-source clause to
/// each unmatched one; deleted and updated rows go, updated ones come back as
/// replacement rows.
fn change_target(
    plan: &MergePlan,
    snapshot: &Snapshot,
    target: &RecordBatch,
    allow_partition_moves: bool,
) -> Result<ChunkChange> {
    let cdf = records_feed(snapshot);
    let (t_idx, s_idx) = plan.matches(target)?;
    let mut change = ChunkChange::default();
    let mut deleted = vec![false; target.num_rows()];
    let mut apply = |clauses: &[plan::BoundClause],
                     rows: &RecordBatch,
                     idx: &[u32],
                     change: &mut ChunkChange|
     -> Result<()> {
        let mut remaining = BooleanArray::from(vec![true; idx.len()]);
        for clause in clauses {
            let hit = clause.mask(rows, &remaining)?;
            remaining = and(&remaining, &not(&hit).map_err(Error::arrow("merge"))?)
                .map_err(Error::arrow("merge"))?;
            let chosen: Vec<u32> = selected(idx, &hit);
            for t in &chosen {
                deleted[*t as usize] = true;
            }
            if let Some(assignments) = &clause.assignments {
                let old = take_rows(target, &chosen)?;
                let inputs = filter_record_batch(rows, &hit).map_err(Error::arrow("merge"))?;
                let new = assign(&old, &inputs, assignments)?;
                check_partition_moves(snapshot, &old, &new, assignments, allow_partition_moves)?;
                if cdf {
                    change.feed.push((old, ChangeKind::UpdatePreimage));
                    change.feed.push((new.clone(), ChangeKind::UpdatePostimage));
                }
                change.replacement.push(new);
                change.replaced.extend(&chosen);
                change.rows_updated += chosen.len() as u64;
            } else {
                if cdf {
                    change
                        .feed
                        .push((take_rows(target, &chosen)?, ChangeKind::Delete));
                }
                change.rows_deleted += chosen.len() as u64;
            }
        }
        Ok(())
    };
    // Matched pairs.
    let pairs = plan.pairs(target, &t_idx, &s_idx)?;
    apply(&plan.matched, &pairs, &t_idx, &mut change)?;
    // Target rows no source row matched.
    if !plan.by_source.is_empty() {
        let mut was_matched = vec![false; target.num_rows()];
        for t in &t_idx {
            was_matched[*t as usize] = true;
        }
        let unmatched: Vec<u32> = (0..target.num_rows() as u32)
            .filter(|i| !was_matched[*i as usize])
            .collect();
        let lonely = plan.target_only(target, &unmatched)?;
        apply(&plan.by_source, &lonely, &unmatched, &mut change)?;
    }
    change.matched_sources = s_idx;
    change.deleted = Some(BooleanArray::from(deleted));
    Ok(change)
}

/// The rows the not-matched clauses insert for source rows no target row matched.
fn insert_rows(
    plan: &MergePlan,
    snapshot: &Snapshot,
    source_matches: &[u32],
    metrics: &mut DmlMetrics,
) -> Result<Vec<RecordBatch>> {
    let unmatched: Vec<u32> = (0..plan.source.num_rows() as u32)
        .filter(|s| source_matches[*s as usize] == 0)
        .collect();
    let mut out = Vec::new();
    if unmatched.is_empty() || plan.not_matched.is_empty() {
        return Ok(out);
    }
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
        out.push(assign(
            &nulls,
            &inputs,
            clause.assignments.as_deref().unwrap_or(&[]),
        )?);
        metrics.rows_inserted += inputs.num_rows() as u64;
    }
    Ok(out)
}

/// The identity columns the inserts of `clauses` bring values for (those they leave out
/// are drawn as appends draw them).
fn brought_identity(
    schema: &StructType,
    clauses: &[Clause],
    source: &[RecordBatch],
) -> Result<Vec<String>> {
    Ok(identity_columns(schema)?
        .into_iter()
        .filter(|(name, _)| {
            clauses.iter().any(|c| match c {
                Clause::NotMatchedInsert(_, sets) => sets.iter().any(|(n, _)| n == name),
                Clause::NotMatchedInsertAll(_) => {
                    source.iter().any(|b| b.schema().index_of(name).is_ok())
                }
                _ => false,
            })
        })
        .map(|(name, _)| name)
        .collect())
}

/// A copy-on-write MERGE: each candidate file streams through the match, its updated rows
/// taking their old rows' place in its new version; then the inserts.
struct CopyOnWriteMerge<'a> {
    plan: &'a Arc<MergePlan>,
    snapshot: &'a Snapshot,
    brought: &'a [String],
    allow_partition_moves: bool,
    now: i64,
}

impl CopyOnWriteMerge<'_> {
    /// Rewrites the `files` that hold matches and writes the inserts into `txn`.
    async fn run(
        &self,
        txn: &mut Transaction,
        files: Vec<Add>,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let (plan, snapshot, now) = (self.plan, self.snapshot, self.now);
        let allow_partition_moves = self.allow_partition_moves;
        let source_rows = plan.source.num_rows();
        // Each candidate file streams through the match, its updated rows taking
        // their old rows' place in its new version.
        let (p, snap) = (Arc::clone(plan), snapshot.clone());
        let decide: Arc<Decide> = Arc::new(move |chunk: &RecordBatch| {
            change_target(&p, &snap, chunk, allow_partition_moves)
        });
        let rewrites = copy_on_write(snapshot, files, decide, now, metrics).await?;
        let mut source_matches = vec![0u32; source_rows];
        for r in &rewrites {
            count_matches(plan, &mut source_matches, &r.matched_sources)?;
        }
        let inserts = insert_rows(plan, snapshot, &source_matches, metrics)?;
        let inserts = draw_identity(txn, snapshot, inserts, self.brought)?;
        let feed = inserted_feed(snapshot, &inserts);
        let inserted = write_rows(snapshot, inserts, now).await?;
        commit_rewrites(txn, snapshot, rewrites, inserted, feed, now, metrics).await?;
        Ok(())
    }
}
