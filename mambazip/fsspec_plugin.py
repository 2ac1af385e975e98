"""``mambazip.register_fsspec``: .mz as a compression fsspec knows, so that
``fsspec.open("notes.txt.mz", "rt", compression="infer")`` reads it and
``compression="mambazip"`` writes it, and through fsspec Dask, pandas and xarray.

fsspec has no entry point for compressions: a program registers them in each process that
opens files. With a Dask client the registration is also a worker plugin
(``fsspec_worker``), run on every worker of the cluster, those present and those that join
later, so that ``dask.bag.read_text("logs/*.log.mz")`` decodes each file on its worker.
fsspec (and Dask) stay optional: the ``cluster`` extra.
"""

NAME = "mambazip"
EXTENSION = "mz"


def register_fsspec(client=None):
    """Register .mz with fsspec in this process, and with a Dask ``client`` also on each of
    its workers, present and future."""
    register_here()
    if client is not None:
        from .fsspec_worker import RegisterFsspec

        client.register_plugin(RegisterFsspec(register_here))


def register_here():
    """Register .mz with fsspec in this process."""
    try:
        from fsspec.compression import register_compression
    except ImportError:
        raise ImportError(
            "mambazip.register_fsspec needs fsspec: pip install 'mambazip[cluster]'"
        ) from None
    register_compression(NAME, _open, EXTENSION, force=True)  # force: calling twice is fine


def _open(infile, mode="rb", **kwargs):
    """fsspec's callback: ``infile`` is binary; fsspec adds the text layer itself."""
    from .mzfile import open as mz_open

    return mz_open(infile, mode[0] + "b", **kwargs)
