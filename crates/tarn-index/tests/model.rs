//! Each index kind against a brute-force model: random values, addresses and queries,
//! on an in-memory store and on the local file system; and damaged objects give typed
//! errors naming the object.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, StringArray};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use proptest::prelude::*;
use tarn_index::fts::{FullTextBuilder, FullTextIndex, FullTextOptions, TextQuery};
use tarn_index::{
    BTreeBuilder, BTreeIndex, BTreeOptions, BitmapBuilder, BitmapIndex, Error, RoaringTreemap,
    ScalarQuery, row_address,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn stores() -> Vec<(Arc<dyn ObjectStore>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    vec![
        (Arc::new(InMemory::new()), None),
        (Arc::new(local), Some(dir)),
    ]
}

/// Values of one of two types: small integers or words with shared prefixes.
#[derive(Debug, Clone)]
enum Column {
    Ints(Vec<Option<i64>>),
    Words(Vec<Option<String>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Ints(v) => v.len(),
            Column::Words(v) => v.len(),
        }
    }

    fn array(&self) -> ArrayRef {
        match self {
            Column::Ints(v) => Arc::new(Int64Array::from(v.clone())),
            Column::Words(v) => Arc::new(StringArray::from(v.clone())),
        }
    }
}

const WORDS: [&str; 8] = ["a", "ab", "abc", "b", "ba", "bab", "c", "cab"];

fn column() -> impl Strategy<Value = Column> {
    prop_oneof![
        proptest::collection::vec(proptest::option::weighted(0.9, -20i64..20), 0..300)
            .prop_map(Column::Ints),
        proptest::collection::vec(
            proptest::option::weighted(
                0.9,
                proptest::sample::select(WORDS.to_vec()).prop_map(String::from)
            ),
            0..300
        )
        .prop_map(Column::Words),
    ]
}

/// A query of the column's type, as the index takes it and as the model evaluates it.
#[derive(Debug, Clone)]
enum Probe {
    Equals(usize),
    In(Vec<usize>),
    Range(Bound<usize>, Bound<usize>),
    Prefix(usize),
    IsNull,
}

fn probe() -> impl Strategy<Value = Probe> {
    let bound = prop_oneof![
        Just(Bound::Unbounded),
        (0usize..40).prop_map(Bound::Included),
        (0usize..40).prop_map(Bound::Excluded),
    ];
    prop_oneof![
        (0usize..40).prop_map(Probe::Equals),
        proptest::collection::vec(0usize..40, 0..6).prop_map(Probe::In),
        (bound.clone(), bound).prop_map(|(l, u)| Probe::Range(l, u)),
        (0usize..40).prop_map(Probe::Prefix),
        Just(Probe::IsNull),
    ]
}

/// The value a probe number stands for in the column's type.
fn value(column: &Column, n: usize) -> ArrayRef {
    match column {
        Column::Ints(_) => Arc::new(Int64Array::from(vec![n as i64 - 20])),
        Column::Words(_) => Arc::new(StringArray::from(vec![WORDS[n % WORDS.len()]])),
    }
}

fn query_of(column: &Column, probe: &Probe) -> Option<ScalarQuery> {
    let v = |n: usize| value(column, n);
    Some(match probe {
        Probe::Equals(n) => ScalarQuery::Equals(v(*n)),
        Probe::In(ns) => {
            let parts: Vec<ArrayRef> = ns.iter().map(|n| v(*n)).collect();
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            let values = if refs.is_empty() {
                arrow::array::new_empty_array(column.array().data_type())
            } else {
                arrow::compute::concat(&refs).unwrap()
            };
            ScalarQuery::In(values)
        }
        Probe::Range(l, u) => {
            let b = |b: &Bound<usize>| match b {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(n) => Bound::Included(v(*n)),
                Bound::Excluded(n) => Bound::Excluded(v(*n)),
            };
            ScalarQuery::Range {
                lower: b(l),
                upper: b(u),
            }
        }
        Probe::Prefix(n) => match column {
            Column::Words(_) => ScalarQuery::Prefix(v(*n)),
            Column::Ints(_) => return None,
        },
        Probe::IsNull => ScalarQuery::IsNull,
    })
}

