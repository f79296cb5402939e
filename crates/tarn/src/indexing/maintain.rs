//! Keeping indices up to date: inline segments for the files a commit adds, and the index
//! objects a vacuum must keep.

use std::collections::HashSet;

use arrow::array::ArrayRef;

use super::build::{FileColumn, build_segment, read_column};
use crate::error::Result;
use crate::index::IndexMode;
use crate::index::meta::{
    INDEX_FORMAT, IndexDefinition, IndexSegment, REGISTRY_DOMAIN, SEGMENT_DOMAIN_PREFIX,
    canonical_files, segment_json,
};
use crate::index::table_indices;
use crate::paths;
use crate::protocol::{Action, Add};
use crate::snapshot::Snapshot;
use crate::txn::Transaction;

/// The inline indices a write maintains.
#[derive(Debug, Clone, Default)]
pub(crate) struct InlineSegments {
    indices: Vec<(String, IndexDefinition)>,
}

impl InlineSegments {
    /// The inline indices of `snapshot` this build can write (an index of a newer format
    /// is left alone: its segments will not cover the new files, which scans then read
    /// with statistics pruning).
    ///
    /// Fails with [`crate::Error::InvalidIndexMetadata`] when the registry does not parse.
    pub(crate) fn of(snapshot: &Snapshot) -> Result<Self> {
        let indices = table_indices(snapshot)?;
        if indices.registry.format > INDEX_FORMAT {
            return Ok(Self::default());
        }
        Ok(Self {
            indices: indices
                .registry
                .indices
                .iter()
                .filter(|(_, d)| d.mode == IndexMode::Inline && d.format <= INDEX_FORMAT)
                .map(|(n, d)| (n.clone(), d.clone()))
                .collect(),
        })
    }

    /// The columns a write captures for these indices, in order, without repeats.
    pub(crate) fn columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, def) in &self.indices {
            if !out.contains(&def.column) {
                out.push(def.column.clone());
            }
        }
        out
    }

    /// Whether there is any inline index to maintain.
    pub(crate) fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Builds and uploads segments over the files of a streamed write, reading the
    /// indexed columns back from them: one segment per index for each run of files
    /// holding up to `tarn.index.streamSegmentRows` rows (a file larger than that is a
    /// run of its own), so memory holds one run's columns, not every row written.
    ///
    /// Fails as [`build`](Self::build) does.
    pub(crate) async fn build_in_runs(
        &self,
        snapshot: &Snapshot,
        adds: &[Add],
    ) -> Result<BuiltSegments> {
        let limit = snapshot.properties().index_stream_segment_rows();
        let mut built = BuiltSegments::default();
        let mut start = 0;
        while start < adds.len() {
            let mut end = start;
            let mut rows = 0;
            while end < adds.len() {
                let more = adds[end]
                    .stats
                    .as_ref()
                    .and_then(|s| s.num_records())
                    .unwrap_or(limit);
                if end > start && rows + more > limit {
                    break;
                }
                rows += more;
                end += 1;
            }
            let run = self.build(snapshot, &adds[start..end], &[], &[]).await?;
            built.records.extend(run.records);
            built.any_files |= run.any_files;
            start = end;
        }
        Ok(built)
    }

    /// Builds and uploads a segment per index over the files written (the domain
    /// metadata records to commit). `captured[i]` holds the columns `captured_columns` of
    /// `adds[i]`, every row; a column not captured is read back from the files.
    ///
    /// Fails as building a segment, or reading a column back, does.
    pub(crate) async fn build(
        &self,
        snapshot: &Snapshot,
        adds: &[Add],
        captured_columns: &[String],
        captured: &[Vec<ArrayRef>],
    ) -> Result<BuiltSegments> {
        if adds.is_empty() {
            return Ok(BuiltSegments::default());
        }
        // Files too small to be worth a segment are left uncovered (read with statistics
        // until `optimize_indices`); the commit still depends on the registry.
        let min_rows = snapshot.properties().index_inline_min_rows();
        let keep: Vec<bool> = adds
            .iter()
            .enumerate()
            .map(|(i, add)| {
                let rows = captured
                    .get(i)
                    .and_then(|c| c.first())
                    .map(|a| a.len() as u64)
                    .or_else(|| add.stats.as_ref().and_then(|s| s.num_records()));
                rows.is_none_or(|r| r >= min_rows)
            })
            .collect();
        let adds: Vec<Add> = adds
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(a, _)| a.clone())
            .collect();
        let captured: Vec<Vec<ArrayRef>> = captured
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c.clone())
            .collect();
        let (adds, captured) = (adds.as_slice(), captured.as_slice());
        // The indices' segments are built and uploaded at once: one round trip, not one
        // per index.
        let builds = self.indices.iter().map(|(name, def)| async move {
            let files: Vec<FileColumn> =
                match captured_columns.iter().position(|c| *c == def.column) {
                    Some(slot) => adds
                        .iter()
                        .zip(captured)
                        .filter_map(|(add, arrays)| {
                            let values = arrays.get(slot)?.clone();
                            Some(FileColumn {
                                add: add.clone(),
                                positions: (0..values.len() as u64).collect(),
                                values,
                            })
                        })
                        .collect(),
                    None => read_column(snapshot, &def.column, adds.to_vec()).await?,
                };
            build_segment(snapshot, name, def, files).await
        });
        let mut records = Vec::new();
        for built in futures::future::join_all(builds).await {
            if let Some((domain, segment)) = built? {
                records.push((domain, segment_json(&segment)?));
            }
        }
        Ok(BuiltSegments {
            records,
            any_files: true,
        })
    }

    /// Adds segments built by [`build`](Self::build) to the transaction, with the
    /// tombstones of segments it leaves without files; the transaction records that it
    /// read the index registry, so a concurrent index creation or drop conflicts with it.
    ///
    /// Fails as retiring segments does (unparsable segment records).
    pub(crate) fn apply(
        txn: &mut Transaction,
        snapshot: &Snapshot,
        built: BuiltSegments,
    ) -> Result<()> {
        retire(txn, snapshot)?;
        if built.any_files {
            txn.record_read_index_registry(REGISTRY_DOMAIN);
        }
        for (domain, json) in built.records {
            txn.set_domain_metadata(domain, json);
        }
        Ok(())
    }

    /// [`build`](Self::build), then [`apply`](Self::apply) to `txn`; files written
    /// without capturing their columns (`captured` not one entry per file) are read back
    /// a run at a time ([`build_in_runs`](Self::build_in_runs)).
    ///
    /// Fails as either does.
    pub(crate) async fn add_to(
        &self,
        txn: &mut Transaction,
        snapshot: &Snapshot,
        adds: &[Add],
        captured_columns: &[String],
        captured: &[Vec<ArrayRef>],
    ) -> Result<()> {
        // Files written without capturing (a streamed write) are read back in runs.
        let built = match captured.len() == adds.len() {
            true => {
                self.build(snapshot, adds, captured_columns, captured)
                    .await?
            }
            false => self.build_in_runs(snapshot, adds).await?,
        };
        Self::apply(txn, snapshot, built)
    }
}

