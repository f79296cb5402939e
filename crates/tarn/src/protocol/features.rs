//! Protocol versions and table features: what Tarn can read and write.

use crate::error::{Error, Result};
use crate::protocol::actions::{Action, Metadata, Protocol};
use crate::protocol::mapping;
use crate::protocol::properties::{ColumnMappingMode, TableProperties};
use crate::protocol::schema::{DataType, PrimitiveType, StructType};

/// Reader features Tarn implements.
pub const SUPPORTED_READER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "typeWidening",
    "typeWidening-preview",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "variantType",
    "variantType-preview",
];

/// Writer features Tarn honours when it writes (some only while unused, see
/// [`ensure_writable`]).
pub const SUPPORTED_WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "clustering",
    "generatedColumns",
    "identityColumns",
    "inCommitTimestamp",
    "rowTracking",
    "columnMapping",
    "deletionVectors",
    "domainMetadata",
    "timestampNtz",
    "typeWidening",
    "typeWidening-preview",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "variantType",
    "variantType-preview",
];

/// The highest reader version Tarn reads.
pub const MAX_READER_VERSION: i32 = 3;
/// The highest writer version Tarn writes.
pub const MAX_WRITER_VERSION: i32 = 7;

impl Protocol {
    /// The protocol Tarn gives new tables: (1, 2), or (3, 7) with the features `schema` and
    /// `properties` need (`timestampNtz` for `timestamp_ntz` columns, `deletionVectors`
    /// when `delta.enableDeletionVectors` is true, `columnMapping` when
    /// `delta.columnMapping.mode` is `name` or `id`, `v2Checkpoint` when
    /// `delta.checkpointPolicy` is `v2`, `variantType` for variant columns), or (1, 7) when the only ones are
    /// writer features (`inCommitTimestamp` when `delta.enableInCommitTimestamps` is
    /// true, `identityColumns` for identity columns, `generatedColumns` for generated
    /// ones, `changeDataFeed` when `delta.enableChangeDataFeed` is true, `rowTracking` and
    /// `domainMetadata` when `delta.enableRowTracking` is true, `checkConstraints` for
    /// `delta.constraints.*` properties).
    pub fn for_new_table(schema: &StructType, metadata: &Metadata) -> Self {
        let mut reader = Vec::new();
        let mut writer = Vec::new();
        let has = |p| schema.fields.iter().any(|f| contains(&f.data_type, p));
        if has(PrimitiveType::TimestampNtz) {
            reader.push("timestampNtz".to_string());
            writer.push("timestampNtz".to_string());
        }
        if has(PrimitiveType::Variant) {
            reader.push("variantType".to_string());
            writer.push("variantType".to_string());
        }
        if metadata.property("delta.enableDeletionVectors") == Some("true") {
            reader.push("deletionVectors".to_string());
            writer.push("deletionVectors".to_string());
        }
        let properties = TableProperties::new(metadata);
        if metadata.property("delta.checkpointPolicy") == Some("v2") {
            reader.push("v2Checkpoint".to_string());
            writer.push("v2Checkpoint".to_string());
        }
        if properties.column_mapping_mode() != ColumnMappingMode::None {
            reader.push("columnMapping".to_string());
            writer.push("columnMapping".to_string());
        }
        // Writer-only: readers that do not know them still read the table right.
        if properties.in_commit_timestamps_since().is_some() {
            writer.push("inCommitTimestamp".to_string());
        }
        if any_field_metadata(schema, "delta.identity.start") {
            writer.push("identityColumns".to_string());
        }
        if any_field_metadata(schema, "delta.generationExpression") {
            writer.push("generatedColumns".to_string());
        }
        if properties.change_data_feed() {
            writer.push("changeDataFeed".to_string());
        }
        if properties.row_tracking() {
            writer.extend(["rowTracking".to_string(), "domainMetadata".to_string()]);
        }
        if metadata
            .configuration
            .keys()
            .any(|k| k.starts_with("delta.constraints."))
        {
            writer.push("checkConstraints".to_string());
        }
        if writer.is_empty() {
            return Self {
                min_reader_version: 1,
                min_writer_version: 2,
                reader_features: None,
                writer_features: None,
            };
        }
        // Writer version 7 lists every feature the writer must know, the legacy ones of
        // (1, 2) included.
        writer.extend(["appendOnly".to_string(), "invariants".to_string()]);
        let (min_reader_version, reader_features) = match reader.is_empty() {
            true => (1, None),
            false => (3, Some(reader)),
        };
        Self {
            min_reader_version,
            min_writer_version: 7,
            reader_features,
            writer_features: Some(writer),
        }
    }

