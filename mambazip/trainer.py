"""Pretraining a preset's Mamba on a corpus, with the online learner that compression runs.

The corpus is a sequence of documents: the files given, and the files under the folders
given (recursively, in sorted order of their relative paths; symlinks and other non-regular
files are skipped, so that a package's doc folder linked from another is not read twice).
Each epoch runs ``OnlineLearner.advance`` over the training documents in that order, so the
model ends where compressing the documents would leave it, and the Mamba alone is trained:
the context models of a mixing preset start empty in every file anyway.

Between documents (``between``):
    separator  one stream per epoch, each document followed by the byte 0, the byte a file's
               first prediction is primed with; the recurrent state runs on
    reset      each document is its own stream from the zero state, as ``compress`` codes
               files one by one (``finish`` learns a document's last partial segment)
Measured with ``default``'s Mamba (one epoch of 40 /usr/share/doc files, 268-283 KB, then
held-out bits/byte of other files from there): separator 2.756 vs reset 2.817 on one split
(8 files, 53 KB), 3.357 vs 3.357 on another (8 files, 38 KB); hence the default.

Held-out documents are coded from the zero state with frozen weights, as the first file a
prior meets: bits/byte after each epoch. They are those whose relative path's hash (FNV-1a,
then splitmix64's finalizer) falls in the ``holdout`` fraction, and those listed in a
``heldout.txt`` at the top of a folder given (one relative path a line; that file itself is
no document).

A trainer checkpoint is our checkpoint file (weights, Adam moments, step, schedule clock),
with the run's position in its metadata (epoch, document, byte offset within it, held-out
results so far, a digest of the corpus) and, in the middle of a stream, every buffer the
learner keeps between bytes: the recurrent state, its counters and the truncated-BPTT
segment (inputs, saved states and activations of the unfinished segment). Restoring them
continues the loop exactly where it stopped, at any byte, so a resumed run ends in the same
bits as one that was never interrupted, wherever the checkpoints fell.
"""

import dataclasses
import hashlib
import json
import os
import stat
import time

import numpy as np

from .checkpoint import Checkpoint, load
from .errors import MambazipError
from .files import atomic_output
from .hf import load_weights
from .model import OnlineLearner
from .params import Params

SEPARATOR = 0
BETWEEN = ("separator", "reset")
DEFAULT_BETWEEN = "separator"
HELDOUT_LIST = "heldout.txt"
# Bytes per call of the compiled loop: a progress report (and a signal check) each time.
CHUNK = 1 << 15
# 2: the segment buffers hold a horizon and a replay history (training-recipe knobs).
TRAINER_VERSION = 2
_KEY_RUN = "mambazip.train_run"
_STATE = "mambazip.train_state."
_FNV_OFFSET, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


class TrainError(MambazipError):
    """A corpus or trainer checkpoint that cannot be used."""


@dataclasses.dataclass(frozen=True)
class Document:
    name: str  # path relative to the folder given (a file given: its base name)
    path: str
    size: int


@dataclasses.dataclass(frozen=True)
class Corpus:
    train: tuple
    heldout: tuple

    def digest(self):
        """SHA-256 of the documents' names and sizes: a resumed run must read the same."""
        h = hashlib.sha256()
        for kind, docs in (("train", self.train), ("heldout", self.heldout)):
            for doc in docs:
                h.update(f"{kind} {doc.size} {doc.name}\n".encode("utf-8", "surrogateescape"))
        return h.hexdigest()


