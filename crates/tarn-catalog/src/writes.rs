//! Changing the catalog: namespaces and tables created, altered, declared, registered,
//! renamed and dropped. Each mutation is an operation on the manifest's rows that states
//! what it reads; the committer runs it (with whatever else this process submitted
//! meanwhile) and commits once, re-running it after a conflict so that it decides on the
//! newest state: a create finds the name taken, a drop finds it gone.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use tarn::{CreateBuilder, Table};

use crate::catalog::{Catalog, TableInfo, child};
use crate::engine::{Needs, Op, View};
use crate::error::{Error, Result};
use crate::manifest::{MANIFEST_DIR, NAMESPACE, ObjectMetadata, Row, TABLE};
use crate::names::ObjectId;
use crate::options::{DropBehavior, DropData, IfExists};

impl Catalog {
    /// Creates a namespace; with [`IfExists::Ignore`], an existing one is success.
    ///
    /// Fails with [`Error::AlreadyExists`] when the name is taken (by a namespace with
    /// [`IfExists::Fail`], or by a table), and [`Error::NotFound`] when the parent
    /// namespace does not exist.
    pub async fn create_namespace(
        &self,
        id: &ObjectId,
        metadata: ObjectMetadata,
        if_exists: IfExists,
    ) -> Result<()> {
        let exist_ok = if_exists == IfExists::Ignore;
        if id.is_root() {
            return Err(Error::InvalidArgument {
                name: "id",
                reason: "the root namespace always exists".into(),
            });
        }
        let (key, parent) = (id.key(), id.parent());
        let needs = needs_with_parent(&key, &parent);
        self.submit(Op {
            needs,
            run: Box::new(move |view: &mut View| {
                check_parent(view, &parent)?;
                match view.get(&key) {
                    Some(r) if r.object_type == NAMESPACE && exist_ok => Ok(()),
                    Some(r) => Err(Error::AlreadyExists {
                        kind: kind_name(&r.object_type),
                        id: key.clone(),
                    }),
                    None => {
                        let now = view.now_us;
                        view.put(Row {
                            object_id: key.clone(),
                            object_type: NAMESPACE.into(),
                            location: None,
                            metadata: metadata.clone(),
                            created_at: now,
                            updated_at: now,
                        });
                        Ok(())
                    }
                }
            }),
        })
        .await
    }

