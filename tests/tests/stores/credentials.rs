//! Credentials never printed. A recognisable secret given every way a user can give one
//! (store options, the `AWS_*` environment, a URL's user information and query) appears
//! in no formatted public type that can hold it (`{}` and `{:?}`), nor in the errors of
//! failing paths that name a store or a URL: store options, locations, the S3 store
//! object_store builds, tables and snapshots on MinIO, and the errors of bad URLs, unknown
//! schemes, wrong credentials and missing tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Debug;
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use tarn::Table;
use tarn_store::{StoreLocation, StoreOptions};
use tarn_tests::fixtures::{sales_batch, sales_schema};
use tarn_tests::minio::s3;

const SECRET: &str = "tarn-secret-4f1d9c";
/// Set in the environment of the child process this file's environment test starts.
const CHILD_ENV: &str = "TARN_CREDENTIALS_CHILD";
/// The bucket the child reads, beside [`CHILD_ENV`] (which holds the endpoint).
const CHILD_BUCKET: &str = "TARN_CREDENTIALS_BUCKET";

/// Panics when `text` shows `secret`.
fn assert_hidden(secret: &str, what: &str, text: &str) {
    assert!(!text.contains(secret), "{what} shows the secret: {text}");
}

fn debug(value: &impl Debug) -> String {
    format!("{value:?}")
}

fn both(value: &(impl Debug + std::fmt::Display)) -> String {
    format!("{value} | {value:?}")
}

#[test]
fn store_options_print_their_keys_and_hide_their_secrets() {
    let options = StoreOptions::new()
        .with_credentials("AKIDEXAMPLE", SECRET)
        .with("session_token", SECRET)
        .with("aws_secret_access_key", SECRET)
        .with("azure_storage_sas_key", SECRET)
        .with("google_service_account_key", SECRET)
        .with_endpoint(format!("http://user:{SECRET}@127.0.0.1:9000"))
        .with_region("eu-west-1");
    let shown = debug(&options);
    assert_hidden(SECRET, "StoreOptions", &shown);
    for kept in [
        "secret_access_key",
        "session_token",
        "AKIDEXAMPLE",
        "eu-west-1",
        "127.0.0.1:9000",
        "***",
    ] {
        assert!(shown.contains(kept), "{kept} missing from {shown}");
    }
}

#[test]
fn urls_with_credentials_print_without_them_in_locations_and_errors() {
    // User information in an s3 URL: the location keeps the bucket and prefix only.
    let location = tarn_store::open(&format!("s3://AKIDEXAMPLE:{SECRET}@bucket/prefix")).unwrap();
    assert_hidden(SECRET, "StoreLocation", &debug(&location));
    assert_hidden(SECRET, "StoreLocation::url", location.url().as_str());
    assert_hidden(SECRET, "the S3 store", &debug(location.store()));

    // A location built by hand from a URL with user information and a query.
    let url = url::Url::parse(&format!("s3://u:{SECRET}@bucket/t?sig={SECRET}")).unwrap();
    let by_hand = StoreLocation::new(url, Arc::new(InMemory::new()), Path::from("t"));
    assert_hidden(SECRET, "StoreLocation::new", &debug(&by_hand));
    assert_eq!(by_hand.url().as_str(), "s3://bucket/t");

    // Every cloud keeps the bucket or container and prefix only.
    for url in [
        format!("gs://user:{SECRET}@bucket/t"),
        format!("az://user:{SECRET}@container/t"),
    ] {
        let options = StoreOptions::new()
            .with("account_name", "acct")
            .with("access_key", "a2V5");
        let location = if url.starts_with("az") {
            tarn_store::open_with_options(&url, &options).unwrap()
        } else {
            tarn_store::open(&url).unwrap()
        };
        assert_hidden(SECRET, "a cloud StoreLocation", &debug(&location));
    }

    // Errors naming the URL.
    let refused = [
        tarn_store::open(&format!("ftp://user:{SECRET}@bucket/t")).unwrap_err(),
        tarn_store::open(&format!("s3://user:{SECRET}@bucket/pre\u{7}fix")).unwrap_err(),
        tarn_store::open_with_options(
            &format!("s3://user:{SECRET}@bucket/t"),
            &StoreOptions::new().with("no_such_option", "x"),
        )
        .unwrap_err(),
        tarn_store::open(&format!("https://host/t?sig={SECRET}&sv=1")).unwrap_err(),
    ];
    for error in &refused {
        assert_hidden(SECRET, "a tarn_store error", &both(error));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_on_s3_and_their_errors_never_print_the_secret_key() {
    let server = s3();
    let secret = server.secret_key.as_str();
    let options = server.options();
    assert_hidden(secret, "the server's StoreOptions", &debug(&options));

    let url = server.url("credentials");
    let mut table = Table::create(&url)
        .with_store_options(options.clone())
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .unwrap();
    table.append([sales_batch(0, 10)]).await.unwrap();
    for (what, text) in [
        ("Table", debug(&table)),
        ("Snapshot", debug(table.snapshot())),
        ("StoreLocation", debug(table.location())),
        ("the S3 store", debug(table.location().store())),
        (
            "the S3 store's Display",
            table.location().store().to_string(),
        ),
    ] {
        assert_hidden(secret, what, &text);
    }

    // A missing table, and wrong credentials (the server refuses the signature).
    let missing = Table::open_with_options(&server.url("missing"), &options)
        .await
        .unwrap_err();
    assert_hidden(secret, "TableNotFound", &both(&missing));
    let wrong = StoreOptions::new()
        .with_endpoint(&server.endpoint)
        .with_region("us-east-1")
        .with_credentials(&server.access_key, SECRET)
        .with_allow_http(true);
    let refused = Table::open_with_options(&url, &wrong).await.unwrap_err();
    assert_hidden(SECRET, "an error of a refused signature", &both(&refused));
    assert_hidden(secret, "an error of a refused signature", &both(&refused));
}

/// The secret in the `AWS_*` environment: the test runs itself in a child process with
/// the variables set (a test cannot set them in its own process), and the child checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_from_the_environment_are_never_printed() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return in_child().await;
    }
    let server = s3();
    let exe = std::env::current_exe().unwrap();
    let output = tokio::process::Command::new(&exe)
        .args([
            "--exact",
            &tarn_tests::test_name(
                module_path!(),
                "secrets_from_the_environment_are_never_printed",
            ),
            "--nocapture",
        ])
        .env(CHILD_ENV, &server.endpoint)
        .env(CHILD_BUCKET, &server.bucket)
        .env("AWS_ACCESS_KEY_ID", &server.access_key)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_SESSION_TOKEN", SECRET)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed:\n{stdout}\n{stderr}"
    );
    assert_hidden(SECRET, "the child's output", &format!("{stdout}{stderr}"));
}

/// The child's side: every location, store and error it can reach with the environment's
/// secret, formatted.
async fn in_child() {
    let endpoint = std::env::var(CHILD_ENV).unwrap();
    let url = format!("s3://{}/credentials", std::env::var(CHILD_BUCKET).unwrap());
    let location = tarn_store::open(&url).unwrap();
    assert_hidden(SECRET, "StoreLocation", &debug(&location));
    assert_hidden(
        SECRET,
        "the S3 store from the environment",
        &debug(location.store()),
    );
    // The server refuses the environment's secret: the error names the request, not it.
    let options = StoreOptions::new().with_endpoint(endpoint);
    let refused = Table::open_with_options(&url, &options).await.unwrap_err();
    assert_hidden(SECRET, "the refused open", &both(&refused));
}
