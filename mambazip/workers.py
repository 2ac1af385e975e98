"""Where frames are coded: in this process, in worker processes, or on a Dask cluster.

Each executor runs ``FrameCoder`` methods by name and hands back a handle whose ``result()``
is the method's return value (or raises its exception). The coder travels to each worker
once: a process pool's workers receive it when they start, a cluster's by one broadcast, so
a worker compiles or loads the Numba cache once, not once per frame. Output bytes never
depend on where a frame was coded: every frame starts from the same coder.
"""

import multiprocessing
import os
import signal

from . import entry
from .errors import MambazipError

POLL_SECONDS = 0.2  # how often a waiting parent looks for signals

_coder = None  # a worker process's FrameCoder, set when it starts


def default_jobs():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class Serial:
    """Codes each frame in this process when it is submitted."""

    slots = 1

    def __init__(self, coder):
        self.coder = coder

    def submit(self, method, *args):
        return _Done(getattr(self.coder, method)(*args))

    def close(self):
        pass

    abort = close


def _start_worker(coder):
    global _coder
    _coder = coder
    # Ctrl-C reaches the whole process group: the parent answers it and ends the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call(method, *args):
    return getattr(_coder, method)(*args)


def _wait(get, timeout_error):
    """``get(seconds)``'s value, looking for signals between waits of POLL_SECONDS."""
    while True:
        entry.check()
        try:
            return get(POLL_SECONDS)
        except timeout_error:
            continue


class _Pending:
    def __init__(self, async_result):
        self.async_result = async_result

    def result(self):
        return _wait(self.async_result.get, multiprocessing.TimeoutError)


class Processes:
    """A pool of ``jobs`` worker processes, started fresh (spawn): a forked child would
    inherit the parent's threads and signal handlers mid-flight."""

    def __init__(self, coder, jobs):
        self.slots = jobs
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(jobs, initializer=_start_worker, initargs=(coder,))

    def submit(self, method, *args):
        return _Pending(self.pool.apply_async(_call, (method, *args)))

    def close(self):
        self.pool.close()
        self.pool.join()

    def abort(self):
        self.pool.terminate()
        self.pool.join()


def call_coder(coder, method, *args):
    """A cluster's task: ``coder`` arrives as the broadcast copy each worker holds."""
    return getattr(coder, method)(*args)


class _Future:
    def __init__(self, future):
        self.future = future

    def result(self):
        from dask.distributed import TimeoutError as DaskTimeout

        return _wait(lambda seconds: self.future.result(timeout=seconds), DaskTimeout)


class Cluster:
    """Frames sent to the Dask scheduler at ``address``; the workers need mambazip (the same
    release) installed. One thread per worker is what pays: the kernels hold the GIL."""

    def __init__(self, coder, address):
        try:
            from dask.distributed import Client
        except ImportError:
            raise MambazipError("--scheduler needs Dask: pip install 'mambazip[cluster]'") from None
        try:
            self.client = Client(address, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise MambazipError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        threads = sum(self.client.nthreads().values())
        if threads == 0:
            self.client.close()
            raise MambazipError(f"the Dask scheduler at {address} has no workers")
        self.slots = threads
        [self.coder] = self.client.scatter([coder], broadcast=True, hash=False)

    def submit(self, method, *args):
        return _Future(self.client.submit(call_coder, self.coder, method, *args, pure=False))

    def close(self):
        self.client.close()

    def abort(self):
        self.client.cancel([self.coder], force=True)
        self.client.close()
