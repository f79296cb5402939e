//! A catalog handle's manifest table: loaded on first use (so opening a catalog costs
//! nothing, and the first read loads the newest state), created when the root holds none,
//! with the layout it was created with.

use std::sync::OnceLock;

use tarn::{IndexKind, Snapshot, StoreLocation, Table};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::manifest::schema;
use crate::options::CatalogOptions;
use crate::pages::Layout;

/// The manifest of one catalog handle.
pub(crate) struct Manifest {
    location: StoreLocation,
    options: CatalogOptions,
    table: Mutex<Option<Table>>,
    layout: OnceLock<Layout>,
}

impl Manifest {
    pub(crate) fn new(location: StoreLocation, options: CatalogOptions) -> Self {
        Self {
            location,
            options,
            table: Mutex::new(None),
            layout: OnceLock::new(),
        }
    }

    /// The manifest table, locked, and whether this call loaded it (so it is as new as a
    /// refresh would make it).
    ///
    /// Fails when the manifest cannot be read or created.
    pub(crate) async fn lock(&self) -> Result<(MappedMutexGuard<'_, Table>, bool)> {
        let mut guard = self.table.lock().await;
        let loaded = guard.is_none();
        if loaded {
            let mut table = match Table::open_at(self.location.clone()).await {
                Ok(table) => table,
                Err(tarn::Error::TableNotFound { .. }) => {
                    create_manifest(self.location.clone(), &self.options).await?
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(writer) = &self.options.writer {
                table.fence_writer(writer).await?;
            }
            let layout = stored_layout(table.snapshot())?;
            let _ = self.layout.set(layout);
            *guard = Some(table);
        }
        let table =
            MutexGuard::try_map(guard, Option::as_mut).map_err(|_| Error::InvalidManifest {
                reason: "the manifest was not loaded".into(),
            })?;
        Ok((table, loaded))
    }

    /// The layout the manifest records (known once loaded).
    ///
    /// Fails before the manifest has been loaded.
    pub(crate) fn layout(&self) -> Result<Layout> {
        self.layout
            .get()
            .copied()
            .ok_or_else(|| Error::InvalidManifest {
                reason: "the manifest was not loaded".into(),
            })
    }
}

/// Commits between the manifest's checkpoints.
const MANIFEST_CHECKPOINT_INTERVAL: &str = "4";

/// How long the manifest's log keeps commits for time travel: a catalog takes tens of
/// mutations a second, and no reader of it travels far back, so its log cleanup (after
/// every checkpoint) keeps an hour rather than Delta's 30 days.
const MANIFEST_LOG_RETENTION: &str = "interval 1 hours";

/// How long the manifest's checkpoints keep the tombstones of pages it replaced: every
/// mutation replaces a page, and a week of them (Delta's default) made each checkpoint,
/// written every few commits, grow with every mutation. An hour, as the log keeps; a
/// vacuum of the manifest then keeps the pages of the last hour's versions.
const MANIFEST_TOMBSTONE_RETENTION: &str = "interval 1 hours";

/// The largest deletion vector of a manifest page kept inline in the log, in bytes.
const MANIFEST_DV_INLINE_BYTES: usize = 2048;

/// Fewest rows a manifest page needs for index segments of its own.
const INDEXED_PAGE_ROWS: u64 = 64;

async fn create_manifest(location: StoreLocation, options: &CatalogOptions) -> Result<Table> {
    let mut create = Table::create_at(location.clone());
    if options.layout != Layout::FullRewrite {
        // A mutation that only drops rows of a page marks them in its deletion vector
        // (inline in the commit) instead of rewriting it: concurrent drops of one page then
        // unite their DVs rather than conflict.
        create = create
            .with_property(tarn::protocol::properties::ENABLE_DELETION_VECTORS, "true")
            // Inline DVs cost no PUT, and only inline ones are united in a group commit:
            // room for about a thousand dropped rows of a page (it is rewritten at half).
            .with_property(
                tarn::protocol::properties::DV_INLINE_THRESHOLD,
                MANIFEST_DV_INLINE_BYTES.to_string(),
            );
    }
    let created = create
        .with_arrow_schema(&schema())
        // A cold open reads the checkpoint and every commit after it at once, and waits
        // on the slowest: fewer commits between checkpoints, a shorter wait. Manifest
        // checkpoints are small and written in the background.
        .with_property("delta.checkpointInterval", MANIFEST_CHECKPOINT_INTERVAL)
        .with_property(
            tarn::protocol::properties::LOG_RETENTION,
            MANIFEST_LOG_RETENTION,
        )
        .with_property(
            tarn::protocol::properties::DELETED_FILE_RETENTION,
            MANIFEST_TOMBSTONE_RETENTION,
        )
        .with_property(LAYOUT_PROPERTY, layout_text(options.layout))
        // Small pages of new keys (a batch's worth) get no index segments of their own:
        // reading a few rows is as cheap as an index lookup, and it saves each such
        // mutation the segments' uploads. Folding them into base pages indexes them.
        .with_property(
            tarn::protocol::properties::INDEX_INLINE_MIN_ROWS,
            INDEXED_PAGE_ROWS.to_string(),
        )
        .execute()
        .await;
    let mut table = match created {
        Ok(table) => table,
        // Another process created it first.
        Err(tarn::Error::TableAlreadyExists { .. }) => {
            return Ok(Table::open_at(location).await?);
        }
        Err(e) => return Err(e.into()),
    };
    if options.indices {
        for (column, kind) in [
            ("object_id", IndexKind::BTree),
            ("object_type", IndexKind::Bitmap),
            ("metadata", IndexKind::FullText),
        ] {
            match table.create_index(column).with_kind(kind).execute().await {
                Ok(_) | Err(tarn::Error::IndexAlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(table)
}

/// The manifest's table property recording its layout: `full-rewrite` or
/// `paged:<rows per page>`.
pub const LAYOUT_PROPERTY: &str = "tarn.catalog.layout";

fn layout_text(layout: Layout) -> String {
    match layout {
        Layout::FullRewrite => "full-rewrite".into(),
        Layout::Paged { rows_per_page } => format!("paged:{}", rows_per_page.max(1)),
    }
}

/// The layout a manifest was created with (paged, 4,096 rows, when it records none).
fn stored_layout(snapshot: &Snapshot) -> Result<Layout> {
    let text = snapshot
        .metadata()
        .configuration
        .get(LAYOUT_PROPERTY)
        .cloned()
        .flatten();
    let Some(text) = text else {
        return Ok(Layout::default());
    };
    if text == "full-rewrite" {
        return Ok(Layout::FullRewrite);
    }
    text.strip_prefix("paged:")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .map(|rows_per_page| Layout::Paged { rows_per_page })
        .ok_or_else(|| Error::InvalidManifest {
            reason: format!("unknown layout {text:?} in {LAYOUT_PROPERTY}"),
        })
}
