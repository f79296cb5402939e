//! The `tarn` binary, built by Cargo and run as a user would: every command against a
//! local table, the catalog commands, and a table on S3 (MinIO) through the `AWS_*`
//! variables. JSON output is parsed and checked against what the library says; failures
//! are checked by exit code and message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;
use tarn::expr::{col, lit};
use tarn::{ChangeStrategy, Table};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("country", DataType::Utf8, true),
    ]))
}

fn rows(start: i64, end: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..end).collect();
    let names: StringArray = ids.iter().map(|i| Some(format!("n{i}"))).collect();
    let countries: StringArray = ids
        .iter()
        .map(|i| Some(if i % 2 == 0 { "NL" } else { "FR" }))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(names),
            Arc::new(countries),
        ],
    )
    .unwrap()
}

/// A table with three appends (10, 20, 30 rows), a merge-on-read delete of ids below 5
/// and a BTree index on `id`.
async fn table_at(url: &str, options: &tarn::StoreOptions) -> Table {
    let mut table = Table::create(url)
        .with_store_options(options.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    table.append([rows(0, 10)]).await.unwrap();
    table.append([rows(10, 30)]).await.unwrap();
    table.append([rows(30, 60)]).await.unwrap();
    table
        .delete(col("id").lt(lit(5i64)))
        .with_strategy(ChangeStrategy::MergeOnRead)
        .execute()
        .await
        .unwrap();
    table.create_index("id").execute().await.unwrap();
    table
}

fn tarn(args: &[&str]) -> Output {
    tarn_with(args, &[])
}

fn tarn_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tarn"));
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run tarn")
}

/// Runs `tarn --json <args>`, checks it succeeded and parses its output.
fn json(args: &[&str]) -> Value {
    json_with(args, &[])
}

