//! A directory catalog of namespaces and tables, with no server: any number of processes
//! open the same root URL (a local folder, or S3) and read and change it, each change a
//! put-if-absent commit to one Tarn table, `__manifest`.
//!
//! The manifest holds one row per object (see [`manifest`]). Its files are pages of rows
//! sorted by `object_id` ([`Layout::Paged`], the default): a mutation rewrites only the
//! page holding its key, copy-on-write, with the manifest's BTree (`object_id`), Bitmap
//! (`object_type`) and full-text (`metadata`) index segments built inline, so a commit
//! costs the same at a thousand entries and at a million. [`Layout::FullRewrite`] keeps
//! the whole manifest in one file rewritten on every mutation, as Lance's directory
//! namespace does, for comparison.
//!
//! ```no_run
//! # async fn demo() -> tarn_catalog::Result<()> {
//! use tarn_catalog::{Catalog, CatalogOptions, IfExists, ObjectId, ObjectMetadata};
//! let catalog = Catalog::open("s3://bucket/catalog", CatalogOptions::default()).await?;
//! let sales = ObjectId::parse("sales")?;
//! catalog.create_namespace(&sales, ObjectMetadata::default(), IfExists::Ignore).await?;
//! let schema = arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
//!     "id",
//!     arrow::datatypes::DataType::Int64,
//!     false,
//! )]);
//! let orders = sales.child("orders")?;
//! catalog.create_table(&orders, &schema, vec![], ObjectMetadata::default()).await?;
//! let page = catalog.list_tables(&sales, 100, None).await?;
//! let table = catalog.load_table(&orders).await?;
//! # Ok(()) }
//! ```

mod catalog;
mod engine;
mod error;
mod loader;
pub mod manifest;
mod names;
mod options;
mod pages;
mod reads;
mod view;
mod writes;

pub use catalog::{Catalog, CatalogStats, NamespaceInfo, TableInfo};
pub use error::{Error, Result};
pub use loader::LAYOUT_PROPERTY;
pub use manifest::ObjectMetadata;
pub use names::ObjectId;
pub use options::{CatalogOptions, Detail, DropBehavior, DropData, IfExists, ObjectType};
pub use pages::Layout;
pub use reads::Listing;

// docs/catalog.md's examples compile as doc tests, so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/catalog.md")]
struct CatalogDocExamples;
