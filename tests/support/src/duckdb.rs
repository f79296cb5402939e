//! DuckDB with its `delta` and `tpcds` extensions (the `duckdb`, `duckdb-ext-delta` and
//! `duckdb-ext-tpcds` Python packages, same version; each extension's file ships in its
//! wheel), in a virtual environment of its own: a third Delta reader beside delta-rs and
//! Spark, and the TPC-DS queries the bench runs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The DuckDB release the tests read with.
pub const DUCKDB_VERSION: &str = "1.4.4";
/// The `duckdb-ext-delta` release built for [`DUCKDB_VERSION`].
pub const DUCKDB_DELTA_VERSION: &str = "1.4.4.20260205";
/// The `duckdb-ext-tpcds` release built for [`DUCKDB_VERSION`]: the TPC-DS queries the
/// bench runs.
pub const DUCKDB_TPCDS_VERSION: &str = "1.4.4.20260205";

static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The Python interpreter of a virtual environment holding `duckdb` and
/// `duckdb-ext-delta`, created in the cache folder on first use. Panics with
/// instructions when Python 3 or PyPI is missing.
pub fn python() -> &'static Path {
    match PYTHON.get_or_init(install) {
        Ok(p) => p,
        Err(e) => panic!(
            "{e}\nThe DuckDB tests need Python 3 with venv and pip, and access to PyPI (they \
             install duckdb=={DUCKDB_VERSION}, duckdb-ext-delta=={DUCKDB_DELTA_VERSION} and \
             duckdb-ext-tpcds=={DUCKDB_TPCDS_VERSION} \
             into {}).",
            crate::cache_dir().display()
        ),
    }
}

fn install() -> Result<PathBuf, String> {
    let dir = crate::cache_dir().join(format!("venv-duckdb-{DUCKDB_VERSION}"));
    crate::python::venv(
        &dir,
        &[
            format!("duckdb=={DUCKDB_VERSION}"),
            format!("duckdb-ext-delta=={DUCKDB_DELTA_VERSION}"),
            format!("duckdb-ext-tpcds=={DUCKDB_TPCDS_VERSION}"),
        ],
    )
}
