//! Paths: resolving the paths the log records, encoding the ones Tarn writes, and Hive-style
//! partition folders.

use object_store::path::Path;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use tarn_store::StoreLocation;
use url::Url;

use crate::error::{Error, Result};

/// The folder name Delta gives a null partition value.
pub(crate) const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Characters escaped in Hive partition folder names (as Spark's `escapePathName` does).
const HIVE_ESCAPED: &AsciiSet = &CONTROLS
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'\'')
    .add(b'*')
    .add(b'/')
    .add(b':')
    .add(b'=')
    .add(b'?')
    .add(b'\\')
    .add(b'\x7F')
    .add(b'{')
    .add(b'[')
    .add(b']')
    .add(b'^');

/// Characters percent-encoded when a relative path is written into `add.path` (a URI
/// path): everything outside unreserved characters, sub-delimiters, `:`, `@` and `/`.
const URI_PATH_ESCAPED: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Escapes a partition value for a folder name, Hive style.
pub(crate) fn hive_escape(value: &str) -> String {
    utf8_percent_encode(value, HIVE_ESCAPED).to_string()
}

/// Encodes a relative object path for `add.path`.
pub(crate) fn uri_encode(path: &str) -> String {
    utf8_percent_encode(path, URI_PATH_ESCAPED).to_string()
}

/// Whether a log path is an absolute URI (`file:/x`, `s3://b/k`) rather than a relative
/// path.
fn scheme_of(path: &str) -> Option<&str> {
    let (scheme, _) = path.split_once(':')?;
    let valid = scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

/// Joins a decoded relative path to `root`, refusing segments that would escape it.
pub(crate) fn join_relative(root: &Path, relative: &str) -> Result<Path> {
    let invalid = |reason: &str| Error::InvalidPath {
        path: relative.to_string(),
        reason: reason.to_string(),
    };
    for segment in relative.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(invalid("empty, '.' or '..' segments would leave the table"));
        }
        if segment.chars().any(char::is_control) {
            return Err(invalid("control characters are not allowed"));
        }
    }
    // `Path::parse` keeps the characters as they are; `Path::join` would escape `%`.
    let joined = if root.as_ref().is_empty() {
        relative.to_string()
    } else {
        format!("{root}/{relative}")
    };
    Path::parse(joined).map_err(|e| invalid(&e.to_string()))
}

/// Resolves a path recorded in the log (URI-encoded, relative to the table root, or an
/// absolute URI) to an object in the table's store, inside the table root or a root the
/// location allows ([`StoreLocation::allowed_roots`]). On the local file system the
/// object's real path (symbolic links followed) must lie inside one of them too.
///
/// Fails with [`Error::InvalidPath`] when the path is malformed (`..` segments, control
/// characters, bad encoding) or names another store, and [`Error::PathOutsideTable`] when
/// it leaves the table.
pub(crate) fn resolve(location: &StoreLocation, path: &str) -> Result<Path> {
    let resolved = locate(location, path)?;
    confine_on_disk(location, path, resolved)
}

/// [`resolve`] without following symbolic links.
pub(crate) fn locate(location: &StoreLocation, path: &str) -> Result<Path> {
    let resolved = object_of(location, path)?;
    if !location.contains(&resolved) {
        return Err(outside(location, path));
    }
    Ok(resolved)
}

/// The object a log path names in the table's store, wherever it is: a file's identity
/// in log replay, where a path outside the table must still match its other spellings.
fn object_of(location: &StoreLocation, path: &str) -> Result<Path> {
    let invalid = |reason: String| Error::InvalidPath {
        path: path.to_string(),
        reason,
    };
    let resolved = if scheme_of(path).is_some() {
        let url = Url::parse(path).map_err(|e| invalid(format!("not a valid URI: {e}")))?;
        location.resolve_absolute(&url).ok_or_else(|| {
            invalid(format!(
                "points outside the table's store {}",
                location.url()
            ))
        })?
    } else if path.starts_with('/') {
        Path::from_url_path(path).map_err(|e| invalid(e.to_string()))?
    } else {
        let decoded = percent_decode_str(path)
            .decode_utf8()
            .map_err(|_| invalid("percent-decodes to invalid UTF-8".to_string()))?;
        // Named as the log spells it, not as decoded.
        join_relative(location.root(), &decoded).map_err(|e| match e {
            Error::InvalidPath { reason, .. } => invalid(reason),
            other => other,
        })?
    };
    Ok(resolved)
}

