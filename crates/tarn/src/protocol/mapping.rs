//! Column mapping on write: giving columns the ids and physical names Delta's
//! `columnMapping` feature asks for, when a table is created with it, gains columns, or
//! turns it on. Reads resolve physical names in `conform`; files are written under them in
//! `write::physical`.

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::protocol::Metadata;
use crate::protocol::properties::{COLUMN_MAPPING_MODE, ColumnMappingMode, TableProperties};
use crate::protocol::schema::{COLUMN_ID_KEY, DataType, PHYSICAL_NAME_KEY, StructType, field_path};

/// `delta.columnMapping.maxColumnId`: the highest column id ever given in the table.
pub const MAX_COLUMN_ID: &str = "delta.columnMapping.maxColumnId";

/// The mapping mode `metadata` asks for.
///
/// Fails with [`Error::InvalidArgument`] for a `delta.columnMapping.mode` other than
/// `none`, `name` or `id`: a table must never be written under a mode Tarn misreads.
pub fn mode_of(metadata: &Metadata) -> Result<ColumnMappingMode> {
    match metadata.property(COLUMN_MAPPING_MODE) {
        None => Ok(ColumnMappingMode::None),
        Some(m) if m.eq_ignore_ascii_case("none") => Ok(ColumnMappingMode::None),
        Some(_) => match TableProperties::new(metadata).column_mapping_mode() {
            ColumnMappingMode::None => Err(Error::InvalidArgument {
                name: "properties",
                reason: format!(
                    "{COLUMN_MAPPING_MODE} must be none, name or id, not {:?}",
                    metadata.property(COLUMN_MAPPING_MODE).unwrap_or_default()
                ),
            }),
            mode => Ok(mode),
        },
    }
}

/// Gives every field of `schema` (nested ones too) that lacks them a column id above the
/// table's `delta.columnMapping.maxColumnId` and a physical name, and records the new
/// highest id in `metadata`; a no-op when the table does not map columns.
///
/// `physical_as_name` keeps a field's logical name as its physical name: the files a
/// table wrote before it turned mapping on use those names. New columns get `col-<uuid>`,
/// as Spark names them, so a column dropped and added again never reads old values.
///
/// Fails as [`mode_of`] does.
pub fn annotate(
    schema: &mut StructType,
    metadata: &mut Metadata,
    physical_as_name: bool,
) -> Result<()> {
    if mode_of(metadata)? == ColumnMappingMode::None {
        return Ok(());
    }
    let mut max = metadata
        .property(MAX_COLUMN_ID)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(0)
        .max(max_id(schema));
    annotate_struct(schema, &mut max, physical_as_name);
    metadata
        .configuration
        .insert(MAX_COLUMN_ID.to_string(), Some(max.to_string()));
    metadata.schema_string = schema.to_json();
    Ok(())
}

fn annotate_struct(schema: &mut StructType, max: &mut i64, physical_as_name: bool) {
    for field in &mut schema.fields {
        if field.column_id().is_none() {
            *max += 1;
            field
                .metadata
                .insert(COLUMN_ID_KEY.to_string(), (*max).into());
        }
        if !field.metadata.contains_key(PHYSICAL_NAME_KEY) {
            let physical = if physical_as_name {
                field.name.clone()
            } else {
                format!("col-{}", Uuid::new_v4())
            };
            field
                .metadata
                .insert(PHYSICAL_NAME_KEY.to_string(), physical.into());
        }
        annotate_type(&mut field.data_type, max, physical_as_name);
    }
}

fn annotate_type(data_type: &mut DataType, max: &mut i64, physical_as_name: bool) {
    match data_type {
        DataType::Primitive(_) => {}
        DataType::Array(a) => annotate_type(&mut a.element_type, max, physical_as_name),
        DataType::Map(m) => {
            annotate_type(&mut m.key_type, max, physical_as_name);
            annotate_type(&mut m.value_type, max, physical_as_name);
        }
        DataType::Struct(s) => annotate_struct(s, max, physical_as_name),
    }
}

/// The highest column id in `schema`, 0 when none has one.
fn max_id(schema: &StructType) -> i64 {
    let mut max = 0;
    let _ = schema.try_for_each_struct(&mut |_, s| {
        for field in &s.fields {
            max = max.max(field.column_id().unwrap_or(0));
        }
        Ok::<(), ()>(())
    });
    max
}

