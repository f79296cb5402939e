//! The catalog workloads of `tarn-concurrency`: the shape of a seeded catalog (which
//! names exist), seeding it, and the operations its worker processes time.
//!
//! A catalog of N entries holds `ceil(N / 100,000)` namespaces `ns00000`, `ns00001`, ...
//! each with the same number of declared tables `t000000`, `t000001`, ...: 1K entries
//! are one namespace of 999 tables, 1M entries ten namespaces of 99,999 tables, so a
//! `list-tables` at 1M lists a 100K-table namespace. Writers work on names of their own
//! (`<prefix><run>w<worker>n<op>`) in a namespace picked at random, so they spread over
//! the manifest's pages as users' tables would.

use std::fmt;

use arrow::datatypes::{DataType, Field, Schema};
use clap::ValueEnum;
use tarn_catalog::manifest::{NAMESPACE, Row, TABLE};
use tarn_catalog::{Catalog, ObjectId, ObjectMetadata};
use tarn_store::SplitMix64;

/// Tables per namespace at most.
const TABLES_PER_NAMESPACE: usize = 100_000;
/// Catalogs up to this size are seeded through the API (group-committed); larger ones
/// with one [`Catalog::import`].
pub const API_SEED_MAX: usize = 10_000;
/// Ids a listing page returns.
pub const LIST_PAGE: usize = 100;

/// What one catalog operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CatalogOp {
    /// Create a namespace.
    CreateNamespace,
    /// Create a table (its Tarn table, then its entry).
    CreateTable,
    /// Declare a table (an entry only).
    DeclareTable,
    /// Drop a table declared beforehand (outside the timing).
    DropTable,
    /// Rename a table declared beforehand (outside the timing).
    RenameTable,
    /// The first page of the root's namespaces.
    ListNamespaces,
    /// The first page of a namespace's tables.
    ListTables,
    /// Describe a seeded table.
    DescribeTable,
    /// Full-text search over metadata for one table's name.
    Search,
    /// Load the manifest's snapshot: cold, what opening the catalog costs; warm, a
    /// refresh.
    Open,
}

impl CatalogOp {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::CreateNamespace => "create-namespace",
            Self::CreateTable => "create-table",
            Self::DeclareTable => "declare-table",
            Self::DropTable => "drop-table",
            Self::RenameTable => "rename-table",
            Self::ListNamespaces => "list-namespaces",
            Self::ListTables => "list-tables",
            Self::DescribeTable => "describe-table",
            Self::Search => "search",
            Self::Open => "open",
        }
    }

    /// Whether it changes the catalog.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Self::CreateNamespace
                | Self::CreateTable
                | Self::DeclareTable
                | Self::DropTable
                | Self::RenameTable
        )
    }
}

impl fmt::Display for CatalogOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which names a seeded catalog holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Namespaces.
    pub namespaces: usize,
    /// Tables in each.
    pub tables_per_namespace: usize,
}

impl Shape {
    /// The shape of a catalog of about `entries` objects.
    pub fn of(entries: usize) -> Shape {
        let namespaces = entries.div_ceil(TABLES_PER_NAMESPACE).max(1);
        Shape {
            namespaces,
            tables_per_namespace: (entries / namespaces).saturating_sub(1).max(1),
        }
    }

    /// Objects in all.
    pub fn entries(&self) -> usize {
        self.namespaces * (self.tables_per_namespace + 1)
    }

    /// Namespace `k`.
    pub fn namespace(&self, k: usize) -> String {
        format!("ns{k:05}")
    }

    /// Table `j` of namespace `k`.
    pub fn table(&self, k: usize, j: usize) -> String {
        format!("ns{k:05}$t{j:06}")
    }

    /// The metadata of table `j` of namespace `k`: an owner, and a description that
    /// names it (what `search` looks for).
    pub fn table_metadata(&self, k: usize, j: usize) -> ObjectMetadata {
        ObjectMetadata {
            properties: [("owner".to_string(), format!("team{}", j % 50))].into(),
            description: Some(format!("table t{j:06} in ns{k:05}")),
            declared: true,
        }
    }

    /// Every row of the seeded catalog, namespaces first in each namespace's run.
    pub fn rows(&self, now_us: i64) -> Vec<Row> {
        let mut rows = Vec::with_capacity(self.entries());
        for k in 0..self.namespaces {
            rows.push(Row {
                object_id: self.namespace(k),
                object_type: NAMESPACE.into(),
                location: None,
                metadata: ObjectMetadata::default(),
                created_at: now_us,
                updated_at: now_us,
            });
            for j in 0..self.tables_per_namespace {
                rows.push(Row {
                    object_id: self.table(k, j),
                    object_type: TABLE.into(),
                    location: None,
                    metadata: self.table_metadata(k, j),
                    created_at: now_us,
                    updated_at: now_us,
                });
            }
        }
        rows
    }
}

