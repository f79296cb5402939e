//! MERGE: match source rows to target rows on key columns and apply ordered clauses.
//!
//! Conditions and values name columns as `target.x` and `source.x` ([`target_col`],
//! [`source_col`]). Matching is a hash join on the keys (nulls never match). A target row
//! matched by two source rows, or a source row matching two target rows, is an
//! [`Error::MergeDuplicateMatch`] and nothing is committed. Target files are pruned with
//! the source's keys (an IN list, or their range) before any is read.
//!
//! A source given as a stream is held in memory while it fits the merge's memory limit;
//! a larger one is spilled to local disk in key ranges and matched a range at a time
//! (`spill`, `ranged`), so no source is too large.
//!
//! [`target_col`]: crate::expr::target_col
//! [`source_col`]: crate::expr::source_col

mod apply;
mod int_lookup;
mod plan;
mod ranged;
mod spill;
mod targets;

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;

use super::rewrite::{Decide, commit_rewrites};
use super::{
    ChangeStrategy, DmlMetrics, DmlOutcome, FileChange, apply_changes, copy_on_write, finish, now,
    refuse_if_append_only, resolve_strategy, row_ids, start, write_rows,
};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::protocol::Add;
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::Transaction;
use crate::write::{Input, from_reader, from_stream};
use apply::{
    TargetChanges, brought_identity, change_target, commit_identity_marks, count_matches,
    draw_identity, insert_rows, inserted_feed,
};
use plan::MergePlan;
use spill::{Gathered, KeyEncoder};

/// The memory a streamed MERGE source may take before it is spilled to local disk, by
/// default: 512 MiB.
pub const DEFAULT_MERGE_MEMORY_LIMIT: usize = 512 << 20;

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
    source: Input,
    memory_limit: usize,
    spill_dir: Option<PathBuf>,
    keys: Vec<(String, String)>,
    condition: Option<Expr>,
    clauses: Vec<Clause>,
    strategy: Option<ChangeStrategy>,
    allow_partition_moves: bool,
}

impl Table {
    /// Starts a MERGE of `source` into the table.
    pub fn merge(&mut self, source: impl IntoIterator<Item = RecordBatch>) -> MergeBuilder<'_> {
        self.merge_input(Input::Batches(source.into_iter().collect()))
    }

    /// Starts a MERGE whose source is a stream of batches. A source within the memory
    /// limit ([`MergeBuilder::with_memory_limit`]) is held in memory; a larger one is
    /// spilled to local disk in key ranges and matched a range at a time, so memory holds
    /// one range, however large the source. A stream error fails the merge with
    /// [`Error::InputStream`] and commits nothing.
    pub fn merge_stream<S, E>(&mut self, source: S) -> MergeBuilder<'_>
    where
        S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.merge_input(Input::Stream(from_stream(source)))
    }

    /// Starts a MERGE whose source is the batches of `reader` (an Arrow
    /// `RecordBatchReader`), read on a blocking thread, as
    /// [`merge_stream`](Self::merge_stream) does.
    pub fn merge_reader<R>(&mut self, reader: R) -> MergeBuilder<'_>
    where
        R: arrow::array::RecordBatchReader + Send + 'static,
    {
        self.merge_input(Input::Stream(from_reader(reader)))
    }

    fn merge_input(&mut self, source: Input) -> MergeBuilder<'_> {
        MergeBuilder {
            table: self,
            source,
            memory_limit: DEFAULT_MERGE_MEMORY_LIMIT,
            spill_dir: None,
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

    /// The memory a streamed source may take while it is matched
    /// ([`DEFAULT_MERGE_MEMORY_LIMIT`] unless set). A source whose batches (in Arrow
    /// memory) fit in a quarter of it is held whole; a larger one is spilled to local disk
    /// and matched in key ranges of about a quarter of it each, the rest being for the
    /// range's hash table, the target rows it matches and the rows it writes. A source
    /// given as batches is already in memory and is matched whole.
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// The local directory spill files go under (the system's temporary directory
    /// unless set); they are removed when the merge ends, whatever its outcome.
    pub fn with_spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
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
    pub async fn execute(self) -> Result<DmlOutcome> {
        let MergeBuilder {
            table,
            source,
            memory_limit,
            spill_dir,
            keys,
            condition,
            clauses,
            strategy,
            allow_partition_moves,
        } = self;
        let (started, txn) = start(table, "MERGE");
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
        if keys.is_empty() || clauses.is_empty() {
            return Err(Error::InvalidArgument {
                name: "merge",
                reason: "a merge needs key columns and at least one clause".into(),
            });
        }
        let mut txn = txn.with_parameter("strategy", format!("{strategy:?}"));
        let merge = Merge {
            snapshot: &snapshot,
            keys: &keys,
            condition: condition.as_ref(),
            clauses: &clauses,
            strategy,
            allow_partition_moves,
            now: now(table),
            memory_limit,
        };
        let mut metrics = DmlMetrics::default();
        let source = match source {
            Input::Batches(batches) => batches,
            Input::Stream(stream) => {
                let encoder = KeyEncoder::new(&snapshot, &keys)?;
                let parent = spill_dir.unwrap_or_else(std::env::temp_dir);
                match spill::gather(stream, &encoder, memory_limit, &parent).await? {
                    // A stream that ended at once brings no schema: only rows it does
                    // not match can change.
                    Gathered::InMemory(batches) if batches.is_empty() => {
                        merge
                            .without_source(&mut txn, &encoder, &mut metrics)
                            .await?;
                        return finish(table, txn, started, metrics).await;
                    }
                    Gathered::InMemory(batches) => batches,
                    Gathered::Ranges(ranges) => {
                        txn = txn.with_parameter("sourceRanges", ranges.len());
                        merge.ranged(&mut txn, ranges, &mut metrics).await?;
                        return finish(table, txn, started, metrics).await;
                    }
                }
            }
        };
        merge.in_memory(&mut txn, source, &mut metrics).await?;
        finish(table, txn, started, metrics).await
    }
}

