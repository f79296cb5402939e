"""Type stubs for ``tarn._tarn``, the native module ``tarn`` re-exports."""

from datetime import datetime
from typing import Any

import pyarrow

__version__: str

# Anything with ``__arrow_c_stream__`` (a pyarrow Table or RecordBatchReader, a Polars
# DataFrame, a DuckDB relation), or what ``pyarrow.table()`` accepts (a pandas DataFrame).
ArrowData = Any
# Milliseconds since the epoch, a datetime, or an ISO-8601 string.
Timestamp = int | datetime | str

class TarnError(Exception):
    """Any error Tarn reports; the message says what failed and on what."""

class TableNotFound(TarnError):
    """No table (or catalog entry) at the location or name given."""

class TableAlreadyExists(TarnError):
    """A table (or catalog entry) already exists where one was to be created."""

class VersionNotFound(TarnError):
    """The version or timestamp asked for is not in the table's log."""

class CommitConflict(TarnError):
    """A concurrent commit conflicts with this one, and retrying could not resolve it."""

class CommitStateUnknown(TarnError):
    """A commit was sent but whether it landed could not be found out."""

class SchemaMismatch(TarnError):
    """Data, columns or types that do not fit the table's schema."""

class InvalidExpression(TarnError):
    """A predicate or expression that does not parse or bind to the schema."""

class ConstraintViolated(TarnError):
    """Rows that break a CHECK constraint, NOT NULL, or a generated column."""

class InvalidArgument(TarnError):
    """An argument Tarn cannot act on: a bad option, name, URL or combination."""

class SqlError(TarnError):
    """A SQL statement failed to plan or run."""

class Scan:
    """A table's rows at one version, narrowed; read by any Arrow consumer."""

    @property
    def version(self) -> int:
        """The version the scan reads."""
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """A fresh Arrow C stream of the rows (the Arrow PyCapsule interface)."""
    def to_reader(self) -> pyarrow.RecordBatchReader:
        """The rows as a RecordBatchReader, read as consumed."""
    def to_pyarrow(self) -> pyarrow.Table:
        """The rows as a pyarrow Table."""
    def to_polars(self) -> Any:
        """The rows as a polars DataFrame (Polars reads the stream: no copy)."""
    def count(self) -> int:
        """The number of rows (at most the limit), from statistics where they answer it."""

class MergeBuilder:
    """A MERGE being built: add ``when_...`` clauses, then ``execute()``.

    Expressions are SQL over ``source.x`` and ``target.x``; clauses are tried in the
    order they were added.
    """

    def when_matched_update(
        self, set: dict[str, str], condition: str | None = None
    ) -> MergeBuilder: ...
    def when_matched_update_all(self, condition: str | None = None) -> MergeBuilder: ...
    def when_matched_delete(self, condition: str | None = None) -> MergeBuilder: ...
    def when_not_matched_insert(
        self, values: dict[str, str], condition: str | None = None
    ) -> MergeBuilder: ...
    def when_not_matched_insert_all(self, condition: str | None = None) -> MergeBuilder: ...
    def when_not_matched_by_source_update(
        self, set: dict[str, str], condition: str | None = None
    ) -> MergeBuilder: ...
    def when_not_matched_by_source_delete(
        self, condition: str | None = None
    ) -> MergeBuilder: ...
    def execute(self) -> dict[str, Any]:
        """Runs the merge in one commit; returns its metrics. Runs once."""

