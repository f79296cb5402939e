//! Spark with Delta Lake, the reference implementation, as a long-lived local process the
//! tests send requests to.
//!
//! On first use the support installs `pyspark` and `delta-spark` into a virtual
//! environment in the cache folder, and the Delta jar resolves from Maven Central through
//! `spark.jars.packages` into a cached Ivy folder. One Spark process (a small Python
//! driver, `tests/python/spark_driver.py`) serves every test of a test binary, so the
//! suite pays one JVM start, not one per case. Without Java 17 or the packages the tests
//! fail with a message saying how to provide them; they never skip.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use arrow::array::RecordBatch;
use serde_json::{Value, json};

use crate::read_parquet_file;

/// The PySpark release the tests drive.
pub const PYSPARK_VERSION: &str = "4.2.0";
/// The delta-spark release (Python package and jar) the tests drive.
pub const DELTA_SPARK_VERSION: &str = "4.4.0";

const HOW_TO: &str = "The Spark tests need Java 17 (`java` on PATH or JAVA_HOME), Python 3 with \
     venv and pip, access to PyPI (pyspark, delta-spark, pyarrow) and to Maven Central \
     (io.delta:delta-spark_4.2_2.13). Everything is installed into the cache folder \
     (TARN_CACHE_DIR, else ~/.cache/tarn) on first use.";

/// A running Spark session with Delta, shared by the tests of one process.
pub struct Spark {
    inner: Mutex<Driver>,
    log: PathBuf,
}

struct Driver {
    // Kept so the process is not reaped while in use; it exits when stdin closes.
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

static SPARK: OnceLock<Result<Spark, String>> = OnceLock::new();

/// The process's Spark session, started on first use (a minute the first time, while the
/// packages and jars download; seconds after). Panics with instructions when Spark cannot
/// be started.
pub fn spark() -> &'static Spark {
    match SPARK.get_or_init(start) {
        Ok(spark) => spark,
        Err(e) => panic!("{e}\n{HOW_TO}"),
    }
}

fn start() -> Result<Spark, String> {
    let java = std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin").join("java"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("java"));
    let version = Command::new(&java)
        .arg("-version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", java.display()))?;
    if !version.status.success() {
        return Err(format!("{} -version failed", java.display()));
    }
    let python = install()?;
    let cache = crate::cache_dir();
    let ivy = cache.join("ivy");
    let warehouse = std::env::temp_dir().join(crate::unique("tarn-spark-warehouse"));
    let log = std::env::temp_dir()
        .join(crate::unique("tarn-spark"))
        .with_extension("log");
    let log_file =
        std::fs::File::create(&log).map_err(|e| format!("cannot create {log:?}: {e}"))?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("python")
        .join("spark_driver.py");
    eprintln!(
        "starting Spark {PYSPARK_VERSION} with Delta {DELTA_SPARK_VERSION} (log: {})",
        log.display()
    );
    // Only one process resolves the jars into the shared Ivy folder at a time.
    let mut child = crate::with_install_lock("ivy", || {
        Command::new(&python)
            .arg(&script)
            .arg(&ivy)
            .arg(&warehouse)
            .env("PYSPARK_PYTHON", &python)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
    })
    .map_err(|e| format!("cannot start {}: {e}", script.display()))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .map_err(|e| format!("Spark did not answer: {e}"))?;
    let ready: Value = serde_json::from_str(first.trim()).map_err(|_| {
        format!(
            "Spark did not start; its output ends with:\n{}",
            tail(&log, 40)
        )
    })?;
    if ready["ok"] != json!(true) {
        return Err(format!(
            "Spark did not start: {}\n{}",
            ready["error"],
            tail(&log, 40)
        ));
    }
    Ok(Spark {
        inner: Mutex::new(Driver {
            _child: child,
            stdin,
            stdout,
        }),
        log,
    })
}