/// The addresses whose value the probe selects, by brute force.
fn model(column: &Column, addresses: &[u64], probe: &Probe) -> RoaringTreemap {
    let matches = |i: usize| -> bool {
        match column {
            Column::Ints(values) => {
                let Some(x) = values[i] else {
                    return matches!(probe, Probe::IsNull);
                };
                let n = |k: usize| k as i64 - 20;
                match probe {
                    Probe::Equals(k) => x == n(*k),
                    Probe::In(ks) => ks.iter().any(|k| x == n(*k)),
                    Probe::Range(l, u) => in_range(&x, l, u, n),
                    Probe::Prefix(_) => false,
                    Probe::IsNull => false,
                }
            }
            Column::Words(values) => {
                let Some(x) = values[i].as_deref() else {
                    return matches!(probe, Probe::IsNull);
                };
                let w = |k: usize| WORDS[k % WORDS.len()];
                match probe {
                    Probe::Equals(k) => x == w(*k),
                    Probe::In(ks) => ks.iter().any(|k| x == w(*k)),
                    Probe::Range(l, u) => in_range(&x, l, u, w),
                    Probe::Prefix(k) => x.starts_with(w(*k)),
                    Probe::IsNull => false,
                }
            }
        }
    };
    (0..column.len())
        .filter(|i| matches(*i))
        .map(|i| addresses[i])
        .collect()
}

fn in_range<T: PartialOrd>(
    x: &T,
    l: &Bound<usize>,
    u: &Bound<usize>,
    of: impl Fn(usize) -> T,
) -> bool {
    let above = match l {
        Bound::Unbounded => true,
        Bound::Included(k) => *x >= of(*k),
        Bound::Excluded(k) => *x > of(*k),
    };
    let below = match u {
        Bound::Unbounded => true,
        Bound::Included(k) => *x <= of(*k),
        Bound::Excluded(k) => *x < of(*k),
    };
    above && below
}

