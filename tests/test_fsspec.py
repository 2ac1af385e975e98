"""fsspec and Dask (issue 27): ``mambazip.register_fsspec()`` makes .mz a compression fsspec
infers and writes, and ``register_fsspec(client)`` does so on every worker of a Dask client,
present and future, so that ``dask.bag.read_text`` decodes .mz files across a cluster."""

import pytest

import mambazip

fsspec = pytest.importorskip("fsspec")
distributed = pytest.importorskip("distributed")
dask_bag = pytest.importorskip("dask.bag")


def lines_of(i):
    return b"".join(b"log %d line %d: request served\n" % (i, n) for n in range(40 + 7 * i))


@pytest.fixture
def registered():
    mambazip.register_fsspec()


def test_fsspec_infers_mz_and_reads_text(registered, tmp_path, sample, tiny_settings):
    path = tmp_path / "notes.txt.mz"
    path.write_bytes(mambazip.compress(lines_of(1), tiny_settings))
    with fsspec.open(str(path), "rt", compression="infer") as f:
        assert f.read() == lines_of(1).decode()


def test_fsspec_writes_mz_by_name(registered, tmp_path):
    path = tmp_path / "out.txt.mz"
    with fsspec.open(str(path), "wt", compression="mambazip") as f:
        f.write(lines_of(2).decode())
    assert mambazip.decompress(path.read_bytes()) == lines_of(2)


def test_registering_twice_is_harmless(registered, tmp_path, tiny_settings):
    mambazip.register_fsspec()
    path = tmp_path / "a.mz"
    path.write_bytes(mambazip.compress(b"twice\n", tiny_settings))
    with fsspec.open(str(path), "rb", compression="infer") as f:
        assert f.read() == b"twice\n"


@pytest.fixture
def cluster():
    """Two worker processes, one thread each, on 127.0.0.1."""
    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     host="127.0.0.1", dashboard_address="127.0.0.1:0")  # fmt: skip
    with local, distributed.Client(local, timeout="60s") as client:
        yield local, client


def _knows_mz():
    import fsspec.compression

    return "mambazip" in fsspec.compression.compr


def test_dask_bag_reads_mz_logs_on_a_two_worker_cluster(cluster, tmp_path, tiny_settings):
    _, client = cluster
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(4):
        (logs / f"{i}.log.mz").write_bytes(mambazip.compress(lines_of(i), tiny_settings))
    mambazip.register_fsspec(client)
    assert set(client.run(_knows_mz).values()) == {True}
    expected = sum(lines_of(i).count(b"\n") for i in range(4))
    assert dask_bag.read_text(str(logs / "*.log.mz")).count().compute() == expected


def test_a_worker_that_joins_later_also_reads_mz(cluster):
    local, client = cluster
    mambazip.register_fsspec(client)
    local.scale(3)
    client.wait_for_workers(3, timeout=120)
    knows = client.run(_knows_mz)
    assert len(knows) == 3
    assert set(knows.values()) == {True}
