//! How a catalog is opened, and the choices its calls take (what to do when a name
//! exists, what a drop takes with it, how much a describe reads): a leaf that the
//! loader, the engine and the handle share.

use tarn::StoreOptions;

use crate::pages::Layout;

/// How a catalog is opened.
#[derive(Debug, Clone)]
pub struct CatalogOptions {
    /// How the manifest is cut into files (default: pages of 4,096 rows), for a catalog
    /// this call creates; an existing catalog keeps the layout it was created with.
    pub layout: Layout,
    /// Whether a new manifest gets its BTree (object_id), Bitmap (object_type) and
    /// full-text (metadata) indices, built inline (default yes).
    pub indices: bool,
    /// Store options for the root URL (endpoint, credentials).
    pub store: StoreOptions,
    /// A stable id for this catalog writer (default none). When set, the handle fences the
    /// writer on the manifest when it first loads it (`tarn::Table::fence_writer`): no
    /// manifest change an earlier incarnation of the writer left pending can land after
    /// that, so a restarted writer reads final state. [`crate::Catalog::fence_writer`]
    /// fences again, to settle an unknown outcome.
    pub writer: Option<String>,
}

impl Default for CatalogOptions {
    fn default() -> Self {
        Self {
            layout: Layout::default(),
            indices: true,
            store: StoreOptions::default(),
            writer: None,
        }
    }
}

/// What creating an object whose name is taken does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfExists {
    /// Fail with [`crate::Error::AlreadyExists`].
    Fail,
    /// Succeed when the existing object is of the same kind.
    Ignore,
}

/// What dropping a namespace that holds objects does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropBehavior {
    /// Refuse with [`crate::Error::NotEmpty`].
    Restrict,
    /// Drop everything in it too (the entries; table data stays).
    Cascade,
}

/// What dropping a table does with its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropData {
    /// Drop the entry only; the data stays where it is.
    Keep,
    /// Drop the entry, then delete the table's data.
    Purge,
}

/// How much describing a table reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The manifest's entry only: location and properties.
    Entry,
    /// The entry and the table's current version (the table is opened for it).
    WithVersion,
}

/// The kinds of object a catalog holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// A namespace.
    Namespace,
    /// A table.
    Table,
}

impl ObjectType {
    /// The kind's name in the manifest's `object_type` column: `namespace` or `table`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Namespace => crate::manifest::NAMESPACE,
            Self::Table => crate::manifest::TABLE,
        }
    }
}
