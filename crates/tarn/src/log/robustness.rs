//! Property tests: the log, checkpoint and deletion-vector parsers answer arbitrary and
//! corrupted input with a value or a typed error, never a panic.

use bytes::Bytes;
use object_store::path::Path;
use proptest::prelude::*;

use super::checkpoint::parse_checkpoint_parquet;
use super::checkpoint_write::encode_checkpoint;
use super::parse_commit;
use crate::protocol::{Action, Add, Metadata, Protocol, Remove};

const CASES: u32 = 10_000;

fn valid_commit() -> Vec<u8> {
    concat!(
        r#"{"commitInfo":{"timestamp":1,"operation":"WRITE","txnId":"x"}}"#, "\n",
        r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}"#, "\n",
        r#"{"metaData":{"id":"a","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":["p"],"configuration":{}}}"#, "\n",
        r#"{"add":{"path":"p=1/f.parquet","partitionValues":{"p":"1"},"size":10,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":1}","deletionVector":{"storageType":"u","pathOrInlineDv":"ab^-aqEH.-t@S}K{vb[*k^","offset":1,"sizeInBytes":36,"cardinality":2}}}"#, "\n",
        r#"{"remove":{"path":"old.parquet","deletionTimestamp":5,"dataChange":true}}"#, "\n",
        r#"{"txn":{"appId":"app","version":3}}"#, "\n",
    )
    .as_bytes()
    .to_vec()
}

fn valid_checkpoint() -> Vec<u8> {
    let actions = vec![
        Action::Protocol(Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        }),
        Action::Metadata(Metadata {
            id: "id".into(),
            name: None,
            description: None,
            format: Default::default(),
            schema_string: r#"{"type":"struct","fields":[]}"#.into(),
            partition_columns: vec![],
            configuration: Default::default(),
            created_time: None,
        }),
        Action::Add(Add {
            path: "a.parquet".into(),
            partition_values: Default::default(),
            size: 1,
            modification_time: 2,
            data_change: false,
            stats: Some(r#"{"numRecords":1}"#.into()),
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }),
        Action::Remove(Remove {
            path: "b.parquet".into(),
            deletion_timestamp: Some(1),
            data_change: false,
            extended_file_metadata: None,
            partition_values: None,
            size: None,
            stats: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
        }),
    ];
    encode_checkpoint(&actions, &crate::stats::parsed::CheckpointLayout::classic())
        .map(|b| b.to_vec())
        .unwrap_or_default()
}

/// A corruption of valid bytes: a few flipped bytes (most cases, so decoding goes deep),
/// a truncation, or an insertion.
fn corrupt(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len().max(1);
    let (flip, cut, insert) = (base.clone(), base.clone(), base);
    prop_oneof![
        6 => prop::collection::vec((0..len, 1..=u8::MAX), 1..4).prop_map(move |flips| {
            let mut bytes = flip.clone();
            for (i, b) in flips {
                if let Some(byte) = bytes.get_mut(i) {
                    *byte ^= b;
                }
            }
            bytes
        }),
        2 => (0..len).prop_map(move |at| cut[..at].to_vec()),
        2 => (0..len, prop::collection::vec(any::<u8>(), 1..16)).prop_map(move |(at, extra)| {
            let mut bytes = insert.clone();
            bytes.splice(at..at, extra);
            bytes
        }),
    ]
}

fn commit_inputs() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        ".{0,300}".prop_map(String::into_bytes),
        corrupt(valid_commit()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn commit_parsing_never_panics(bytes in commit_inputs()) {
        let _ = parse_commit(7, &Bytes::from(bytes));
    }

    #[test]
    fn checkpoint_parsing_never_panics(bytes in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        corrupt(valid_checkpoint()),
    ]) {
        let _ = parse_checkpoint_parquet(Bytes::from(bytes), &Path::from("00000000000000000010.checkpoint.parquet"));
    }

    #[test]
    fn deletion_vector_decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256), size in -4i32..300, cardinality in -1i64..100) {
        let descriptor = crate::protocol::DeletionVectorDescriptor {
            storage_type: "i".into(),
            path_or_inline_dv: String::new(),
            offset: None,
            size_in_bytes: size,
            cardinality,
        };
        let record = Bytes::from(bytes.clone());
        let _ = crate::protocol::dv::decode_bitmap(&bytes, &descriptor);
        let _ = crate::protocol::dv::verify_record(&record, &descriptor);
    }
}

#[test]
fn the_valid_inputs_are_valid() {
    assert_eq!(
        parse_commit(0, &Bytes::from(valid_commit())).unwrap().len(),
        6
    );
    let checkpoint = valid_checkpoint();
    assert!(!checkpoint.is_empty());
    assert_eq!(
        parse_checkpoint_parquet(Bytes::from(checkpoint), &Path::from("cp"))
            .unwrap()
            .concat()
            .len(),
        4
    );
}
