//! Where a table's indices are recorded: in Delta domain metadata, which Spark, delta-rs
//! and other Delta readers carry along and otherwise ignore.
//!
//! - `tarn.indices`: the registry, JSON `{"format": 1, "indices": {name: definition}}`.
//!   Every index DDL rewrites it, and every commit that adds data files reads it, so a
//!   write that raced an index's creation or drop retries with the new set of indices.
//! - `tarn.index.<name>.<segment id>`: one segment of an index, JSON
//!   `{"format": 1, "index": <index id>, "object": "_tarn_index/<name>/<id>.<kind>",
//!   "files": [<add paths>], "rows": n, "size": bytes}`. A row address's file ordinal is
//!   the position of its file in `files`. Segments are added by separate domains, so
//!   concurrent appends that each add one never conflict.
//!
//! A definition: `{"id": uuid, "column": c, "kind": "btree"|"bitmap"|"fulltext",
//! "mode": "inline"|"deferred", "options": {...}, "createdVersion": v, "format": 1}`.
//! A registry or segment whose `format` is above [`INDEX_FORMAT`] is refused with
//! [`Error::UnsupportedIndexFormat`] by anything that would use it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{IndexKind, IndexMode, IndexOptions};
use crate::error::{Error, Result};
use crate::paths;
use crate::snapshot::Snapshot;

/// The domain of the index registry.
pub(crate) const REGISTRY_DOMAIN: &str = "tarn.indices";
/// The prefix of segment domains: `tarn.index.<name>.<segment id>`.
pub(crate) use crate::protocol::names::INDEX_SEGMENT_DOMAIN_PREFIX as SEGMENT_DOMAIN_PREFIX;
/// The folder (under the table root) index objects live in. Its leading `_` hides it
/// from Delta readers and from data-file listings.
pub(crate) const INDEX_DIR: &str = "_tarn_index";
/// The index format this build writes, and the newest it reads.
pub(crate) const INDEX_FORMAT: u32 = 1;

/// One index, as the registry records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexDefinition {
    /// A unique id: segments name the index they belong to by it.
    pub id: String,
    /// The indexed (top-level) column.
    pub column: String,
    /// The kind of index.
    pub kind: IndexKind,
    /// When segments are built.
    pub mode: IndexMode,
    /// Options of the kind.
    #[serde(default)]
    pub options: IndexOptions,
    /// The table version the index was created at.
    pub created_version: i64,
    /// The format of the index's objects and records.
    #[serde(default = "one")]
    pub format: u32,
}

fn one() -> u32 {
    1
}

/// The registry domain's configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Registry {
    #[serde(default = "one")]
    pub(crate) format: u32,
    #[serde(default)]
    pub(crate) indices: BTreeMap<String, IndexDefinition>,
}

/// One segment of an index: an object covering a known list of data files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexSegment {
    /// The id of the index this segment belongs to.
    pub index: String,
    /// The object, relative to the table root.
    pub object: String,
    /// The data files covered, as `add` paths; a file's ordinal is its position.
    pub files: Vec<String>,
    /// Row addresses indexed.
    pub rows: u64,
    /// The object's size in bytes.
    pub size: u64,
    /// The format of the object and this record.
    #[serde(default = "one")]
    pub format: u32,
}

/// The indices of one snapshot: definitions and their segments (with their domains).
#[derive(Debug, Clone, Default)]
pub(crate) struct TableIndices {
    pub(crate) registry: Registry,
    /// Segments by index name: `(domain, segment)`.
    pub(crate) segments: BTreeMap<String, Vec<(String, IndexSegment)>>,
}

/// The domain of a segment.
pub(crate) fn segment_domain(name: &str, segment_id: &str) -> String {
    format!("{SEGMENT_DOMAIN_PREFIX}{name}.{segment_id}")
}

/// The object path (relative to the root) of a new segment.
pub(crate) fn segment_object(name: &str, segment_id: &str, kind: IndexKind) -> String {
    format!("{INDEX_DIR}/{name}/{segment_id}.{}", kind.name())
}

