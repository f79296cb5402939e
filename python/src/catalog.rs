//! `Catalog`: Tarn's directory catalog of namespaces and tables from Python. Names are
//! given as `"sales.eu.orders"` (dots between levels) or as a list of names.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use tarn_catalog::{
    Catalog, CatalogOptions, DropBehavior, DropData, IfExists, ObjectId, ObjectMetadata,
};

use crate::errors::IntoPy;
use crate::options::store_options;
use crate::runtime::run;
use crate::table::PyTable;

/// Entries listed per call to the catalog.
const PAGE: usize = 1000;

/// A name: a string with dots between levels, or a list of names.
#[derive(FromPyObject)]
pub(crate) enum Name {
    Dotted(String),
    Parts(Vec<String>),
}

impl Name {
    fn id(self) -> PyResult<ObjectId> {
        match self {
            Name::Dotted(text) if text.is_empty() => Ok(ObjectId::root()),
            Name::Dotted(text) => ObjectId::new(text.split('.')).py_err(),
            Name::Parts(parts) => ObjectId::new(parts).py_err(),
        }
    }
}

fn dotted(id: &ObjectId) -> String {
    id.names().join(".")
}

fn metadata(
    properties: Option<HashMap<String, String>>,
    description: Option<String>,
) -> ObjectMetadata {
    ObjectMetadata {
        properties: properties.unwrap_or_default().into_iter().collect(),
        description,
        ..ObjectMetadata::default()
    }
}

/// What a listing lists.
enum Kind {
    Namespaces,
    Tables,
}

/// Every child of `parent` of one kind, as dotted names, read a page at a time.
async fn list_all(catalog: &Catalog, parent: &ObjectId, kind: Kind) -> PyResult<Vec<String>> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = match kind {
            Kind::Namespaces => {
                catalog
                    .list_namespaces(parent, PAGE, token.as_deref())
                    .await
            }
            Kind::Tables => catalog.list_tables(parent, PAGE, token.as_deref()).await,
        }
        .py_err()?;
        all.extend(page.ids.iter().map(dotted));
        match page.next {
            Some(next) => token = Some(next),
            None => return Ok(all),
        }
    }
}

/// A Tarn catalog at a URL (made there on first open).
#[pyclass(module = "tarn._tarn", name = "Catalog", frozen)]
pub(crate) struct PyCatalog {
    inner: Arc<Catalog>,
}

#[pymethods]
impl PyCatalog {
    /// Opens the catalog at `uri`, creating it when there is none.
    #[staticmethod]
    #[pyo3(signature = (uri, *, storage_options=None))]
    fn open(
        py: Python<'_>,
        uri: String,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let options = CatalogOptions {
            store: store_options(storage_options),
            ..CatalogOptions::default()
        };
        let catalog = run(
            py,
            async move { Catalog::open(&uri, options).await.py_err() },
        )?;
        Ok(PyCatalog {
            inner: Arc::new(catalog),
        })
    }

    /// The catalog's URL.
    #[getter]
    fn uri(&self) -> String {
        self.inner.url().to_string()
    }

    /// Creates a namespace (its parent must exist); `exist_ok` makes an existing one
    /// success.
    #[pyo3(signature = (name, *, properties=None, description=None, exist_ok=false))]
    fn create_namespace(
        &self,
        py: Python<'_>,
        name: Name,
        properties: Option<HashMap<String, String>>,
        description: Option<String>,
        exist_ok: bool,
    ) -> PyResult<()> {
        let id = name.id()?;
        let meta = metadata(properties, description);
        let if_exists = if exist_ok {
            IfExists::Ignore
        } else {
            IfExists::Fail
        };
        let catalog = self.inner.clone();
        run(py, async move {
            catalog
                .create_namespace(&id, meta, if_exists)
                .await
                .py_err()
        })
    }

    /// The namespaces directly in `parent` (the root by default), as dotted names.
    #[pyo3(signature = (parent=None))]
    fn list_namespaces(&self, py: Python<'_>, parent: Option<Name>) -> PyResult<Vec<String>> {
        let parent = parent.map_or_else(|| Ok(ObjectId::root()), Name::id)?;
        let catalog = self.inner.clone();
        run(py, async move {
            list_all(&catalog, &parent, Kind::Namespaces).await
        })
    }

    /// The tables directly in `namespace` (the root by default), as dotted names.
    #[pyo3(signature = (namespace=None))]
    fn list_tables(&self, py: Python<'_>, namespace: Option<Name>) -> PyResult<Vec<String>> {
        let parent = namespace.map_or_else(|| Ok(ObjectId::root()), Name::id)?;
        let catalog = self.inner.clone();
        run(py, async move {
            list_all(&catalog, &parent, Kind::Tables).await
        })
    }

    /// Creates a table in the catalog with `schema` and returns it.
    #[pyo3(signature = (name, schema, *, partition_by=None, properties=None, description=None))]
    fn create_table(
        &self,
        py: Python<'_>,
        name: Name,
        schema: &Bound<'_, PyAny>,
        partition_by: Option<Vec<String>>,
        properties: Option<HashMap<String, String>>,
        description: Option<String>,
    ) -> PyResult<PyTable> {
        let id = name.id()?;
        let schema = crate::ffi::schema(schema)?;
        let meta = metadata(properties, description);
        let catalog = self.inner.clone();
        let table = run(py, async move {
            catalog
                .create_table(&id, &schema, partition_by.unwrap_or_default(), meta)
                .await
                .py_err()?;
            catalog.load_table(&id).await.py_err()
        })?;
        Ok(PyTable::wrap(table))
    }

    /// Opens the table `name`.
    fn load_table(&self, py: Python<'_>, name: Name) -> PyResult<PyTable> {
        let id = name.id()?;
        let catalog = self.inner.clone();
        let table = run(py, async move { catalog.load_table(&id).await.py_err() })?;
        Ok(PyTable::wrap(table))
    }

    /// Whether `name` is a table.
    fn table_exists(&self, py: Python<'_>, name: Name) -> PyResult<bool> {
        let id = name.id()?;
        let catalog = self.inner.clone();
        run(py, async move { catalog.table_exists(&id).await.py_err() })
    }

    /// Drops the table's entry, and with `purge` its data.
    #[pyo3(signature = (name, *, purge=false))]
    fn drop_table(&self, py: Python<'_>, name: Name, purge: bool) -> PyResult<()> {
        let id = name.id()?;
        let data = if purge {
            DropData::Purge
        } else {
            DropData::Keep
        };
        let catalog = self.inner.clone();
        run(
            py,
            async move { catalog.drop_table(&id, data).await.py_err() },
        )
    }

    /// Drops a namespace; with `cascade`, its entries go too, else it must be empty.
    #[pyo3(signature = (name, *, cascade=false))]
    fn drop_namespace(&self, py: Python<'_>, name: Name, cascade: bool) -> PyResult<()> {
        let id = name.id()?;
        let behavior = if cascade {
            DropBehavior::Cascade
        } else {
            DropBehavior::Restrict
        };
        let catalog = self.inner.clone();
        run(py, async move {
            catalog.drop_namespace(&id, behavior).await.py_err()
        })
    }

    fn __repr__(&self) -> String {
        format!("Catalog({:?})", self.inner.url())
    }
}

impl PyCatalog {
    /// The catalog behind this object, for SQL.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.inner.clone()
    }
}
