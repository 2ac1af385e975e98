"""Who watches a run: the codec reports to an observer as it goes (a progress bar, the
per-byte analysis of ``score``) instead of taking a parameter for each thing it can report.
"""


class Observer:
    """Watches nothing; a subclass overrides what it wants. ``per_byte``: whether ``coded``
    wants each byte's code length, ``trust``: also the context side's trust in its parts per
    byte (it costs time); both need the frames coded in this process."""

    per_byte = False
    trust = False

    def header(self, header):
        """Decoding: a stream's header (``container.read_header``), before its data."""

    def progress(self, n_bytes, bits):
        """After each chunk: its length and its ideal code length (0 when decoding)."""

    def coded(self, bits, trust):
        """With ``per_byte``, after each chunk: bits (n,) float64, each byte's -log2 p; trust
        (n, parts) float32, the shares of ``Predictor.advance`` (None without ``trust`` or
        without a context side)."""


SILENT = Observer()


class Report(Observer):
    """An observer made of a callable ``progress(n_bytes, bits)``, a callable
    ``on_header(header)``, and lists that receive each chunk's bits (``per_byte``) and trust
    shares (``trust``)."""

    def __init__(self, progress=None, per_byte=None, trust=None, on_header=None):
        self.on_progress, self.on_header = progress, on_header
        self.bits, self.shares = per_byte, trust
        self.per_byte = per_byte is not None or trust is not None
        self.trust = trust is not None

    def header(self, header):
        if self.on_header is not None:
            self.on_header(header)

    def progress(self, n_bytes, bits):
        if self.on_progress is not None:
            self.on_progress(n_bytes, bits)

    def coded(self, bits, trust):
        if self.bits is not None:
            self.bits.append(bits)
        if trust is not None:
            self.shares.append(trust)


class InOriginalBytes(Observer):
    """Forwards to ``inner`` the progress of a transformed segment in its original bytes:
    the predictor codes the segment's ``stream`` bytes, the user's total counts its
    ``original`` ones, so after ``done`` stream bytes floor(done * original / stream) are
    reported, and the segment's end reports exactly its original length."""

    def __init__(self, inner, original, stream):
        self.inner, self.original, self.stream = inner, original, stream
        self.per_byte, self.trust = inner.per_byte, inner.trust
        self.done = self.reported = 0

    def header(self, header):
        self.inner.header(header)

    def progress(self, n_bytes, bits):
        self.done += n_bytes
        now = self.done * self.original // self.stream
        self.inner.progress(now - self.reported, bits)
        self.reported = now

    def coded(self, bits, trust):
        self.inner.coded(bits, trust)
