"""Several Python processes writing one table at once: every append lands once."""

import multiprocessing as mp

import tarn
from conftest import sales

WRITERS = 4
APPENDS = 5


def writer(uri, n):
    t = tarn.Table.open(uri)
    for i in range(APPENDS):
        base = 1000 * (n + 1) + i * 10
        t.append(sales(range(base, base + 10)))


def test_processes_append_concurrently(uri):
    tarn.Table.create(uri, sales([]).schema)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=writer, args=(uri, n)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    t = tarn.Table.open(uri)
    assert t.count() == WRITERS * APPENDS * 10
    ids = t.to_pyarrow(columns=["id"]).column("id").to_pylist()
    assert len(set(ids)) == len(ids)
    # Group commit may carry several appends in one version, never more versions than appends.
    assert 1 <= t.version <= WRITERS * APPENDS


def test_fork_started_children_get_their_own_runtime(uri):
    t = tarn.Table.create(uri, sales([]).schema)
    t.append(sales([1]))  # starts the parent's runtime before the fork
    ctx = mp.get_context("fork")
    p = ctx.Process(target=writer, args=(uri, 7))
    p.start()
    p.join(120)
    assert p.exitcode == 0
    assert tarn.Table.open(uri).count() == 1 + APPENDS * 10
