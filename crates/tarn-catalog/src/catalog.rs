//! The catalog handle: opening a catalog, its reads, and the committer that groups the
//! mutations of one process into one manifest commit.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tarn::{Clock, Snapshot, StoreLocation, SystemClock, Table};
use tokio::sync::{mpsc, oneshot};

use crate::engine::{COMPACT_AT, Op, Stats, run_batch};
use crate::error::{Error, Result};
use crate::loader::Manifest;
use crate::manifest::{MANIFEST_DIR, NAMESPACE, ObjectMetadata, Row, TABLE};
use crate::names::ObjectId;
use crate::options::{CatalogOptions, Detail};
use crate::pages::Layout;
use crate::pages::{PageCache, find, pages_for_key};

/// Mutations one commit may carry.
const BATCH: usize = 256;
/// A namespace as [`Catalog::describe_namespace`] returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceInfo {
    /// Its id.
    pub id: ObjectId,
    /// Its properties and description.
    pub metadata: ObjectMetadata,
    /// Creation and last change, microseconds since the epoch.
    pub created_at: i64,
    /// Last change, microseconds since the epoch.
    pub updated_at: i64,
}

/// A table as [`Catalog::describe_table`] returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// Its id.
    pub id: ObjectId,
    /// Its folder relative to the catalog's root.
    pub location: String,
    /// Its full URL.
    pub url: String,
    /// Its properties and description; `declared` when no data exists yet.
    pub metadata: ObjectMetadata,
    /// The table's current version (none for a declared table).
    pub version: Option<i64>,
}

type Reply = oneshot::Sender<Result<()>>;

pub(crate) struct Pending {
    op: Op,
    reply: Reply,
}

/// A directory catalog of namespaces and tables under one root URL, kept in the
/// `__manifest` Tarn table. Any number of processes may open the same root; cheap to
/// clone within a process, where concurrent mutations are grouped into one commit.
#[derive(Clone)]
pub struct Catalog {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) root: StoreLocation,
    pub(crate) url: String,
    pub(crate) options: CatalogOptions,
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) pages: Arc<PageCache>,
    pub(crate) queue: mpsc::UnboundedSender<Pending>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) stats: Arc<Stats>,
}