def fnv1a64(data):
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def mix64(z):
    """splitmix64's finalizer: FNV-1a alone leaves the top bits of names that differ only in
    their last byte (doc1100 ... doc1109) nearly equal, so that they would go out together."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def held_out_by_hash(name, fraction):
    """Whether ``name`` falls in the held-out ``fraction``: by our own hash, so that the split
    is the same in every process and on every machine."""
    return mix64(fnv1a64(os.fsencode(name))) < int(fraction * 2.0**64)


def find_documents(inputs, holdout=0.0):
    """The ``Corpus`` of files and folders ``inputs`` (in the order given)."""
    if not 0.0 <= holdout < 1.0:
        raise TrainError(f"the held-out fraction must be in [0, 1), got {holdout}")
    train, heldout = [], []
    for given in inputs:
        try:
            st = os.stat(given)
        except OSError as exc:
            raise TrainError(f"{given}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            docs, listed = _folder(given)
        elif stat.S_ISREG(st.st_mode):
            docs, listed = [Document(os.path.basename(given), given, st.st_size)], set()
        else:
            raise TrainError(f"{given}: not a regular file or a folder")
        for doc in docs:
            out = doc.name in listed or held_out_by_hash(doc.name, holdout)
            (heldout if out else train).append(doc)
    train = [doc for doc in train if doc.size > 0]
    if not train:
        raise TrainError("no training documents (all empty or held out)")
    return Corpus(tuple(train), tuple(heldout))


def _folder(folder):
    """(documents, names listed in its heldout.txt)."""
    found = []
    for root, _dirs, files in os.walk(folder, onerror=_raise):
        for name in files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                rel = os.path.relpath(path, folder).replace(os.sep, "/")
                found.append(Document(rel, path, st.st_size))
    # Sorted by bytes, not by the locale's collation, for the same order everywhere.
    found.sort(key=lambda doc: os.fsencode(doc.name))
    listed = set()
    list_path = os.path.join(folder, HELDOUT_LIST)
    if os.path.isfile(list_path):
        with open(list_path, encoding="utf-8", errors="surrogateescape") as f:
            listed = {line.strip() for line in f if line.strip()}
        names = {doc.name for doc in found}
        missing = sorted(listed - names)
        if missing:
            raise TrainError(
                f"{list_path}: lists {missing[0]!r}, which is not a file in {folder} "
                f"({len(missing)} such line(s))"
            )
        found = [doc for doc in found if doc.name != HELDOUT_LIST]
    return found, listed


def _raise(exc):
    raise exc


def _read(doc):
    with open(doc.path, "rb") as f:
        data = f.read()
    if len(data) != doc.size:
        raise TrainError(f"{doc.path}: changed while training ({doc.size} -> {len(data)} bytes)")
    return np.frombuffer(data, dtype=np.uint8)


def bits(p):
    """-log2 of the probabilities ``p`` that ``advance`` returns, summed in float64."""
    return float(-np.log2(p.astype(np.float64)).sum())


def frozen_settings(settings):
    """The same model with optimizer none: the loop predicts and learns nothing."""
    train = dataclasses.replace(settings.train, optimizer="none")
    return dataclasses.replace(settings, train=train)


def heldout_bits(settings, flat, docs, progress=None):
    """(bits, bytes) of ``docs``, each coded from the zero state by a frozen copy of the
    weights ``flat``, which are not touched."""
    frozen = frozen_settings(settings)
    total, n = 0.0, 0
    for doc in docs:
        data = _read(doc)
        if data.size == 0:
            continue
        learner = OnlineLearner(frozen, Params(settings.model, flat.copy()))
        for lo in range(0, data.size, CHUNK):
            _, p = learner.advance(data[lo : lo + CHUNK])
            total += bits(p)
            if progress is not None:
                progress(p.size, bits(p))
        n += data.size
    return total, n


@dataclasses.dataclass
class Position:
    """Where the run is: ``offset`` bytes of document ``document`` of epoch ``epoch`` (0-based)
    are learned; ``heldout`` holds the held-out bits/byte after each finished epoch."""

    epoch: int = 0
    document: int = 0
    offset: int = 0
    heldout: list = dataclasses.field(default_factory=list)


class Training:
    """A training run over ``corpus``: ``epoch`` trains the rest of the current epoch."""

    def __init__(self, corpus, settings, between=DEFAULT_BETWEEN, learner=None, position=None):
        if between not in BETWEEN:
            raise TrainError(f"between must be one of {', '.join(BETWEEN)}, got {between!r}")
        if settings.train.overlap:
            raise TrainError("train with --no-overlap: a trainer checkpoint holds the "
                             "state between updates, not an update in flight")  # fmt: skip
        self.corpus, self.settings, self.between = corpus, settings, between
        self.learner = learner if learner is not None else OnlineLearner(settings)
        # True when the next byte starts a new stream (zero state, primed), so that the
        # learner holds only weights and optimizer state worth keeping.
        self.fresh = True
        self.position = position if position is not None else Position()

    @property
    def train_bytes(self):
        """Bytes one epoch learns (separators included)."""
        extra = len(self.corpus.train) if self.between == "separator" else 0
        return sum(doc.size for doc in self.corpus.train) + extra

    def _document_bytes(self, doc):
        data = _read(doc)
        if self.between == "separator":
            data = np.concatenate([data, np.array([SEPARATOR], dtype=np.uint8)])
        return data

    def _new_stream(self):
        old = self.learner
        self.learner = OnlineLearner(self.settings, old.model.params, (old.adam_m, old.adam_v),
                                     old.step, old.learned)  # fmt: skip
        self.fresh = False

    def _end_stream(self):
        self.learner.finish()
        self.fresh = True

    def epoch(self, progress=None, checkpoint=None, heldout_progress=None):
        """Train to the end of the current epoch, then evaluate the held-out documents.
        ``progress(n_bytes, bits)`` after each chunk learned (``heldout_progress`` after each
        chunk evaluated); ``checkpoint(self)`` after each chunk and ``checkpoint(self,
        final=True)`` at the end of the epoch, deciding itself whether to write. Returns the
        held-out bits/byte (None without held-out documents)."""
        pos = self.position
        docs = self.corpus.train
        while pos.document < len(docs):
            data = self._document_bytes(docs[pos.document])
            while pos.offset < data.size:
                if self.fresh:
                    self._new_stream()
                piece = data[pos.offset : pos.offset + CHUNK]
                _, p = self.learner.advance(piece)
                pos.offset += piece.size
                if progress is not None:
                    progress(piece.size, bits(p))
                if pos.offset < data.size and checkpoint is not None:
                    checkpoint(self)
            if self.between == "reset":
                self._end_stream()
            pos.document, pos.offset = pos.document + 1, 0
            if pos.document < len(docs) and checkpoint is not None:
                checkpoint(self)
        if not self.fresh:
            self._end_stream()
        result = None
        if self.corpus.heldout:
            total, n = heldout_bits(self.settings, self.learner.model.params.flat,
                                    self.corpus.heldout, heldout_progress)  # fmt: skip
            result = total / n if n else None
        pos.heldout.append(result)
        pos.epoch, pos.document, pos.offset = pos.epoch + 1, 0, 0
        if checkpoint is not None:
            checkpoint(self, final=True)
        return result

    def model(self):
        """The ``Checkpoint`` of the model so far (what ``--save-model`` writes)."""
        return Checkpoint.from_learner(self.learner)

    def to_bytes(self):
        """The trainer checkpoint (see the module docstring)."""
        pos = self.position
        run = {
            "version": TRAINER_VERSION,
            "between": self.between,
            "corpus": self.corpus.digest(),
            "epoch": pos.epoch,
            "document": pos.document,
            "offset": pos.offset,
            "heldout": pos.heldout,
            "live": not self.fresh,
        }
        tensors = {}
        if not self.fresh:
            m = self.learner.model
            tensors = {"conv_state": m.conv_state, "ssm_state": m.ssm_state}
            run["counters"] = m.counters.tolist()
            if self.learner.seg is None:
                tensors["work"] = m.work
            else:
                tensors["segment"] = self.learner._seg_floats
                run["segment_ints"] = self.learner._seg_ints.tolist()
                run["segment_shape"] = list(self.learner._seg_shape)
        tensors = {_STATE + k: v for k, v in tensors.items()}
        metadata = {_KEY_RUN: json.dumps(run, sort_keys=True, separators=(",", ":"))}
        return self.model().to_bytes(tensors, metadata)

    @classmethod
    def resume(cls, path, corpus, settings, between=None, memlimit=None):
        """The run saved in the trainer checkpoint at ``path``, which must have been made with
        ``settings`` (None: the saved ones), ``between`` (None: the saved one) and a corpus
        of the same documents."""
        start = load(path, memlimit)
        meta, tensors = _run_metadata(path, memlimit)
        if _KEY_RUN not in meta or start.settings is None:
            raise TrainError(f"{path}: not a trainer checkpoint (written by mambazip train)")
        try:
            run = json.loads(meta[_KEY_RUN])
            if run["version"] != TRAINER_VERSION:
                raise TrainError(f"{path}: trainer checkpoint version {run['version']!r}, not "
                                 f"{TRAINER_VERSION}: resume it with the release that wrote "
                                 "it")  # fmt: skip
            if settings is not None and settings.to_dict() != start.settings.to_dict():
                raise TrainError(f"{path}: trained with other settings than these; give the "
                                 "same preset and options as the run it continues")  # fmt: skip
            between = run["between"] if between is None else between
            if between != run["between"]:
                raise TrainError(f"{path}: the run trains with --between {run['between']}")
            if run["corpus"] != corpus.digest():
                raise TrainError(f"{path}: the run read other documents (names or sizes differ)")
            position = Position(run["epoch"], run["document"], run["offset"], run["heldout"])
            training = cls(corpus, start.settings, between, start.learner(start.settings, True),
                           position)  # fmt: skip
            if run["live"]:
                _restore(training.learner, run, tensors)
                training.fresh = False
        except (KeyError, TypeError, ValueError) as exc:
            raise TrainError(f"{path}: malformed trainer state ({exc})") from None
        return training


def _run_metadata(path, memlimit):
    weights = load_weights(path, memlimit)
    tensors = {k[len(_STATE) :]: v for k, v in weights.tensors.items() if k.startswith(_STATE)}
    return weights.metadata, tensors


def _restore(learner, run, tensors):
    """Put the buffers ``to_bytes`` saved back into a learner built from the same weights."""
    m = learner.model

    def put(target, value):
        value = np.asarray(value, dtype=target.dtype)
        if value.shape != target.shape:
            raise ValueError(f"saved state of shape {value.shape}, expected {target.shape}")
        target[...] = value

    put(m.conv_state, tensors["conv_state"])
    put(m.ssm_state, tensors["ssm_state"])
    put(m.counters, run["counters"])
    if learner.seg is None:
        put(m.work, tensors["work"])
    else:
        if list(learner._seg_shape) != run["segment_shape"]:
            raise ValueError("segment shape differs")
        put(learner._seg_floats, tensors["segment"])
        put(learner._seg_ints, run["segment_ints"])


class Checkpointer:
    """``Training.epoch``'s checkpoint callback: writes ``path`` (atomically, replacing it)
    once ``every_bytes`` bytes or ``every_seconds`` seconds have passed since the last write,
    and at the end of every epoch."""

    def __init__(self, path, every_bytes=None, every_seconds=None, clock=time.monotonic):
        self.path, self.every_bytes, self.every_seconds = path, every_bytes, every_seconds
        self.clock = clock
        self.last_time = clock()
        self.last_bytes = None

    def __call__(self, training, final=False):
        done = training.learner.learned
        if self.last_bytes is None:
            self.last_bytes = done
        due = final
        if self.every_bytes is not None and done - self.last_bytes >= self.every_bytes:
            due = True
        if self.every_seconds is not None and self.clock() - self.last_time >= self.every_seconds:
            due = True
        if due:
            data = training.to_bytes()
            with atomic_output(self.path, force=True) as f:
                f.write(data)
            self.last_time, self.last_bytes = self.clock(), done


def epoch_bytes_done(training):
    """Bytes of the current epoch learned so far: where a resumed epoch's progress starts."""
    pos = training.position
    extra = 1 if training.between == "separator" else 0
    return sum(doc.size + extra for doc in training.corpus.train[: pos.document]) + pos.offset
