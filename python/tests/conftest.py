"""Fixtures shared by the tests: a fresh table location and a small sales table."""

import pyarrow as pa
import pytest


@pytest.fixture
def uri(tmp_path):
    """A location for a new table on the local file system."""
    return str(tmp_path / "table")


def sales(ids, country="NL"):
    """Rows of the sales schema with the given ids."""
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "country": pa.array([country] * len(ids), pa.string()),
            "amount": pa.array([float(i) * 1.5 for i in ids], pa.float64()),
        }
    )


@pytest.fixture
def table(uri):
    """A table of ids 0..99 at version 0, then 100..199 appended at version 1."""
    import tarn

    t = tarn.Table.create(
        uri, data=sales(range(100)), properties={"delta.enableDeletionVectors": "true"}
    )
    t.append(sales(range(100, 200), country="FR"))
    return t
