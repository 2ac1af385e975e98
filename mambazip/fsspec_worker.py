"""The Dask worker plugin of ``mambazip.register_fsspec(client)``: a module of its own
because it imports ``distributed``, which only a program with a Dask client has."""

from distributed.diagnostics.plugin import WorkerPlugin


class RegisterFsspec(WorkerPlugin):
    """Calls ``register`` (a module-level function, pickled by name) on each worker as it
    starts, and on those already running."""

    name = "mambazip-fsspec"
    idempotent = True  # registering again changes nothing

    def __init__(self, register):
        self.register = register

    def setup(self, worker):
        self.register()
