//! Protocol versions and table features: what Tarn can read and write.

use crate::error::{Error, Result};
use crate::protocol::actions::{Metadata, Protocol};
use crate::protocol::schema::{DataType, StructType};

/// Reader features Tarn implements.
pub const SUPPORTED_READER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
];

/// Writer features Tarn honours when it writes (some only while unused, see
/// [`ensure_writable`]).
pub const SUPPORTED_WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "identityColumns",
    "columnMapping",
    "deletionVectors",
    "domainMetadata",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
];

/// The highest reader version Tarn reads.
pub const MAX_READER_VERSION: i32 = 3;
/// The highest writer version Tarn writes.
pub const MAX_WRITER_VERSION: i32 = 7;

impl Protocol {
    /// The protocol Tarn gives new tables: (1, 2), or (3, 7) with the features `schema` and
    /// `properties` need (`timestampNtz` for `timestamp_ntz` columns, `deletionVectors`
    /// when `delta.enableDeletionVectors` is true).
    pub fn for_new_table(schema: &StructType, metadata: &Metadata) -> Self {
        let mut reader = Vec::new();
        let mut writer = Vec::new();
        if schema.fields.iter().any(|f| contains_ntz(&f.data_type)) {
            reader.push("timestampNtz".to_string());
            writer.push("timestampNtz".to_string());
        }
        if metadata.property("delta.enableDeletionVectors") == Some("true") {
            reader.push("deletionVectors".to_string());
            writer.push("deletionVectors".to_string());
        }
        if reader.is_empty() {
            Self {
                min_reader_version: 1,
                min_writer_version: 2,
                reader_features: None,
                writer_features: None,
            }
        } else {
            // Writer version 7 lists every feature the writer must know, the legacy ones of
            // (1, 2) included.
            writer.extend(["appendOnly".to_string(), "invariants".to_string()]);
            Self {
                min_reader_version: 3,
                min_writer_version: 7,
                reader_features: Some(reader),
                writer_features: Some(writer),
            }
        }
    }

    /// The protocol that supports everything `self` and `other` support: the same when
    /// `other` asks for nothing new, else (3, 7) listing every feature either implies.
    pub fn merged_with(&self, other: &Protocol) -> Protocol {
        let needs = |p: &Protocol| p.min_reader_version >= 3 || p.min_writer_version >= 7;
        let new_features = other
            .reader_features
            .iter()
            .flatten()
            .any(|f| !self.has_reader_feature(f))
            || other
                .writer_features
                .iter()
                .flatten()
                .any(|f| !self.has_writer_feature(f));
        if !needs(other) || !new_features {
            return self.clone();
        }
        let mut readers: Vec<String> = match self.min_reader_version {
            3 => self.reader_features.clone().unwrap_or_default(),
            2 => vec!["columnMapping".into()],
            _ => Vec::new(),
        };
        let mut writers: Vec<String> = match self.min_writer_version {
            7 => self.writer_features.clone().unwrap_or_default(),
            v => legacy_writer_features(v)
                .iter()
                .map(|f| f.to_string())
                .collect(),
        };
        for f in other.reader_features.iter().flatten() {
            if !readers.contains(f) {
                readers.push(f.clone());
            }
        }
        for f in other.writer_features.iter().flatten() {
            if !writers.contains(f) {
                writers.push(f.clone());
            }
        }
        Protocol {
            min_reader_version: 3,
            min_writer_version: 7,
            reader_features: Some(readers),
            writer_features: Some(writers),
        }
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

fn contains_ntz(t: &DataType) -> bool {
    match t {
        DataType::Primitive(p) => *p == crate::protocol::schema::PrimitiveType::TimestampNtz,
        DataType::Array(a) => contains_ntz(&a.element_type),
        DataType::Map(m) => contains_ntz(&m.key_type) || contains_ntz(&m.value_type),
        DataType::Struct(s) => s.fields.iter().any(|f| contains_ntz(&f.data_type)),
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
/// above 7, unknown writer features, and features in use that Tarn cannot maintain
/// (invariants, CHECK constraints, generated or identity columns, column mapping) are
/// refused with an error naming the feature.
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
    let refuse = |feature: &str| Error::UnsupportedWriterFeature {
        feature: feature.to_string(),
    };
    if protocol.has_writer_feature("invariants") && any_field_metadata(schema, "delta.invariants") {
        return Err(refuse("invariants"));
    }
    if protocol.has_writer_feature("checkConstraints")
        && metadata
            .configuration
            .keys()
            .any(|k| k.starts_with("delta.constraints."))
    {
        return Err(refuse("checkConstraints"));
    }
    if protocol.has_writer_feature("generatedColumns")
        && any_field_metadata(schema, "delta.generationExpression")
    {
        return Err(refuse("generatedColumns"));
    }
    if protocol.has_writer_feature("identityColumns")
        && any_field_metadata(schema, "delta.identity.start")
    {
        return Err(refuse("identityColumns"));
    }
    let mapping = metadata
        .property("delta.columnMapping.mode")
        .unwrap_or("none");
    if protocol.has_writer_feature("columnMapping") && mapping != "none" {
        return Err(refuse("columnMapping"));
    }
    Ok(())
}

fn any_field_metadata(schema: &StructType, key: &str) -> bool {
    fn walk(t: &DataType, key: &str) -> bool {
        match t {
            DataType::Primitive(_) => false,
            DataType::Array(a) => walk(&a.element_type, key),
            DataType::Map(m) => walk(&m.key_type, key) || walk(&m.value_type, key),
            DataType::Struct(s) => s
                .fields
                .iter()
                .any(|f| f.metadata.contains_key(key) || walk(&f.data_type, key)),
        }
    }
    walk(&DataType::Struct(schema.clone()), key)
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
        let err = ensure_readable(&protocol(3, 7, &["variantType"], &[])).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedReaderFeature { feature } if feature == "variantType")
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
    }

    #[test]
    fn legacy_versions_imply_their_features() {
        let p = protocol(2, 5, &[], &[]);
        assert!(p.has_reader_feature("columnMapping"));
        assert!(p.has_writer_feature("generatedColumns"));
        assert!(!protocol(1, 2, &[], &[]).has_writer_feature("checkConstraints"));
    }
}
