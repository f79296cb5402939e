//! The Delta tables written by Spark in `../shared/delta-golden`.

use std::path::{Path, PathBuf};

/// The folder of golden tables: `TARN_GOLDEN_DIR`, else `shared/delta-golden` beside the
/// repository. Panics when it is missing, naming where it was looked for.
pub fn golden_root() -> PathBuf {
    let dir = std::env::var_os("TARN_GOLDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/delta-golden")
        });
    assert!(
        dir.is_dir(),
        "the Delta golden tables are not at {}; set TARN_GOLDEN_DIR to their folder",
        dir.display()
    );
    dir.canonicalize().expect("canonical golden folder")
}

/// The `delta/` folder of one golden table.
pub fn golden_table(name: &str) -> PathBuf {
    golden_root().join(name).join("delta")
}

/// The `expected/` folder of one golden table, if it has one.
pub fn golden_expected(name: &str) -> Option<PathBuf> {
    let dir = golden_root().join(name).join("expected");
    dir.is_dir().then_some(dir)
}

/// Names of all golden tables, sorted.
pub fn golden_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(golden_root())
        .expect("read the golden folder")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Copies a folder tree (a golden table, to write to it without touching the original).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