    /// The protocol that supports everything `self` and `other` support: `self` when
    /// `other` asks for nothing new; otherwise writer version 7 listing every writer
    /// feature either implies, and reader version 3 only when a reader feature is new
    /// (writer-only features such as `domainMetadata` keep old readers working).
    pub fn merged_with(&self, other: &Protocol) -> Protocol {
        let new_readers: Vec<String> = other
            .reader_features
            .iter()
            .flatten()
            .filter(|f| !self.has_reader_feature(f))
            .cloned()
            .collect();
        let new_writers: Vec<String> = other
            .writer_features
            .iter()
            .flatten()
            .filter(|f| !self.has_writer_feature(f))
            .cloned()
            .collect();
        if new_readers.is_empty() && new_writers.is_empty() {
            return self.clone();
        }
        let (min_reader_version, reader_features) = if new_readers.is_empty() {
            (self.min_reader_version, self.reader_features.clone())
        } else {
            let mut readers: Vec<String> = match self.min_reader_version {
                3 => self.reader_features.clone().unwrap_or_default(),
                2 => vec!["columnMapping".into()],
                _ => Vec::new(),
            };
            readers.extend(new_readers);
            (3, Some(readers))
        };
        let mut writers: Vec<String> = match self.min_writer_version {
            7 => self.writer_features.clone().unwrap_or_default(),
            v => legacy_writer_features(v)
                .iter()
                .map(|f| f.to_string())
                .collect(),
        };
        // A reader feature is a writer feature too.
        for f in reader_features.iter().flatten().chain(&new_writers) {
            if !writers.contains(f) {
                writers.push(f.clone());
            }
        }
        Protocol {
            min_reader_version,
            min_writer_version: 7,
            reader_features,
            writer_features: Some(writers),
        }
    }

    /// The protocol with one more writer-only feature (such as `domainMetadata`).
    pub fn with_writer_feature(&self, feature: &str) -> Protocol {
        self.merged_with(&Protocol {
            min_reader_version: 1,
            min_writer_version: 7,
            reader_features: None,
            writer_features: Some(vec![feature.to_string()]),
        })
    }

    /// Whether the table has this reader feature (explicitly, or implied by a legacy
    /// reader version).
    pub fn has_reader_feature(&self, feature: &str) -> bool {
        match self.min_reader_version {
            3 => self.reader_features.iter().flatten().any(|f| f == feature),
            2 => feature == "columnMapping",
            _ => false,
        }
    }

    /// Whether the table has this writer feature (explicitly, or implied by a legacy writer
    /// version).
    pub fn has_writer_feature(&self, feature: &str) -> bool {
        if self.min_writer_version == 7 {
            return self.writer_features.iter().flatten().any(|f| f == feature);
        }
        legacy_writer_features(self.min_writer_version).contains(&feature)
    }
}

/// Whether `t` is or holds the primitive type `p`.
fn contains(t: &DataType, p: PrimitiveType) -> bool {
    match t {
        DataType::Primitive(q) => *q == p,
        DataType::Array(a) => contains(&a.element_type, p),
        DataType::Map(m) => contains(&m.key_type, p) || contains(&m.value_type, p),
        DataType::Struct(s) => s.fields.iter().any(|f| contains(&f.data_type, p)),
    }
}

fn legacy_writer_features(version: i32) -> &'static [&'static str] {
    const ALL: &[&str] = &[
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "identityColumns",
    ];
    match version {
        ..=1 => &[],
        2 => &ALL[..2],
        3 => &ALL[..3],
        4 => &ALL[..5],
        5 => &ALL[..6],
        _ => ALL,
    }
}

