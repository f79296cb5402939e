"""Tables on S3 (MinIO, started by the Rust side of the suite and passed in as
TARN_PY_S3_*): reached by store options, and by the AWS_* environment."""

import os
import uuid

import pytest

import tarn
from conftest import sales


@pytest.fixture
def s3():
    keys = ["ENDPOINT", "ACCESS_KEY", "SECRET_KEY", "BUCKET"]
    missing = [k for k in keys if not os.environ.get(f"TARN_PY_S3_{k}")]
    assert not missing, (
        "set TARN_PY_S3_ENDPOINT, _ACCESS_KEY, _SECRET_KEY and _BUCKET to an S3-compatible "
        "server (cargo test --test interop python does)"
    )
    return {k.lower(): os.environ[f"TARN_PY_S3_{k}"] for k in keys}


def options(s3):
    return {
        "endpoint": s3["endpoint"],
        "region": "us-east-1",
        "access_key_id": s3["access_key"],
        "secret_access_key": s3["secret_key"],
        "allow_http": "true",
    }


def test_a_table_on_s3_by_store_options(s3):
    uri = f"s3://{s3['bucket']}/python-{uuid.uuid4().hex}"
    t = tarn.Table.create(uri, data=sales(range(10)), storage_options=options(s3))
    t.append(sales(range(10, 15)))
    t.delete("id < 5")
    again = tarn.Table.open(uri, storage_options=options(s3))
    assert again.version == 2 and again.count() == 10
    cat = tarn.Catalog.open(f"s3://{s3['bucket']}/catalog-{uuid.uuid4().hex}", storage_options=options(s3))
    cat.create_namespace("ns")
    assert cat.list_namespaces() == ["ns"]


def test_a_table_on_s3_by_the_environment(s3, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3["secret_key"])
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    uri = f"s3://{s3['bucket']}/python-env-{uuid.uuid4().hex}"
    tarn.Table.create(uri, data=sales(range(3)))
    assert tarn.Table.open(uri).count() == 3


def test_wrong_credentials_raise(s3):
    bad = dict(options(s3), secret_access_key="wrong")
    with pytest.raises(tarn.TarnError):
        tarn.Table.create(f"s3://{s3['bucket']}/python-bad-{uuid.uuid4().hex}", data=sales([1]), storage_options=bad)
