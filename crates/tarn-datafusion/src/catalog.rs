//! A Tarn catalog as a DataFusion catalog: each namespace is a schema, named by its id
//! (`sales`, or `sales$2024` for a nested one), the root namespace's tables are in the
//! schema `public`, and each table is a [`TarnTableProvider`] opened when a statement
//! names it, at its latest version. DataFusion asks for schema and table names without
//! waiting, so they are listed when the provider is made and again on
//! [`TarnCatalogProvider::refresh`].

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, MemTable, SchemaProvider, TableProvider};
use datafusion::common::{DataFusionError, Result, plan_err};
use tarn_catalog::{Catalog, ObjectId, ObjectMetadata};

use crate::TarnTableProvider;
use crate::wait::wait;

/// A catalog error as DataFusion's, kept as the source.
fn external(error: tarn_catalog::Error) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

/// The schema the root namespace's tables are in.
pub const ROOT_SCHEMA: &str = "public";

/// Ids listed per catalog call.
const PAGE: usize = 1000;

/// A Tarn catalog as a DataFusion [`CatalogProvider`].
#[derive(Debug)]
pub struct TarnCatalogProvider {
    catalog: Catalog,
    schemas: RwLock<BTreeMap<String, Arc<TarnSchemaProvider>>>,
}

impl TarnCatalogProvider {
    /// The provider of `catalog`, with its namespaces and tables listed.
    ///
    /// Fails as [`Catalog::list_namespaces`] and [`Catalog::list_tables`] do.
    pub async fn new(catalog: Catalog) -> tarn_catalog::Result<Self> {
        let provider = Self {
            catalog,
            schemas: RwLock::new(BTreeMap::new()),
        };
        provider.refresh().await?;
        Ok(provider)
    }

    /// Lists the namespaces and tables again, to see those made or dropped since.
    ///
    /// Fails as [`Catalog::list_namespaces`] and [`Catalog::list_tables`] do; the names
    /// listed before stay.
    pub async fn refresh(&self) -> tarn_catalog::Result<()> {
        let mut namespaces = vec![ObjectId::root()];
        let mut next = 0;
        while next < namespaces.len() {
            let children = list_all(&self.catalog, &namespaces[next], true).await?;
            namespaces.extend(children);
            next += 1;
        }
        let mut schemas = BTreeMap::new();
        // The root last: a namespace named like its schema keeps the name, and the root's
        // tables are then not listed.
        namespaces.rotate_left(1);
        for namespace in namespaces {
            let name = match namespace.is_root() {
                true => ROOT_SCHEMA.to_string(),
                false => namespace.key(),
            };
            if schemas.contains_key(&name) {
                continue;
            }
            let tables = list_all(&self.catalog, &namespace, false).await?;
            let schema = TarnSchemaProvider {
                catalog: self.catalog.clone(),
                tables: RwLock::new(
                    tables
                        .into_iter()
                        .map(|id| (id.leaf().to_string(), id))
                        .collect(),
                ),
                namespace,
            };
            schemas.insert(name, Arc::new(schema));
        }
        *self.schemas.write().unwrap_or_else(PoisonError::into_inner) = schemas;
        Ok(())
    }
}

/// Every namespace (or table) directly in `parent`, page by page.
async fn list_all(
    catalog: &Catalog,
    parent: &ObjectId,
    namespaces: bool,
) -> tarn_catalog::Result<Vec<ObjectId>> {
    let mut ids = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let listing = match namespaces {
            true => {
                catalog
                    .list_namespaces(parent, PAGE, token.as_deref())
                    .await?
            }
            false => catalog.list_tables(parent, PAGE, token.as_deref()).await?,
        };
        ids.extend(listing.ids);
        match listing.next {
            Some(next) => token = Some(next),
            None => return Ok(ids),
        }
    }
}

impl CatalogProvider for TarnCatalogProvider {
    fn schema_names(&self) -> Vec<String> {
        let schemas = self.schemas.read().unwrap_or_else(PoisonError::into_inner);
        schemas.keys().cloned().collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let schemas = self.schemas.read().unwrap_or_else(PoisonError::into_inner);
        let schema = Arc::clone(schemas.get(name)?);
        Some(schema)
    }
}

/// One namespace of a Tarn catalog as a DataFusion [`SchemaProvider`]. `CREATE TABLE
/// name [AS SELECT ...]` in it creates a catalog table; dropping one is left to the
/// catalog's API, since DataFusion also deregisters tables that only leave a session.
#[derive(Debug)]
pub struct TarnSchemaProvider {
    catalog: Catalog,
    namespace: ObjectId,
    /// The tables by name, as listed or created here.
    tables: RwLock<BTreeMap<String, ObjectId>>,
}

impl TarnSchemaProvider {
    fn tables(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ObjectId>> {
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl SchemaProvider for TarnSchemaProvider {
    fn table_names(&self) -> Vec<String> {
        self.tables().keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(id) = self.tables().get(name).cloned() else {
            return Ok(None);
        };
        let table = self.catalog.load_table(&id).await.map_err(external)?;
        Ok(Some(Arc::new(TarnTableProvider::new(table))))
    }

    /// `CREATE TABLE name [AS SELECT ...]`: DataFusion hands over the query's rows,
    /// collected, as a memory table; they become the new catalog table's version 0.
    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(memory) = table.downcast_ref::<MemTable>() else {
            return plan_err!(
                "a Tarn catalog's schema takes new tables from CREATE TABLE [AS SELECT]; \
                 register other tables in a session schema"
            );
        };
        if memory.constraints().is_some_and(|c| !c.is_empty()) {
            return plan_err!(
                "CREATE TABLE {name} in a Tarn catalog: SQL constraints (PRIMARY KEY, \
                 UNIQUE) are not kept by Tarn tables; leave them out"
            );
        }
        let mut names = self.namespace.names().to_vec();
        names.push(name.clone());
        let id = ObjectId::new(names).map_err(external)?;
        let schema = memory.schema();
        let partitions = memory.batches.clone();
        wait("CREATE TABLE in a Tarn catalog", async {
            let mut rows = Vec::new();
            for partition in &partitions {
                rows.extend(partition.read().await.iter().cloned());
            }
            self.catalog
                .create_table_as(&id, &schema, Vec::new(), ObjectMetadata::default(), rows)
                .await
        })?
        .map_err(external)?;
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        tables.insert(name, id);
        Ok(None)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables().contains_key(name)
    }
}