class Table:
    """A Tarn (Delta) table at a local path, ``memory://name`` or ``s3://bucket/prefix``."""

    @staticmethod
    def create(
        uri: str,
        schema: pyarrow.Schema | None = None,
        *,
        data: ArrowData | None = None,
        partition_by: list[str] | None = None,
        properties: dict[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> Table:
        """Creates a table with ``schema``, or with ``data``'s schema and rows.

        Raises TableAlreadyExists when a table is there, InvalidArgument without a schema
        or data.
        """
    @staticmethod
    def open(
        uri: str,
        *,
        version: int | None = None,
        timestamp: Timestamp | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> Table:
        """Opens a table, at its latest version or at ``version`` / ``timestamp``.

        Raises TableNotFound, or VersionNotFound for a version not in the log.
        """
    @property
    def uri(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def partition_columns(self) -> list[str]: ...
    @property
    def properties(self) -> dict[str, str]: ...
    def schema(self) -> pyarrow.Schema: ...
    def file_count(self) -> int: ...
    def refresh(self) -> int:
        """Catches up with other writers' commits; returns the new version."""
    def load_version(self, version: int) -> None: ...
    def load_timestamp(self, timestamp: Timestamp) -> None: ...
    def versions(self) -> list[dict[str, int]]: ...
    def history(self, limit: int | None = None) -> list[dict[str, Any]]: ...
    def append(
        self,
        data: ArrowData,
        *,
        schema_mode: str = "strict",
        app_transaction: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """Appends ``data`` (read as a stream) in one commit.

        ``schema_mode="merge"`` adds new columns; ``app_transaction=(app_id, version)``
        skips a write whose version is not past the app's last (exactly once).
        Raises SchemaMismatch for data that does not fit; nothing is committed.
        """
    def overwrite(
        self,
        data: ArrowData,
        *,
        replace_where: str | None = None,
        schema_mode: str = "strict",
        app_transaction: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """Replaces every row, or those ``replace_where`` matches, with ``data``."""
    def app_transaction_version(self, app_id: str) -> int | None: ...
    def scan(
        self,
        columns: list[str] | None = None,
        filter: str | None = None,
        *,
        version: int | None = None,
        limit: int | None = None,
        text_match: tuple[str, str] | None = None,
    ) -> Scan:
        """A scan: ``filter`` is a SQL predicate; nothing is read until consumed.

        Raises InvalidExpression for a predicate that does not parse.
        """
    def to_pyarrow(
        self, columns: list[str] | None = None, filter: str | None = None
    ) -> pyarrow.Table: ...
    def to_polars(self, columns: list[str] | None = None, filter: str | None = None) -> Any: ...
    def count(self, filter: str | None = None) -> int: ...
    def delete(self, predicate: str | None = None, *, strategy: str | None = None) -> dict[str, Any]:
        """Deletes matching rows (all when None); strategy "copy-on-write" or "merge-on-read"."""
    def update(
        self, set: dict[str, str], *, where: str | None = None, strategy: str | None = None
    ) -> dict[str, Any]:
        """Sets columns to SQL expressions on the rows ``where`` matches."""
    def merge(
        self,
        source: ArrowData,
        on: list[str],
        *,
        condition: str | None = None,
        strategy: str | None = None,
    ) -> MergeBuilder: ...
    def optimize(
        self,
        *,
        target_size: int | None = None,
        filter: str | None = None,
        sort_by: list[str] | None = None,
    ) -> dict[str, Any]: ...
    def vacuum(
        self,
        *,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention: bool = True,
    ) -> dict[str, Any]: ...
    def restore(self, version: int | None = None, *, timestamp: Timestamp | None = None) -> int: ...
    def checkpoint(self) -> None: ...
    def create_index(
        self, column: str, kind: str = "btree", *, name: str | None = None, deferred: bool = False
    ) -> dict[str, Any]:
        """Builds a "btree", "bitmap" or "fulltext" index on ``column``."""
    def indices(self) -> list[dict[str, Any]]: ...
    def drop_index(self, name: str) -> int: ...

class Catalog:
    """Tarn's directory catalog of namespaces and tables (names dotted: "sales.eu")."""

    @staticmethod
    def open(uri: str, *, storage_options: dict[str, str] | None = None) -> Catalog:
        """Opens the catalog at ``uri``, creating it when there is none."""
    @property
    def uri(self) -> str: ...
    def create_namespace(
        self,
        name: str | list[str],
        *,
        properties: dict[str, str] | None = None,
        description: str | None = None,
        exist_ok: bool = False,
    ) -> None: ...
    def list_namespaces(self, parent: str | list[str] | None = None) -> list[str]: ...
    def list_tables(self, namespace: str | list[str] | None = None) -> list[str]: ...
    def create_table(
        self,
        name: str | list[str],
        schema: pyarrow.Schema,
        *,
        partition_by: list[str] | None = None,
        properties: dict[str, str] | None = None,
        description: str | None = None,
    ) -> Table: ...
    def load_table(self, name: str | list[str]) -> Table: ...
    def table_exists(self, name: str | list[str]) -> bool: ...
    def drop_table(self, name: str | list[str], *, purge: bool = False) -> None: ...
    def drop_namespace(self, name: str | list[str], *, cascade: bool = False) -> None: ...

def settle_background_work(seconds: float) -> bool:
    """Waits up to ``seconds`` for checkpoints and proposal clean-up started by earlier
    calls; run at interpreter exit. Returns whether all of it finished."""

def sql(
    query: str,
    *,
    tables: Mapping[str, Table] | None = None,
    catalogs: Mapping[str, Catalog] | None = None,
) -> pyarrow.RecordBatchReader:
    """Runs one SQL statement through DataFusion over the named tables and catalogs.

    Changes (INSERT, DELETE, UPDATE, MERGE) commit before the call returns; the Table
    objects passed in keep their version until ``refresh()``. Raises SqlError (or Tarn's
    exception of the kind) when the statement does not plan or start; an error while the
    rows are read surfaces from pyarrow.
    """
