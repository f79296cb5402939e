"""Time travel, history and restore."""

import datetime
import time

import pytest

import tarn
from conftest import sales


def test_versions_and_history(table):
    table.delete("id < 10")
    assert [v["version"] for v in table.versions()] == [0, 1, 2]
    history = table.history()
    assert [h["version"] for h in history] == [2, 1, 0]
    assert history[0]["operation"] == "DELETE"
    assert history[1]["operation"] == "WRITE"
    assert table.history(limit=1)[0]["version"] == 2


def test_open_and_scan_at_a_version(table):
    table.delete("id < 10")
    assert tarn.Table.open(table.uri, version=1).count() == 200
    assert table.scan(version=0).count() == 100
    assert table.count() == 190
    old = tarn.Table.open(table.uri)
    old.load_version(0)
    assert old.version == 0 and old.count() == 100
    assert old.refresh() == 2


def test_open_at_a_timestamp(uri):
    t = tarn.Table.create(uri, data=sales(range(3)))
    time.sleep(0.05)
    between = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.05)
    t.append(sales(range(3, 6)))
    assert tarn.Table.open(uri, timestamp=between).version == 0
    assert tarn.Table.open(uri, timestamp=between.isoformat()).version == 0
    assert tarn.Table.open(uri, timestamp=int(time.time() * 1000)).version == 1


def test_a_missing_version_raises(table):
    with pytest.raises(tarn.VersionNotFound):
        tarn.Table.open(table.uri, version=9)
    with pytest.raises(tarn.InvalidArgument):
        tarn.Table.open(table.uri, version=0, timestamp=0)


def test_restore(table):
    table.delete()
    version = table.restore(1)
    assert version == 3
    assert table.count() == 200
