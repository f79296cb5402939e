//! What a [`crate::FaultStore`] injects: the kinds of request, the faults, the rules
//! that pick requests by kind, glob and chance, and the error an injected fault raises.

use std::fmt;
use std::time::Duration;

/// The kind of request a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// PUTs and multipart uploads.
    Put,
    /// GETs (whole, ranged) and HEADs.
    Get,
    /// LISTs.
    List,
    /// Deletes.
    Delete,
    /// Every request.
    Any,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// The request fails without taking effect.
    FailBefore,
    /// The request takes effect, then the caller gets an error: a lost acknowledgement.
    /// For reads and lists it is the same as [`Fault::FailBefore`].
    FailAfter,
    /// The store answers 500 without the request taking effect.
    ServerError,
    /// The store answers 409 Conflict without the request taking effect.
    Conflict,
    /// The request hangs this long, then fails without taking effect.
    Timeout(Duration),
    /// A GET returns only the first half of its bytes.
    TruncatedGet,
    /// A LIST answers after this delay.
    SlowList(Duration),
    /// The request waits until the store's gate opens ([`crate::FaultControl::gate`]), then
    /// goes through: a test stops a writer at an exact point (its PUT of a version in
    /// flight) while other writers go on.
    Hold,
    /// A LIST leaves out the entries whose paths the rule's glob matches (matched
    /// against each listed path, not the prefix), as a listing that has not caught up
    /// with a PUT does. Only for [`FaultOp::List`] rules.
    HideFromList,
}

/// The error a fault produces, inside `object_store::Error::Generic`.
#[derive(Debug, Clone)]
pub struct InjectedFault {
    /// The fault.
    pub fault: Fault,
    /// The request's path.
    pub path: String,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fault {
            Fault::FailBefore => write!(f, "injected failure before the request on {}", self.path),
            Fault::FailAfter => write!(
                f,
                "injected lost acknowledgement on {} (the request took effect)",
                self.path
            ),
            Fault::ServerError => write!(f, "injected 500 Internal Server Error on {}", self.path),
            Fault::Conflict => write!(f, "injected 409 Conflict on {}", self.path),
            Fault::Timeout(d) => write!(f, "injected timeout after {d:?} on {}", self.path),
            Fault::TruncatedGet => write!(f, "injected truncated read of {}", self.path),
            Fault::SlowList(d) => write!(f, "injected slow list ({d:?}) of {}", self.path),
            Fault::Hold => write!(f, "injected hold of {}", self.path),
            Fault::HideFromList => write!(f, "injected hiding of {} from a listing", self.path),
        }
    }
}

impl std::error::Error for InjectedFault {}

/// Whether an object-store error was injected by a [`crate::FaultStore`].
pub fn is_injected(error: &object_store::Error) -> bool {
    match error {
        object_store::Error::Generic { source, .. } => {
            source.downcast_ref::<InjectedFault>().is_some()
        }
        _ => false,
    }
}

/// Which requests fail, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    pub(crate) op: FaultOp,
    pub(crate) pattern: String,
    pub(crate) fault: Fault,
    pub(crate) probability: f64,
    pub(crate) limit: Option<u64>,
    pub(crate) skip: u64,
}

impl FaultRule {
    /// Every `op` request fails with `fault` (narrow it with the other methods).
    pub fn new(op: FaultOp, fault: Fault) -> Self {
        Self {
            op,
            pattern: "*".into(),
            fault,
            probability: 1.0,
            limit: None,
            skip: 0,
        }
    }

    /// Only requests whose path matches this glob (`*` matches anything, `/` included).
    #[must_use]
    pub fn with_glob(mut self, glob: impl Into<String>) -> Self {
        self.pattern = glob.into();
        self
    }

    /// Only this share of matching requests (0 to 1).
    #[must_use]
    pub fn with_probability(mut self, probability: f64) -> Self {
        self.probability = probability.clamp(0.0, 1.0);
        self
    }

    /// At most this many times.
    #[must_use]
    pub fn with_limit(mut self, times: u64) -> Self {
        self.limit = Some(times);
        self
    }

    /// Lets the first `requests` matching requests through, then applies: in a store of
    /// one writer, to fail its second commit PUT and not its first, say. Counted per rule,
    /// over the requests of this store it matches while injection is on and no earlier
    /// rule has failed them.
    #[must_use]
    pub fn with_skip(mut self, requests: u64) -> Self {
        self.skip = requests;
        self
    }

    pub(crate) fn applies(&self, op: FaultOp, path: &str) -> bool {
        (self.op == FaultOp::Any || self.op == op) && glob_match(&self.pattern, path)
    }
}

/// `*` matches any run of characters.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_across_segments() {
        assert!(glob_match("*", "a/b/c"));
        assert!(glob_match(
            "*/_delta_log/*.json",
            "t/_delta_log/00000000000000000001.json"
        ));
        assert!(!glob_match("*/_delta_log/*.json", "t/part-0.parquet"));
        assert!(glob_match("a*c*e", "abcde"));
        assert!(!glob_match("a*c", "abd"));
    }
}
