//! Making one commit that carries another writer's work (group commit), at a known
//! version, so tests can show what other readers make of it.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use futures::future::BoxFuture;
use tarn::{CommitOutcome, StoreLocation, Table};

use crate::log::txn_ids_at;
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};

/// One writer's operation on its table handle, and its commit.
pub type Write =
    Box<dyn for<'a> FnOnce(&'a mut Table) -> BoxFuture<'a, tarn::Result<CommitOutcome>> + Send>;

/// An append of `batch`, as one writer's part of a grouped commit.
pub fn append_write(batch: RecordBatch) -> Write {
    Box::new(
        move |t: &mut Table| -> BoxFuture<'_, tarn::Result<CommitOutcome>> {
            Box::pin(async move { t.append([batch]).await.map(|o| o.commit) })
        },
    )
}

/// A DELETE of the rows matching `predicate` with `strategy`, as one writer's part of a
/// grouped commit.
pub fn delete_write(predicate: tarn::expr::Expr, strategy: tarn::ChangeStrategy) -> Write {
    Box::new(
        move |t: &mut Table| -> BoxFuture<'_, tarn::Result<CommitOutcome>> {
            Box::pin(async move {
                t.delete(predicate)
                    .with_strategy(strategy)
                    .execute()
                    .await
                    .map(|o| o.commit)
            })
        },
    )
}

/// Commits `first` and `carried`, both prepared on the table's latest version `v`, as one
/// commit at `v + 2` written by `first`'s handle and carrying `carried`'s proposal
/// (version `v + 1` is an unrelated application transaction that makes `carried` lose its
/// race and publish). Returns `v + 2`; panics unless the commit names both writers.
pub async fn commit_grouped(location: &StoreLocation, first: Write, carried: Write) -> i64 {
    let mut setup = Table::open_at(location.clone()).await.unwrap();
    let base = setup.version();
    let gated = FaultStore::new(Arc::clone(location.store()), 0).with_rule(
        FaultRule::new(FaultOp::Put, Fault::Hold)
            .with_glob(format!("*_delta_log/{:020}.json", base + 2)),
    );
    let gate = gated.control().gate();
    let mut f = Table::open_at(location.clone()).await.unwrap();
    let mut s = Table::open_at(location.clone().with_store(Arc::new(gated)))
        .await
        .unwrap();
    let mut other = setup.transaction();
    other.set_app_transaction(crate::unique("grouped"), 1);
    let _ = other.commit().await.unwrap();
    let held = tokio::spawn(async move { carried(&mut s).await });
    // Its PUT of `v + 2` is held; its proposal goes up beside it.
    gate.arrived(Duration::from_secs(60))
        .await
        .expect("no PUT reached the gate");
    assert!(
        proposal_published(location, base + 1).await,
        "the carried writer published no proposal"
    );
    let first = first(&mut f).await.unwrap();
    gate.open();
    let carried = held.await.unwrap().unwrap();
    let version = base + 2;
    assert_eq!((first.version, carried.version), (version, version));
    let named = txn_ids_at(location, version).await;
    assert_eq!(
        named,
        vec![first.txn_id, carried.txn_id],
        "version {version}"
    );
    setup.refresh().await.unwrap();
    version
}

/// Waits (up to 5 s) for a proposal from base `base` to be listed; false if none came.
/// Only that base counts: an earlier group's proposals may still be being deleted.
pub async fn proposal_published(location: &StoreLocation, base: i64) -> bool {
    let folder = location
        .root()
        .clone()
        .join("_delta_log")
        .join("_tarn_proposals");
    let from = format!("{base:020}.");
    for _ in 0..500 {
        let listed: Vec<_> = location
            .store()
            .list(Some(&folder))
            .try_collect()
            .await
            .unwrap();
        if listed
            .iter()
            .any(|m: &object_store::ObjectMeta| m.location.as_ref().contains(&from))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