fn outside(location: &StoreLocation, path: &str) -> Error {
    Error::PathOutsideTable {
        table: location.url().to_string(),
        path: path.to_string(),
    }
}

/// `resolved` (the object `path` names, inside the table) unless, on the local file
/// system, its real path lies outside every root.
pub(crate) fn confine_on_disk(
    location: &StoreLocation,
    path: &str,
    resolved: Path,
) -> Result<Path> {
    // A symbolic link inside the table may point anywhere on the disk: follow it, and
    // check where it lands. A file that does not exist fails later, when it is read.
    // `resolved` is lexically inside a root, so a file that is its own real path (no
    // link on the way) is inside one too: only a link costs the roots' lookups.
    if let Some(file) = location.local_path(&resolved)
        && let Ok(real) = std::fs::canonicalize(&file)
        && real != file
    {
        let roots = std::iter::once(location.root()).chain(location.allowed_roots());
        let inside = roots
            .filter_map(|root| location.local_path(root))
            .filter_map(|dir| std::fs::canonicalize(dir).ok())
            .any(|dir| real.starts_with(dir));
        if !inside {
            return Err(outside(location, path));
        }
    }
    Ok(resolved)
}

/// The full URL of an object of the table's store (at `table`), for messages: the
/// location's scheme and authority with the object's path
/// (`file:///data/t/part-0.parquet`, `s3://bucket/t/part-0.parquet`).
pub(crate) fn url_of(table: &Url, path: &Path) -> String {
    let mut url = table.clone();
    url.set_path(&format!("/{path}"));
    url.to_string()
}

/// The identity of a path for log replay: the resolved object path, so that the same file
/// written as `a%20b`, `/t/a b` or `file:///t/a%20b` is one file. Paths that do not
/// resolve keep their text; reading them fails later with a typed error.
pub(crate) fn canonical(location: &StoreLocation, path: &str) -> String {
    // Most log paths are plain relative ones with nothing to decode: join them to the root
    // (already a valid path) after `join_relative`'s checks, without re-parsing the root
    // for every file of a large checkpoint.
    if plain_relative(path) {
        let root = location.root().as_ref();
        if root.is_empty() {
            return path.to_string();
        }
        let mut joined = String::with_capacity(root.len() + 1 + path.len());
        joined.push_str(root);
        joined.push('/');
        joined.push_str(path);
        return joined;
    }
    match object_of(location, path) {
        Ok(p) => p.to_string(),
        Err(_) => path.to_string(),
    }
}