/// What a handle's committer has done so far, as [`Catalog::stats`] returns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogStats {
    /// Manifest commits made.
    pub commits: u64,
    /// Batches run again because another process committed first and changed what they
    /// read (a lost race on the log alone is rebased by Tarn and not counted).
    pub reruns: u64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("url", &self.inner.url)
            .field("layout", &self.inner.options.layout)
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Opens the catalog at `url`. Nothing is read yet: the first call loads the
    /// manifest (creating it when the root holds none), so a process that opens a catalog
    /// and describes a table waits on the describe alone. Must be called inside a Tokio
    /// runtime (the handle's committer is a task).
    ///
    /// Fails with [`Error::Table`] when the URL cannot be parsed or its store
    /// configured; a store that cannot be reached, or a manifest that cannot be read or
    /// created, fails the first call.
    pub async fn open(url: &str, options: CatalogOptions) -> Result<Catalog> {
        let root = tarn_store::open_with_options(url, &options.store)
            .map_err(|e| Error::Table(e.into()))?;
        Self::open_at(root, options).await
    }

    /// Opens the catalog at a location built by hand (a wrapped store, for example), as
    /// [`Catalog::open`] does.
    ///
    /// Fails with [`Error::InvalidLocation`] when the manifest's URL cannot be
    /// built from the root's.
    pub async fn open_at(root: StoreLocation, options: CatalogOptions) -> Result<Catalog> {
        let manifest = Arc::new(Manifest::new(child(&root, MANIFEST_DIR)?, options.clone()));
        let pages = Arc::new(PageCache::default());
        let (queue, receiver) = mpsc::unbounded_channel();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let stats = Arc::new(Stats::default());
        tokio::spawn(committer(
            Arc::clone(&manifest),
            Arc::clone(&pages),
            Arc::clone(&clock),
            Arc::clone(&stats),
            receiver,
        ));
        Ok(Catalog {
            inner: Arc::new(Inner {
                url: root.url().to_string(),
                root,
                options,
                manifest,
                pages,
                queue,
                clock,
                stats,
            }),
        })
    }

    /// The catalog's root URL.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The manifest's latest snapshot: one LIST when nothing changed, and the new commits
    /// when something did.
    ///
    /// Fails when the log cannot be read.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let (mut table, loaded) = self.inner.manifest.lock().await?;
        // A manifest loaded by this call is as new as a refresh would make it.
        if !loaded {
            table.refresh().await?;
        }
        Ok(table.snapshot().clone())
    }

    pub(crate) async fn row(&self, snapshot: &Snapshot, key: &str) -> Result<Option<Row>> {
        // Only pages whose key range holds `key` can hold it: a base page, and at most a
        // small page of new keys; they are read at once.
        let all = self.inner.pages.pages(snapshot);
        let reads = pages_for_key(&all, key)
            .into_iter()
            .filter(|p| p.covers(key))
            .map(|page| self.inner.pages.rows(snapshot, &page.add));
        for rows in futures::future::try_join_all(reads).await? {
            if let Some(i) = find(&rows, key) {
                return Ok(Some(Row::clone(&rows[i])));
            }
        }
        Ok(None)
    }

    async fn object(&self, id: &ObjectId, kind: &'static str) -> Result<Row> {
        let snapshot = self.snapshot().await?;
        match self.row(&snapshot, &id.key()).await? {
            Some(row) if row.object_type == kind => Ok(row),
            _ => Err(Error::NotFound { kind, id: id.key() }),
        }
    }

    /// Whether the namespace exists (the root always does).
    ///
    /// Fails when the manifest cannot be read.
    pub async fn namespace_exists(&self, id: &ObjectId) -> Result<bool> {
        if id.is_root() {
            return Ok(true);
        }
        let snapshot = self.snapshot().await?;
        Ok(self
            .row(&snapshot, &id.key())
            .await?
            .is_some_and(|r| r.object_type == NAMESPACE))
    }

    /// Whether the table exists (declared tables included).
    ///
    /// Fails when the manifest cannot be read.
    pub async fn table_exists(&self, id: &ObjectId) -> Result<bool> {
        let snapshot = self.snapshot().await?;
        Ok(self
            .row(&snapshot, &id.key())
            .await?
            .is_some_and(|r| r.object_type == TABLE))
    }

    /// A namespace's properties and description.
    ///
    /// Fails with [`Error::NotFound`] when it does not exist.
    pub async fn describe_namespace(&self, id: &ObjectId) -> Result<NamespaceInfo> {
        let row = self.object(id, NAMESPACE).await?;
        Ok(NamespaceInfo {
            id: id.clone(),
            metadata: row.metadata,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }

    /// A table's location and properties, and with [`Detail::WithVersion`] its current
    /// version (the table is opened for it).
    ///
    /// Fails with [`Error::NotFound`] when it does not exist, and
    /// [`Error::Table`] when its data cannot be opened.
    pub async fn describe_table(&self, id: &ObjectId, detail: Detail) -> Result<TableInfo> {
        let with_version = detail == Detail::WithVersion;
        let row = self.object(id, TABLE).await?;
        let location = row.location.clone().unwrap_or_default();
        let url = format!("{}/{}", self.inner.url.trim_end_matches('/'), location);
        let version = if with_version && !row.metadata.declared {
            let table = Table::open_at(child(&self.inner.root, &location)?).await?;
            Some(table.version())
        } else {
            None
        };
        Ok(TableInfo {
            id: id.clone(),
            location,
            url,
            metadata: row.metadata,
            version,
        })
    }

    /// Opens a catalogued table.
    ///
    /// Fails with [`Error::NotFound`] for an unknown or declared table.
    pub async fn load_table(&self, id: &ObjectId) -> Result<Table> {
        let row = self.object(id, TABLE).await?;
        if row.metadata.declared {
            return Err(Error::NotFound {
                kind: TABLE,
                id: id.key(),
            });
        }
        let location = row.location.unwrap_or_default();
        Ok(Table::open_at(child(&self.inner.root, &location)?).await?)
    }

    pub(crate) async fn submit(&self, op: Op) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.inner
            .queue
            .send(Pending { op, reply })
            .map_err(|_| Error::Stopped)?;
        answer.await.map_err(|_| Error::Stopped)?
    }

    pub(crate) fn now_us(&self) -> i64 {
        self.inner.clock.now_ms() * 1000
    }

    /// This handle's commits and re-runs so far.
    pub fn stats(&self) -> CatalogStats {
        CatalogStats {
            commits: self.inner.stats.commits.load(Ordering::Relaxed),
            reruns: self.inner.stats.reruns.load(Ordering::Relaxed),
        }
    }

    /// Fences this handle's writer ([`CatalogOptions::writer`]) on the manifest again:
    /// afterwards no manifest change this writer made before can land, so what the handle
    /// reads next is final as far as those go. Call it after a call failed with an
    /// unknown outcome, before reading what it did.
    ///
    /// Fails with [`Error::InvalidArgument`] when the handle has no writer id, and when
    /// the fence cannot be committed.
    pub async fn fence_writer(&self) -> Result<tarn::Writer> {
        let Some(id) = self.inner.options.writer.clone() else {
            return Err(Error::InvalidArgument {
                name: "writer",
                reason: "fencing needs a writer id (CatalogOptions::writer)".into(),
            });
        };
        let (mut table, _) = self.inner.manifest.lock().await?;
        Ok(table.fence_writer(id).await?)
    }

    /// How this catalog's manifest is cut into files (chosen when it was created).
    ///
    /// Fails when the manifest cannot be loaded or records an unknown layout.
    pub async fn layout(&self) -> Result<Layout> {
        drop(self.inner.manifest.lock().await?);
        self.inner.manifest.layout()
    }

    /// The clock time in microseconds (creation and update times).
    pub fn now(&self) -> i64 {
        self.now_us()
    }
}

