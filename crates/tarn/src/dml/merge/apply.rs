//! What a MERGE's clauses do to rows: matched pairs and target rows no source row
//! matched become deleted positions and replacement rows ([`TargetChanges`]), source rows
//! no target row matched become inserts, with identity values drawn for them.

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::{and, concat_batches, filter_record_batch, not};
use arrow::datatypes::Schema;
use roaring::RoaringTreemap;

use super::super::rewrite::ChunkChange;
use super::super::update::{assign, check_partition_moves};
use super::super::{ChangeKind, DmlMetrics, Feed, positions_of, records_feed};
use super::Clause;
use super::plan::{self, MergePlan, null_rows, selected, take_rows};
use crate::error::{Error, Result};
use crate::protocol::{StructField, StructType};
use crate::scan::FileRows;
use crate::snapshot::Snapshot;
use crate::txn::Transaction;
use crate::write::{fill_identity, identity_columns};

/// What a merge's target files turn into, gathered file by file: the source rows each
/// matched (to find ambiguous and unmatched ones), updated rows, and the change feed.
pub(super) struct TargetChanges<'a> {
    plan: &'a MergePlan,
    snapshot: &'a Snapshot,
    hidden: &'a [StructField],
    allow_partition_moves: bool,
    /// Per source row of the plan, how many target rows it matched.
    pub(super) source_matches: Vec<u32>,
    /// Updated rows (with their row ids when the table keeps them), to write.
    pub(super) new_rows: Vec<RecordBatch>,
    /// The change data feed so far.
    pub(super) feed: Feed,
}

impl<'a> TargetChanges<'a> {
    /// Nothing changed yet, for the source of `plan`.
    pub(super) fn new(
        plan: &'a MergePlan,
        snapshot: &'a Snapshot,
        hidden: &'a [StructField],
        allow_partition_moves: bool,
    ) -> Self {
        Self {
            plan,
            snapshot,
            hidden,
            allow_partition_moves,
            source_matches: vec![0; plan.source.num_rows()],
            new_rows: Vec::new(),
            feed: Feed::new(),
        }
    }

    /// Applies the clauses to one file's rows; returns the file positions they delete
    /// (updated rows included) and those a source row matched.
    ///
    /// Fails as [`change_target`] does, and with [`Error::MergeDuplicateMatch`] for a
    /// source row matching a second target row.
    pub(super) fn file(
        &mut self,
        txn: &mut Transaction,
        rows: &FileRows,
        metrics: &mut DmlMetrics,
    ) -> Result<(RoaringTreemap, RoaringTreemap)> {
        let change = change_target(
            self.plan,
            self.snapshot,
            &rows.batch,
            self.allow_partition_moves,
        )?;
        count_matches(self.plan, &mut self.source_matches, &change.matched_sources)?;
        metrics.rows_updated += change.rows_updated;
        metrics.rows_deleted += change.rows_deleted;
        let deleted = match &change.deleted {
            Some(mask) => positions_of(rows, mask),
            None => RoaringTreemap::new(),
        };
        let matched = change
            .matched_targets
            .iter()
            .map(|t| rows.positions[*t as usize])
            .collect();
        // Updated rows keep their row ids when the table keeps them.
        match (&rows.ids, change.replacement.is_empty()) {
            (Some(ids), false) => {
                let updated = concat_batches(&change.replacement[0].schema(), &change.replacement)
                    .map_err(Error::arrow("merge"))?;
                txn.note_row_ids_kept(change.replaced.len() == updated.num_rows());
                self.new_rows
                    .push(ids.updated(&updated, &change.replaced, self.hidden)?);
            }
            (None, false) => {
                txn.note_row_ids_kept(false);
                self.new_rows.extend(change.replacement);
            }
            (_, true) => {}
        }
        self.feed.extend(change.feed);
        Ok((deleted, matched))
    }
}

/// The change data feed of a merge's inserted rows, when the table records one.
pub(super) fn inserted_feed(snapshot: &Snapshot, inserts: &[RecordBatch]) -> Feed {
    match records_feed(snapshot) {
        true => inserts
            .iter()
            .map(|b| (b.clone(), ChangeKind::Insert))
            .collect(),
        false => Feed::new(),
    }
}

/// Inserted rows with values for the identity columns the merge does not bring, drawn
/// after the high-water marks of `schema` (which moves them; `true` when it did);
/// `brought` ones must allow explicit values.
///
/// Fails with [`Error::SchemaMismatch`] when the merge brings values for a `GENERATED
/// ALWAYS` identity column.
pub(super) fn draw_identity(
    schema: &mut StructType,
    inserts: Vec<RecordBatch>,
    brought: &[String],
) -> Result<(Vec<RecordBatch>, bool)> {
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
        return Ok((inserts, false));
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
    let moved = marked.is_some();
    if let Some(marked) = marked {
        *schema = marked;
    }
    Ok((filled, moved))
}

/// Puts `schema` (the table's, with identity marks the merge moved) into `txn`.
pub(super) fn commit_identity_marks(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    schema: &StructType,
) {
    let mut metadata = snapshot.metadata().clone();
    metadata.schema_string = schema.to_json();
    txn.set_metadata(metadata);
}

/// Counts the source rows a target chunk matched; a source row matching a second
/// target row is ambiguous.
pub(super) fn count_matches(plan: &MergePlan, counts: &mut [u32], matched: &[u32]) -> Result<()> {
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
pub(super) fn change_target(
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
    change.matched_targets = t_idx;
    change.deleted = Some(BooleanArray::from(deleted));
    Ok(change)
}

/// The rows the not-matched clauses insert for source rows no target row matched.
pub(super) fn insert_rows(
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
pub(super) fn brought_identity(
    schema: &StructType,
    clauses: &[Clause],
    source: &Schema,
) -> Result<Vec<String>> {
    Ok(identity_columns(schema)?
        .into_iter()
        .filter(|(name, _)| {
            clauses.iter().any(|c| match c {
                Clause::NotMatchedInsert(_, sets) => sets.iter().any(|(n, _)| n == name),
                Clause::NotMatchedInsertAll(_) => source.index_of(name).is_ok(),
                _ => false,
            })
        })
        .map(|(name, _)| name)
        .collect())
}