    /// Sets and removes properties of a namespace (last writer wins).
    ///
    /// Fails with [`Error::NotFound`] when it does not exist.
    pub async fn alter_namespace(
        &self,
        id: &ObjectId,
        set: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<()> {
        let key = id.key();
        self.submit(Op {
            needs: Needs {
                keys: vec![key.clone()],
                ranges: Vec::new(),
            },
            run: Box::new(move |view: &mut View| {
                let mut row = match view.get(&key) {
                    Some(r) if r.object_type == NAMESPACE => r.clone(),
                    _ => {
                        return Err(Error::NotFound {
                            kind: NAMESPACE,
                            id: key.clone(),
                        });
                    }
                };
                for (k, v) in &set {
                    row.metadata.properties.insert(k.clone(), v.clone());
                }
                for k in &remove {
                    row.metadata.properties.remove(k);
                }
                row.updated_at = view.now_us;
                view.put(row);
                Ok(())
            }),
        })
        .await
    }

    /// Drops a namespace. With [`DropBehavior::Cascade`], everything in it goes too (the
    /// entries; table data stays); with [`DropBehavior::Restrict`], a namespace that
    /// holds anything is refused. Dropping a namespace that is already gone is success.
    ///
    /// Fails with [`Error::NotEmpty`].
    pub async fn drop_namespace(&self, id: &ObjectId, behavior: DropBehavior) -> Result<()> {
        let cascade = behavior == DropBehavior::Cascade;
        let key = id.key();
        let (from, to) = id.child_range();
        let ns = id.clone();
        self.submit(Op {
            needs: Needs {
                keys: vec![key.clone()],
                ranges: vec![(from.clone(), to.clone())],
            },
            run: Box::new(move |view: &mut View| {
                match view.get(&key) {
                    Some(r) if r.object_type == NAMESPACE => {}
                    Some(_) => {
                        return Err(Error::NotFound {
                            kind: NAMESPACE,
                            id: key.clone(),
                        });
                    }
                    None => return Ok(()),
                }
                let inside: Vec<String> = view
                    .range(&from, &to)
                    .iter()
                    .map(|r| r.object_id.clone())
                    .collect();
                if !inside.is_empty() && !cascade {
                    let children = inside.iter().filter(|k| ns.is_child_key(k)).count();
                    return Err(Error::NotEmpty {
                        id: key.clone(),
                        children,
                    });
                }
                for k in inside {
                    view.delete(&k);
                }
                view.delete(&key);
                Ok(())
            }),
        })
        .await
    }

    /// Creates a table: its Tarn table, in a new folder under the root, and its entry.
    /// The folder is named `<8 hex digits>-<name>` so that tables spread over S3's key
    /// prefixes. The table's version 0 is written once the entry's checks pass, while the
    /// manifest page is written, and the entry commits only after it landed, so an entry
    /// never points at nothing.
    ///
    /// Fails with [`Error::AlreadyExists`] (a table made meanwhile is removed),
    /// [`Error::NotFound`] when the namespace does not exist, and as creating a
    /// Tarn table does (a bad schema or partition column before anything is written;
    /// then no entry is made). When the entry's commit has an unknown outcome, the table
    /// is kept, since the entry may point at it.
    pub async fn create_table(
        &self,
        id: &ObjectId,
        schema: &Schema,
        partition_columns: Vec<String>,
        metadata: ObjectMetadata,
    ) -> Result<TableInfo> {
        self.create_table_as(id, schema, partition_columns, metadata, Vec::new())
            .await
    }

    /// Creates a table holding `rows` (`CREATE TABLE ... AS SELECT`): its version 0 has
    /// the schema and the rows' data files in one commit, made as
    /// [`create_table`](Self::create_table) makes a table.
    ///
    /// Fails as [`create_table`](Self::create_table) does, and with
    /// [`tarn::Error::SchemaMismatch`] (as [`Error::Table`]) for rows that do not fit
    /// `schema`.
    pub async fn create_table_as(
        &self,
        id: &ObjectId,
        schema: &Schema,
        partition_columns: Vec<String>,
        metadata: ObjectMetadata,
        rows: Vec<RecordBatch>,
    ) -> Result<TableInfo> {
        if id.is_root() {
            return Err(Error::InvalidArgument {
                name: "id",
                reason: "a table needs a name".into(),
            });
        }
        let location = table_folder(id);
        let mut builder = Table::create_at(child(&self.inner.root, &location)?)
            .with_arrow_schema(schema)
            .with_partition_columns(partition_columns)
            .with_fresh_location();
        for (k, v) in &metadata.properties {
            builder = builder.with_property(k.clone(), v.clone());
        }
        builder.validate()?;
        let created = Arc::new(AtomicBool::new(false));
        let creation = Creation {
            builder,
            rows,
            created: Arc::clone(&created),
        };
        match self
            .insert_table(id, &location, metadata.clone(), Some(creation))
            .await
        {
            Ok(()) => Ok(TableInfo {
                id: id.clone(),
                url: format!("{}/{}", self.inner.url.trim_end_matches('/'), location),
                location,
                metadata,
                version: Some(0),
            }),
            Err(e) => {
                // Only a table this call made goes, and not when the entry may have
                // landed after all.
                if created.load(Ordering::SeqCst) && !outcome_unknown(&e) {
                    let _ = self.purge(&location).await;
                }
                Err(e)
            }
        }
    }

    /// Reserves a table's name before its data exists (its entry is marked `declared`).
    ///
    /// Fails as [`Catalog::create_table`] does.
    pub async fn declare_table(
        &self,
        id: &ObjectId,
        mut metadata: ObjectMetadata,
    ) -> Result<TableInfo> {
        metadata.declared = true;
        let location = table_folder(id);
        self.insert_table(id, &location, metadata.clone(), None)
            .await?;
        Ok(TableInfo {
            id: id.clone(),
            url: format!("{}/{}", self.inner.url.trim_end_matches('/'), location),
            location,
            metadata,
            version: None,
        })
    }

    /// Registers a Delta table that already exists at `location` (relative to the root,
    /// or a URL under it).
    ///
    /// Fails with [`Error::InvalidLocation`] for a location outside the root or
    /// without a Delta table, and as [`Catalog::create_table`] does.
    pub async fn register_table(
        &self,
        id: &ObjectId,
        location: &str,
        metadata: ObjectMetadata,
    ) -> Result<TableInfo> {
        let relative = self.relative(location)?;
        let table = Table::open_at(child(&self.inner.root, &relative)?)
            .await
            .map_err(|e| Error::InvalidLocation {
                location: location.to_string(),
                reason: format!("no Delta table there: {e}"),
            })?;
        self.insert_table(id, &relative, metadata.clone(), None)
            .await?;
        Ok(TableInfo {
            id: id.clone(),
            url: format!("{}/{}", self.inner.url.trim_end_matches('/'), relative),
            location: relative,
            metadata,
            version: Some(table.version()),
        })
    }

    /// Adds a table's entry; with `create`, the table is created once the entry's checks
    /// pass, and the entry commits only if that succeeded.
    async fn insert_table(
        &self,
        id: &ObjectId,
        location: &str,
        metadata: ObjectMetadata,
        mut create: Option<Creation>,
    ) -> Result<()> {
        let (key, parent) = (id.key(), id.parent());
        let location = location.to_string();
        self.submit(Op {
            needs: needs_with_parent(&key, &parent),
            run: Box::new(move |view: &mut View| {
                check_parent(view, &parent)?;
                if let Some(r) = view.get(&key) {
                    return Err(Error::AlreadyExists {
                        kind: kind_name(&r.object_type),
                        id: key.clone(),
                    });
                }
                let now = view.now_us;
                view.put(Row {
                    object_id: key.clone(),
                    object_type: TABLE.into(),
                    location: Some(location.clone()),
                    metadata: metadata.clone(),
                    created_at: now,
                    updated_at: now,
                });
                // Started once: a rerun after a conflict finds the table made.
                if let Some(Creation {
                    builder,
                    rows,
                    created,
                }) = create.take()
                {
                    view.commit_after(tokio::spawn(async move {
                        match rows.is_empty() {
                            true => builder.execute().await?,
                            false => {
                                // The folder is fresh (`with_fresh_location`): data files
                                // a failed write left in it are this call's to remove.
                                created.store(true, Ordering::SeqCst);
                                let rows = rows.into_iter().map(Ok::<_, Infallible>);
                                builder.execute_stream(futures::stream::iter(rows)).await?
                            }
                        };
                        created.store(true, Ordering::SeqCst);
                        Ok(())
                    }));
                }
                Ok(())
            }),
        })
        .await
    }

    /// Drops a table's entry, then, with [`DropData::Purge`], its data. A table already
    /// gone is success.
    ///
    /// Fails when the manifest or the data cannot be written.
    pub async fn drop_table(&self, id: &ObjectId, data: DropData) -> Result<()> {
        let purge = data == DropData::Purge;
        let key = id.key();
        let removed: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let seen = Arc::clone(&removed);
        self.submit(Op {
            needs: Needs {
                keys: vec![key.clone()],
                ranges: Vec::new(),
            },
            run: Box::new(move |view: &mut View| {
                match view.get(&key) {
                    Some(r) if r.object_type == TABLE => {
                        *seen.lock().unwrap_or_else(|p| p.into_inner()) = r.location.clone();
                        view.delete(&key);
                    }
                    Some(_) => {
                        return Err(Error::NotFound {
                            kind: TABLE,
                            id: key.clone(),
                        });
                    }
                    None => {}
                }
                Ok(())
            }),
        })
        .await?;
        let location = removed.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if purge && let Some(location) = location {
            self.purge(&location).await?;
        }
        Ok(())
    }

    /// Renames a table, atomically: the old entry and the new one change in one commit.
    ///
    /// Fails with [`Error::NotFound`] when the table or the target namespace does
    /// not exist, and [`Error::AlreadyExists`] when the new name is taken.
    pub async fn rename_table(&self, from: &ObjectId, to: &ObjectId) -> Result<()> {
        let (old, new, parent) = (from.key(), to.key(), to.parent());
        let mut needs = needs_with_parent(&new, &parent);
        needs.keys.push(old.clone());
        self.submit(Op {
            needs,
            run: Box::new(move |view: &mut View| {
                let mut row = match view.get(&old) {
                    Some(r) if r.object_type == TABLE => r.clone(),
                    _ => {
                        return Err(Error::NotFound {
                            kind: TABLE,
                            id: old.clone(),
                        });
                    }
                };
                check_parent(view, &parent)?;
                if let Some(r) = view.get(&new) {
                    return Err(Error::AlreadyExists {
                        kind: kind_name(&r.object_type),
                        id: new.clone(),
                    });
                }
                view.delete(&old);
                row.object_id = new.clone();
                row.updated_at = view.now_us;
                view.put(row);
                Ok(())
            }),
        })
        .await
    }

    /// Adds many objects in one commit, given as manifest rows: to seed a catalog, or to
    /// move one in from elsewhere. Each row's key must be new, its parent must exist or be
    /// among the rows, and a table's location must be a folder under the root. The rows
    /// are held in memory while they are written.
    ///
    /// Fails with [`Error::InvalidName`] for a bad `object_id`,
    /// [`Error::InvalidManifest`] for an unknown `object_type`,
    /// [`Error::InvalidLocation`] for a table location outside the root,
    /// [`Error::AlreadyExists`] for a key that exists and
    /// [`Error::NotFound`] for a missing parent; nothing is added then.
    pub async fn import(&self, mut rows: Vec<Row>) -> Result<usize> {
        rows.sort_by(|a, b| a.object_id.cmp(&b.object_id));
        let mut parents = std::collections::BTreeSet::new();
        for (i, row) in rows.iter_mut().enumerate() {
            let id = ObjectId::parse(&row.object_id)?;
            if id.is_root() {
                return Err(Error::InvalidName {
                    name: String::new(),
                    reason: format!("row {i} has an empty object_id"),
                });
            }
            match row.object_type.as_str() {
                NAMESPACE => row.location = None,
                TABLE => {
                    let location = row.location.clone().unwrap_or_else(|| table_folder(&id));
                    row.location = Some(self.relative(&location)?);
                }
                other => {
                    return Err(Error::InvalidManifest {
                        reason: format!("object {:?} has type {other:?}", row.object_id),
                    });
                }
            }
            let parent = id.parent();
            if !parent.is_root() {
                parents.insert(parent.key());
            }
        }
        if let Some(pair) = rows.windows(2).find(|w| w[0].object_id == w[1].object_id) {
            return Err(Error::AlreadyExists {
                kind: kind_name(&pair[0].object_type),
                id: pair[0].object_id.clone(),
            });
        }
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Ok(0);
        };
        let range = (first.object_id.clone(), format!("{}\0", last.object_id));
        let keys: std::collections::BTreeSet<String> =
            rows.iter().map(|r| r.object_id.clone()).collect();
        let outside: Vec<String> = parents.into_iter().filter(|p| !keys.contains(p)).collect();
        let count = rows.len();
        let rows = Arc::new(rows);
        self.submit(Op {
            needs: Needs {
                keys: outside.clone(),
                ranges: vec![range],
            },
            run: Box::new(move |view: &mut View| {
                for parent in &outside {
                    check_parent(view, &ObjectId::parse(parent)?)?;
                }
                if let Some(taken) = rows.iter().find_map(|r| view.get(&r.object_id)) {
                    return Err(Error::AlreadyExists {
                        kind: kind_name(&taken.object_type),
                        id: taken.object_id.clone(),
                    });
                }
                // A parent among the rows must be a namespace.
                let kind_of = |key: &str| {
                    rows.binary_search_by(|q| q.object_id.as_str().cmp(key))
                        .ok()
                        .map(|k| rows[k].object_type.as_str())
                };
                for row in rows.iter() {
                    if let Some((parent, _)) = row.object_id.rsplit_once('$')
                        && keys.contains(parent)
                        && kind_of(parent) != Some(NAMESPACE)
                    {
                        return Err(Error::NotFound {
                            kind: NAMESPACE,
                            id: parent.to_string(),
                        });
                    }
                }
                for row in rows.iter() {
                    view.put(row.clone());
                }
                Ok(())
            }),
        })
        .await?;
        Ok(count)
    }

