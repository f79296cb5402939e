//! The `deltalake` Python package (delta-rs), in a virtual environment of its own, for
//! interoperability tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use arrow::array::RecordBatch;

/// The `deltalake` release the tests check against.
pub const DELTALAKE_VERSION: &str = "1.6.6";

static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The Python interpreter of a virtual environment holding `deltalake` and `pyarrow`,
/// created in the cache folder on first use. Panics with instructions when Python 3 is
/// missing.
pub fn python() -> &'static Path {
    match PYTHON.get_or_init(install) {
        Ok(p) => p,
        Err(e) => panic!(
            "{e}\nThe interoperability tests need Python 3 with venv and pip, and access to PyPI \
             (they install deltalake=={DELTALAKE_VERSION} and pyarrow into {}).",
            crate::cache_dir().display()
        ),
    }
}

fn install() -> Result<PathBuf, String> {
    let dir = crate::cache_dir().join(format!("venv-deltalake-{DELTALAKE_VERSION}"));
    venv(
        &dir,
        &[
            format!("deltalake=={DELTALAKE_VERSION}"),
            "pyarrow".to_string(),
        ],
    )
}

/// The interpreter of a virtual environment at `dir` holding `packages` (pip
/// requirement strings), created on first use: the environment is ready once a marker
/// listing the packages is written, so an interrupted install starts over.
pub fn venv(dir: &Path, packages: &[String]) -> Result<PathBuf, String> {
    let python = dir.join("bin").join("python");
    let ready = dir.join(".tarn-ready");
    let wanted = packages.join(" ");
    let lock = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "venv".into());
    crate::with_install_lock(&lock, || {
        if python.exists() && std::fs::read_to_string(&ready).is_ok_and(|r| r == wanted) {
            return Ok(python.clone());
        }
        let system = ["python3", "python"]
            .into_iter()
            .find(|p| {
                Command::new(p)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .ok_or_else(|| "no python3 on PATH".to_string())?;
        eprintln!(
            "creating a Python environment with {wanted} in {}",
            dir.display()
        );
        let _ = std::fs::remove_dir_all(dir);
        run(Command::new(system).args(["-m", "venv"]).arg(dir))?;
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages))?;
        std::fs::write(&ready, &wanted).map_err(|e| e.to_string())?;
        Ok(python.clone())
    })
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Runs one of the scripts in `tests/python/` with the environment's interpreter and
/// returns its standard output. Panics with the script's error output when it fails.
pub fn run_script(script: &str, args: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(script);
    let output = Command::new(python())
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    assert!(
        output.status.success(),
        "{script} {args:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What `read_table.py` reports, and the rows it read.
pub struct PythonRead {
    /// The version read.
    pub version: i64,
    /// How many rows it read.
    pub rows: usize,
    /// The rows.
    pub batches: Vec<RecordBatch>,
}

/// Reads the table at `dir` (at `version`, else the latest) through `deltalake`.
pub fn read_with_deltalake(dir: &Path, version: Option<i64>) -> PythonRead {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut args = vec![dir.to_str().unwrap(), out.path().to_str().unwrap()];
    let version_text = version.map(|v| v.to_string());
    if let Some(v) = &version_text {
        args.push(v);
    }
    let report = run_script("read_table.py", &args);
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    PythonRead {
        version: report["version"].as_i64().unwrap(),
        rows: report["rows"].as_u64().unwrap() as usize,
        batches: crate::rows::read_parquet_file(out.path()),
    }
}