/// Seeds an empty catalog: through the API (namespaces, then every table at once, which
/// the handle groups into commits) up to [`API_SEED_MAX`] entries, else in one import.
///
/// Fails as the catalog's operations do.
pub async fn seed(catalog: &Catalog, shape: Shape) -> Result<usize, tarn_catalog::Error> {
    if shape.entries() > API_SEED_MAX {
        return catalog.import(shape.rows(catalog.now())).await;
    }
    for k in 0..shape.namespaces {
        let id = ObjectId::parse(&shape.namespace(k))?;
        catalog
            .create_namespace(&id, ObjectMetadata::default(), tarn_catalog::IfExists::Fail)
            .await?;
    }
    let mut declares = Vec::with_capacity(shape.entries());
    for k in 0..shape.namespaces {
        for j in 0..shape.tables_per_namespace {
            let (catalog, id) = (catalog.clone(), ObjectId::parse(&shape.table(k, j))?);
            let metadata = shape.table_metadata(k, j);
            declares.push(tokio::spawn(async move {
                catalog.declare_table(&id, metadata).await
            }));
        }
    }
    for declare in declares {
        declare.await.map_err(|_| tarn_catalog::Error::Stopped)??;
    }
    Ok(shape.entries())
}

/// A small deterministic generator (tarn-store's SplitMix64), so runs pick the same names.
#[derive(Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64(seed))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A value in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The objects one timed operation works on.
#[derive(Debug, Clone)]
pub struct Target {
    /// The object (the namespace listed, the table described, the name created).
    pub id: ObjectId,
    /// A rename's new name.
    pub to: Option<ObjectId>,
    /// A search's query.
    pub query: Option<String>,
}

/// The targets of worker `worker`'s `ops` operations in run `run`.
///
/// Fails with [`tarn_catalog::Error::InvalidName`] only if the names built are invalid.
pub fn targets(
    op: CatalogOp,
    shape: Shape,
    run: &str,
    worker: usize,
    ops: usize,
) -> Result<Vec<Target>, tarn_catalog::Error> {
    let mut rng = Rng::new(0x5EED ^ ((worker as u64) << 20) ^ hash(run));
    let mut out = Vec::with_capacity(ops);
    for n in 0..ops {
        let k = rng.below(shape.namespaces);
        let j = rng.below(shape.tables_per_namespace);
        let own = |prefix: &str| format!("{}${prefix}{run}w{worker}n{n}", shape.namespace(k));
        let target = match op {
            CatalogOp::CreateNamespace | CatalogOp::CreateTable | CatalogOp::DeclareTable => {
                Target {
                    id: ObjectId::parse(&own("c"))?,
                    to: None,
                    query: None,
                }
            }
            CatalogOp::DropTable => Target {
                id: ObjectId::parse(&own("d"))?,
                to: None,
                query: None,
            },
            CatalogOp::RenameTable => Target {
                id: ObjectId::parse(&own("r"))?,
                to: Some(ObjectId::parse(&own("s"))?),
                query: None,
            },
            CatalogOp::ListNamespaces | CatalogOp::Open => Target {
                id: ObjectId::root(),
                to: None,
                query: None,
            },
            CatalogOp::ListTables => Target {
                id: ObjectId::parse(&shape.namespace(k))?,
                to: None,
                query: None,
            },
            CatalogOp::DescribeTable => Target {
                id: ObjectId::parse(&shape.table(k, j))?,
                to: None,
                query: None,
            },
            CatalogOp::Search => Target {
                id: ObjectId::root(),
                to: None,
                query: Some(format!("t{j:06}")),
            },
        };
        out.push(target);
    }
    Ok(out)
}

fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Makes what the operations on `targets` need before they are timed: the tables a
/// drop or rename acts on, declared in one import (so the setup of many workers does
/// not race itself).
///
/// Fails as the import does.
pub async fn prepare(
    catalog: &Catalog,
    op: CatalogOp,
    targets: &[Target],
) -> Result<(), tarn_catalog::Error> {
    if !matches!(op, CatalogOp::DropTable | CatalogOp::RenameTable) || targets.is_empty() {
        return Ok(());
    }
    let now = catalog.now();
    let rows = targets
        .iter()
        .map(|t| Row {
            object_id: t.id.key(),
            object_type: TABLE.into(),
            location: None,
            metadata: ObjectMetadata {
                declared: true,
                ..ObjectMetadata::default()
            },
            created_at: now,
            updated_at: now,
        })
        .collect();
    catalog.import(rows).await?;
    Ok(())
}

