//! `FaultGate`: where requests a [`crate::FaultStore`] holds (`Fault::Hold`) wait until a
//! test lets them through.

use std::sync::Arc;
use std::time::Duration;

/// The gate that [`crate::Fault::Hold`] requests wait on: a test waits for a held request to
/// arrive, then opens the gate for it and every later one.
#[derive(Debug, Clone)]
pub struct FaultGate {
    arrived: Arc<tokio::sync::Notify>,
    open: Arc<tokio::sync::Semaphore>,
}

impl FaultGate {
    pub(crate) fn new() -> Self {
        Self {
            arrived: Arc::new(tokio::sync::Notify::new()),
            open: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }

    /// Waits until a held request has reached the gate.
    ///
    /// Fails with the time waited when none arrives within `within`.
    pub async fn arrived(&self, within: Duration) -> std::result::Result<(), Duration> {
        tokio::time::timeout(within, self.arrived.notified())
            .await
            .map_err(|_| within)
    }

    /// Lets every held request (and every later one) through.
    pub fn open(&self) {
        self.open
            .add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    pub(crate) async fn pass(&self) {
        self.arrived.notify_one();
        // The semaphore is never closed, so the acquire only waits.
        if let Ok(permit) = self.open.acquire().await {
            permit.forget();
        }
    }
}
