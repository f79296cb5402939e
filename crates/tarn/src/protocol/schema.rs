//! Delta schemas: the JSON types of `metaData.schemaString` and their Arrow equivalents.

use std::fmt;
use std::sync::Arc;

use arrow_schema::{DataType as ArrowType, Field, Fields, Schema as ArrowSchema, TimeUnit};
use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Field metadata key of a column's physical name under column mapping.
pub const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";
/// Field metadata key of a column's id under column mapping.
pub const COLUMN_ID_KEY: &str = "delta.columnMapping.id";
/// Arrow field metadata key Parquet field ids are exposed under.
pub const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";
/// The Arrow extension type of variant columns (`arrow.parquet.variant`, the canonical
/// one `parquet-variant-compute`'s `VariantArray` reads).
pub const VARIANT_EXTENSION_NAME: &str = "arrow.parquet.variant";

/// A Delta primitive type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrimitiveType {
    /// `string`
    String,
    /// `long`
    Long,
    /// `integer`
    Integer,
    /// `short`
    Short,
    /// `byte`
    Byte,
    /// `float`
    Float,
    /// `double`
    Double,
    /// `boolean`
    Boolean,
    /// `binary`
    Binary,
    /// `date`
    Date,
    /// `timestamp` (microseconds, adjusted to UTC)
    Timestamp,
    /// `timestamp_ntz` (microseconds, no time zone)
    TimestampNtz,
    /// `decimal(precision, scale)`
    Decimal(u8, i8),
    /// `variant`: semi-structured values in the Parquet variant encoding, read as a struct
    /// of binary `metadata` and `value` with the [`VARIANT_EXTENSION_NAME`] extension type.
    Variant,
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::String => "string",
            Self::Long => "long",
            Self::Integer => "integer",
            Self::Short => "short",
            Self::Byte => "byte",
            Self::Float => "float",
            Self::Double => "double",
            Self::Boolean => "boolean",
            Self::Binary => "binary",
            Self::Date => "date",
            Self::Timestamp => "timestamp",
            Self::TimestampNtz => "timestamp_ntz",
            Self::Variant => "variant",
            Self::Decimal(p, s) => return write!(f, "decimal({p},{s})"),
        };
        f.write_str(name)
    }
}

impl PrimitiveType {
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "long" => Self::Long,
            "integer" => Self::Integer,
            "short" => Self::Short,
            "byte" => Self::Byte,
            "float" => Self::Float,
            "double" => Self::Double,
            "boolean" => Self::Boolean,
            "binary" => Self::Binary,
            "date" => Self::Date,
            "timestamp" => Self::Timestamp,
            "timestamp_ntz" => Self::TimestampNtz,
            "variant" => Self::Variant,
            "decimal" => Self::Decimal(10, 0),
            other => {
                let inner = other.strip_prefix("decimal(")?.strip_suffix(')')?;
                let (p, s) = inner.split_once(',')?;
                let (p, s): (u8, i8) = (p.trim().parse().ok()?, s.trim().parse().ok()?);
                if p == 0 || p > 38 || s < 0 || s as u8 > p {
                    return None;
                }
                Self::Decimal(p, s)
            }
        })
    }

    /// Whether the min/max a file's statistics keep for this type are its values
    /// exactly: integers, dates and decimals. Strings are truncated, floats and
    /// timestamps may be rounded by other writers, so their bounds only bound.
    pub(crate) fn keeps_exact_bounds(self) -> bool {
        matches!(
            self,
            Self::Long | Self::Integer | Self::Short | Self::Byte | Self::Date | Self::Decimal(..)
        )
    }

    /// The Arrow type Tarn reads and writes this type as.
    pub fn to_arrow(self) -> ArrowType {
        match self {
            Self::String => ArrowType::Utf8,
            Self::Long => ArrowType::Int64,
            Self::Integer => ArrowType::Int32,
            Self::Short => ArrowType::Int16,
            Self::Byte => ArrowType::Int8,
            Self::Float => ArrowType::Float32,
            Self::Double => ArrowType::Float64,
            Self::Boolean => ArrowType::Boolean,
            Self::Binary => ArrowType::Binary,
            Self::Date => ArrowType::Date32,
            Self::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            Self::TimestampNtz => ArrowType::Timestamp(TimeUnit::Microsecond, None),
            Self::Decimal(p, s) => ArrowType::Decimal128(p, s),
            Self::Variant => ArrowType::Struct(Fields::from(vec![
                Field::new("metadata", ArrowType::Binary, false),
                Field::new("value", ArrowType::Binary, false),
            ])),
        }
    }
}

