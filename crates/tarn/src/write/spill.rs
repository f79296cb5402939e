//! Partitions' waiting rows a write has no room for, kept in local Arrow IPC files until
//! their partition's file is written, so a partition spread thinly over a long input
//! still ends in one file while memory stays within the write's budget.
//!
//! Each time an encoder's waiting rows outgrow its share, its largest partitions go to
//! disk as one round: one IPC file holding a batch per partition. At the end each
//! partition's batches are read back, round by round, into its file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;

use crate::error::{Error, Result};
use crate::protocol::PartitionValues;

type Key = Vec<Option<String>>;

/// Round files kept open for reading back; later rounds open at each read, so a write
/// that spills for very long stays within the process's open files.
const OPEN_ROUNDS: usize = 256;

/// A directory of spill files, removed with everything in it when dropped. A write's
/// spill and a MERGE's source spill (`dml::merge::spill`) each make one.
pub(crate) struct SpillDir(PathBuf);

impl SpillDir {
    /// A fresh directory `<prefix>-<uuid>` under `parent`.
    ///
    /// Fails with [`Error::Spill`] when it cannot be created.
    pub(crate) fn new(parent: &Path, prefix: &str) -> Result<Self> {
        let path = parent.join(format!("{prefix}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).map_err(spill_error(&path))?;
        Ok(Self(path))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// The file `name` in the directory.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory under the temp dir harms nothing.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One encoder's spilled rows: the round files and where each partition's batches are.
pub(super) struct Spill {
    dir: SpillDir,
    schema: SchemaRef,
    rounds: Vec<(PathBuf, Option<FileReader<BufReader<File>>>)>,
    /// Per spilled partition: its values and its batches as (round, batch) positions.
    at: HashMap<Key, (PartitionValues, Vec<(usize, usize)>)>,
}

impl Spill {
    /// An empty spill of `schema` rows in a fresh directory under the system's temp dir.
    ///
    /// Fails with [`Error::Spill`] when the directory cannot be made.
    pub(super) fn new(schema: SchemaRef) -> Result<Spill> {
        Ok(Spill {
            dir: SpillDir::new(&std::env::temp_dir(), "tarn-write")?,
            schema,
            rounds: Vec::new(),
            at: HashMap::new(),
        })
    }

    /// Writes one batch per partition of `parts` as a new round.
    ///
    /// Fails with [`Error::Spill`] when the round's file cannot be written or reopened.
    pub(super) fn round(&mut self, parts: Vec<(Key, PartitionValues, RecordBatch)>) -> Result<()> {
        let round = self.rounds.len();
        let path = self.dir.file(&format!("round-{round}.arrow"));
        let file = File::create(&path).map_err(spill_error(&path))?;
        let mut writer = FileWriter::try_new(BufWriter::new(file), &self.schema)
            .map_err(spill_arrow_error(&path))?;
        for (index, (key, values, rows)) in parts.into_iter().enumerate() {
            writer.write(&rows).map_err(spill_arrow_error(&path))?;
            self.at
                .entry(key)
                .or_insert_with(|| (values, Vec::new()))
                .1
                .push((round, index));
        }
        writer.finish().map_err(spill_arrow_error(&path))?;
        let reader = match round < OPEN_ROUNDS {
            true => Some(open_round(&path)?),
            false => None,
        };
        self.rounds.push((path, reader));
        Ok(())
    }

    /// Whether rows of the partition `key` are spilled.
    pub(super) fn holds(&self, key: &Key) -> bool {
        self.at.contains_key(key)
    }

    /// The spilled partitions' keys.
    pub(super) fn keys(&self) -> impl Iterator<Item = &Key> {
        self.at.keys()
    }

    /// Takes the partition `key` out of the spill: its values and the positions of its
    /// batches, in the order they were spilled; `None` when none are spilled.
    pub(super) fn take(&mut self, key: &Key) -> Option<(PartitionValues, Vec<(usize, usize)>)> {
        self.at.remove(key)
    }

    /// The batch at `position` (as [`take`](Self::take) gives it), read back.
    ///
    /// Fails with [`Error::Spill`] when its round's file cannot be read.
    pub(super) fn read(&mut self, (round, index): (usize, usize)) -> Result<RecordBatch> {
        let Some((path, kept)) = self.rounds.get_mut(round) else {
            return Err(missing(self.dir.path(), round, index));
        };
        let mut opened = None;
        let reader = match kept {
            Some(reader) => reader,
            None => opened.insert(open_round(path)?),
        };
        reader.set_index(index).map_err(spill_arrow_error(path))?;
        match reader.next() {
            Some(batch) => batch.map_err(spill_arrow_error(path)),
            None => Err(missing(path, round, index)),
        }
    }
}

fn open_round(path: &Path) -> Result<FileReader<BufReader<File>>> {
    let file = File::open(path).map_err(spill_error(path))?;
    FileReader::try_new(BufReader::new(file), None).map_err(spill_arrow_error(path))
}

fn missing(path: &Path, round: usize, index: usize) -> Error {
    Error::Spill {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("round {round} has no batch {index}"),
        ),
    }
}

/// An [`Error::Spill`] naming the spill file `path`.
pub(crate) fn spill_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Spill {
        path: path.to_path_buf(),
        source,
    }
}

/// An Arrow IPC error on the spill file `path` of `what`: [`Error::Spill`] for I/O,
/// otherwise an Arrow error.
pub(crate) fn arrow_spill_error<'a>(
    path: &'a Path,
    what: &'a str,
) -> impl FnOnce(arrow::error::ArrowError) -> Error + 'a {
    move |e| match e {
        arrow::error::ArrowError::IoError(_, source) => spill_error(path)(source),
        other => Error::arrow(format!("spilling {what} to {}", path.display()))(other),
    }
}