fn install() -> Result<PathBuf, String> {
    let venv = crate::cache_dir().join(format!(
        "venv-spark-{PYSPARK_VERSION}-delta-{DELTA_SPARK_VERSION}"
    ));
    let packages = [
        format!("pyspark=={PYSPARK_VERSION}"),
        format!("delta-spark=={DELTA_SPARK_VERSION}"),
        "pyarrow".to_string(),
        // PySpark 4.2 does not support pandas 3 yet.
        "pandas<3".to_string(),
    ];
    crate::python::venv(&venv, &packages)
}

/// The last `lines` lines of a file, for error messages.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Spark {
    /// Sends one request and returns the answer. Panics with Spark's error (and the end of
    /// its log) when the request fails.
    pub fn request(&self, request: Value) -> Value {
        let answer = self.try_request(request.clone());
        match answer {
            Ok(v) => v,
            Err(e) => panic!("Spark request {request} failed: {e}"),
        }
    }

    /// Sends one request; `Err` carries Spark's error message.
    pub fn try_request(&self, request: Value) -> Result<Value, String> {
        let mut driver = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let line = format!("{request}\n");
        driver
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| driver.stdin.flush())
            .map_err(|e| {
                format!(
                    "Spark is gone ({e}); its log ends with:\n{}",
                    tail(&self.log, 40)
                )
            })?;
        let mut answer = String::new();
        driver
            .stdout
            .read_line(&mut answer)
            .map_err(|e| format!("Spark did not answer: {e}"))?;
        if answer.is_empty() {
            return Err(format!(
                "Spark exited; its log ends with:\n{}",
                tail(&self.log, 40)
            ));
        }
        let answer: Value = serde_json::from_str(answer.trim())
            .map_err(|e| format!("bad answer {answer:?}: {e}"))?;
        if answer["ok"] == json!(true) {
            Ok(answer)
        } else {
            Err(answer["error"]
                .as_str()
                .unwrap_or("unknown error")
                .to_string())
        }
    }

    /// Runs one SQL statement and returns its rows as JSON objects.
    pub fn sql(&self, sql: &str) -> Vec<Value> {
        rows(self.request(json!({"op": "sql", "sql": sql})))
    }

    /// Runs one SQL statement; `Err` carries Spark's error message.
    pub fn try_sql(&self, sql: &str) -> Result<Vec<Value>, String> {
        self.try_request(json!({"op": "sql", "sql": sql})).map(rows)
    }

    /// The rows Spark reads from the Delta table at `path`, at `version` or the latest.
    pub fn read(&self, path: &Path, version: Option<i64>) -> Vec<RecordBatch> {
        self.read_with(path, json!({"version": version}))
    }

    /// The rows Spark reads from the Delta table at `path` as of a timestamp (text Spark
    /// parses, such as `2026-01-01 10:00:00.123`).
    pub fn read_at_timestamp(&self, path: &Path, timestamp: &str) -> Vec<RecordBatch> {
        self.read_with(path, json!({"timestamp": timestamp}))
    }

    fn read_with(&self, path: &Path, mut options: Value) -> Vec<RecordBatch> {
        let out = tempfile::Builder::new()
            .suffix(".parquet")
            .tempfile()
            .expect("a temporary file");
        options["op"] = json!("read");
        options["path"] = json!(path.to_str().expect("a UTF-8 path"));
        options["out"] = json!(out.path().to_str().expect("a UTF-8 path"));
        self.request(options);
        read_parquet_file(out.path())
    }

    /// `DESCRIBE HISTORY` of the table at `path`, newest first.
    pub fn history(&self, path: &Path) -> Vec<Value> {
        rows(self.request(json!({"op": "history", "path": path.to_str().expect("a UTF-8 path")})))
    }
}

fn rows(answer: Value) -> Vec<Value> {
    answer["rows"].as_array().cloned().unwrap_or_default()
}

/// Quotes a path for Spark SQL's ``delta.`path` `` table references.
pub fn delta_table(path: &Path) -> String {
    format!(
        "delta.`{}`",
        path.to_str().expect("a UTF-8 path").replace('`', "``")
    )
}
