//! A catalog's log under many mutations: one catalog with log cleanup after its
//! checkpoints, one with it turned off, each taking the same mutations one commit at a
//! time: the creation of a fixed set of namespaces, then property changes to them in
//! turn, so the catalog keeps its size and only its log can grow. At every tenth of the
//! way, the objects under the manifest's `_delta_log` and a cold open of the catalog (a
//! new handle describing one namespace) are measured, so whether the log stays bounded,
//! and what a long log costs a cold open, is on record.

use std::time::Duration;

use futures::TryStreamExt;
use tarn_catalog::{Catalog, CatalogOptions, IfExists, ObjectId, ObjectMetadata};

use crate::report::{Record, Reporter};
use crate::{Bench, BenchError, Summary, sample};

/// Runs `mutations` mutations on each catalog of `cases` (log cleanup on, off), the
/// manifest's log and tombstone retention set to `retention` (a catalog's hour, shrunk
/// to the run's length): `namespaces` creations, then property changes of those
/// namespaces in turn.
///
/// Fails when the catalog or its store fails.
pub async fn catalog_log(
    bench: &Bench,
    mutations: usize,
    namespaces: usize,
    retention: Duration,
    cases: &[bool],
    reporter: &mut Reporter,
) -> Result<(), BenchError> {
    let namespaces = namespaces.max(1);
    let step = (mutations / 10).max(1);
    for &cleanup in cases {
        let name = if cleanup {
            "catalog-log-cleaned"
        } else {
            "catalog-log-kept"
        };
        bench.clear(name).await?;
        let url = bench.url(name);
        let options = CatalogOptions {
            store: bench.options.clone(),
            ..CatalogOptions::default()
        };
        // The first mutation creates the manifest; its properties are set before the rest,
        // through a handle of its own.
        let first = Catalog::open(&url, options.clone()).await?;
        first
            .create_namespace(&namespace(0)?, ObjectMetadata::default(), IfExists::Fail)
            .await?;
        drop(first);
        let mut manifest =
            tarn::Table::open_with_options(&format!("{url}/__manifest"), &bench.options).await?;
        let retention_text = format!("interval {} seconds", retention.as_secs());
        let _ = manifest
            .set_properties([
                ("delta.logRetentionDuration", retention_text.as_str()),
                (
                    "delta.deletedFileRetentionDuration",
                    retention_text.as_str(),
                ),
                (
                    "delta.enableExpiredLogCleanup",
                    if cleanup { "true" } else { "false" },
                ),
            ])
            .await?;
        let catalog = Catalog::open(&url, options.clone()).await?;
        let started = std::time::Instant::now();
        for i in 1..mutations {
            if i < namespaces {
                catalog
                    .create_namespace(&namespace(i)?, ObjectMetadata::default(), IfExists::Fail)
                    .await?;
            } else {
                let revision = vec![("revision".to_string(), i.to_string())];
                catalog
                    .alter_namespace(&namespace(i % namespaces)?, revision, Vec::new())
                    .await?;
            }
            if (i + 1) % step == 0 || i + 1 == mutations {
                tarn::settle_background_work(Duration::from_secs(60)).await;
                let objects = log_objects(bench, name).await?;
                let mut opens = Vec::new();
                for run in 0..bench.runs {
                    let measured = bench.measured(name, run)?;
                    let (_, open) = sample(&measured.counter, async {
                        let cold =
                            Catalog::open_at(measured.location.clone(), options.clone()).await?;
                        cold.describe_namespace(&namespace(0)?).await
                    })
                    .await?;
                    opens.push(open);
                }
                let summary = Summary::of(&opens);
                reporter.push(
                    Record::new(
                        "catalog-log",
                        format!(
                            "{} after {} mutations",
                            if cleanup { "cleanup" } else { "no cleanup" },
                            i + 1
                        ),
                        summary,
                    )
                    .field("cleanup", cleanup)
                    .field("mutations", (i + 1) as u64)
                    .field("namespaces", namespaces.min(i + 1) as u64)
                    .field("log_objects", objects as u64)
                    .field("elapsed_s", started.elapsed().as_secs_f64())
                    .field("retention_s", retention.as_secs()),
                )?;
            }
        }
    }
    Ok(())
}

fn namespace(i: usize) -> Result<ObjectId, tarn_catalog::Error> {
    ObjectId::parse(&format!("ns{i:07}"))
}

/// Objects under the manifest's `_delta_log` of the catalog `name` (proposals and claims
/// included).
async fn log_objects(bench: &Bench, name: &str) -> Result<usize, BenchError> {
    let location = bench.plain(&format!("{name}/__manifest/_delta_log"))?;
    let listed: Vec<_> = location
        .store()
        .list(Some(location.root()))
        .try_collect()
        .await?;
    Ok(listed.len())
}