/// A Delta data type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataType {
    /// A primitive.
    Primitive(PrimitiveType),
    /// `array`.
    Array(Box<ArrayType>),
    /// `map`.
    Map(Box<MapType>),
    /// `struct`.
    Struct(StructType),
}

/// `array` type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArrayType {
    /// Always `array`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Element type.
    pub element_type: DataType,
    /// Whether elements may be null.
    pub contains_null: bool,
}

/// `map` type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MapType {
    /// Always `map`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Key type.
    pub key_type: DataType,
    /// Value type.
    pub value_type: DataType,
    /// Whether values may be null.
    pub value_contains_null: bool,
}

/// A field of a struct.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructField {
    /// The (logical) name.
    pub name: String,
    /// The type.
    #[serde(rename = "type")]
    pub data_type: DataType,
    /// Whether values may be null.
    pub nullable: bool,
    /// Field metadata (column mapping, comments, invariants...).
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl StructField {
    /// A field without metadata.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        Self {
            name: name.into(),
            data_type,
            nullable,
            metadata: serde_json::Map::new(),
        }
    }

    /// The name in data files: the column-mapping physical name if set, else the name.
    pub fn physical_name(&self) -> &str {
        self.metadata
            .get(PHYSICAL_NAME_KEY)
            .and_then(|v| v.as_str())
            .unwrap_or(&self.name)
    }

    /// The column-mapping id, if set.
    pub fn column_id(&self) -> Option<i64> {
        self.metadata.get(COLUMN_ID_KEY).and_then(|v| v.as_i64())
    }

    /// Whether writers draw the column's values (an identity column,
    /// `delta.identity.start`).
    pub fn is_identity(&self) -> bool {
        self.metadata.contains_key("delta.identity.start")
    }

    /// Whether writers compute the column's values from others (a generated column,
    /// `delta.generationExpression`).
    pub fn is_generated(&self) -> bool {
        self.metadata.contains_key("delta.generationExpression")
    }
}

/// A struct type; a table schema is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructType {
    /// Always `struct`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The fields, in order.
    pub fields: Vec<StructField>,
}

impl StructType {
    /// A struct of the given fields.
    pub fn new(fields: Vec<StructField>) -> Self {
        Self {
            type_name: "struct".into(),
            fields,
        }
    }

    /// The field with this name, if any (names compare exactly).
    pub fn field(&self, name: &str) -> Option<&StructField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field names.
    pub fn field_names(&self) -> Vec<String> {
        self.fields.iter().map(|f| f.name.clone()).collect()
    }

    /// Parses `metaData.schemaString`.
    ///
    /// Fails with [`Error::InvalidSchema`] if the JSON is not a Delta struct type.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| Error::InvalidSchema {
            reason: format!("schemaString is not a Delta struct type: {e}"),
        })
    }

    /// The schema as Delta schema JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs and maps of JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Calls `f` with every struct of the schema (the schema itself, and those nested in
    /// fields, arrays and maps) and the dotted path of the field holding it (empty for the
    /// schema), stopping at the first error.
    pub(crate) fn try_for_each_struct<E>(
        &self,
        f: &mut impl FnMut(&str, &StructType) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        fn in_type<E>(
            t: &DataType,
            path: &str,
            f: &mut impl FnMut(&str, &StructType) -> std::result::Result<(), E>,
        ) -> std::result::Result<(), E> {
            match t {
                DataType::Primitive(_) => Ok(()),
                DataType::Array(a) => in_type(&a.element_type, path, f),
                DataType::Map(m) => {
                    in_type(&m.key_type, path, f)?;
                    in_type(&m.value_type, path, f)
                }
                DataType::Struct(s) => in_struct(s, path, f),
            }
        }
        fn in_struct<E>(
            s: &StructType,
            path: &str,
            f: &mut impl FnMut(&str, &StructType) -> std::result::Result<(), E>,
        ) -> std::result::Result<(), E> {
            f(path, s)?;
            for field in &s.fields {
                in_type(&field.data_type, &field_path(path, &field.name), f)?;
            }
            Ok(())
        }
        in_struct(self, "", f)
    }

    /// The Arrow schema with logical names, as scans return it.
    pub fn to_arrow(&self) -> ArrowSchema {
        ArrowSchema::new(self.fields.iter().map(field_to_arrow).collect::<Vec<_>>())
    }

    /// Converts an Arrow schema (as a user hands it to `create`) into a Delta schema.
    ///
    /// Fails with [`Error::InvalidSchema`] for Arrow types Delta cannot store (unsigned
    /// integers, intervals, unions, nanosecond-only types are widened or refused as noted
    /// in the error).
    pub fn try_from_arrow(schema: &ArrowSchema) -> Result<Self> {
        let fields = schema
            .fields()
            .iter()
            .map(|f| field_from_arrow(f))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::new(fields))
    }
}

