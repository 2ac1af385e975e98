"""Where frames are coded when not in this process (``frames`` streams them here itself):
in worker processes, or on a Dask cluster.

Each executor runs ``FrameJob`` methods by name and hands back a handle whose ``result()``
is the method's return value (or raises its exception). The job travels to each worker
once: a process pool's workers receive it when they start, a cluster's by one broadcast, so
a worker compiles or loads the Numba cache once, not once per frame. Output bytes never
depend on where a frame was coded: every frame starts from the same job.
"""

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import multiprocessing
import os
import re
import signal
import threading
import time
from pathlib import Path

from . import container, signals
from .errors import MambazipError

POLL_SECONDS = 0.2  # how often a waiting parent looks for signals
ABORT_SECONDS = 2.0  # how long an ending pool may take before its workers are killed

_job = None  # a worker process's FrameJob, set when it starts


def default_jobs():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _start_worker(job):
    global _job
    _job = job
    # Ctrl-C reaches the whole process group: the parent answers it and ends the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call(method, *args):
    return getattr(_job, method)(*args)


def _wait(get, timeout_error):
    """``get(seconds)``'s value, looking for signals between waits of POLL_SECONDS."""
    while True:
        signals.check()
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

    def __init__(self, job, jobs):
        self.slots = jobs
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(jobs, initializer=_start_worker, initargs=(job,))
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
        """End the pool now. A worker killed while it waited for a task died holding the task
        queue's lock, and ``Pool.terminate`` waits for that lock before it ends the workers:
        forever (found by a clean-clone CI run). So it gets ABORT_SECONDS in a thread of
        its own, then the workers are killed here."""
        ending = threading.Thread(target=self.pool.terminate, daemon=True)
        ending.start()
        ending.join(ABORT_SECONDS)
        if ending.is_alive():
            left = list(self.pool._pool) + self.started
            for process in left:
                process.kill()
            for process in left:
                process.join(ABORT_SECONDS)
            return
        self.pool.join()


# The source that defines the format and the coding path: two installs whose digests of it
# differ may write different bytes for the same frame, whatever their version strings say.
_CODE_FOLDERS = ("", "kernels", "predictor")


def digest_of(root):
    """SHA-256 (hex) of the package at ``root``: its *.py, kernels/*.py and predictor/*.py,
    each file's relative name, length and bytes in the order of the sorted names."""
    root = Path(root)
    files = sorted(
        (path.relative_to(root).as_posix(), path)
        for folder in _CODE_FOLDERS
        for path in (root / folder).glob("*.py")
    )
    digest = hashlib.sha256()
    for name, path in files:
        data = path.read_bytes()
        digest.update(b"%s\0%d\0" % (name.encode(), len(data)))
        digest.update(data)
    return digest.hexdigest()


@functools.cache
def code_digest():
    """This install's ``digest_of``, computed once."""
    return digest_of(Path(__file__).resolve().parent)


def release():
    """What a cluster's workers must share with us to write the same bytes: the digest of
    the code (``code_digest``), the version and the format version it writes."""
    return code_digest(), importlib.metadata.version("mambazip"), container.VERSION


def call_job(job, expected, method, *args):
    """A cluster's task: ``job`` arrives as the broadcast copy each worker holds. The workers
    there at the start were checked (``Cluster._check_workers``), but one may join later,
    so each task first checks that its worker runs ``expected``, the client's ``release``."""
    ours = release()
    if ours != tuple(expected):
        raise MambazipError(
            f"Dask worker {_worker_address()} runs other mambazip code ({_short(ours)}) than "
            f"this ({_short(expected)}): it joined after the start; install the same "
            f"mambazip on every worker"
        )
    return getattr(job, method)(*args)


def _worker_address():
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # not on a worker
        return "(unknown)"


DEFAULT_TIMEOUT = 300.0  # seconds a cluster may go without progress (see Cluster)
PROBE_SECONDS = 5.0  # at most how often a wait asks the scheduler about the workers


@dataclasses.dataclass(frozen=True)
class Scheduler:
    """A Dask scheduler's ``address`` (``--scheduler``) and the ``timeout``: the seconds
    its cluster may go without progress while we wait (``--scheduler-timeout``).
    Wherever a scheduler is taken, its address alone (a str) means the default timeout."""

    address: str
    timeout: float = DEFAULT_TIMEOUT


class _Future:
    def __init__(self, future, cluster):
        self.future, self.cluster = future, cluster

    def result(self):
        from dask.distributed import TimeoutError as DaskTimeout

        # The clock runs while we wait and restarts whenever any frame finishes.
        began = time.monotonic()

        def get(seconds):
            try:
                return self.future.result(timeout=seconds)
            except DaskTimeout:
                self.cluster.check_progress(began)
                raise

        try:
            value = _wait(get, DaskTimeout)
            # Dropping the last reference lets the cluster forget the frame.
            self.cluster.tasks.discard(self.future)
            return value
        except (MambazipError, signals.Interrupted):
            raise
        except Exception as exc:  # KilledWorker, CancelledError, a lost scheduler, ...
            raise self.cluster.failure(exc) from None


def _one_line(exc):
    return " ".join(str(exc).split())[:200]


def _short(answer):
    """One worker's answer to ``release``, for a message."""
    if isinstance(answer, (tuple, list)) and len(answer) == 3:
        digest, version, fmt = answer
        return f"digest {str(digest)[:12]}, version {version}, format {fmt}"
    return f"an older release: {_one_line(answer)[:60]}"


