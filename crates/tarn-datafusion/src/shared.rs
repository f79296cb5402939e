//! The table handle a provider and the statements it plans share: the Tarn table, locked
//! while a statement changes it, and the snapshot queries plan against, readable at any
//! time (planning must not wait on, or fail for, a statement in progress).

use std::sync::{Arc, PoisonError, RwLock};

use datafusion::common::Statistics;
use tarn::{Snapshot, Table};

/// A Tarn table shared by a provider and its statements.
#[derive(Debug)]
pub(crate) struct SharedTable {
    table: tokio::sync::Mutex<Table>,
    current: RwLock<Current>,
}

/// The snapshot queries read, and its statistics once computed.
#[derive(Debug)]
struct Current {
    snapshot: Snapshot,
    statistics: Option<Arc<Statistics>>,
}

impl SharedTable {
    pub(crate) fn new(table: Table) -> Arc<Self> {
        let snapshot = table.snapshot().clone();
        Arc::new(Self {
            table: tokio::sync::Mutex::new(table),
            current: RwLock::new(Current {
                snapshot,
                statistics: None,
            }),
        })
    }

    /// The table, for a statement to change; call [`publish`](Self::publish) after.
    pub(crate) async fn lock(&self) -> tokio::sync::MutexGuard<'_, Table> {
        self.table.lock().await
    }

    /// The snapshot queries plan against now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        current.snapshot.clone()
    }

    /// Makes `table`'s snapshot the one queries read (after a commit or a refresh).
    pub(crate) fn publish(&self, table: &Table) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.snapshot.version() != table.snapshot().version() {
            *current = Current {
                snapshot: table.snapshot().clone(),
                statistics: None,
            };
        }
    }

    /// The statistics of `snapshot`, computed by `compute` once per version of the
    /// current snapshot.
    pub(crate) fn statistics(
        &self,
        snapshot: &Snapshot,
        compute: impl FnOnce(&Snapshot) -> Option<Statistics>,
    ) -> Option<Arc<Statistics>> {
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if current.snapshot.version() == snapshot.version()
                && let Some(statistics) = &current.statistics
            {
                return Some(Arc::clone(statistics));
            }
        }
        let statistics = Arc::new(compute(snapshot)?);
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.snapshot.version() == snapshot.version() {
            current.statistics = Some(Arc::clone(&statistics));
        }
        Some(statistics)
    }
}