/// Fails unless Tarn can read a table with this protocol: a reader version above 3, or a
/// reader feature Tarn lacks, is refused with an error naming it, never answered with
/// wrong rows.
pub fn ensure_readable(protocol: &Protocol) -> Result<()> {
    if protocol.min_reader_version < 1 || protocol.min_reader_version > MAX_READER_VERSION {
        return Err(Error::UnsupportedReaderVersion {
            version: protocol.min_reader_version,
        });
    }
    if protocol.min_reader_version == 3 {
        for feature in protocol.reader_features.iter().flatten() {
            if !SUPPORTED_READER_FEATURES.contains(&feature.as_str()) {
                return Err(Error::UnsupportedReaderFeature {
                    feature: feature.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Fails unless Tarn can write to a table with this protocol and metadata: writer versions
/// above 7 and unknown writer features are refused with an error naming the feature; a
/// column mapping mode other than `none`, `name` or `id`, or a mapped column without its
/// id or physical name, with an error naming it. (Constraints, generated and identity
/// columns are kept by the writes themselves.)
pub fn ensure_writable(
    protocol: &Protocol,
    metadata: &Metadata,
    schema: &StructType,
) -> Result<()> {
    ensure_readable(protocol)?;
    if protocol.min_writer_version < 1 || protocol.min_writer_version > MAX_WRITER_VERSION {
        return Err(Error::UnsupportedWriterVersion {
            version: protocol.min_writer_version,
        });
    }
    if protocol.min_writer_version == 7 {
        for feature in protocol.writer_features.iter().flatten() {
            if !SUPPORTED_WRITER_FEATURES.contains(&feature.as_str()) {
                return Err(Error::UnsupportedWriterFeature {
                    feature: feature.clone(),
                });
            }
        }
    }
    let mode = mapping::mode_of(metadata)?;
    if mode != ColumnMappingMode::None && !protocol.has_writer_feature("columnMapping") {
        // Readers that do not know the feature would read the files' physical names.
        return Err(Error::InvalidSchema {
            reason: format!(
                "the table maps columns by {mode:?} but its protocol lacks the columnMapping feature"
            ),
        });
    }
    mapping::ensure_mapped(schema, mode)
}

/// Fails with [`Error::AppendOnly`] when a commit of `actions` by `operation` removes
/// data from the append-only table at `table` (`delta.appendOnly` in the metadata the
/// actions set, else in `current`).
pub fn ensure_appends_only(
    table: &str,
    current: &Metadata,
    actions: &[Action],
    operation: &str,
) -> Result<()> {
    let metadata = actions
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::Metadata(m) => Some(m),
            _ => None,
        })
        .unwrap_or(current);
    let removes = actions
        .iter()
        .any(|a| matches!(a, Action::Remove(r) if r.data_change));
    if removes && TableProperties::new(metadata).append_only() {
        return Err(Error::AppendOnly {
            table: table.to_string(),
            operation: operation.to_string(),
        });
    }
    Ok(())
}

fn any_field_metadata(schema: &StructType, key: &str) -> bool {
    schema
        .try_for_each_struct(
            &mut |_, s| match s.fields.iter().any(|f| f.metadata.contains_key(key)) {
                true => Err(()),
                false => Ok(()),
            },
        )
        .is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(r: i32, w: i32, rf: &[&str], wf: &[&str]) -> Protocol {
        let list = |f: &[&str]| Some(f.iter().map(|s| s.to_string()).collect());
        Protocol {
            min_reader_version: r,
            min_writer_version: w,
            reader_features: (r == 3).then(|| list(rf)).flatten(),
            writer_features: (w == 7).then(|| list(wf)).flatten(),
        }
    }

    #[test]
    fn unknown_reader_features_and_versions_are_named() {
        assert!(ensure_readable(&protocol(1, 2, &[], &[])).is_ok());
        assert!(ensure_readable(&protocol(3, 7, &["deletionVectors"], &[])).is_ok());
        let err = ensure_readable(&protocol(3, 7, &["variantShredding-preview"], &[])).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedReaderFeature { feature } if feature == "variantShredding-preview")
        );
        let err = ensure_readable(&protocol(99, 7, &[], &[])).unwrap_err();
        assert!(matches!(
            err,
            Error::UnsupportedReaderVersion { version: 99 }
        ));
    }

    #[test]
    fn merging_upgrades_only_for_new_features() {
        let legacy = protocol(1, 2, &[], &[]);
        assert_eq!(legacy.merged_with(&protocol(1, 2, &[], &[])), legacy);
        let dv = protocol(
            3,
            7,
            &["deletionVectors"],
            &["deletionVectors", "appendOnly"],
        );
        let merged = legacy.merged_with(&dv);
        assert_eq!(
            (merged.min_reader_version, merged.min_writer_version),
            (3, 7)
        );
        assert!(
            merged.has_writer_feature("invariants") && merged.has_reader_feature("deletionVectors")
        );
        assert_eq!(merged.merged_with(&dv), merged);
        let domains = legacy.with_writer_feature("domainMetadata");
        assert_eq!(
            (domains.min_reader_version, domains.reader_features.clone()),
            (1, None)
        );
        assert!(
            domains.has_writer_feature("domainMetadata")
                && domains.has_writer_feature("appendOnly")
        );
    }

    #[test]
    fn legacy_versions_imply_their_features() {
        let p = protocol(2, 5, &[], &[]);
        assert!(p.has_reader_feature("columnMapping"));
        assert!(p.has_writer_feature("generatedColumns"));
        assert!(!protocol(1, 2, &[], &[]).has_writer_feature("checkConstraints"));
    }
}
