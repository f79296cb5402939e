//! Creating, listing, dropping and maintaining a table's indices.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::build::{build_segment, check_type, read_column};
use crate::error::{ConflictReason, Error, Result};
use crate::index::meta::{
    INDEX_FORMAT, IndexDefinition, REGISTRY_DOMAIN, TableIndices, canonical_files, segment_json,
    validate_index_name,
};
use crate::index::table_indices;
use crate::index::{IndexKind, IndexMode, IndexOptions};
use crate::paths;
use crate::protocol::Add;
use crate::table::Table;
use crate::txn::{CommitOutcome, Transaction};

/// Times index creation catches up with concurrent appends before giving up.
const CREATE_ATTEMPTS: u32 = 10;
/// Segments below this many rows are merged by `optimize_indices`.
const SMALL_SEGMENT_ROWS: u64 = 1 << 20;
/// A segment whose files are more than this share gone is rebuilt by `optimize_indices`.
const DEAD_SHARE: f64 = 0.2;

/// An index as [`Table::indices`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexInfo {
    /// Its name.
    pub name: String,
    /// Its definition.
    pub definition: IndexDefinition,
    /// Its segments.
    pub segments: usize,
    /// Live data files its segments cover.
    pub files_covered: usize,
    /// Live data files in the table.
    pub files_total: usize,
    /// Row addresses its segments hold (rows of removed files included).
    pub rows: u64,
    /// Bytes of its segment objects.
    pub bytes: u64,
}

/// An index being created; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct CreateIndexBuilder<'a> {
    table: &'a mut Table,
    column: String,
    name: Option<String>,
    kind: IndexKind,
    mode: IndexMode,
    options: IndexOptions,
}