    /// The location relative to the root, for a relative path or a URL under the root.
    fn relative(&self, location: &str) -> Result<String> {
        let invalid = |reason: &str| Error::InvalidLocation {
            location: location.to_string(),
            reason: reason.to_string(),
        };
        let root = self.inner.url.trim_end_matches('/');
        let relative = match location.strip_prefix(root) {
            Some(rest) => rest.trim_start_matches('/').to_string(),
            None if location.contains("://") || location.starts_with('/') => {
                return Err(invalid("it is not under the catalog's root"));
            }
            None => location.trim_matches('/').to_string(),
        };
        if relative.is_empty()
            || relative
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
            || relative == MANIFEST_DIR
            || relative.starts_with(&format!("{MANIFEST_DIR}/"))
        {
            return Err(invalid("it is not a folder under the catalog's root"));
        }
        Ok(relative)
    }

    /// Deletes every object under a table folder.
    async fn purge(&self, location: &str) -> Result<()> {
        let folder = child(&self.inner.root, location)?;
        let store = Arc::clone(folder.store());
        let listed: Vec<object_store::ObjectMeta> = store
            .list(Some(folder.root()))
            .try_collect()
            .await
            .map_err(|e| {
                Error::Table(tarn::Error::Store {
                    operation: tarn_store::StoreOp::List,
                    path: folder.root().to_string(),
                    source: e,
                })
            })?;
        for meta in listed {
            store.delete(&meta.location).await.map_err(|e| {
                Error::Table(tarn::Error::Store {
                    operation: tarn_store::StoreOp::Delete,
                    path: meta.location.to_string(),
                    source: e,
                })
            })?;
        }
        Ok(())
    }
}

