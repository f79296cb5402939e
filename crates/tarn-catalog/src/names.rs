//! Object ids: names joined by `$`, the separator the manifest sorts children under
//! their parent with.

use std::fmt;

use crate::error::{Error, Result};

/// The separator of an object id's names.
pub(crate) const SEPARATOR: char = '$';
/// The longest name, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 256;

/// The id of a namespace or table: its names from the root, e.g. `["sales", "2024",
/// "orders"]`, written `sales$2024$orders`. The root namespace has no names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(Vec<String>);

impl ObjectId {
    /// The root namespace.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// An id from names.
    ///
    /// Fails with [`Error::InvalidName`] for a name that is empty, over 256
    /// bytes, `.` or `..`, or holds `$`, `/` or a control character.
    pub fn new(names: impl IntoIterator<Item = impl Into<String>>) -> Result<Self> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        for name in &names {
            validate_name(name)?;
        }
        Ok(Self(names))
    }

    /// Parses `a$b$c`.
    ///
    /// Fails as [`ObjectId::new`] does.
    pub fn parse(text: &str) -> Result<Self> {
        if text.is_empty() {
            return Ok(Self::root());
        }
        Self::new(text.split(SEPARATOR))
    }

    /// The names.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether this is the root namespace.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The last name (empty for the root).
    pub fn leaf(&self) -> &str {
        self.0.last().map_or("", String::as_str)
    }

    /// The parent namespace (the root's parent is the root).
    pub fn parent(&self) -> ObjectId {
        let mut names = self.0.clone();
        names.pop();
        Self(names)
    }

    /// A child of this namespace.
    ///
    /// Fails as [`ObjectId::new`] does.
    pub fn child(&self, name: &str) -> Result<ObjectId> {
        validate_name(name)?;
        let mut names = self.0.clone();
        names.push(name.to_string());
        Ok(Self(names))
    }

    /// The id as the manifest stores it: the names joined by `$`.
    pub fn key(&self) -> String {
        self.0.join("$")
    }

    /// The smallest key of this namespace's descendants (`a$`), and the smallest key above
    /// them all (`a%`, `$` + 1): children sort between the two.
    pub(crate) fn child_range(&self) -> (String, String) {
        if self.is_root() {
            return (String::new(), String::from(char::MAX));
        }
        let key = self.key();
        (format!("{key}$"), format!("{key}%"))
    }

    /// Whether `key` names a direct child of this namespace.
    pub(crate) fn is_child_key(&self, key: &str) -> bool {
        let (from, to) = self.child_range();
        let inside = if self.is_root() {
            !key.is_empty()
        } else {
            key >= from.as_str() && key < to.as_str()
        };
        inside && !key[from.len()..].contains(SEPARATOR)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

fn validate_name(name: &str) -> Result<()> {
    let invalid = |reason: &str| {
        Err(Error::InvalidName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return invalid("a name must not be empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return invalid("a name is at most 256 bytes");
    }
    if name == "." || name == ".." || name.contains("..") {
        return invalid("a name must not hold `..`");
    }
    if name.contains(SEPARATOR) {
        return invalid("`$` separates the names of an object id");
    }
    if name.contains('/') {
        return invalid("a name must not hold `/`");
    }
    if name.chars().any(char::is_control) {
        return invalid("a name must not hold control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_join_names_and_know_their_children() {
        let id = ObjectId::parse("sales$2024$orders").unwrap();
        assert_eq!(id.names().len(), 3);
        assert_eq!(id.leaf(), "orders");
        assert_eq!(id.parent().key(), "sales$2024");
        let ns = ObjectId::parse("sales").unwrap();
        assert!(ns.is_child_key("sales$2024"));
        assert!(!ns.is_child_key("sales$2024$orders"));
        assert!(!ns.is_child_key("salesx"));
        assert!(ObjectId::root().is_child_key("sales"));
        assert!(!ObjectId::root().is_child_key("sales$x"));
        for bad in ["", "a/b", "..", "a$b", "x\u{7}", &"n".repeat(257)] {
            assert!(ObjectId::new([bad]).is_err(), "{bad:?}");
        }
    }
}