impl Table {
    /// Starts creating an index on a top-level column (a BTree, inline, named
    /// `<column>_idx`, unless told otherwise).
    pub fn create_index(&mut self, column: impl Into<String>) -> CreateIndexBuilder<'_> {
        CreateIndexBuilder {
            table: self,
            column: column.into(),
            name: None,
            kind: IndexKind::BTree,
            mode: IndexMode::Inline,
            options: IndexOptions::default(),
        }
    }

    /// The table's indices, with their coverage.
    ///
    /// Fails with [`Error::InvalidIndexMetadata`] when the records do not parse.
    pub fn indices(&self) -> Result<Vec<IndexInfo>> {
        let snapshot = self.snapshot();
        let indices = table_indices(snapshot)?;
        let live: HashSet<String> = snapshot
            .files()
            .map(|a| paths::canonical(snapshot.location(), &a.path))
            .collect();
        Ok(indices
            .registry
            .indices
            .iter()
            .map(|(name, definition)| {
                let segments = indices.segments_of(name);
                let covered: HashSet<String> = segments
                    .iter()
                    .flat_map(|(_, s)| canonical_files(snapshot, s))
                    .filter(|f| live.contains(f))
                    .collect();
                IndexInfo {
                    name: name.clone(),
                    definition: definition.clone(),
                    segments: segments.len(),
                    files_covered: covered.len(),
                    files_total: live.len(),
                    rows: segments.iter().map(|(_, s)| s.rows).sum(),
                    bytes: segments.iter().map(|(_, s)| s.size).sum(),
                }
            })
            .collect())
    }

    /// Drops an index: its definition and segments leave the table in one commit (the
    /// objects stay for readers of older versions until a vacuum).
    ///
    /// Fails with [`Error::IndexNotFound`], and as [`Transaction::commit`] does.
    pub async fn drop_index(&mut self, name: &str) -> Result<CommitOutcome> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let indices = table_indices(self.snapshot())?;
            if indices.definition(name).is_none() {
                return Err(Error::IndexNotFound {
                    name: name.to_string(),
                    available: indices.registry.indices.keys().cloned().collect(),
                });
            }
            let mut registry = indices.registry.clone();
            registry.indices.remove(name);
            let mut txn = self
                .transaction()
                .with_operation("DROP INDEX")
                .with_parameter("name", name);
            txn.read_domain_metadata(REGISTRY_DOMAIN);
            txn.set_domain_metadata(REGISTRY_DOMAIN, TableIndices::registry_json(&registry)?);
            if let Some(all) = indices.segments.get(name) {
                for (domain, segment) in all {
                    txn.remove_domain_metadata(domain.clone(), segment_json(segment)?);
                }
            }
            match self.commit(txn).await {
                // A concurrent merge replaced the segments, or a drop or creation changed
                // the registry: drop what is there now.
                Err(Error::Conflict {
                    reason: ConflictReason::DomainMetadataChanged { .. },
                    ..
                }) if attempt < CREATE_ATTEMPTS => self.refresh().await?,
                other => return other,
            }
        }
    }

    /// Builds segments for the live files an index does not cover yet (a deferred
    /// index's new files, or files a concurrent write added), merges small segments and
    /// segments whose files are mostly gone into one, per index, and removes segments
    /// left by dropped indices.
    ///
    /// Fails with [`Error::UnsupportedIndexFormat`] for an index a newer build wrote, as
    /// building does, and as [`Transaction::commit`] does.
    pub async fn optimize_indices(&mut self) -> Result<OptimizeIndicesOutcome> {
        let started = Instant::now();
        let snapshot = self.snapshot().clone();
        let indices = table_indices(&snapshot)?;
        let mut txn = self.transaction().with_operation("OPTIMIZE INDICES");
        let mut outcome = OptimizeIndicesOutcome::default();
        for (name, def) in &indices.registry.indices {
            indices.check_format(name)?;
            let segments = indices.segments_of(name);
            let live: HashSet<String> = snapshot
                .files()
                .map(|a| paths::canonical(snapshot.location(), &a.path))
                .collect();
            let mut covered = HashSet::new();
            let mut rebuild = Vec::new();
            for (domain, segment) in &segments {
                let files = canonical_files(&snapshot, segment);
                let alive = files.iter().filter(|f| live.contains(*f)).count();
                let dead = files.len() - alive;
                let small = segment.rows < SMALL_SEGMENT_ROWS;
                if (small && segments.len() > 1) || dead as f64 > DEAD_SHARE * files.len() as f64 {
                    rebuild.push((domain.clone(), (*segment).clone()));
                } else {
                    covered.extend(files);
                }
            }
            // Files to (re)index: those no kept segment covers.
            let files: Vec<Add> = snapshot
                .files()
                .filter(|a| !covered.contains(&paths::canonical(snapshot.location(), &a.path)))
                .cloned()
                .collect();
            if files.is_empty() && rebuild.is_empty() {
                continue;
            }
            let columns = read_column(&snapshot, &def.column, files).await?;
            outcome.files_indexed += columns.len();
            if let Some((domain, segment)) = build_segment(&snapshot, name, def, columns).await? {
                outcome.segments_written += 1;
                outcome.rows += segment.rows;
                txn.set_domain_metadata(domain, segment_json(&segment)?);
            }
            for (domain, segment) in rebuild {
                // Reading the merged segments makes a concurrent merge of them conflict.
                txn.read_domain_metadata(&domain);
                txn.remove_domain_metadata(domain, segment_json(&segment)?);
                outcome.segments_removed += 1;
            }
            txn.read_domain_metadata(REGISTRY_DOMAIN);
        }
        // Segments of dropped indices (an append that raced the drop may leave one).
        for (name, all) in &indices.segments {
            let current = indices.definition(name).map(|d| d.id.as_str());
            for (domain, segment) in all {
                if current != Some(segment.index.as_str()) {
                    txn.read_domain_metadata(domain);
                    txn.remove_domain_metadata(domain.clone(), segment_json(segment)?);
                    outcome.segments_removed += 1;
                }
            }
        }
        if !txn.actions().is_empty() {
            outcome.commit = Some(self.commit(txn).await?);
        }
        outcome.duration = started.elapsed();
        Ok(outcome)
    }
}

/// What [`Table::optimize_indices`] did.
#[derive(Debug, Clone, Default)]
pub struct OptimizeIndicesOutcome {
    /// The commit, when there was something to do.
    pub commit: Option<CommitOutcome>,
    /// Segments written.
    pub segments_written: usize,
    /// Segments replaced.
    pub segments_removed: usize,
    /// Data files whose column was read and indexed.
    pub files_indexed: usize,
    /// Row addresses written.
    pub rows: u64,
    /// Wall-clock time.
    pub duration: Duration,
}