/// Segments built and uploaded for a commit's new files, not yet in its transaction.
#[derive(Debug, Clone, Default)]
pub(crate) struct BuiltSegments {
    /// Domain metadata records (domain, configuration) of the new segments.
    records: Vec<(String, String)>,
    /// Whether the commit adds files (so it depends on the index registry).
    any_files: bool,
}

/// Tombstones, in `txn`, the segments every file of which the transaction removes (without
/// adding it back) or which are already gone: a copy-on-write rewrite retires the segments
/// of the files it replaces in the same commit, so segment records stay in step with the
/// live files however often files are rewritten.
fn retire(txn: &mut Transaction, snapshot: &Snapshot) -> Result<()> {
    let location = snapshot.location();
    let (mut removed, mut added) = (HashSet::new(), HashSet::new());
    for action in txn.actions() {
        match action {
            Action::Remove(r) => {
                removed.insert(paths::canonical(location, &r.path));
            }
            Action::Add(a) => {
                added.insert(paths::canonical(location, &a.path));
            }
            _ => {}
        }
    }
    let gone: HashSet<String> = removed.difference(&added).cloned().collect();
    if gone.is_empty() {
        return Ok(());
    }
    let indices = table_indices(snapshot)?;
    for segments in indices.segments.values() {
        for (domain, segment) in segments {
            let files = canonical_files(snapshot, segment);
            if !files.iter().any(|f| gone.contains(f)) {
                continue;
            }
            if files
                .iter()
                .all(|f| gone.contains(f) || !snapshot.has_file(f))
            {
                txn.remove_domain_metadata(domain.clone(), segment_json(segment)?);
            }
        }
    }
    Ok(())
}

/// The index objects (canonical paths) a vacuum keeps: those of the segments live in the
/// snapshot, and those of segments removed by commits in `removed_recently` (the actions
/// of the commits within the retention period).
pub(crate) fn referenced_objects(
    snapshot: &Snapshot,
    removed_recently: &[Vec<Action>],
) -> HashSet<String> {
    let location = snapshot.location();
    let mut out = HashSet::new();
    let mut keep = |configuration: &str| {
        if let Ok(segment) = serde_json::from_str::<IndexSegment>(configuration) {
            out.insert(paths::canonical(location, &segment.object));
        }
    };
    for domain in snapshot.domains() {
        if domain.domain.starts_with(SEGMENT_DOMAIN_PREFIX) {
            keep(&domain.configuration);
        }
    }
    for actions in removed_recently {
        for action in actions {
            if let Action::DomainMetadata(d) = action
                && d.domain.starts_with(SEGMENT_DOMAIN_PREFIX)
            {
                keep(&d.configuration);
            }
        }
    }
    out
}
