//! The crate's layers, written once, and a test that holds the code to them: every
//! `crate::` path outside tests and comments names a module of a lower layer (or its own
//! module). `docs/architecture.md` describes the same order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules of `src/`, from the bottom up. A module may use the modules of
/// the layers below its own, never those of its own layer or above.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["clock", "tasks", "paths", "cache", "background"],
    &["protocol"],
    &["expr", "conform"],
    &["stats"],
    &["log"],
    &["dv", "reader"],
    &["snapshot"],
    &["index"],
    &["scan"],
    &["txn"],
    &["table"],
    &["indexing"],
    &["write"],
    &[
        "changes", "cleanup", "create", "describe", "history", "restore", "vacuum",
    ],
    &["dml"],
    &["optimize"],
];

/// The layer of every module.
fn layer_of() -> BTreeMap<&'static str, usize> {
    LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (*m, i)))
        .collect()
}

/// `source` without comments and without `#[cfg(test)] mod ... { ... }` blocks.
fn code_of(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod ") && next.ends_with('{'))
        {
            for skipped in lines.by_ref() {
                if skipped == "}" {
                    break;
                }
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or_default();
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The top-level modules named by `crate::` paths in `code`.
fn modules_used(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `tarn_crate::` or the like is not this crate.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or_default();
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                used.insert(name);
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        used.insert(name);
    }
    used
}

/// Every `.rs` file under `dir` that is not a test file, with its top-level module.
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(root, &path, out);
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if !relative.ends_with(".rs") || relative.ends_with("tests.rs") {
            continue;
        }
        let top = relative
            .split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string();
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        out.push((relative, top, source));
    }
}

/// The module each item `lib.rs` re-exports comes from (`Error` from `error`, say), so a
/// `crate::Error` counts as a use of `error`.
fn root_items(lib: &str) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    for statement in code_of(lib).split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = path
            .split("::")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let names = match path.split_once('{') {
            Some((_, inner)) => inner.trim_end_matches('}').to_string(),
            None => path.rsplit("::").next().unwrap_or_default().to_string(),
        };
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap_or_default().trim();
            if !name.is_empty() {
                items.insert(name.to_string(), module.clone());
            }
        }
    }
    items
}

/// The imports that break the layers, as `file: module -> module` lines.
fn violations(files: &[(String, String, String)]) -> Vec<String> {
    let layers = layer_of();
    let lib = files
        .iter()
        .find(|(file, _, _)| file == "lib.rs")
        .map(|(_, _, source)| root_items(source))
        .unwrap_or_default();
    let mut found = Vec::new();
    for (file, top, source) in files {
        if top == "lib" || top == "layers" {
            continue;
        }
        let Some(own) = layers.get(top.as_str()) else {
            found.push(format!("{file}: module `{top}` is in no layer of LAYERS"));
            continue;
        };
        for used in modules_used(&code_of(source)) {
            let used = lib.get(&used).cloned().unwrap_or(used);
            if used == *top {
                continue;
            }
            match layers.get(used.as_str()) {
                Some(layer) if layer < own => {}
                Some(_) => found.push(format!("{file}: `{top}` uses `{used}`, not below it")),
                None => found.push(format!("{file}: `{top}` uses `{used}`, in no layer")),
            }
        }
    }
    found
}

#[test]
fn no_module_imports_from_its_own_layer_or_above() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(files.len() > 50, "read only {} files", files.len());
    let found = violations(&files);
    assert!(
        found.is_empty(),
        "imports against the layers:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_back_edge_is_caught() {
    let files = vec![
        (
            "lib.rs".to_string(),
            "lib".to_string(),
            "pub use table::{Table, VersionInfo};\npub use error::Error;\n".to_string(),
        ),
        (
            "txn/mod.rs".to_string(),
            "txn".to_string(),
            "use crate::Error;\nfn f(t: crate::Table) {}\n".to_string(),
        ),
        (
            "log/mod.rs".to_string(),
            "log".to_string(),
            "use crate::error::Result;\nuse crate::snapshot::Snapshot;\n".to_string(),
        ),
        (
            "dv.rs".to_string(),
            "dv".to_string(),
            "// crate::table in a comment\n#[cfg(test)]\nmod tests {\n    use crate::table::Table;\n}\n"
                .to_string(),
        ),
        (
            "scan/mod.rs".to_string(),
            "scan".to_string(),
            "use crate::{error::Error, optimize::OptimizeBuilder};\n".to_string(),
        ),
    ];
    assert_eq!(
        violations(&files),
        vec![
            "txn/mod.rs: `txn` uses `table`, not below it".to_string(),
            "log/mod.rs: `log` uses `snapshot`, not below it".to_string(),
            "scan/mod.rs: `scan` uses `optimize`, not below it".to_string(),
        ]
    );
}