impl CreateIndexBuilder<'_> {
    /// The index's name (default `<column>_idx`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The kind of index (default BTree).
    pub fn with_kind(mut self, kind: IndexKind) -> Self {
        self.kind = kind;
        self
    }

    /// Inline (default) or deferred.
    pub fn with_mode(mut self, mode: IndexMode) -> Self {
        self.mode = mode;
        self
    }

    /// Options of the kind (BTree page size, full-text analyzer).
    pub fn with_options(mut self, options: IndexOptions) -> Self {
        self.options = options;
        self
    }

    /// Creates the index: an inline index is built over every live file first; the
    /// definition and the segments commit together. Appends that commit meanwhile are
    /// caught up (their files indexed too) before retrying.
    ///
    /// Fails with [`Error::UnknownColumn`] for an unknown column, [`Error::InvalidArgument`]
    /// for a bad name or a partition or nested column, [`Error::UnsupportedIndexType`] for
    /// a type the kind cannot hold, [`Error::IndexAlreadyExists`] for a name taken, and as
    /// building and [`Transaction::commit`] do. Nothing is committed on failure.
    pub async fn execute(self) -> Result<IndexInfo> {
        let CreateIndexBuilder {
            table,
            column,
            name,
            kind,
            mode,
            options,
        } = self;
        let name = name.unwrap_or_else(|| format!("{column}_idx"));
        validate_index_name(&name)?;
        let snapshot = table.snapshot().clone();
        let field = snapshot
            .arrow_schema()
            .field_with_name(&column)
            .map_err(|_| Error::UnknownColumn {
                column: column.clone(),
                available: snapshot.schema().field_names(),
            })?
            .clone();
        if snapshot
            .partition_columns()
            .iter()
            .any(|p| p.name == column)
        {
            return Err(Error::InvalidArgument {
                name: "column",
                reason: format!(
                    "{column:?} is a partition column: partition values already prune files"
                ),
            });
        }
        check_type(kind, &column, field.data_type())?;
        if options.page_rows == Some(0) {
            return Err(Error::InvalidArgument {
                name: "page_rows",
                reason: "a BTree page needs at least one row".into(),
            });
        }
        let definition = IndexDefinition {
            id: Uuid::new_v4().to_string(),
            column,
            kind,
            mode,
            options,
            created_version: snapshot.version(),
            format: INDEX_FORMAT,
        };
        // Files already indexed by this creation, across catch-up attempts.
        let mut indexed: HashSet<String> = HashSet::new();
        let mut segments = Vec::new();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let snapshot = table.snapshot().clone();
            let indices = table_indices(&snapshot)?;
            if indices.definition(&name).is_some() {
                return Err(Error::IndexAlreadyExists { name });
            }
            if mode == IndexMode::Inline {
                let new: Vec<Add> = snapshot
                    .files()
                    .filter(|a| !indexed.contains(&paths::canonical(snapshot.location(), &a.path)))
                    .cloned()
                    .collect();
                indexed.extend(
                    new.iter()
                        .map(|a| paths::canonical(snapshot.location(), &a.path)),
                );
                let columns = read_column(&snapshot, &definition.column, new).await?;
                if let Some(segment) = build_segment(&snapshot, &name, &definition, columns).await?
                {
                    segments.push(segment);
                }
            }
            let mut registry = indices.registry.clone();
            registry.indices.insert(name.clone(), definition.clone());
            let mut txn: Transaction = table
                .transaction()
                .with_operation("CREATE INDEX")
                .with_parameter("name", name.clone())
                .with_parameter("column", definition.column.clone())
                .with_parameter("kind", kind.name())
                .with_parameter("mode", format!("{mode:?}").to_lowercase());
            // Files added concurrently would escape the index: they conflict, and the
            // next attempt indexes them.
            txn.record_read_whole_table();
            txn.read_domain_metadata(REGISTRY_DOMAIN);
            txn.set_domain_metadata(REGISTRY_DOMAIN, TableIndices::registry_json(&registry)?);
            for (domain, segment) in &segments {
                txn.set_domain_metadata(domain.clone(), segment_json(segment)?);
            }
            match table.commit(txn).await {
                Ok(_) => break,
                Err(Error::Conflict {
                    reason:
                        ConflictReason::ConcurrentAppend { .. }
                        | ConflictReason::DomainMetadataChanged { .. },
                    ..
                }) if attempt < CREATE_ATTEMPTS => {
                    table.refresh().await?;
                }
                Err(e) => return Err(e),
            }
        }
        table
            .indices()?
            .into_iter()
            .find(|i| i.name == name)
            .ok_or(Error::IndexNotFound {
                name,
                available: Vec::new(),
            })
    }
}