/// A new table's folder: 8 random hex digits then the table's name, so table keys
/// spread over S3 prefixes, and a name reused after a drop gets a new folder.
fn table_folder(id: &ObjectId) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    let leaf: String = id
        .leaf()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{}-{leaf}", &random[..8])
}

/// A table to create before its entry commits, and whether it was.
struct Creation {
    builder: CreateBuilder,
    /// The rows version 0 holds (none for an empty table).
    rows: Vec<RecordBatch>,
    created: Arc<AtomicBool>,
}

/// Whether the error leaves the manifest commit's outcome unknown.
fn outcome_unknown(error: &Error) -> bool {
    match error {
        Error::Table(tarn::Error::CommitStateUnknown { .. }) => true,
        Error::Batch(inner) => outcome_unknown(inner),
        _ => false,
    }
}

fn kind_name(object_type: &str) -> &'static str {
    if object_type == TABLE {
        TABLE
    } else {
        NAMESPACE
    }
}

fn needs_with_parent(key: &str, parent: &ObjectId) -> Needs {
    let mut keys = vec![key.to_string()];
    if !parent.is_root() {
        keys.push(parent.key());
    }
    Needs {
        keys,
        ranges: Vec::new(),
    }
}

fn check_parent(view: &View, parent: &ObjectId) -> Result<()> {
    if parent.is_root() {
        return Ok(());
    }
    match view.get(&parent.key()) {
        Some(r) if r.object_type == NAMESPACE => Ok(()),
        _ => Err(Error::NotFound {
            kind: NAMESPACE,
            id: parent.key(),
        }),
    }
}