/// The manifest's folder, or a table's, under the root.
pub(crate) fn child(root: &StoreLocation, relative: &str) -> Result<StoreLocation> {
    let url = format!("{}/{}", root.url().as_str().trim_end_matches('/'), relative);
    let url = url::Url::parse(&url).map_err(|e| Error::InvalidLocation {
        location: relative.to_string(),
        reason: e.to_string(),
    })?;
    let mut path = root.root().clone();
    for part in relative.split('/').filter(|p| !p.is_empty()) {
        path = path.join(part);
    }
    Ok(StoreLocation::new(url, Arc::clone(root.store()), path))
}

/// Takes mutations off the queue, as many as are waiting, and commits them together.
async fn committer(
    manifest: Arc<Manifest>,
    pages: Arc<PageCache>,
    clock: Arc<dyn Clock>,
    stats: Arc<Stats>,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
) {
    // Each handle compacts at its own count of small pages, so processes do not all
    // compact the same pages at once.
    let compact_at = COMPACT_AT + (uuid::Uuid::new_v4().as_u128() % COMPACT_AT as u128) as usize;
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (mut ops, replies): (Vec<Op>, Vec<Reply>) =
            batch.into_iter().map(|p| (p.op, p.reply)).unzip();
        let outcome: Result<Vec<Result<()>>> = match manifest.lock().await {
            Ok((mut table, _)) => match manifest.layout() {
                Ok(layout) => {
                    run_batch(
                        &mut table,
                        &pages,
                        layout,
                        &mut ops,
                        Arc::clone(&clock),
                        &stats,
                        compact_at,
                    )
                    .await
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) if replies.len() == 1 => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(e));
                }
            }
            Err(e) => {
                // Every mutation of the batch shares the commit's fate.
                let shared = Arc::new(e);
                for reply in replies {
                    let _ = reply.send(Err(Error::Batch(Arc::clone(&shared))));
                }
            }
        }
    }
}
