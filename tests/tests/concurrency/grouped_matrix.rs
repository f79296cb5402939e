//! The conflict matrix grouped: every pair of operations prepared on one version and
//! committed in one commit (group commit), at every isolation level, must end exactly as
//! the serial matrix (`conflict_matrix.rs`, `EXPECTED`) says.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use tarn::{Error, IsolationLevel, Table};
use tarn_store::{Fault, FaultOp, FaultRule, FaultStore};
use tarn_tests::grouped::proposal_published;
use tarn_tests::log::commit_info_at;
use tarn_tests::matrix::{Backend, EXPECTED, LEVELS, Op, cell_table, code, run};

/// Every pair again, but with both operations prepared on the same version and grouped
/// into one commit: `second` loses the race for a version to a carrier commit (an
/// unrelated application transaction), publishes its proposal and is held at the gate
/// with its PUT of the next version in flight; `first` then wins that version, carrying
/// `second`'s proposal when the checker lets it. `second` must end exactly as it would
/// committing alone after `first` (the cell of `EXPECTED`), and when it commits, it does so
/// inside `first`'s commit or alone after it, never both. Returns the outcome code and
/// whether `second` rode in `first`'s commit.
async fn grouped_cell(
    second: Op,
    first: Op,
    level: IsolationLevel,
) -> Result<(String, bool), String> {
    let (url, options) = Backend::Memory.url();
    let setup = cell_table(&url, &options).await;
    let base = setup.version();
    let location = tarn_store::open_with_options(&url, &options).unwrap();
    let gated = FaultStore::new(Arc::clone(location.store()), 0).with_rule(
        FaultRule::new(FaultOp::Put, Fault::Hold)
            .with_glob(format!("*_delta_log/{:020}.json", base + 2)),
    );
    let gate = gated.control().gate();
    let mut f = Table::open_at(location.clone())
        .await
        .unwrap()
        .with_isolation(level);
    let mut s = Table::open_at(location.clone().with_store(Arc::new(gated)))
        .await
        .unwrap()
        .with_isolation(level);
    let mut carrier = setup.transaction();
    carrier.set_app_transaction("carrier", 1);
    let _ = carrier.commit().await.unwrap();
    let held = tokio::spawn(async move {
        let result = run(second, &mut s).await;
        (result, s.version())
    });
    gate.arrived(Duration::from_secs(60))
        .await
        .expect("no PUT reached the gate");
    // The proposal goes up beside the held PUT: wait for it where the work is carriable
    // (no metadata change; these tables' deletion vectors are small enough to be inline).
    let carriable = !matches!(second, Op::AddColumn | Op::SetProperty);
    if carriable && !proposal_published(&location, base + 1).await {
        return Err("the second published no proposal".into());
    }
    let first_result = run(first, &mut f).await;
    gate.open();
    let (result, s_version) = held.await.unwrap();
    first_result.map_err(|e| format!("the first failed: {e}"))?;
    if f.version() != base + 2 {
        return Err(format!(
            "the first committed {}, not {}",
            f.version(),
            base + 2
        ));
    }
    let names_second = |info: &serde_json::Value, id: &str| {
        info["tarnGroup"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|v| v.as_str() == Some(id)))
    };
    let info = |version: i64| {
        let location = location.clone();
        async move { commit_info_at(&location, version).await.unwrap() }
    };
    let grouped_info = info(base + 2).await;
    let carried = grouped_info["tarnGroup"]
        .as_array()
        .is_some_and(|ids| !ids.is_empty());
    match &result {
        Ok(_) if s_version == base + 2 => {
            if !carried {
                return Err("the second is at the first's version, which carried nothing".into());
            }
        }
        Ok(_) if s_version == base + 3 => {
            let alone = info(base + 3).await;
            let id = alone["txnId"].as_str().unwrap_or_default();
            if names_second(&grouped_info, id) {
                return Err("the second committed alone and inside the first's commit".into());
            }
        }
        Ok(_) => return Err(format!("the second committed at {s_version}")),
        Err(Error::Conflict {
            winning_version, ..
        }) if *winning_version != base + 2 => {
            return Err(format!(
                "conflict names version {winning_version}, not {}",
                base + 2
            ));
        }
        Err(_) if carried => {
            return Err("the second failed, yet the first's commit carried a proposal".into());
        }
        Err(_) => {}
    }
    Ok((code(&result), s_version == base + 2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_grouped_into_one_commit_ends_as_committed_one_by_one() {
    let mut failures = Vec::new();
    let mut grouped = Vec::new();
    for (second, first, expected) in EXPECTED {
        // A checkpoint commits nothing, so there is nothing to group.
        if *second == Op::Checkpoint || *first == Op::Checkpoint {
            continue;
        }
        let expected: Vec<&str> = expected.split_whitespace().collect();
        for (level, want) in LEVELS.iter().zip(expected) {
            match grouped_cell(*second, *first, *level).await {
                Ok((got, rode)) if got == want => {
                    if rode {
                        grouped.push((*second, *first, *level));
                    }
                }
                Ok((got, _)) => failures.push(format!(
                    "{second:?} grouped after {first:?} at {level:?}: got {got}, expected {want}"
                )),
                Err(e) => failures.push(format!(
                    "{second:?} grouped after {first:?} at {level:?}: {e}"
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Work that another writer can carry was carried: appends, overwrites, partition
    // deletes, copy-on-write deletes, and merge-on-read deletes and updates, their
    // deletion vectors united with the first's on one file; metadata changes commit alone.
    for level in LEVELS {
        for (second, first) in [
            (Op::Append("A"), Op::Append("A")),
            (Op::Append("B"), Op::DeletePartition("A")),
            (Op::DeletePartition("B"), Op::Append("A")),
            (Op::DeleteRow(1, false), Op::Append("A")),
            (Op::DeleteRow(1, true), Op::Append("A")),
            (Op::DeleteRow(3, true), Op::DeleteRow(1, true)),
            (Op::UpdateRow(2), Op::DeleteRow(1, true)),
            (Op::DeleteRow(1, true), Op::UpdateRow(2)),
        ] {
            assert!(
                grouped.contains(&(second, first, level)),
                "{second:?} was not carried by {first:?} at {level:?}"
            );
        }
    }
    assert!(
        !grouped
            .iter()
            .any(|(s, _, _)| matches!(s, Op::AddColumn | Op::SetProperty)),
        "a metadata change rode in another commit"
    );
}