/// `parent.name`, or `name` at the top.
pub(crate) fn field_path(parent: &str, name: &str) -> String {
    match parent {
        "" => name.to_string(),
        _ => format!("{parent}.{name}"),
    }
}

fn field_to_arrow(field: &StructField) -> Field {
    arrow_field(&field.name, &field.data_type, field.nullable)
}

/// The Arrow field of a value of type `ty`: variants carry their extension type.
pub(crate) fn arrow_field(name: &str, ty: &DataType, nullable: bool) -> Field {
    let field = Field::new(name, ty.to_arrow(), nullable);
    match ty {
        DataType::Primitive(PrimitiveType::Variant) => field.with_metadata(
            [
                (
                    "ARROW:extension:name".to_string(),
                    VARIANT_EXTENSION_NAME.to_string(),
                ),
                ("ARROW:extension:metadata".to_string(), String::new()),
            ]
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>(),
        ),
        _ => field,
    }
}

impl DataType {
    /// Number of primitive leaves under this type, as Delta counts indexed columns
    /// (`delta.dataSkippingNumIndexedCols`).
    pub(crate) fn leaf_count(&self) -> usize {
        match self {
            Self::Primitive(_) => 1,
            Self::Array(a) => a.element_type.leaf_count(),
            Self::Map(m) => m.key_type.leaf_count() + m.value_type.leaf_count(),
            Self::Struct(s) => s.fields.iter().map(|f| f.data_type.leaf_count()).sum(),
        }
    }

    /// A primitive type.
    pub const fn primitive(p: PrimitiveType) -> Self {
        Self::Primitive(p)
    }

    /// The Arrow type with logical names.
    pub fn to_arrow(&self) -> ArrowType {
        match self {
            Self::Primitive(p) => p.to_arrow(),
            Self::Array(a) => ArrowType::List(Arc::new(arrow_field(
                "element",
                &a.element_type,
                a.contains_null,
            ))),
            Self::Map(m) => ArrowType::Map(
                Arc::new(Field::new(
                    "key_value",
                    ArrowType::Struct(Fields::from(vec![
                        arrow_field("key", &m.key_type, false),
                        arrow_field("value", &m.value_type, m.value_contains_null),
                    ])),
                    false,
                )),
                false,
            ),
            Self::Struct(s) => {
                ArrowType::Struct(s.fields.iter().map(field_to_arrow).collect::<Fields>())
            }
        }
    }

    /// The primitive type, if this is one.
    pub fn as_primitive(&self) -> Option<PrimitiveType> {
        match self {
            Self::Primitive(p) => Some(*p),
            _ => None,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Primitive(p) => p.fmt(f),
            Self::Array(a) => write!(f, "array<{}>", a.element_type),
            Self::Map(m) => write!(f, "map<{},{}>", m.key_type, m.value_type),
            Self::Struct(s) => {
                f.write_str("struct<")?;
                for (i, field) in s.fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}:{}", field.name, field.data_type)?;
                }
                f.write_str(">")
            }
        }
    }
}

fn field_from_arrow(field: &Field) -> Result<StructField> {
    let data_type = match field.extension_type_name() {
        Some(VARIANT_EXTENSION_NAME) => DataType::Primitive(PrimitiveType::Variant),
        _ => type_from_arrow(field.name(), field.data_type())?,
    };
    Ok(StructField::new(
        field.name(),
        data_type,
        field.is_nullable(),
    ))
}

