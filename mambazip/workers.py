"""Where frames are coded when not in this process (``frames`` streams them here itself):
in worker processes, or on a Dask cluster.

Each executor runs ``FrameCoder`` methods by name and hands back a handle whose ``result()``
is the method's return value (or raises its exception). The coder travels to each worker
once: a process pool's workers receive it when they start, a cluster's by one broadcast, so
a worker compiles or loads the Numba cache once, not once per frame. Output bytes never
depend on where a frame was coded: every frame starts from the same coder.
"""

import importlib.metadata
import multiprocessing
import os
import signal

from . import container, entry
from .errors import MambazipError

POLL_SECONDS = 0.2  # how often a waiting parent looks for signals

_coder = None  # a worker process's FrameCoder, set when it starts


def default_jobs():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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
    def __init__(self, async_result, pool):
        self.async_result, self.pool = async_result, pool

    def result(self):
        def get(seconds):
            if self.pool.lost_worker():
                raise MambazipError(
                    "a worker process died (out of memory, or killed); nothing written"
                )
            return self.async_result.get(seconds)

        return _wait(get, multiprocessing.TimeoutError)


class Processes:
    """A pool of ``jobs`` worker processes, started fresh (spawn): a forked child would
    inherit the parent's threads and signal handlers mid-flight. A pool replaces a worker
    that dies but never finishes its frame, so waiting looks for the death instead of
    waiting forever. (``multiprocessing.Pool`` rather than ``ProcessPoolExecutor``, whose
    queue feeder may still be writing a frame to a worker it is told to end: EPIPE, a
    traceback or, where SIGPIPE is not ignored, the death of this process.)"""

    def __init__(self, coder, jobs):
        self.slots = jobs
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(jobs, initializer=_start_worker, initargs=(coder,))
        # The pool's worker processes as started; it keeps no public list of them.
        self.started = list(self.pool._pool)

    def lost_worker(self):
        return any(process.exitcode is not None for process in self.started)

    def submit(self, method, *args):
        return _Pending(self.pool.apply_async(_call, (method, *args)), self)

    def close(self):
        self.pool.close()
        self.pool.join()

    def abort(self):
        self.pool.terminate()
        self.pool.join()


def release():
    """What a cluster's workers must share with us to write the same bytes."""
    return importlib.metadata.version("mambazip"), container.VERSION


def call_coder(coder, method, *args):
    """A cluster's task: ``coder`` arrives as the broadcast copy each worker holds."""
    return getattr(coder, method)(*args)


class _Future:
    def __init__(self, future, cluster):
        self.future, self.cluster = future, cluster

    def result(self):
        from dask.distributed import TimeoutError as DaskTimeout

        try:
            value = _wait(lambda seconds: self.future.result(timeout=seconds), DaskTimeout)
            # Dropping the last reference lets the cluster forget the frame.
            self.cluster.tasks.discard(self.future)
            return value
        except (MambazipError, entry.Interrupted):
            raise
        except Exception as exc:  # KilledWorker, CancelledError, a lost scheduler, ...
            raise MambazipError(
                f"the Dask cluster at {self.cluster.address} failed to code a frame: "
                f"{type(exc).__name__}: {_one_line(exc)}"
            ) from None


def _one_line(exc):
    return " ".join(str(exc).split())[:200]


class Cluster:
    """Frames sent to the Dask scheduler at ``address``; the workers need mambazip (the same
    release) installed. One thread per worker is what pays: the kernels hold the GIL."""

    def __init__(self, coder, address):
        try:
            from dask.distributed import Client
            from distributed.comm import parse_address
        except ImportError:
            raise MambazipError("--scheduler needs Dask: pip install 'mambazip[cluster]'") from None
        self.address = address
        try:
            scheme, _ = parse_address(address)
            if scheme not in ("tcp", "tls", "ws", "wss", "ucx"):
                raise ValueError(f"{scheme}:// is not a network address")
            self.client = Client(address, timeout="10s", set_as_default=False)
        except Exception as exc:  # a bad address, refused, timed out: all one line
            raise MambazipError(
                f"cannot reach the Dask scheduler at {address!r}: {_one_line(exc)}"
            ) from None
        self.tasks = set()  # the frames in flight, to cancel on abort
        try:
            threads = sum(self.client.nthreads().values())
            if threads == 0:
                raise MambazipError(f"the Dask scheduler at {address} has no workers")
            ours = release()
            theirs = {w: tuple(r) for w, r in self.client.run(release).items()}
            other = {w: r for w, r in theirs.items() if r != ours}
            if other:
                worker, (version, fmt) = next(iter(other.items()))
                raise MambazipError(
                    f"Dask worker {worker} runs mambazip {version} (format {fmt}), this is "
                    f"{ours[0]} (format {ours[1]}): install the same release on every worker"
                )
            self.slots = threads
            [self.coder] = self.client.scatter([coder], broadcast=True, hash=False)
        except BaseException:
            self.client.close()
            raise

    def submit(self, method, *args):
        future = self.client.submit(call_coder, self.coder, method, *args, pure=False)
        self.tasks.add(future)
        return _Future(future, self)

    def close(self):
        self.client.close()

    def abort(self):
        self.client.cancel([*self.tasks, self.coder], force=True)
        self.client.close()
