//! The shape data files take under column mapping: columns (nested fields too) under
//! their physical names, each with its column id as the Parquet field id, as Spark writes
//! them. Without mapping the physical schema is the logical one and nothing is copied.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, MapArray, StructArray};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, Schema};

use crate::error::{Error, Result};
use crate::protocol::schema::{DataType, PARQUET_FIELD_ID_KEY, StructField, StructType};

/// The Arrow schema of data files for columns `fields`: physical names, and Parquet
/// field ids where the columns have ids.
pub(crate) fn physical_schema(fields: &StructType) -> Schema {
    Schema::new(fields.fields.iter().map(physical_field).collect::<Vec<_>>())
}

fn physical_field(field: &StructField) -> Field {
    let out = Field::new(
        field.physical_name(),
        physical_type(&field.data_type),
        field.nullable,
    );
    match field.column_id() {
        Some(id) => out.with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_KEY.to_string(),
            id.to_string(),
        )])),
        None => out,
    }
}

fn physical_type(data_type: &DataType) -> ArrowType {
    match (data_type, data_type.to_arrow()) {
        (DataType::Struct(s), _) => {
            ArrowType::Struct(s.fields.iter().map(physical_field).collect::<Fields>())
        }
        (DataType::Array(a), ArrowType::List(element)) => ArrowType::List(Arc::new(
            element
                .as_ref()
                .clone()
                .with_data_type(physical_type(&a.element_type)),
        )),
        (DataType::Map(m), ArrowType::Map(entries, sorted)) => {
            let ArrowType::Struct(kv) = entries.data_type() else {
                return ArrowType::Map(entries, sorted);
            };
            let kv: Fields = [
                kv[0]
                    .as_ref()
                    .clone()
                    .with_data_type(physical_type(&m.key_type)),
                kv[1]
                    .as_ref()
                    .clone()
                    .with_data_type(physical_type(&m.value_type)),
            ]
            .into_iter()
            .collect();
            ArrowType::Map(
                Arc::new(
                    entries
                        .as_ref()
                        .clone()
                        .with_data_type(ArrowType::Struct(kv)),
                ),
                sorted,
            )
        }
        (_, arrow) => arrow,
    }
}

/// `array` (of the logical Arrow type) relabelled to `target`, the same type under
/// physical names: only struct, list and map headers are rebuilt, values are shared.
///
/// Fails with [`Error::Arrow`] when the shapes differ, which conformed batches never do.
pub(crate) fn relabel(array: &ArrayRef, target: &ArrowType) -> Result<ArrayRef> {
    if array.data_type() == target {
        return Ok(Arc::clone(array));
    }
    let error = Error::arrow("writing columns under their physical names");
    let out: ArrayRef = match target {
        ArrowType::Struct(fields) => {
            let s = array.as_struct();
            let columns = s
                .columns()
                .iter()
                .zip(fields)
                .map(|(c, f)| relabel(c, f.data_type()))
                .collect::<Result<Vec<_>>>()?;
            Arc::new(
                StructArray::try_new(fields.clone(), columns, s.nulls().cloned()).map_err(error)?,
            )
        }
        ArrowType::List(field) => {
            let l = array.as_list::<i32>();
            Arc::new(
                ListArray::try_new(
                    Arc::clone(field),
                    l.offsets().clone(),
                    relabel(l.values(), field.data_type())?,
                    l.nulls().cloned(),
                )
                .map_err(error)?,
            )
        }
        ArrowType::Map(field, sorted) => {
            let m = array.as_map();
            let entries: ArrayRef = Arc::new(m.entries().clone());
            let entries = relabel(&entries, field.data_type())?;
            Arc::new(
                MapArray::try_new(
                    Arc::clone(field),
                    m.offsets().clone(),
                    entries.as_struct().clone(),
                    m.nulls().cloned(),
                    *sorted,
                )
                .map_err(error)?,
            )
        }
        other => {
            return Err(error(arrow::error::ArrowError::SchemaError(format!(
                "cannot write a {} column as {other}",
                array.data_type()
            ))));
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::schema::{COLUMN_ID_KEY, PHYSICAL_NAME_KEY, PrimitiveType};
    use arrow::array::{Int64Array, StringArray};

    fn mapped(name: &str, physical: &str, id: i64, data_type: DataType) -> StructField {
        let mut f = StructField::new(name, data_type, true);
        f.metadata.insert(PHYSICAL_NAME_KEY.into(), physical.into());
        f.metadata.insert(COLUMN_ID_KEY.into(), id.into());
        f
    }

    #[test]
    fn nested_structs_take_physical_names_and_field_ids_and_keep_their_values() {
        let inner = StructType::new(vec![mapped(
            "x",
            "col-x",
            2,
            DataType::Primitive(PrimitiveType::String),
        )]);
        let schema = StructType::new(vec![
            mapped("id", "col-id", 1, DataType::Primitive(PrimitiveType::Long)),
            mapped("s", "col-s", 3, DataType::Struct(inner)),
        ]);
        let physical = physical_schema(&schema);
        assert_eq!(physical.field(0).name(), "col-id");
        assert_eq!(
            physical.field(1).metadata().get(PARQUET_FIELD_ID_KEY),
            Some(&"3".to_string())
        );
        let logical = schema.to_arrow();
        let s: ArrayRef = Arc::new(StructArray::new(
            match logical.field(1).data_type() {
                ArrowType::Struct(f) => f.clone(),
                _ => unreachable!(),
            },
            vec![Arc::new(StringArray::from(vec![Some("a"), None]))],
            None,
        ));
        let out = relabel(&s, physical.field(1).data_type()).unwrap();
        assert_eq!(out.data_type(), physical.field(1).data_type());
        assert_eq!(out.as_struct().column(0).as_string::<i32>().value(0), "a");
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        assert!(Arc::ptr_eq(
            &relabel(&ids, physical.field(0).data_type()).unwrap(),
            &ids
        ));
    }
}