fn type_from_arrow(name: &str, t: &ArrowType) -> Result<DataType> {
    use PrimitiveType as P;
    let p = |p| Ok(DataType::Primitive(p));
    match t {
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => p(P::String),
        ArrowType::Int64 => p(P::Long),
        ArrowType::Int32 => p(P::Integer),
        ArrowType::Int16 => p(P::Short),
        ArrowType::Int8 => p(P::Byte),
        ArrowType::Float32 => p(P::Float),
        ArrowType::Float64 => p(P::Double),
        ArrowType::Boolean => p(P::Boolean),
        ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => p(P::Binary),
        ArrowType::Date32 => p(P::Date),
        ArrowType::Timestamp(_, Some(_)) => p(P::Timestamp),
        ArrowType::Timestamp(_, None) => p(P::TimestampNtz),
        ArrowType::Decimal128(precision, scale) if *scale >= 0 && *precision <= 38 => {
            p(P::Decimal(*precision, *scale))
        }
        ArrowType::List(f) | ArrowType::LargeList(f) | ArrowType::ListView(f) => {
            Ok(DataType::Array(Box::new(ArrayType {
                type_name: "array".into(),
                element_type: type_from_arrow(name, f.data_type())?,
                contains_null: f.is_nullable(),
            })))
        }
        ArrowType::Map(entries, _) => match entries.data_type() {
            ArrowType::Struct(kv) if kv.len() == 2 => Ok(DataType::Map(Box::new(MapType {
                type_name: "map".into(),
                key_type: type_from_arrow(name, kv[0].data_type())?,
                value_type: type_from_arrow(name, kv[1].data_type())?,
                value_contains_null: kv[1].is_nullable(),
            }))),
            other => Err(Error::InvalidSchema {
                reason: format!("column {name:?}: map entries of type {other} are not key/value"),
            }),
        },
        ArrowType::Struct(fields) => Ok(DataType::Struct(StructType::new(
            fields
                .iter()
                .map(|f| field_from_arrow(f))
                .collect::<Result<Vec<_>>>()?,
        ))),
        other => Err(Error::InvalidSchema {
            reason: format!("column {name:?}: Arrow type {other} has no Delta equivalent"),
        }),
    }
}

impl Serialize for DataType {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Primitive(p) => serializer.serialize_str(&p.to_string()),
            Self::Array(a) => a.serialize(serializer),
            Self::Map(m) => m.serialize(serializer),
            Self::Struct(s) => s.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for DataType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        match &value {
            serde_json::Value::String(name) => PrimitiveType::parse(name)
                .map(DataType::Primitive)
                .ok_or_else(|| de::Error::custom(format!("unsupported Delta type {name:?}"))),
            serde_json::Value::Object(map) => {
                let kind = map.get("type").and_then(|t| t.as_str()).unwrap_or_default();
                match kind {
                    "array" => serde_json::from_value(value)
                        .map(|a| DataType::Array(Box::new(a)))
                        .map_err(de::Error::custom),
                    "map" => serde_json::from_value(value)
                        .map(|m| DataType::Map(Box::new(m)))
                        .map_err(de::Error::custom),
                    "struct" => serde_json::from_value(value)
                        .map(DataType::Struct)
                        .map_err(de::Error::custom),
                    other => Err(de::Error::custom(format!(
                        "unsupported Delta type {other:?}"
                    ))),
                }
            }
            other => Err(de::Error::custom(format!("a Delta type cannot be {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_json_round_trips_with_nested_types() {
        let json = r#"{"type":"struct","fields":[
            {"name":"id","type":"long","nullable":false,"metadata":{}},
            {"name":"d","type":"decimal(10,2)","nullable":true,"metadata":{}},
            {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
            {"name":"m","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"nullable":true,"metadata":{}},
            {"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"timestamp_ntz","nullable":true,"metadata":{"delta.columnMapping.physicalName":"col-1"}}]},"nullable":true,"metadata":{}}
        ]}"#;
        let schema = StructType::from_json(json).unwrap();
        assert_eq!(StructType::from_json(&schema.to_json()).unwrap(), schema);
        assert_eq!(
            schema.field("d").unwrap().data_type,
            DataType::Primitive(PrimitiveType::Decimal(10, 2))
        );
        let DataType::Struct(s) = &schema.field("s").unwrap().data_type else {
            panic!()
        };
        assert_eq!(s.fields[0].physical_name(), "col-1");
        let arrow = schema.to_arrow();
        assert_eq!(arrow.field(0).data_type(), &ArrowType::Int64);
        assert_eq!(
            StructType::try_from_arrow(&arrow).unwrap().fields[1].data_type,
            schema.fields[1].data_type
        );
    }

    #[test]
    fn bad_types_are_refused_with_a_reason() {
        let err = StructType::from_json(
            r#"{"type":"struct","fields":[{"name":"a","type":"uint","nullable":true}]}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("uint"), "{err}");
        assert!(StructType::from_json("{").is_err());
        let arrow = ArrowSchema::new(vec![Field::new("u", ArrowType::UInt32, true)]);
        assert!(matches!(
            StructType::try_from_arrow(&arrow),
            Err(Error::InvalidSchema { .. })
        ));
    }
}