/// A MERGE's settings, checked, over one snapshot.
struct Merge<'a> {
    snapshot: &'a Snapshot,
    keys: &'a [(String, String)],
    condition: Option<&'a Expr>,
    clauses: &'a [Clause],
    strategy: ChangeStrategy,
    allow_partition_moves: bool,
    now: i64,
    memory_limit: usize,
}

impl Merge<'_> {
    /// A merge whose source stream had no batch: NOT MATCHED BY SOURCE clauses apply to
    /// every target row, and nothing else can (a table without them is left unchanged).
    ///
    /// Fails as [`in_memory`](Self::in_memory) does.
    async fn without_source(
        &self,
        txn: &mut Transaction,
        encoder: &KeyEncoder,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let by_source: Vec<Clause> = self
            .clauses
            .iter()
            .filter(|c| matches!(c, Clause::BySourceUpdate(..) | Clause::BySourceDelete(..)))
            .cloned()
            .collect();
        if by_source.is_empty() {
            return Ok(());
        }
        let unmatched = Merge {
            condition: None,
            clauses: &by_source,
            ..*self
        };
        unmatched
            .in_memory(txn, vec![encoder.empty_source()], metrics)
            .await
    }

    /// Matches a source held in memory whole and puts the changes into `txn`.
    async fn in_memory(
        &self,
        txn: &mut Transaction,
        source: Vec<RecordBatch>,
        metrics: &mut DmlMetrics,
    ) -> Result<()> {
        let snapshot = self.snapshot;
        let plan = MergePlan::new(snapshot, source, self.keys, self.condition, self.clauses)?;
        let brought = brought_identity(snapshot.schema(), self.clauses, &plan.source.schema())?;

        // Target files that may hold a matching key (all of them when rows unmatched by
        // the source can change).
        let by_source = self
            .clauses
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

        let plan = Arc::new(plan);
        if self.strategy == ChangeStrategy::CopyOnWrite {
            let cow = CopyOnWriteMerge {
                plan: &plan,
                snapshot,
                brought: &brought,
                allow_partition_moves: self.allow_partition_moves,
                now: self.now,
            };
            return cow.run(txn, files.files, metrics).await;
        }

        metrics.files_scanned = files.files.len();
        let hidden = row_ids::hidden_fields(snapshot);
        let targets = targets::read_targets(&plan, snapshot, &files, by_source).await?;
        let mut changed = TargetChanges::new(&plan, snapshot, &hidden, self.allow_partition_moves);
        let mut changes = Vec::new();
        for (add, rows) in targets {
            let (deleted, _) = changed.file(txn, &rows, metrics)?;
            changes.push(FileChange { add, rows, deleted });
        }
        let TargetChanges {
            source_matches,
            mut new_rows,
            mut feed,
            ..
        } = changed;
        let inserts = insert_rows(&plan, snapshot, &source_matches, metrics)?;
        let mut schema = snapshot.schema().clone();
        let (inserts, moved) = draw_identity(&mut schema, inserts, &brought)?;
        if moved {
            commit_identity_marks(txn, snapshot, &schema);
        }
        feed.extend(inserted_feed(snapshot, &inserts));
        new_rows.extend(inserts);
        apply_changes(txn, snapshot, changes, new_rows, feed, self.now, metrics).await
    }
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
        let mut schema = snapshot.schema().clone();
        let (inserts, moved) = draw_identity(&mut schema, inserts, self.brought)?;
        if moved {
            commit_identity_marks(txn, snapshot, &schema);
        }
        let feed = inserted_feed(snapshot, &inserts);
        let inserted = write_rows(snapshot, inserts, now).await?;
        commit_rewrites(txn, snapshot, rewrites, inserted, feed, now, metrics).await?;
        Ok(())
    }
}
