"""Bad input raises the exception of its kind and commits nothing."""

import pyarrow as pa
import pytest

import tarn
from conftest import sales


def test_a_wrong_schema_raises_and_commits_nothing(table):
    with pytest.raises(tarn.SchemaMismatch):
        table.append(pa.table({"id": pa.array(["not", "ints"])}))
    assert tarn.Table.open(table.uri).version == 1
    assert table.count() == 200


def test_a_bad_predicate_raises(table):
    with pytest.raises(tarn.InvalidExpression):
        table.scan(filter="id >>> 3")
    with pytest.raises(tarn.TarnError):
        table.delete("no_such_column = 1")
    assert tarn.Table.open(table.uri).version == 1


def test_an_unknown_column_raises(table):
    with pytest.raises(tarn.SchemaMismatch):
        pa.table(table.scan(columns=["nope"]))


def test_a_consumed_stream_raises_and_commits_nothing(table):
    class Once:
        """Hands out the same C stream every time, as a careless producer might."""

        def __init__(self, data):
            self.capsule = data.__arrow_c_stream__()

        def __arrow_c_stream__(self, requested_schema=None):
            return self.capsule

    once = Once(sales(range(1000, 1003)))
    table.append(once)
    assert table.version == 2
    with pytest.raises(tarn.InvalidArgument, match="already consumed"):
        table.append(once)
    assert tarn.Table.open(table.uri).version == 2


def test_an_empty_stream_commits_nothing(table):
    reader = sales(range(3)).to_reader()
    reader.read_all()
    out = table.append(reader)
    assert out["rows_written"] == 0
    assert tarn.Table.open(table.uri).version == 1


def test_a_stream_that_fails_commits_nothing(table):
    schema = sales([]).schema

    def batches():
        yield sales(range(1000, 1010)).to_batches()[0]
        raise ValueError("the source broke")

    with pytest.raises(tarn.TarnError, match="the source broke"):
        table.append(pa.RecordBatchReader.from_batches(schema, batches()))
    assert tarn.Table.open(table.uri).version == 1


def test_not_arrow_data_is_a_type_error(table):
    with pytest.raises(TypeError):
        table.append(object())


def test_missing_and_existing_tables(uri, table):
    with pytest.raises(tarn.TableNotFound):
        tarn.Table.open(uri + "-missing")
    with pytest.raises(tarn.TableAlreadyExists):
        tarn.Table.create(table.uri, data=sales(range(1)))
    with pytest.raises(tarn.InvalidArgument):
        tarn.Table.create(uri + "-nothing")


def test_bad_arguments(table):
    with pytest.raises(tarn.InvalidArgument):
        table.delete("id = 1", strategy="sideways")
    with pytest.raises(tarn.InvalidArgument):
        table.create_index("id", "hash")
    with pytest.raises(tarn.InvalidArgument):
        table.append(sales([1]), schema_mode="loose")


def test_every_error_is_a_tarn_error():
    for kind in [
        tarn.TableNotFound,
        tarn.TableAlreadyExists,
        tarn.VersionNotFound,
        tarn.CommitConflict,
        tarn.CommitStateUnknown,
        tarn.SchemaMismatch,
        tarn.InvalidExpression,
        tarn.ConstraintViolated,
        tarn.InvalidArgument,
        tarn.SqlError,
    ]:
        assert issubclass(kind, tarn.TarnError)


def test_ctrl_c_cancels_a_call_and_commits_nothing(uri):
    import _thread
    import signal
    import threading
    import time

    schema = sales([]).schema

    def slow():
        for i in range(600):
            time.sleep(0.05)
            yield sales([i]).to_batches()[0]

    t = tarn.Table.create(uri, schema)
    # A process started with SIGINT ignored (in the background by a script: `cmd &`) has
    # no Ctrl-C handler, and `interrupt_main` then does nothing: install Python's usual one.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            t.append(pa.RecordBatchReader.from_batches(schema, slow()))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 10, "the call ran on after Ctrl-C"
    assert tarn.Table.open(uri).version == 0
