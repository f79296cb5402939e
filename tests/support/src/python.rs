//! Python virtual environments: `deltalake` (delta-rs) for the interoperability tests
//! and the bench's side-by-side, the `tarn` package built from this checkout for its
//! pytest suite and for the bench's `python` side-by-side, and any other set of packages.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

static PACKAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The interpreter of a virtual environment holding the `tarn` Python package built
/// from this checkout (`maturin develop`, the dev profile, in the workspace's target
/// folder), with pytest and the libraries its tests exchange data with: pyarrow,
/// Polars, pandas, DuckDB and `deltalake`. The environment is made once; the package is
/// built again by each test process, which cargo makes quick when nothing changed.
/// Panics with instructions when Python 3, PyPI or the build fails.
pub fn package() -> &'static Path {
    match PACKAGE.get_or_init(build_package) {
        Ok(p) => p,
        Err(e) => panic!(
            "{e}\nThe Python package's tests need Python 3 with venv and pip, and access to \
             PyPI (they install maturin, pytest, pyarrow, polars, pandas, \
             duckdb=={} and deltalake=={DELTALAKE_VERSION} into {}).",
            crate::duckdb::DUCKDB_VERSION,
            crate::cache_dir().display()
        ),
    }
}

fn build_package() -> Result<PathBuf, String> {
    let dir = crate::cache_dir().join(format!(
        "venv-python-package-{}-{DELTALAKE_VERSION}",
        crate::duckdb::DUCKDB_VERSION
    ));
    let python = venv(
        &dir,
        &[
            "maturin>=1.9.4,<2".to_string(),
            "pytest".to_string(),
            "pyarrow==26.0.1".to_string(),
            "polars==2.1.0".to_string(),
            "pandas==3.1.1".to_string(),
            format!("duckdb=={}", crate::duckdb::DUCKDB_VERSION),
            format!("deltalake=={DELTALAKE_VERSION}"),
        ],
    )?;
    // In the environment the outer `cargo test` built in, so it reuses that build.
    maturin_develop(&dir)?;
    Ok(python)
}

/// The interpreter of a virtual environment for the bench's `python` side-by-side: the
/// `tarn` package installed as a user installs it, from a release wheel of this checkout
/// (`maturin build --release` in the workspace's target folder, then `pip install`; the
/// first build takes a while), beside pyarrow, Polars, DuckDB and `deltalake`, the
/// versions the tests use.
///
/// Fails when Python 3, PyPI, the build or the install fails.
pub fn bench_package() -> Result<PathBuf, String> {
    let dir = crate::cache_dir().join(format!(
        "venv-python-bench-{}-{DELTALAKE_VERSION}",
        crate::duckdb::DUCKDB_VERSION
    ));
    let python = venv(
        &dir,
        &[
            "maturin>=1.9.4,<2".to_string(),
            "pyarrow==26.0.1".to_string(),
            "polars==2.1.0".to_string(),
            format!("duckdb=={}", crate::duckdb::DUCKDB_VERSION),
            format!("deltalake=={DELTALAKE_VERSION}"),
        ],
    )?;
    let wheels = dir.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    eprintln!("building a release wheel of the tarn Python package");
    let mut build = Command::new(dir.join("bin").join("maturin"));
    crate::clear_cargo_test_env(&mut build)
        .args(["build", "--quiet", "--release", "--compatibility", "linux"])
        .arg("--manifest-path")
        .arg(manifest()?)
        .arg("--out")
        .arg(&wheels);
    crate::with_install_lock("python-package-build", || run(&mut build))?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("{}: {e}", wheels.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin wrote no wheel into {}", wheels.display()))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--force-reinstall", "--no-deps"])
        .arg(&wheel))?;
    Ok(python)
}

fn manifest() -> Result<PathBuf, String> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/Cargo.toml")
        .canonicalize()
        .map_err(|e| format!("the python/ folder of this checkout: {e}"))
}

/// Builds the package from this checkout into the environment at `dir`.
fn maturin_develop(dir: &Path) -> Result<(), String> {
    let manifest = manifest()?;
    let bin = dir.join("bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).map_err(|e| e.to_string())?;
    eprintln!("building the tarn Python package into {}", dir.display());
    let mut command = Command::new(bin.join("maturin"));
    crate::clear_cargo_test_env(&mut command)
        .args(["develop", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .env("VIRTUAL_ENV", dir)
        .env("PATH", path)
        .env_remove("CONDA_PREFIX");
    crate::with_install_lock("python-package-build", || run(&mut command))
}