fn spill_arrow_error(path: &Path) -> impl FnOnce(arrow::error::ArrowError) -> Error + '_ {
    arrow_spill_error(path, "waiting rows")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn ids(range: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(range))]).unwrap()
    }

    fn values(part: &str) -> PartitionValues {
        let mut values = PartitionValues::default();
        values.insert("part".into(), Some(part.into()));
        values
    }

    #[test]
    fn spilled_partitions_read_back_whole_in_the_order_they_went_out() {
        let mut spill = Spill::new(ids(0..0).schema()).unwrap();
        let (a, b) = (vec![Some("a".to_string())], vec![Some("b".to_string())]);
        spill
            .round(vec![
                (a.clone(), values("a"), ids(0..3)),
                (b.clone(), values("b"), ids(10..12)),
            ])
            .unwrap();
        spill
            .round(vec![(a.clone(), values("a"), ids(3..5))])
            .unwrap();
        assert!(spill.holds(&a) && spill.holds(&b));
        assert!(!spill.holds(&vec![Some("c".to_string())]));

        let (got, positions) = spill.take(&a).unwrap();
        assert_eq!(got.into_map().remove("part"), Some(Some("a".to_string())));
        let read: Vec<i64> = positions
            .into_iter()
            .flat_map(|p| {
                let batch = spill.read(p).unwrap();
                batch
                    .column(0)
                    .as_primitive::<Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(read, vec![0, 1, 2, 3, 4]);
        assert!(!spill.holds(&a), "taken");
        assert_eq!(spill.keys().count(), 1);
        let err = spill.read((7, 0)).unwrap_err();
        assert!(matches!(err, Error::Spill { .. }), "{err}");
    }

    #[test]
    fn rounds_past_those_kept_open_read_back_too() {
        let mut spill = Spill::new(ids(0..0).schema()).unwrap();
        let key = vec![Some("a".to_string())];
        let rounds = OPEN_ROUNDS as i64 + 2;
        for round in 0..rounds {
            spill
                .round(vec![(key.clone(), values("a"), ids(round..round + 1))])
                .unwrap();
        }
        assert!(spill.rounds[OPEN_ROUNDS].1.is_none(), "opened when read");
        let (_, positions) = spill.take(&key).unwrap();
        let read: Vec<i64> = positions
            .into_iter()
            .map(|p| {
                spill
                    .read(p)
                    .unwrap()
                    .column(0)
                    .as_primitive::<Int64Type>()
                    .value(0)
            })
            .collect();
        assert_eq!(read, (0..rounds).collect::<Vec<i64>>());
    }

    #[test]
    fn the_spill_directory_goes_with_the_spill() {
        let spill = Spill::new(ids(0..0).schema()).unwrap();
        let dir = spill.dir.path().to_path_buf();
        assert!(dir.is_dir());
        drop(spill);
        assert!(!dir.exists());
    }
}
