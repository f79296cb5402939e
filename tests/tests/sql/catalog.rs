//! Tarn tables found by name: a Tarn catalog as a DataFusion catalog (namespaces as
//! schemas), `CREATE EXTERNAL TABLE ... STORED AS TARN`, and the `tarn_table` time-travel
//! function.

use std::sync::Arc;

use arrow::util::pretty::pretty_format_batches;
use datafusion::catalog::CatalogProvider;
use datafusion::prelude::SessionContext;
use tarn::Table;
use tarn_catalog::{Catalog, CatalogOptions, IfExists, ObjectMetadata};
use tarn_datafusion::{ROOT_SCHEMA, TarnCatalogProvider};
use tarn_tests::catalog::id;
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::python::read_with_duckdb;
use tarn_tests::rows::row_count;

use super::{run, sales};

/// `sql`'s answer as text.
async fn text(ctx: &SessionContext, sql: &str) -> String {
    pretty_format_batches(&run(ctx, sql).await)
        .unwrap()
        .to_string()
}

/// The error `sql` fails with, planning or running.
async fn error(ctx: &SessionContext, sql: &str) -> String {
    let result = match ctx.sql(sql).await {
        Ok(frame) => frame.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    result.expect_err(sql).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalogs_namespaces_are_schemas_and_its_tables_take_statements() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path().to_str().unwrap(), CatalogOptions::default())
        .await
        .unwrap();
    let none = ObjectMetadata::default();
    for namespace in ["sales", "sales$eu"] {
        catalog
            .create_namespace(&id(namespace), none.clone(), IfExists::Fail)
            .await
            .unwrap();
    }
    for (table, rows) in [("sales$orders", 100), ("sales$eu$returns", 10), ("misc", 5)] {
        catalog
            .create_table(&id(table), &sales_schema(), vec![], none.clone())
            .await
            .unwrap();
        let mut opened = catalog.load_table(&id(table)).await.unwrap();
        opened.append([sales_batch(0, rows)]).await.unwrap();
    }

    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);
    let lake = TarnCatalogProvider::new(catalog.clone()).await.unwrap();
    assert_eq!(lake.schema_names(), [ROOT_SCHEMA, "sales", "sales$eu"]);
    ctx.register_catalog("lake", Arc::new(lake));

    let counted = text(
        &ctx,
        "SELECT (SELECT count(*) FROM lake.sales.orders) AS orders, \
                (SELECT count(*) FROM lake.\"sales$eu\".returns) AS returns, \
                (SELECT count(*) FROM lake.public.misc) AS misc",
    )
    .await;
    assert!(counted.contains("| 100    | 10      | 5    |"), "{counted}");

    // Each statement opens the table at its latest version, so a write is seen next.
    run(
        &ctx,
        "INSERT INTO lake.sales.orders SELECT * FROM lake.public.misc",
    )
    .await;
    run(&ctx, "DELETE FROM lake.sales.orders WHERE id < 3").await;
    // 100 + 5 rows, less ids 0, 1 and 2 of each.
    let counted = text(&ctx, "SELECT count(*) AS n FROM lake.sales.orders").await;
    assert!(counted.contains("| 99 |"), "{counted}");
    let opened = catalog.load_table(&id("sales$orders")).await.unwrap();
    assert_eq!(opened.snapshot().version(), 3, "append, insert, delete");

    let err = error(&ctx, "SELECT * FROM lake.sales.missing").await;
    assert!(err.contains("missing"), "{err}");

    // CREATE TABLE AS SELECT makes a catalog table whose version 0 holds the rows.
    run(
        &ctx,
        "CREATE TABLE lake.sales.few AS SELECT id, customer, amount FROM lake.sales.orders \
         WHERE id < 10",
    )
    .await;
    let few = catalog.load_table(&id("sales$few")).await.unwrap();
    assert_eq!(few.snapshot().version(), 0, "one commit");
    // Ids 3 to 9 of the orders, and 3 and 4 of the rows copied from misc.
    let counted = text(&ctx, "SELECT count(*) AS n FROM lake.sales.few").await;
    assert!(counted.contains("| 9 |"), "{counted}");
    run(
        &ctx,
        "CREATE TABLE lake.public.empty (id BIGINT, name VARCHAR)",
    )
    .await;
    let empty = catalog.load_table(&id("empty")).await.unwrap();
    assert_eq!(empty.snapshot().arrow_schema().fields().len(), 2);
    let err = error(&ctx, "CREATE TABLE lake.sales.few AS SELECT 1 AS id").await;
    assert!(err.contains("exists"), "{err}");
    let listed = catalog.list_tables(&id("sales"), 10, None).await.unwrap();
    assert_eq!(listed.ids, [id("sales$few"), id("sales$orders")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_external_table_opens_a_tarn_table_or_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("sales");
    sales(&existing).await;
    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);

    let location = existing.to_str().unwrap();
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE s STORED AS TARN LOCATION '{location}'"),
    )
    .await;
    let counted = text(&ctx, "SELECT count(*) AS n FROM s").await;
    assert!(counted.contains("| 342 |"), "{counted}");
    // As of version 2: the first two appends, before the delete.
    run(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s2 STORED AS TARN LOCATION '{location}' OPTIONS ('version' '2')"
        ),
    )
    .await;
    let counted = text(&ctx, "SELECT count(*) AS n FROM s2").await;
    assert!(counted.contains("| 200 |"), "{counted}");
    // A past version is read-only.
    let err = error(&ctx, "INSERT INTO s2 SELECT * FROM s LIMIT 1").await;
    assert!(err.contains("past version"), "{err}");
    let err = error(&ctx, "DELETE FROM s2 WHERE id = 1").await;
    assert!(err.contains("past version"), "{err}");
    let err = error(
        &ctx,
        &format!("CREATE EXTERNAL TABLE bad (id BIGINT) STORED AS TARN LOCATION '{location}'"),
    )
    .await;
    assert!(err.contains("leave the columns out"), "{err}");

    // With columns and no table there, the statement makes one.
    let fresh = dir.path().join("fresh");
    let location = fresh.to_str().unwrap();
    let create_fresh = format!(
        "CREATE EXTERNAL TABLE fresh (id BIGINT NOT NULL, name VARCHAR, country VARCHAR) \
         STORED AS TARN PARTITIONED BY (country) LOCATION '{location}'"
    );
    run(&ctx, &create_fresh).await;
    run(
        &ctx,
        "INSERT INTO fresh VALUES (1, 'a', 'NL'), (2, 'b', 'FR'), (3, NULL, 'NL')",
    )
    .await;
    let table = Table::open(location).await.unwrap();
    assert_eq!(table.snapshot().partition_columns().len(), 1);
    assert_eq!(table.snapshot().version(), 1);
    let theirs = read_with_duckdb(&fresh);
    assert_eq!(theirs.rows, 3);
    // The same statement in another session opens the table: its VARCHAR columns (string
    // views to DataFusion) are the table's strings.
    let again = SessionContext::new();
    tarn_datafusion::register(&again);
    run(&again, &create_fresh).await;
    assert_eq!(row_count(&run(&again, "SELECT * FROM fresh").await), 3);

    let err = error(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE nothing STORED AS TARN LOCATION '{}'",
            dir.path().join("nothing").display()
        ),
    )
    .await;
    assert!(err.contains("no Delta table"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tarn_table_reads_a_version_or_a_time() {
    let dir = tempfile::tempdir().unwrap();
    sales(dir.path()).await;
    let ctx = SessionContext::new();
    tarn_datafusion::register(&ctx);
    let location = dir.path().to_str().unwrap();

    let count = |args: String| {
        let ctx = ctx.clone();
        async move {
            let sql = format!("SELECT * FROM tarn_table({args})");
            row_count(&run(&ctx, &sql).await)
        }
    };
    // Version 0 is the empty table; each append added 100 rows; version 5 deleted the
    // multiples of 7.
    assert_eq!(count(format!("'{location}', 0")).await, 0);
    assert_eq!(count(format!("'{location}', 3")).await, 300);
    assert_eq!(count(format!("'{location}'")).await, 342);
    assert_eq!(
        count(format!("'{location}', '2999-01-01T00:00:00Z'")).await,
        342
    );
    assert_eq!(
        count(format!("'{location}', TIMESTAMP '2200-01-01T00:00:00Z'")).await,
        342
    );
    // A join of two versions: the rows the delete took.
    let gone = text(
        &ctx,
        &format!(
            "SELECT count(*) AS n FROM tarn_table('{location}', 4) a \
             LEFT JOIN tarn_table('{location}', 5) b ON a.id = b.id WHERE b.id IS NULL"
        ),
    )
    .await;
    assert!(gone.contains("| 58 |"), "{gone}");

    let err = error(&ctx, &format!("SELECT * FROM tarn_table('{location}', 9)")).await;
    assert!(err.contains('9'), "{err}");
    let err = error(&ctx, "SELECT * FROM tarn_table(1)").await;
    assert!(err.contains("takes a table URL"), "{err}");
    let err = error(
        &ctx,
        &format!("SELECT * FROM tarn_table('{location}', 'yesterday')"),
    )
    .await;
    assert!(err.contains("RFC 3339"), "{err}");
}