fn json_with(args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = tarn_with(&all, env);
    assert!(
        out.status.success(),
        "tarn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "tarn {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Checks `out` failed with `code` and said `needle` on standard error.
fn fails(out: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspecting_commands_say_what_the_library_says() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("t");
    let url = url.to_str().unwrap();
    let table = table_at(url, &tarn::StoreOptions::default()).await;
    let detail = table.describe().unwrap();

    let d = json(&["describe", url]);
    assert_eq!(d["version"], table.version());
    assert_eq!(d["files"], detail.files);
    assert_eq!(d["rows"], 55);
    assert_eq!(d["deleted_rows"], 5);
    assert_eq!(d["partition_columns"], serde_json::json!(["country"]));
    assert_eq!(d["indices"][0]["name"], "id_idx");
    assert_eq!(d["schema"]["fields"][0]["name"], "id");
    assert!(
        d["writer_features"]
            .as_array()
            .unwrap()
            .contains(&Value::from("deletionVectors"))
    );
    let old = json(&["describe", url, "--version", "1"]);
    assert_eq!(old["rows"], 10);

    let h = json(&["history", url]);
    let versions: Vec<i64> = h
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, (0..=table.version()).rev().collect::<Vec<_>>());
    assert_eq!(
        h[h.as_array().unwrap().len() - 1]["operation"],
        "CREATE TABLE"
    );
    assert_eq!(h[1]["operation"], "DELETE");
    let limited = json(&["history", url, "--limit", "2"]);
    assert_eq!(limited.as_array().unwrap().len(), 2);

    let f = json(&["files", url]);
    let files = f.as_array().unwrap();
    assert_eq!(files.len(), detail.files);
    let deleted: i64 = files
        .iter()
        .map(|f| f["deleted_rows"].as_i64().unwrap())
        .sum();
    assert_eq!(deleted, 5);
    assert!(files.iter().all(|f| f["partition.country"].is_string()));

    // Readable output is a table with the same facts.
    let out = tarn(&["describe", url]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("partitioned by") && l.trim_end().ends_with(" country")),
        "{text}"
    );
    assert!(text.contains("id_idx (btree on id"), "{text}");
    let out = tarn(&["history", url]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("CREATE TABLE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_sql_write_rows_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("t");
    let url = url.to_str().unwrap();
    table_at(url, &tarn::StoreOptions::default()).await;

    let out = tarn(&[
        "scan",
        url,
        "--filter",
        "id < 8 AND country = 'NL'",
        "--columns",
        "id,name",
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.remove(0), "id,name");
    lines.sort();
    assert_eq!(lines, ["6,n6"], "ids 0-4 are deleted, 5 and 7 are FR");

    let out = tarn(&["--json", "scan", url, "--version", "1", "--limit", "3"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 3, "{text}");
    for line in text.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        assert!(row["id"].as_i64().unwrap() < 10);
    }

    let parquet = dir.path().join("out.parquet");
    let out = tarn(&[
        "scan",
        url,
        "--format",
        "parquet",
        "--output",
        parquet.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: usize = tarn_test_support::read_parquet_file(&parquet)
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(written, 55);

    let out = tarn(&["scan", url, "--limit", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| id") && text.contains("+--"), "{text}");

    let table_arg = format!("t={url}");
    let out = tarn(&[
        "sql",
        "SELECT country, count(*) AS n FROM t GROUP BY country ORDER BY country",
        "--table",
        &table_arg,
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["country"], "FR");
    assert_eq!(rows[0]["n"], 28);
    assert_eq!(rows[1]["country"], "NL");
    assert_eq!(rows[1]["n"], 27);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_commands_change_the_table_as_the_library_would() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("t");
    let url = url.to_str().unwrap();
    let table = table_at(url, &tarn::StoreOptions::default()).await;
    let latest = table.version();

    let restored = json(&["restore", url, "--to-version", "2"]);
    assert_eq!(restored["version"], latest + 1);
    assert_eq!(restored["restored_version"], 2);
    let reopened = Table::open(url).await.unwrap();
    assert_eq!(reopened.describe().unwrap().rows, Some(30));
    assert_eq!(
        reopened.history(Some(1)).await.unwrap()[0]
            .operation
            .as_deref(),
        Some("RESTORE")
    );

    let optimized = json(&["optimize", url]);
    assert!(
        optimized["files_removed"].as_u64().unwrap() >= 2,
        "{optimized}"
    );
    let after = Table::open(url).await.unwrap();
    assert_eq!(after.describe().unwrap().rows, Some(30));

    let vacuum = json(&["vacuum", url, "--dry-run"]);
    assert_eq!(vacuum["dry_run"], true);
    assert_eq!(
        vacuum["files"].as_array().unwrap().len(),
        0,
        "all files are young"
    );
    let checkpoint = json(&["checkpoint", url]);
    assert_eq!(checkpoint["version"], after.version());
    assert!(dir.path().join("t/_delta_log/_last_checkpoint").exists());
    let cleanup = json(&["cleanup", url, "--dry-run"]);
    assert_eq!(cleanup["commits"], 0, "nothing is older than 30 days");
    assert_eq!(cleanup["dry_run"], true);

    let created = json(&["index", "create", url, "name", "--kind", "bitmap"]);
    assert_eq!(created["name"], "name_idx");
    let listed = json(&["index", "list", url]);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["id_idx", "name_idx"]);
    json(&["index", "drop", url, "id_idx"]);
    let listed = json(&["index", "list", url]);
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_with_the_code_of_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("t");
    let url = url.to_str().unwrap();
    let table = table_at(url, &tarn::StoreOptions::default()).await;

    let missing = dir.path().join("nothing");
    fails(
        &tarn(&["describe", missing.to_str().unwrap()]),
        4,
        "no Delta table",
    );
    fails(
        &tarn(&["describe", url, "--version", "99"]),
        4,
        "version 99",
    );
    fails(
        &tarn(&["index", "drop", url, "nope"]),
        4,
        "no index \"nope\"",
    );
    fails(
        &tarn(&["scan", url, "--filter", "id <"]),
        3,
        "SQL expression",
    );
    fails(
        &tarn(&["scan", url, "--columns", "nope"]),
        3,
        "unknown column",
    );
    fails(&tarn(&["scan", url, "--format", "parquet"]), 3, "--output");
    fails(
        &tarn(&["restore", url, "--to-version", &table.version().to_string()]),
        3,
        "only an earlier version",
    );
    fails(
        &tarn(&["restore", url, "--to-timestamp", "yesterday"]),
        3,
        "RFC 3339",
    );
    fails(&tarn(&["sql", "SELEC 1"]), 3, "SQL");
    fails(
        &tarn(&["--store-option", "novalue", "describe", url]),
        3,
        "KEY=VALUE",
    );
    // Usage errors are the argument parser's.
    assert_eq!(tarn(&["restore", url]).status.code(), Some(2));
    assert_eq!(tarn(&["frobnicate"]).status.code(), Some(2));
    // Nothing was committed by any of them.
    assert_eq!(Table::open(url).await.unwrap().version(), table.version());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_commands_list_describe_create_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("catalog");
    let url = root.to_str().unwrap();

    fails(&tarn(&["catalog", "list", url]), 4, "no Tarn catalog");
    assert!(
        !root.join("__manifest").exists(),
        "a read does not create a catalog"
    );

    json(&[
        "catalog",
        "create-namespace",
        url,
        "sales",
        "--description",
        "money",
        "--property",
        "owner=ops",
    ]);
    json(&["catalog", "create-namespace", url, "sales.eu"]);
    let catalog = tarn_catalog::Catalog::open(url, tarn_catalog::CatalogOptions::default())
        .await
        .unwrap();
    let orders = tarn_catalog::ObjectId::new(["sales", "orders"]).unwrap();
    catalog
        .create_table(
            &orders,
            &schema(),
            vec![],
            tarn_catalog::ObjectMetadata::default(),
        )
        .await
        .unwrap();

    let listed = json(&["catalog", "list", url]);
    assert_eq!(listed["namespaces"], serde_json::json!(["sales"]));
    let listed = json(&["catalog", "list", url, "sales"]);
    assert_eq!(listed["namespaces"], serde_json::json!(["sales.eu"]));
    assert_eq!(listed["tables"], serde_json::json!(["sales.orders"]));

    let ns = json(&["catalog", "describe", url, "sales"]);
    assert_eq!(ns["type"], "namespace");
    assert_eq!(ns["description"], "money");
    assert_eq!(ns["properties"]["owner"], "ops");
    let t = json(&["catalog", "describe", url, "sales.orders"]);
    assert_eq!(t["type"], "table");
    assert_eq!(t["version"], 0);
    let described = json(&["describe", t["url"].as_str().unwrap()]);
    assert_eq!(described["version"], 0);

    let catalog_arg = format!("c={url}");
    let out = tarn(&[
        "sql",
        "SELECT count(*) AS n FROM c.sales.orders",
        "--catalog",
        &catalog_arg,
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "n\n0");

    fails(&tarn(&["catalog", "drop", url, "sales"]), 3, "sales");
    json(&["catalog", "drop", url, "sales.orders"]);
    json(&["catalog", "drop", url, "sales", "--cascade"]);
    let listed = json(&["catalog", "list", url]);
    assert_eq!(listed["namespaces"], serde_json::json!([]));
    fails(&tarn(&["catalog", "describe", url, "sales"]), 4, "sales");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_reach_azure_and_gcs_through_their_variables() {
    let azure = tarn_test_support::azurite::azure();
    let gcs = tarn_test_support::gcs::gcs();
    let clouds = [
        (azure.url("cli"), azure.options(), azure.env()),
        (gcs.url("cli"), gcs.options(), gcs.env()),
    ];
    for (url, options, env) in clouds {
        let table = table_at(&url, &options).await;
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let d = json_with(&["describe", &url], &env);
        assert_eq!(d["version"], table.version(), "{url}");
        assert_eq!(d["rows"], 55, "{url}");
        let out = tarn_with(
            &["scan", &url, "--filter", "id = 42", "--format", "csv"],
            &env,
        );
        assert!(
            out.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "id,name,country\n42,n42,NL\n",
            "{url}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_reach_s3_through_the_aws_variables() {
    let server = tarn_test_support::minio::s3();
    let url = server.url(&tarn_test_support::unique("cli"));
    let table = table_at(&url, &server.options()).await;
    let env = [
        ("AWS_ENDPOINT", server.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", server.access_key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", server.secret_key.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let d = json_with(&["describe", &url], &env);
    assert_eq!(d["version"], table.version());
    assert_eq!(d["rows"], 55);
    let h = json_with(&["history", &url, "--limit", "1"], &env);
    assert_eq!(h[0]["operation"], "CREATE INDEX");
    let out = tarn_with(
        &["scan", &url, "--filter", "id = 42", "--format", "csv"],
        &env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "id,name,country\n42,n42,NL\n"
    );
    let restored = json_with(&["restore", &url, "--to-version", "1"], &env);
    assert_eq!(restored["restored_version"], 1);
    let cleanup = json_with(&["cleanup", &url], &env);
    assert_eq!(cleanup["commits"], 0);

    // Flags instead of variables: the endpoint and credentials as options.
    let flags = [
        "--endpoint",
        server.endpoint.as_str(),
        "--region",
        "us-east-1",
        "--allow-http",
        "--store-option",
    ];
    let key = format!("aws_access_key_id={}", server.access_key);
    let secret = format!("aws_secret_access_key={}", server.secret_key);
    let mut args: Vec<&str> = vec!["--json"];
    args.extend_from_slice(&flags);
    args.extend([
        key.as_str(),
        "--store-option",
        secret.as_str(),
        "describe",
        &url,
    ]);
    let out = tarn(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["rows"], 10);

    // A wrong secret is a store failure.
    let bad = [
        ("AWS_ENDPOINT", server.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", server.access_key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", "wrong"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let out = tarn_with(&["describe", &url], &bad);
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
