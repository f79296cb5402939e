//! The Delta protocol as pure types: actions, schemas, table features, and the names of
//! log files, the deletion-vector codec.
//! Nothing here does IO.

pub mod actions;
pub(crate) mod dv;
pub mod features;
pub mod mapping;
pub mod names;
mod partition_values;
pub mod properties;
pub mod schema;
pub mod stats;
pub mod widening;

pub use actions::{
    Action, Add, Cdc, CheckpointMetadata, CommitInfo, DeletionVectorDescriptor, DomainMetadata,
    Format, Metadata, PartitionValues, Protocol, Remove, Sidecar, Txn,
};
pub use schema::{ArrayType, DataType, MapType, PrimitiveType, StructField, StructType};
pub use stats::Stats;