class Cluster:
    """Frames sent to the Dask scheduler of ``scheduler`` (a ``Scheduler`` or an address);
    the workers need the same mambazip code installed. One thread per worker is what pays:
    the kernels hold the GIL. Waiting gives up with a ``MambazipError`` after the
    scheduler's timeout without progress (no frame finished, no worker coding one heard
    from: every worker gone, frozen or unreachable) instead of waiting forever."""

    def __init__(self, job, scheduler):
        if isinstance(scheduler, str):
            scheduler = Scheduler(scheduler)
        try:
            from dask.distributed import Client
            from distributed.comm import parse_address
        except ImportError:
            raise MambazipError("--scheduler needs Dask: pip install 'mambazip[cluster]'") from None
        self.address = address = scheduler.address
        self.timeout = scheduler.timeout
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
        self.progressed = time.monotonic()  # when a frame last finished, or a worker lived
        self.next_probe = 0.0  # when a wait may next ask the scheduler about the workers
        self.seen = {}  # worker: when the scheduler last heard from it, as of the last look
        self.release = release()  # what every task checks its worker runs
        try:
            threads = sum(self.client.nthreads().values())
            if threads == 0:
                raise MambazipError(f"the Dask scheduler at {address} has no workers")
            self._check_workers()
            self.slots = threads
            [self.job] = self.client.scatter(
                [job], broadcast=True, hash=False, timeout=self.timeout
            )
        except MambazipError:
            self.client.close()
            raise
        except Exception as exc:  # a worker or the scheduler stopped answering
            self.client.close()
            raise MambazipError(
                f"the Dask cluster at {address} failed to take the model: "
                f"{type(exc).__name__}: {_one_line(exc)}"
            ) from None
        except BaseException:
            self.client.close()
            raise

    def _check_workers(self):
        """Refuse (one line) a worker without mambazip or with other code than ours."""
        ours = release()
        answers = self.client.run(release, on_error="return", callback_timeout=self.timeout)
        for worker, answer in sorted(answers.items()):
            if isinstance(answer, BaseException):
                # An exception raised while the worker unpickles ``release`` comes back
                # wrapped in a plain Exception that names it.
                text = _one_line(answer)
                missing = re.search(r"No module named '[^']*'", text)
                if missing or isinstance(answer, ImportError):
                    raise MambazipError(
                        f"Dask worker {worker} cannot import mambazip "
                        f"({missing.group() if missing else text}): install mambazip on "
                        f"every worker, the same code as here (digest {ours[0][:12]})"
                    )
                raise MambazipError(
                    f"Dask worker {worker} failed the release check: "
                    f"{type(answer).__name__}: {text}"
                )
            if not isinstance(answer, (tuple, list)) or tuple(answer) != ours:
                raise MambazipError(
                    f"Dask worker {worker} runs other mambazip code ({_short(answer)}) than "
                    f"this ({_short(ours)}): install the same mambazip on every worker"
                )

    def check_progress(self, began):
        """Raise if the cluster made no progress in the last ``timeout`` seconds of waiting
        since ``began``: no frame finished, and no worker coding one of ours was heard from
        (frames may take longer than the timeout; a live worker coding one is progress)."""
        now = time.monotonic()
        if now >= self.next_probe:
            self.next_probe = now + min(PROBE_SECONDS, self.timeout / 4)
            if self._heard_from_busy_workers():
                self.progressed = now
        if now - max(began, self.progressed) <= self.timeout:
            return
        if self.seen is None:
            what = "its scheduler does not answer: check it"
        elif not self.seen:
            what = "it has no workers left: start workers (with this mambazip)"
        else:
            what = (
                f"none of its {len(self.seen)} workers that code our frames was heard from: "
                f"check them (stalled, unreachable, or busy with other work)"
            )
        raise MambazipError(
            f"no frame finished on the Dask cluster at {self.address} in {self.timeout:g} s "
            f"(--scheduler-timeout) and {what}, or give a longer --scheduler-timeout"
        )

    def _heard_from_busy_workers(self):
        """Whether a worker coding one of our frames was heard from since the last look
        (its heartbeats move its ``last_seen`` on the scheduler). Sets ``seen``: each
        worker's ``last_seen``, or None when the scheduler did not answer in 10 s."""
        previous = self.seen or {}
        try:
            sync, scheduler = self.client.sync, self.client.scheduler
            processing = sync(scheduler.processing, callback_timeout=10)
            identity = sync(scheduler.identity, callback_timeout=10)
            self.seen = {w: info.get("last_seen") for w, info in identity["workers"].items()}
        except Exception:  # no answer, or a Dask that answers otherwise: no sign of life
            self.seen = None
            return False
        ours = {future.key for future in self.tasks}
        busy = [worker for worker, keys in processing.items() if ours.intersection(keys)]
        return any(w in previous and self.seen.get(w) != previous[w] for w in busy)

    def failure(self, exc):
        """The one-line error for ``exc``, raised by waiting for a frame."""
        if self.job.status != "finished":
            return MambazipError(
                f"the Dask cluster at {self.address} lost every worker that held the model "
                f"(they died or left mid-run): start workers and run again"
            )
        return MambazipError(
            f"the Dask cluster at {self.address} failed to code a frame: "
            f"{type(exc).__name__}: {_one_line(exc)}"
        )

    def _finished(self, future):
        self.progressed = time.monotonic()

    def submit(self, method, *args):
        future = self.client.submit(call_job, self.job, self.release, method, *args,
                                    pure=False)  # fmt: skip
        future.add_done_callback(self._finished)
        self.tasks.add(future)
        return _Future(future, self)

    def close(self):
        self.client.close()

    def abort(self):
        """Cancel the frames in flight and leave, never raising nor waiting long (the
        scheduler may be gone)."""
        with contextlib.suppress(Exception):
            self.client.cancel([*self.tasks, self.job], force=True)
        with contextlib.suppress(Exception):
            self.client.close(timeout=10)