/// Fails with [`Error::InvalidSchema`] naming the column when a field of a mapped table
/// lacks its id or physical name, or two fields of one struct share a physical name:
/// writing such a table would put values under names no reader resolves.
pub fn ensure_mapped(schema: &StructType, mode: ColumnMappingMode) -> Result<()> {
    if mode == ColumnMappingMode::None {
        return Ok(());
    }
    schema.try_for_each_struct(&mut |path, s| {
        let mut seen = std::collections::HashSet::new();
        for field in &s.fields {
            let name = field_path(path, &field.name);
            if field.column_id().is_none() || !field.metadata.contains_key(PHYSICAL_NAME_KEY) {
                return Err(Error::InvalidSchema {
                    reason: format!("column {name:?} lacks its column mapping id or physical name"),
                });
            }
            if !seen.insert(field.physical_name()) {
                return Err(Error::InvalidSchema {
                    reason: format!(
                        "column {name:?} shares the physical name {:?} with another column",
                        field.physical_name()
                    ),
                });
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::schema::{PrimitiveType, StructField};
    use crate::protocol::{ArrayType, Format};

    fn metadata(mode: Option<&str>) -> Metadata {
        Metadata {
            id: "t".into(),
            name: None,
            description: None,
            format: Format::default(),
            schema_string: String::new(),
            partition_columns: Vec::new(),
            configuration: mode
                .map(|m| (COLUMN_MAPPING_MODE.to_string(), Some(m.to_string())))
                .into_iter()
                .collect(),
            created_time: None,
        }
    }

    fn nested() -> StructType {
        let inner = StructType::new(vec![StructField::new(
            "x",
            DataType::Primitive(PrimitiveType::Long),
            true,
        )]);
        StructType::new(vec![
            StructField::new("id", DataType::Primitive(PrimitiveType::Long), true),
            StructField::new(
                "items",
                DataType::Array(Box::new(ArrayType {
                    type_name: "array".into(),
                    element_type: DataType::Struct(inner),
                    contains_null: true,
                })),
                true,
            ),
        ])
    }

    #[test]
    fn every_field_gets_an_id_and_a_physical_name_and_the_high_water_mark_grows() {
        let mut schema = nested();
        let mut meta = metadata(Some("name"));
        annotate(&mut schema, &mut meta, false).unwrap();
        assert_eq!(meta.property(MAX_COLUMN_ID), Some("3"));
        ensure_mapped(&schema, ColumnMappingMode::Name).unwrap();
        assert!(schema.fields[0].physical_name().starts_with("col-"));
        let DataType::Array(items) = &schema.fields[1].data_type else {
            panic!("not an array")
        };
        let DataType::Struct(inner) = &items.element_type else {
            panic!("not a struct")
        };
        assert_eq!(inner.fields[0].column_id(), Some(3));

        // A column added later continues above the mark, the others keep theirs.
        let kept = schema.fields[0].physical_name().to_string();
        schema.fields.push(StructField::new(
            "later",
            DataType::Primitive(PrimitiveType::String),
            true,
        ));
        annotate(&mut schema, &mut meta, false).unwrap();
        assert_eq!(schema.fields[2].column_id(), Some(4));
        assert_eq!(schema.fields[0].physical_name(), kept);
        assert_eq!(meta.property(MAX_COLUMN_ID), Some("4"));
    }

    #[test]
    fn unmapped_tables_are_untouched_and_unknown_modes_refused() {
        let mut schema = nested();
        let mut meta = metadata(None);
        annotate(&mut schema, &mut meta, false).unwrap();
        assert_eq!(schema, nested());
        assert!(ensure_mapped(&schema, ColumnMappingMode::Id).is_err());
        let err = annotate(&mut schema, &mut metadata(Some("names")), false).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { reason, .. } if reason.contains("names")),
            "{err}"
        );
        // Turning mapping on keeps the names files already use.
        let mut meta = metadata(Some("name"));
        annotate(&mut schema, &mut meta, true).unwrap();
        assert_eq!(schema.fields[1].physical_name(), "items");
    }
}
