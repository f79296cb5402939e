//! Helpers of the catalog tests: ids, metadata and a table schema written short, and a
//! catalog handle with its manifest loaded.

use std::collections::BTreeMap;

use arrow::datatypes::{DataType, Field, Schema};
use tarn::StoreLocation;
use tarn_catalog::manifest::Row;
use tarn_catalog::{Catalog, CatalogOptions, Layout, ObjectId, ObjectMetadata};

/// The id `text` names (`$` between nested names); panics on an invalid one.
pub fn id(text: &str) -> ObjectId {
    ObjectId::parse(text).unwrap()
}

/// Metadata holding the properties `pairs`, no description.
pub fn props(pairs: &[(&str, &str)]) -> ObjectMetadata {
    ObjectMetadata {
        properties: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        description: None,
        declared: false,
    }
}

/// The schema of the tables the tests create: one `id` column.
pub fn schema() -> Schema {
    Schema::new(vec![Field::new("id", DataType::Int64, false)])
}

/// Opens a catalog with `layout` and loads its manifest (opening alone reads nothing).
pub async fn open(location: &StoreLocation, layout: Layout) -> Catalog {
    let catalog = Catalog::open_at(
        location.clone(),
        CatalogOptions {
            layout,
            ..CatalogOptions::default()
        },
    )
    .await
    .unwrap();
    catalog.snapshot().await.unwrap();
    catalog
}

/// A manifest row for [`Catalog::import`]: a namespace, or a declared table (`kind`
/// "table"), created and updated at `now` (microseconds).
pub fn import_row(key: String, kind: &str, now: i64) -> Row {
    Row {
        object_id: key,
        object_type: kind.into(),
        location: None,
        metadata: ObjectMetadata {
            declared: kind == "table",
            ..ObjectMetadata::default()
        },
        created_at: now,
        updated_at: now,
    }
}
