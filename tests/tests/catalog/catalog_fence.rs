//! The catalog torture test's failure, made deterministic on the local file system: a
//! catalog writer is killed while its create of `w0$t1` waits as a group-commit proposal;
//! its restart finds the table missing and does the step its own way (creates the final
//! name `w0$r1`); a later commit by another writer that lists the proposals would carry
//! the dead create, and the old name would be listed beside the new one. With a writer
//! id, the restart fences the writer when it opens the catalog, and the create never
//! lands. The run without a writer id shows the hole the fence closes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use tarn::{StoreLocation, Table};
use tarn_catalog::{Catalog, CatalogOptions, IfExists, ObjectMetadata};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::catalog::{id, schema};
use tarn_tests::grouped::proposal_published;

/// A commit to the manifest that touches no entry (an application transaction): other
/// writers lose the race for its version without conflicting with it.
async fn bump(manifest: &StoreLocation, n: i64) {
    let mut table = Table::open_at(manifest.clone()).await.unwrap();
    let mut txn = table.transaction().with_operation("BUMP");
    txn.set_app_transaction("bump", n);
    let _ = table.commit(txn).await.unwrap();
}

fn options(writer: Option<&str>) -> CatalogOptions {
    CatalogOptions {
        writer: writer.map(str::to_string),
        ..CatalogOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_pending_create_never_lands_after_its_restart_fenced() {
    for fenced in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = tarn_store::open(dir.path().to_str().unwrap()).unwrap();
        let manifest = tarn_store::open(&format!("{}/__manifest", root.url())).unwrap();
        let writer = fenced.then_some("w0");
        let setup = Catalog::open_at(root.clone(), options(None)).await.unwrap();
        setup
            .create_namespace(&id("w0"), ObjectMetadata::default(), IfExists::Fail)
            .await
            .unwrap();

        // The first incarnation, loaded (and fenced) before another commit lands: its
        // create loses that race, publishes its proposal beside its next PUT, which is
        // held, and the process dies there.
        let faulty = FaultStore::new(Arc::clone(root.store()), 3);
        let faults = faulty.control();
        let first = Catalog::open_at(root.clone().with_store(Arc::new(faulty)), options(writer))
            .await
            .unwrap();
        let base = first.snapshot().await.unwrap().version();
        bump(&manifest, 1).await;
        faults.add_rule(
            FaultRule::new(FaultOp::Put, Fault::Hold)
                .with_glob(format!("*__manifest/_delta_log/{:020}.json", base + 2)),
        );
        let gate = faults.gate();
        let held = tokio::spawn(async move {
            first
                .create_table(
                    &id("w0$t1"),
                    &schema(),
                    Vec::new(),
                    ObjectMetadata::default(),
                )
                .await
        });
        gate.arrived(Duration::from_secs(60))
            .await
            .expect("no manifest PUT reached the gate");
        assert!(proposal_published(&manifest, base + 1).await, "no proposal");
        held.abort();
        let _ = held.await;

        // The restart finds the step undone and does it its own way.
        let restarted = Catalog::open_at(root.clone(), options(writer))
            .await
            .unwrap();
        assert!(!restarted.table_exists(&id("w0$t1")).await.unwrap());
        restarted
            .create_table(
                &id("w0$r1"),
                &schema(),
                Vec::new(),
                ObjectMetadata::default(),
            )
            .await
            .unwrap();

        // Another writer loses one race, so it lists the proposals, then commits.
        let other = Catalog::open_at(root.clone(), options(None)).await.unwrap();
        let _ = other.snapshot().await.unwrap();
        bump(&manifest, 2).await;
        other
            .create_namespace(&id("z9"), ObjectMetadata::default(), IfExists::Fail)
            .await
            .unwrap();

        let check = Catalog::open_at(root.clone(), options(None)).await.unwrap();
        assert!(check.table_exists(&id("w0$r1")).await.unwrap());
        let old_name_back = check.table_exists(&id("w0$t1")).await.unwrap();
        assert_eq!(
            old_name_back, !fenced,
            "fenced: {fenced}: the dead create landed: {old_name_back}"
        );
    }
}