/// A relative path with nothing to decode or resolve: no `%`, no control character, no
/// scheme, and no empty, `.` or `..` segment. One pass over the bytes for ASCII paths
/// (a checkpoint's 100,000 paths go through here).
fn plain_relative(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first().is_none_or(|b| *b == b'/') {
        return false;
    }
    let mut ascii = true;
    for &b in bytes {
        if b == b'%' || b < 0x20 || b == 0x7f {
            return false;
        }
        ascii &= b < 0x80;
    }
    (ascii || !path.chars().any(char::is_control))
        && scheme_of(path).is_none()
        && path
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// Validates a name a user gives Tarn for a column, table or partition value folder part:
/// no `/`, no `..`, no control characters, not empty.
pub(crate) fn validate_name(kind: &'static str, name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidArgument {
        name: kind,
        reason: format!("{name:?}: {reason}"),
    };
    if name.is_empty() {
        return Err(bad("must not be empty"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("must not hold control characters"));
    }
    if name.contains('/') || name == "." || name == ".." {
        return Err(bad("must not hold '/' or be '.' or '..'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_paths_resolve_relative_absolute_and_escaped() {
        let loc = tarn_store::open("/data/t").unwrap();
        assert_eq!(
            resolve(&loc, "part-0.parquet").unwrap().as_ref(),
            "data/t/part-0.parquet"
        );
        // From data-reader-escaped-chars: decode once, keep '+'.
        assert_eq!(
            resolve(&loc, "_2=bar+%252521/part-0.parquet")
                .unwrap()
                .as_ref(),
            "data/t/_2=bar+%2521/part-0.parquet"
        );
        assert_eq!(
            resolve(&loc, "file:///data/t/a%20b").unwrap().as_ref(),
            "data/t/a b"
        );
        assert_eq!(
            resolve(&loc, "/data/t/x/a%20b").unwrap().as_ref(),
            "data/t/x/a b"
        );
        // Outside the root: refused, unless the location allows that root.
        for path in [
            "file:///data/x/a%20b",
            "file:/data/x/a%20b",
            "/data/x/a%20b",
        ] {
            assert!(
                matches!(resolve(&loc, path), Err(Error::PathOutsideTable { .. })),
                "{path}"
            );
        }
        for path in [
            "/data/t/../x",
            "file:///data/t/%2E%2E/x",
            "file:///data/t/../x",
        ] {
            assert!(resolve(&loc, path).is_err(), "{path}");
        }
        let clone = tarn_store::open_with_options(
            "/data/t",
            &tarn_store::StoreOptions::new().with_allowed_roots(["file:///data/x"]),
        )
        .unwrap();
        assert_eq!(
            resolve(&clone, "file:/data/x/a%20b").unwrap().as_ref(),
            "data/x/a b"
        );
        assert!(matches!(
            resolve(&clone, "/data/xy/a"),
            Err(Error::PathOutsideTable { .. })
        ));
        assert!(matches!(
            resolve(&loc, "../escape.parquet"),
            Err(Error::InvalidPath { .. })
        ));
        assert!(matches!(
            resolve(&loc, "a/%2E%2E/b"),
            Err(Error::InvalidPath { .. })
        ));
        assert!(matches!(
            resolve(&loc, "s3://bucket/x"),
            Err(Error::InvalidPath { .. })
        ));
        assert_eq!(
            canonical(&loc, "/data/t/p@%23h"),
            canonical(&loc, "file:///data/t/p@%23h")
        );
        // The fast path for plain relative paths agrees with full resolution, and leaves
        // everything else to it.
        for path in [
            "part-0.parquet",
            "day=2024-01-01/part-1.snappy.parquet",
            "a b/c+d@e.parquet",
            "a%20b/c.parquet",
            "../escape.parquet",
            "a//b.parquet",
            "x/./y.parquet",
        ] {
            let full = resolve(&loc, path).map_or_else(|_| path.to_string(), |p| p.to_string());
            assert_eq!(canonical(&loc, path), full, "{path}");
        }
    }

    proptest::proptest! {
        /// Any path a log may hold resolves inside the table root, or fails with a typed
        /// error: built from traversal, encoded traversal, absolute and URI pieces.
        #[test]
        fn fuzzed_log_paths_never_leave_the_table(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "..", ".", "%2E%2E", "%2e.", ".%2E", "%2F", "%252E%252E", "a", "b c",
                    "%00", "/", "//", "file:", "file://", "file:///data", "s3://bucket",
                    "memory://x", "data", "t", "u", "%2Fdata", "\\..", "..\\", "?", "#",
                ]),
                1..8,
            ),
            separators in proptest::collection::vec(proptest::bool::ANY, 8),
        ) {
            let loc = tarn_store::open("/data/t").unwrap();
            let mut path = String::new();
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 && separators[i % 8] {
                    path.push('/');
                }
                path.push_str(piece);
            }
            match resolve(&loc, &path) {
                Ok(object) => proptest::prop_assert!(
                    object.prefix_matches(loc.root())
                        && object.parts().all(|p| !matches!(p.as_ref(), "." | "..")),
                    "{path:?} resolved to {object}"
                ),
                Err(Error::InvalidPath { .. } | Error::PathOutsideTable { .. }) => {}
                Err(e) => proptest::prop_assert!(false, "{path:?}: unexpected {e}"),
            }
        }
    }

    #[test]
    fn partition_folders_escape_like_hive_and_uris_escape_again() {
        assert_eq!(hive_escape("bar+%21"), "bar+%2521");
        assert_eq!(
            hive_escape("2021-09-08 11:11:11"),
            "2021-09-08 11%3A11%3A11"
        );
        assert_eq!(hive_escape("a/b=c"), "a%2Fb%3Dc");
        let dir = format!("_2={}", hive_escape("bar+%21"));
        assert_eq!(uri_encode(&dir), "_2=bar+%252521");
        assert_eq!(
            uri_encode("t=2021-09-08 11%3A11"),
            "t=2021-09-08%2011%253A11"
        );
        assert!(validate_name("column", "a/b").is_err());
        assert!(validate_name("column", "..").is_err());
        assert!(validate_name("column", "ok name").is_ok());
    }
}