/// Runs one operation; returns how many ids or hits it returned (1 for a write).
///
/// Fails as the catalog operation does.
pub async fn run(
    catalog: &Catalog,
    op: CatalogOp,
    target: &Target,
) -> Result<usize, tarn_catalog::Error> {
    let metadata = || ObjectMetadata {
        properties: [("owner".to_string(), "bench".to_string())].into(),
        description: Some("made by tarn-concurrency".into()),
        declared: false,
    };
    match op {
        CatalogOp::CreateNamespace => {
            catalog
                .create_namespace(&target.id, metadata(), tarn_catalog::IfExists::Fail)
                .await?;
            Ok(1)
        }
        CatalogOp::CreateTable => {
            let schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
            catalog
                .create_table(&target.id, &schema, Vec::new(), metadata())
                .await?;
            Ok(1)
        }
        CatalogOp::DeclareTable => {
            catalog.declare_table(&target.id, metadata()).await?;
            Ok(1)
        }
        CatalogOp::DropTable => {
            catalog
                .drop_table(&target.id, tarn_catalog::DropData::Keep)
                .await?;
            Ok(1)
        }
        CatalogOp::RenameTable => {
            let to = target.to.as_ref().unwrap_or(&target.id);
            catalog.rename_table(&target.id, to).await?;
            Ok(1)
        }
        CatalogOp::ListNamespaces => Ok(catalog
            .list_namespaces(&target.id, LIST_PAGE, None)
            .await?
            .ids
            .len()),
        CatalogOp::ListTables => Ok(catalog
            .list_tables(&target.id, LIST_PAGE, None)
            .await?
            .ids
            .len()),
        CatalogOp::DescribeTable => {
            catalog
                .describe_table(&target.id, tarn_catalog::Detail::Entry)
                .await?;
            Ok(1)
        }
        CatalogOp::Search => {
            let query = target.query.as_deref().unwrap_or("table");
            Ok(catalog.search(query, 10).await?.len())
        }
        CatalogOp::Open => {
            catalog.snapshot().await?;
            Ok(0)
        }
    }
}

/// A short name for the kind of an error (its variant path), for counting errors by kind.
pub fn error_kind(error: &impl fmt::Debug) -> String {
    let text = format!("{error:?}");
    let mut kind = String::new();
    for part in text.split(['(', ' ', '{']) {
        if part.is_empty() || !part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            break;
        }
        if !kind.is_empty() {
            kind.push('/');
        }
        kind.push_str(part);
    }
    kind
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_hold_about_the_entries_asked_for() {
        assert_eq!(
            Shape::of(1_000),
            Shape {
                namespaces: 1,
                tables_per_namespace: 999
            }
        );
        assert_eq!(Shape::of(1_000).entries(), 1_000);
        let big = Shape::of(1_000_000);
        assert_eq!((big.namespaces, big.tables_per_namespace), (10, 99_999));
        assert_eq!(big.entries(), 1_000_000);
        assert_eq!(big.rows(0).len(), 1_000_000);
    }

    #[test]
    fn targets_are_the_workers_own_and_repeatable() {
        let shape = Shape::of(1_000);
        let a = targets(CatalogOp::RenameTable, shape, "x1", 3, 4).unwrap();
        let b = targets(CatalogOp::RenameTable, shape, "x1", 3, 4).unwrap();
        assert_eq!(a[2].id, b[2].id);
        assert_eq!(a[2].id.key(), "ns00000$rx1w3n2");
        assert_eq!(a[2].to.as_ref().unwrap().key(), "ns00000$sx1w3n2");
        let d = targets(CatalogOp::DescribeTable, shape, "x1", 0, 50).unwrap();
        assert!(d.iter().all(|t| t.id.key().starts_with("ns00000$t")));
    }

    #[test]
    fn error_kinds_name_the_variant_path() {
        let e = tarn_catalog::Error::NotFound {
            kind: "table",
            id: "a".into(),
        };
        assert_eq!(error_kind(&e), "NotFound");
        let e =
            tarn_catalog::Error::Table(tarn::Error::TextMatchWithoutIndex { column: "m".into() });
        assert_eq!(error_kind(&e), "Table/TextMatchWithoutIndex");
    }
}