impl TableIndices {
    /// Reads the registry and the segments from a snapshot's domain metadata.
    ///
    /// Fails with [`Error::InvalidIndexMetadata`] when a record does not parse.
    pub(crate) fn of(snapshot: &Snapshot) -> Result<TableIndices> {
        let registry: Registry = match snapshot.domain_metadata(REGISTRY_DOMAIN) {
            Some(text) => serde_json::from_str(text).map_err(|e| Error::InvalidIndexMetadata {
                domain: REGISTRY_DOMAIN.into(),
                reason: e.to_string(),
            })?,
            None => Registry::default(),
        };
        let mut segments: BTreeMap<String, Vec<(String, IndexSegment)>> = BTreeMap::new();
        for domain in snapshot.domains() {
            let Some(rest) = domain.domain.strip_prefix(SEGMENT_DOMAIN_PREFIX) else {
                continue;
            };
            let Some((name, _)) = rest.rsplit_once('.') else {
                continue;
            };
            let segment: IndexSegment =
                serde_json::from_str(&domain.configuration).map_err(|e| {
                    Error::InvalidIndexMetadata {
                        domain: domain.domain.clone(),
                        reason: e.to_string(),
                    }
                })?;
            segments
                .entry(name.to_string())
                .or_default()
                .push((domain.domain.clone(), segment));
        }
        Ok(TableIndices { registry, segments })
    }

    /// The index named `name`, if there is one.
    pub(crate) fn definition(&self, name: &str) -> Option<&IndexDefinition> {
        self.registry.indices.get(name)
    }

    /// The index on `column` of `kind`s, preferring the first kind listed.
    pub(crate) fn on_column(
        &self,
        column: &str,
        kinds: &[IndexKind],
    ) -> Option<(&str, &IndexDefinition)> {
        kinds.iter().find_map(|kind| {
            self.registry
                .indices
                .iter()
                .find(|(_, d)| d.column == column && d.kind == *kind)
                .map(|(n, d)| (n.as_str(), d))
        })
    }

    /// The live segments of an index (those of its current id).
    pub(crate) fn segments_of(&self, name: &str) -> Vec<&(String, IndexSegment)> {
        let Some(def) = self.definition(name) else {
            return Vec::new();
        };
        self.segments
            .get(name)
            .map(|all| all.iter().filter(|(_, s)| s.index == def.id).collect())
            .unwrap_or_default()
    }

    /// Fails with [`Error::UnsupportedIndexFormat`] when the registry, the index or one
    /// of its segments was written by a newer format than this build reads.
    pub(crate) fn check_format(&self, name: &str) -> Result<()> {
        let too_new = |version: u32| Error::UnsupportedIndexFormat {
            index: name.to_string(),
            version,
            supported: INDEX_FORMAT,
        };
        if self.registry.format > INDEX_FORMAT {
            return Err(too_new(self.registry.format));
        }
        if let Some(def) = self.definition(name)
            && def.format > INDEX_FORMAT
        {
            return Err(too_new(def.format));
        }
        for (_, segment) in self.segments_of(name) {
            if segment.format > INDEX_FORMAT {
                return Err(too_new(segment.format));
            }
        }
        Ok(())
    }

    /// The registry as domain configuration text.
    pub(crate) fn registry_json(registry: &Registry) -> Result<String> {
        serde_json::to_string(registry).map_err(|source| Error::Serialize {
            what: "the index registry".into(),
            source,
        })
    }
}

/// A segment record as domain configuration text.
pub(crate) fn segment_json(segment: &IndexSegment) -> Result<String> {
    serde_json::to_string(segment).map_err(|source| Error::Serialize {
        what: "an index segment".into(),
        source,
    })
}

/// Index names: letters, digits, `_` and `-`, 1 to 64 of them.
pub(crate) fn validate_index_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            name: "index name",
            reason: format!(
                "{name:?} must be 1 to 64 letters, digits, '_' or '-' (it names a domain and a folder)"
            ),
        })
    }
}

/// The canonical paths of a segment's files, by ordinal.
pub(crate) fn canonical_files(snapshot: &Snapshot, segment: &IndexSegment) -> Vec<String> {
    segment
        .files
        .iter()
        .map(|p| paths::canonical(snapshot.location(), p))
        .collect()
}