/// Distinct addresses over a few files, in a shuffled order.
fn addresses(n: usize, seed: u64) -> Vec<u64> {
    let mut out: Vec<u64> = (0..n as u64)
        .map(|i| row_address((i % 4) as u32, (i / 4) as u32 * 3 + (seed % 3) as u32))
        .collect();
    // A deterministic shuffle.
    let mut state = seed | 1;
    for i in (1..out.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.swap(i, (state % (i as u64 + 1)) as usize);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn btree_and_bitmap_answer_as_the_model_does(
        column in column(),
        probes in proptest::collection::vec(probe(), 1..8),
        page_rows in 1usize..40,
        chunks in 1usize..4,
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        let addresses = addresses(column.len(), seed);
        let array = column.array();
        for (store, _dir) in stores() {
            rt.block_on(async {
                let mut btree = BTreeBuilder::new(array.data_type(), BTreeOptions { page_rows }).unwrap();
                let mut bitmap = BitmapBuilder::new(array.data_type()).unwrap();
                // Pushed in several chunks, as a stream of batches arrives.
                let step = column.len().div_ceil(chunks).max(1);
                let mut start = 0;
                while start < column.len() {
                    let len = step.min(column.len() - start);
                    btree.push(array.slice(start, len), &addresses[start..start + len]).unwrap();
                    bitmap.push(array.slice(start, len), &addresses[start..start + len]).unwrap();
                    start += len;
                }
                let (bt_path, bm_path) = (Path::from("i/x.btree"), Path::from("i/x.bitmap"));
                let info = btree.write(store.as_ref(), &bt_path).await.unwrap();
                prop_assert_eq!(info.rows, column.len() as u64);
                bitmap.write(store.as_ref(), &bm_path).await.unwrap();
                let bt = BTreeIndex::open(Arc::clone(&store), &bt_path).await.unwrap();
                let bm = BitmapIndex::open(Arc::clone(&store), &bm_path).await.unwrap();
                prop_assert_eq!(bt.rows(), column.len() as u64);
                for probe in &probes {
                    let Some(query) = query_of(&column, probe) else { continue };
                    let expected = model(&column, &addresses, probe);
                    let got = bt.query(&query).await.unwrap();
                    prop_assert_eq!(&got, &expected, "btree {:?}", probe);
                    // Asked again, from cached pages.
                    prop_assert_eq!(&bt.query(&query).await.unwrap(), &expected);
                    let got = bm.query(&query).await.unwrap();
                    prop_assert_eq!(&got, &expected, "bitmap {:?}", probe);
                }
                Ok(())
            })?;
        }
    }
}

const VOCABULARY: [&str; 6] = ["red", "green", "blue", "fox", "dog", "Red"];

fn text_query() -> impl Strategy<Value = TextQuery> {
    let word = proptest::sample::select(VOCABULARY.to_vec());
    let leaf = prop_oneof![
        word.clone().prop_map(|w| TextQuery::Term(w.to_string())),
        (word.clone(), word).prop_map(|(a, b)| TextQuery::Phrase(format!("{a} {b}"))),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..3).prop_map(TextQuery::And),
            proptest::collection::vec(inner.clone(), 1..3).prop_map(TextQuery::Or),
            inner.prop_map(|q| TextQuery::Not(Box::new(q))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn full_text_answers_as_the_model_does(
        docs in proptest::collection::vec(
            proptest::option::weighted(
                0.9,
                proptest::collection::vec(proptest::sample::select(VOCABULARY.to_vec()), 0..6)
                    .prop_map(|w| w.join(" ")),
            ),
            0..80,
        ),
        queries in proptest::collection::vec(text_query(), 1..6),
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        let addresses = addresses(docs.len(), seed);
        let array: ArrayRef = Arc::new(StringArray::from(docs.clone()));
        let options = FullTextOptions::default();
        let analyzer = options.analyzer();
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        rt.block_on(async {
            let mut builder = FullTextBuilder::new(options).unwrap();
            builder.push(&array, &addresses).unwrap();
            let path = Path::from("i/x.fts");
            builder.write(store.as_ref(), &path).await.unwrap();
            let index = FullTextIndex::open(Arc::clone(&store), &path).await.unwrap();
            for query in &queries {
                let expected: RoaringTreemap = docs
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.as_deref().is_some_and(|d| query.matches(&analyzer, d)))
                    .map(|(i, _)| addresses[i])
                    .collect();
                let got = index.search(query).await.unwrap();
                prop_assert_eq!(&got, &expected, "{}", query);
                let scored = index.search_scored(query, 1000).await.unwrap();
                let scored: RoaringTreemap = scored.iter().map(|(a, _)| *a).collect();
                prop_assert_eq!(&scored, &expected, "scored {}", query);
            }
            Ok(())
        })?;
    }
}

#[test]
fn full_text_scores_rank_the_denser_match_first() {
    let rt = runtime();
    rt.block_on(async {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let docs: ArrayRef = Arc::new(StringArray::from(vec![
            "the fox",
            "fox fox fox jumps",
            "a dog",
        ]));
        let mut builder = FullTextBuilder::new(FullTextOptions::default()).unwrap();
        builder.push(&docs, &[10, 20, 30]).unwrap();
        let path = Path::from("i/rank.fts");
        builder.write(store.as_ref(), &path).await.unwrap();
        let index = FullTextIndex::open(Arc::clone(&store), &path)
            .await
            .unwrap();
        let top = index
            .search_scored(&TextQuery::parse("fox").unwrap(), 10)
            .await
            .unwrap();
        assert_eq!(
            top.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            vec![20, 10]
        );
        assert!(top[0].1 > top[1].1);
    });
}

/// Each kind, written once, then read back damaged in several ways.
#[test]
fn damaged_objects_give_typed_errors_naming_the_object() {
    let rt = runtime();
    rt.block_on(async {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let values: ArrayRef = Arc::new(Int64Array::from((0..5000).collect::<Vec<i64>>()));
        let words: ArrayRef = Arc::new(StringArray::from(
            (0..500)
                .map(|i| format!("word{} other", i % 17))
                .collect::<Vec<_>>(),
        ));
        let addresses: Vec<u64> = (0..5000).collect();
        let mut btree =
            BTreeBuilder::new(values.data_type(), BTreeOptions { page_rows: 100 }).unwrap();
        btree.push(Arc::clone(&values), &addresses).unwrap();
        let (btree_bytes, _) = btree.finish().unwrap();
        let mut bitmap = BitmapBuilder::new(values.data_type()).unwrap();
        bitmap.push(Arc::clone(&values), &addresses).unwrap();
        let (bitmap_bytes, _) = bitmap.finish().unwrap();
        let mut fts = FullTextBuilder::new(FullTextOptions::default()).unwrap();
        fts.push(&words, &addresses[..500]).unwrap();
        let (fts_bytes, _) = fts.finish().unwrap();

        async fn open_and_query(
            store: &Arc<dyn ObjectStore>,
            path: &Path,
            kind: &str,
        ) -> Result<(), Error> {
            let eq = ScalarQuery::Equals(Arc::new(Int64Array::from(vec![4321])));
            match kind {
                "btree" => BTreeIndex::open(Arc::clone(store), path)
                    .await?
                    .query(&eq)
                    .await
                    .map(|_| ()),
                "bitmap" => BitmapIndex::open(Arc::clone(store), path)
                    .await?
                    .query(&eq)
                    .await
                    .map(|_| ()),
                _ => FullTextIndex::open(Arc::clone(store), path)
                    .await?
                    .search(&TextQuery::parse("word3").unwrap())
                    .await
                    .map(|_| ()),
            }
        }
        for (kind, good) in [
            ("btree", btree_bytes),
            ("bitmap", bitmap_bytes),
            ("fts", fts_bytes),
        ] {
            let path = Path::from(format!("damaged/{kind}"));
            store.put(&path, good.clone().into()).await.unwrap();
            open_and_query(&store, &path, kind).await.unwrap();

            let missing = Path::from(format!("damaged/{kind}-missing"));
            let err = open_and_query(&store, &missing, kind).await.unwrap_err();
            assert!(
                matches!(&err, Error::NotFound { path } if path.contains("missing")),
                "{kind}: {err}"
            );

            let truncated = good.slice(..good.len() - 7);
            store.put(&path, truncated.into()).await.unwrap();
            let err = open_and_query(&store, &path, kind).await.unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { path: p, .. } if p.contains(kind)),
                "{kind}: {err}"
            );

            let cut = good.slice(1000..);
            store.put(&path, cut.into()).await.unwrap();
            let err = open_and_query(&store, &path, kind).await.unwrap_err();
            assert!(matches!(&err, Error::Corrupt { .. }), "{kind}: {err}");

            // A flipped byte in the meta: its checksum catches it on open.
            let mut flipped = good.to_vec();
            let n = flipped.len();
            flipped[n - 40] ^= 0x5a;
            store.put(&path, flipped.into()).await.unwrap();
            let err = open_and_query(&store, &path, kind).await.unwrap_err();
            assert!(matches!(&err, Error::Corrupt { .. }), "{kind}: {err}");
            assert!(err.to_string().contains(kind), "{kind}: {err}");

            // A newer format version.
            let mut newer = good.to_vec();
            let n = newer.len();
            newer[n - 12] = 9;
            store.put(&path, newer.into()).await.unwrap();
            let err = open_and_query(&store, &path, kind).await.unwrap_err();
            assert!(
                matches!(&err, Error::UnsupportedVersion { version: 9, .. }),
                "{kind}: {err}"
            );
        }
        // A bitmap read with its checksum broken (the first bitmap is value 0's).
        let mut bitmap = BitmapBuilder::new(values.data_type()).unwrap();
        bitmap.push(Arc::clone(&values), &addresses).unwrap();
        let (bytes, _) = bitmap.finish().unwrap();
        let mut flipped = bytes.to_vec();
        flipped[3] ^= 0xff;
        let path = Path::from("damaged/bitmap-part");
        store.put(&path, flipped.into()).await.unwrap();
        let index = BitmapIndex::open(Arc::clone(&store), &path).await.unwrap();
        let err = index
            .query(&ScalarQuery::Equals(Arc::new(Int64Array::from(vec![0]))))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")),
            "{err}"
        );
        // The full-text hot cache (just before the meta) with a byte flipped.
        let mut fts = FullTextBuilder::new(FullTextOptions::default()).unwrap();
        fts.push(&words, &addresses[..500]).unwrap();
        let (bytes, _) = fts.finish().unwrap();
        let n = bytes.len();
        let meta_offset = u64::from_le_bytes(bytes[n - 32..n - 24].try_into().unwrap()) as usize;
        let mut flipped = bytes.to_vec();
        flipped[meta_offset - 5] ^= 0xff;
        let path = Path::from("damaged/fts-hot");
        store.put(&path, flipped.into()).await.unwrap();
        let err = FullTextIndex::open(Arc::clone(&store), &path)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")),
            "{err}"
        );
        // A BTree page read with its checksum broken.
        let mut btree =
            BTreeBuilder::new(values.data_type(), BTreeOptions { page_rows: 100 }).unwrap();
        btree.push(Arc::clone(&values), &addresses).unwrap();
        let (bytes, _) = btree.finish().unwrap();
        let mut flipped = bytes.to_vec();
        flipped[20] ^= 0xff;
        let path = Path::from("damaged/page");
        store.put(&path, flipped.into()).await.unwrap();
        let index = BTreeIndex::open(Arc::clone(&store), &path).await.unwrap();
        let err = index
            .query(&ScalarQuery::Equals(Arc::new(Int64Array::from(vec![5]))))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")),
            "{err}"
        );
    });
}
