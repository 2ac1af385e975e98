"""Assemble the training corpus for mambazip's pretrained priors (issue 13).

The corpus is built only from files that installed Debian packages own (dpkg's file lists), so the
same installed packages give the same bytes. It expects these packages (``--install`` runs this
as root; the rest of the sources come with the machine image):

    apt-get install -y --no-install-recommends python3-doc python3.11-doc debian-policy \\
        developers-reference debian-reference-en debian-faq golang-1.19-src librust-serde-dev \\
        librust-regex-dev node-lodash glibc-doc docbook-xml

Categories (first matching rule wins, see CATEGORIES): Debian and GNU manuals (HTML, plain text,
info), package READMEs and NEWS, changelogs, licences, man pages (decompressed roff source), the
Python documentation (reStructuredText sources of python3.11-doc), Python, C/C++, Go, Rust, JS
and Perl/shell sources, and structured text (JSON, XML/DTD, CSV, YAML, TOML, INI, config).
Gzipped files are decompressed. Only UTF-8 text without NUL bytes is kept; files over
``--max-file`` are cut at the last newline before it; identical contents are kept once.

Selection is fixed: the per-category budget is a water-fill of ``--size`` over what each category
has, capped at ``--category-share`` of the total; within a category documents are taken in the
order of SHA-256(path) (a fixed pseudo-random sample), no package taking more than
PACKAGE_SHARE of the budget until every package has had its turn. About 2 % of the documents
(SHA-256 of a salted path, see is_heldout) go to ``heldout.txt`` instead of the training files.

Never in the corpus: files whose path names a standard compression corpus, files named like a
Canterbury, Calgary or Silesia file, Wikipedia/MediaWiki dumps, and any document that shares
content with a file under ``--reference`` (the benchmark corpus in /work/shared): equal SHA-256,
an equal 4 KiB-aligned block, or a run of at least 4 KiB of consecutive lines that all occur in
the reference files (this catches a copy at any offset, as long as it is line-aligned).
Packages that no archive provides (``apt list`` says ``local``) are skipped: nobody else could
install them.

Output: OUT/NN-CATEGORY-KKK.txt (documents of one category concatenated with no separator, about
``--chunk`` bytes each; the offsets of each document are in the manifest), OUT/heldout.txt,
OUT/manifest.json (the record plus every document) and the record alone at ``--record``.
The corpus SHA-256 is that of the text ``sha256sum`` prints for the files in manifest order:
``cd OUT && sha256sum $(jq -r '.files[].name' manifest.json) | sha256sum``.

    python scripts/build_prior_corpus.py --install --out /work/prior-corpus --size 36MB
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = Path("/")

APT_PACKAGES = (
    "python3-doc",
    "python3.11-doc",
    "debian-policy",
    "developers-reference",
    "debian-reference-en",
    "debian-faq",
    "golang-1.19-src",
    "librust-serde-dev",
    "librust-regex-dev",
    "node-lodash",
    "glibc-doc",
    "docbook-xml",
)

CORPUS_PATH_WORDS = ("canterbury", "calgary", "enwik", "silesia", "wikipedia", "mediawiki")
CANTERBURY = (
    *("alice29.txt", "asyoulik.txt", "cp.html", "fields.c", "grammar.lsp", "kennedy.xls"),
    *("lcet10.txt", "plrabn12.txt", "ptt5", "sum", "xargs.1", "E.coli", "bible.txt"),
    "world192.txt",
)
CALGARY = (
    *("bib", "book1", "book2", "geo", "news", "obj1", "obj2", "pic", "progc", "progl", "progp"),
    *("trans", "paper1", "paper2", "paper3", "paper4", "paper5", "paper6"),
)
SILESIA = (
    *("dickens", "mozilla", "mr", "nci", "ooffice", "osdb", "reymont", "samba", "sao"),
    *("webster", "xml", "x-ray"),
)
# Matched against the file name with any compression suffix removed, case-sensitively: Debian's
# many NEWS files are not Calgary's "news", and the content checks would catch a renamed copy.
CORPUS_FILE_NAMES = frozenset(CANTERBURY + CALGARY + SILESIA)
WIKI_MARKERS = (b"<mediawiki", b"www.mediawiki.org/xml/export", b"[[Category:")

BLOCK = 4096
MIN_DOCUMENT = 128
MAX_READ = 64 << 20
PACKAGE_SHARE = 0.3
HELDOUT_MODULUS = 50
RANK_SALT = b"mambazip-prior-corpus-rank\0"
HELDOUT_SALT = b"mambazip-prior-corpus-heldout\0"

_TEXT_DOC = r"(?:txt|html?|md|rst|info(?:-\d+)?)"
_STRUCTURED = r"(?:json|xml|csv|tsv|dtd|xsd|rng|ent|xsl|yaml|yml|toml|ini|conf|cfg|desktop)"


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    pattern: str
    shebang: tuple[bytes, ...] = ()  # also take extensionless scripts whose #! line has one


# Order matters twice: the first matching rule classifies a file, and the output files follow it.
CATEGORIES = (
    Category(
        "licences",
        "licence texts and Debian copyright files",
        r"^/usr/share/(common-licenses/[^/]+|doc/[^/]+/copyright)$",
    ),
    Category(
        "changelogs",
        "Debian and upstream changelogs (dated, log-like entries)",
        r"^/usr/share/doc/[^/]+/(.*/)?(?i:changelog|news\.debian)[^/]*$",
    ),
    Category(
        "python-docs",
        "Python 3.11 documentation, reStructuredText sources",
        r"^/usr/share/doc/python3\.11/html/_sources/.*\.txt$",
    ),
    Category(
        "manuals",
        "Debian Policy, Developer's and Debian Reference, Debian FAQ (HTML, text); GNU info",
        r"^/usr/share/(doc/(debian-policy|developers-reference|debian-reference-en|debian/FAQ)/"
        rf".*\.{_TEXT_DOC}|info/[^/]+\.info(-\d+)?)$",
    ),
    Category(
        "man-pages",
        "English man pages, roff source",
        r"^/usr/share/man/man[^/]+/[^/]+$",
    ),
    Category(
        "package-docs",
        "READMEs, NEWS, FAQs and other text in /usr/share/doc",
        r"^/usr/share/doc/(?!python3\.11/html/)[^/]+/(.*/)?"
        rf"([^/.]+|[^/]+\.{_TEXT_DOC})$",
    ),
    Category(
        "python-src",
        "Python standard library and Debian's Python packages",
        r"^/usr/lib/python3(\.11)?/.*\.py$",
        (b"python",),
    ),
    Category(
        "c-src",
        "C and C++ headers (/usr/include) and sources",
        r"^/usr/(include|share)/.*\.(h|hh|hpp|hxx|c|cc|cpp)$",
    ),
    Category(
        "go-src",
        "Go 1.19 standard library sources (no testdata)",
        r"^/usr/share/go-[^/]+/(?!.*/testdata/).*\.go$",
    ),
    Category(
        "rust-src",
        "Rust crates from Debian's librust-*-dev packages",
        r"^/usr/share/cargo/registry/.*\.rs$",
    ),
    Category(
        "js-src",
        "JavaScript and TypeScript from Debian's node-* and libjs-* packages (no minified files)",
        r"^/usr/share/(nodejs|javascript)/(?!.*\.min\.js$).*\.(js|mjs|cjs|ts)$",
    ),
    Category(
        "perl-shell",
        "Perl modules and scripts, shell scripts",
        r"^/usr/(share|lib)/.*\.(pl|pm|pod|sh|bash)$",
        (b"perl", b"sh"),  # "sh" also matches bash, dash and zsh
    ),
    Category(
        "structured",
        "JSON, XML, DTD, CSV, YAML, TOML, INI and config files",
        rf"^/usr/(share|lib)/.*\.{_STRUCTURED}$",
    ),
)
_COMPILED = tuple(re.compile(c.pattern) for c in CATEGORIES)
SCRIPT_DIRS = ("/usr/bin/", "/usr/sbin/", "/usr/lib/", "/usr/share/")


def strip_compression(path: str) -> str:
    return path[:-3] if path.endswith(".gz") else path


def classify(path: str) -> str | None:
    """The category of a file by its path (with .gz removed), or None."""
    plain = strip_compression(path)
    for category, rule in zip(CATEGORIES, _COMPILED, strict=True):
        if rule.search(plain):
            return category.name
    return None


def shebang_category(path: str, head: bytes) -> str | None:
    """The category of an extensionless script, from its #! line."""
    if "." in os.path.basename(path) or not path.startswith(SCRIPT_DIRS):
        return None
    if not head.startswith(b"#!"):
        return None
    first = head.split(b"\n", 1)[0]
    for category in CATEGORIES:
        if any(word in first for word in category.shebang):
            return category.name
    return None


def path_exclusion(path: str) -> str | None:
    """Why a path may not enter the corpus by its name alone, or None."""
    lower = path.lower()
    for word in CORPUS_PATH_WORDS:
        if word in lower:
            return f"path contains {word!r}"
    if os.path.basename(strip_compression(path)) in CORPUS_FILE_NAMES:
        return "named like a standard corpus file"
    return None


@dataclass
class Reference:
    """What the benchmark corpus looks like, to keep every piece of it out."""

    file_hashes: set[bytes] = field(default_factory=set)
    block_hashes: set[bytes] = field(default_factory=set)
    lines: set[bytes] = field(default_factory=set)
    files: int = 0

    @classmethod
    def from_folder(cls, folder: Path) -> Reference:
        ref = cls()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            ref.files += 1
            ref.file_hashes.add(hashlib.sha256(data).digest())
            ref.block_hashes.update(block_hashes(data))
            ref.lines.update(data.split(b"\n"))
        return ref

    def exclusion(self, data: bytes) -> str | None:
        if hashlib.sha256(data).digest() in self.file_hashes:
            return "same SHA-256 as a reference file"
        if not self.block_hashes.isdisjoint(block_hashes(data)):
            return "shares a 4 KiB-aligned block with a reference file"
        run = longest_shared_run(data, self.lines)
        if run >= BLOCK:
            return f"{run} bytes of consecutive lines found in the reference files"
        return None


def block_hashes(data: bytes) -> set[bytes]:
    return {
        hashlib.sha256(data[i : i + BLOCK]).digest() for i in range(0, len(data) - BLOCK + 1, BLOCK)
    }


def longest_shared_run(data: bytes, lines: set[bytes]) -> int:
    """The most bytes of consecutive lines of ``data`` that all occur in ``lines``."""
    best = run = 0
    for line in data.split(b"\n"):
        if line in lines:
            run += len(line) + 1
            best = max(best, run)
        else:
            run = 0
    return best


def content_exclusion(data: bytes, reference: Reference) -> str | None:
    """Why a document's bytes may not enter the corpus (standard-corpus content), or None."""
    for marker in WIKI_MARKERS:
        if marker in data:
            return f"contains {marker.decode()!r} (MediaWiki/Wikipedia)"
    return reference.exclusion(data)


def is_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_document(path: Path) -> bytes | None:
    """The file's bytes, gunzipped if it ends in .gz; None if unreadable or over MAX_READ."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_READ + 1)
    except OSError:
        return None
    if path.name.endswith(".gz"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_READ + 1)
        except zlib.error:
            return None
    return raw if len(raw) <= MAX_READ else None


def cut(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes, ending at a newline when one is there, and valid UTF-8."""
    if len(data) <= limit:
        return data
    head = data[:limit]
    newline = head.rfind(b"\n")
    if newline > 0:
        return head[: newline + 1]
    return head.decode("utf-8", "ignore").encode()


def rank(path: str) -> bytes:
    return hashlib.sha256(RANK_SALT + path.encode("utf-8", "surrogateescape")).digest()


def is_heldout(path: str) -> bool:
    digest = hashlib.sha256(HELDOUT_SALT + path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % HELDOUT_MODULUS == 0


@dataclass(frozen=True)
class Document:
    path: str
    category: str
    package: str
    size: int
    sha256: str
    truncated: bool


@dataclass
class Scan:
    documents: list[Document] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def scan(files: dict[str, str], reference: Reference, max_file: int, root: Path) -> Scan:
    """Classify, read and filter ``files`` (path as dpkg lists it -> package) in sorted path
    order; the files are read under ``root`` ("/" but in tests)."""
    result = Scan()
    seen: set[bytes] = set()
    for path in sorted(files):
        real = root / path.lstrip("/")
        # A symlink's target is listed under its own path, so following links would only duplicate.
        if real.is_symlink() or not real.is_file():
            continue
        category = classify(path)
        if category is None:
            with open(real, "rb") as f:
                category = shebang_category(path, f.read(256))
        if category is None:
            continue
        reason = path_exclusion(path)
        if reason:
            result.excluded.append((path, reason))
            continue
        data = read_document(real)
        if data is None:
            result.skipped["unreadable or too large"] += 1
            continue
        if not is_text(data):
            result.skipped["not UTF-8 text"] += 1
            continue
        reason = content_exclusion(data, reference)
        if reason:
            result.excluded.append((path, reason))
            continue
        doc = cut(data, max_file)
        if len(doc) < MIN_DOCUMENT:
            result.skipped[f"under {MIN_DOCUMENT} bytes"] += 1
            continue
        digest = hashlib.sha256(doc).digest()
        if digest in seen:
            result.skipped["duplicate content"] += 1
            continue
        seen.add(digest)
        truncated = len(doc) < len(data)
        result.documents.append(
            Document(path, category, files[path], len(doc), digest.hex(), truncated)
        )
    return result


def waterfill(available: dict[str, int], total: int, cap: int) -> dict[str, int]:
    """Budgets summing to at most ``total``: equal shares (at most ``cap``), and a category with
    less than its share gives all it has, the rest going to the others."""
    budgets: dict[str, int] = {}
    remaining = dict(available)
    left = total
    while remaining:
        share = min(cap, left // len(remaining))
        small = {name: size for name, size in remaining.items() if size <= share}
        if not small:
            budgets.update(dict.fromkeys(remaining, share))
            break
        for name, size in small.items():
            budgets[name] = size
            left -= size
            del remaining[name]
    return budgets


def select(documents: list[Document], budget: int) -> list[Document]:
    """Documents of one category in rank order up to ``budget`` bytes, sorted by path. A first
    pass holds each package to PACKAGE_SHARE of the budget so that no package crowds out the
    rest; a second pass fills what is left from any package."""
    ranked = sorted(documents, key=lambda d: rank(d.path))
    chosen: set[str] = set()
    taken = 0
    per_package: dict[str, int] = defaultdict(int)
    for package_limit in (int(budget * PACKAGE_SHARE), budget):
        for doc in ranked:
            if doc.path in chosen or taken + doc.size > budget:
                continue
            if per_package[doc.package] + doc.size > package_limit:
                continue
            chosen.add(doc.path)
            taken += doc.size
            per_package[doc.package] += doc.size
    return sorted((d for d in documents if d.path in chosen), key=lambda d: d.path)


def bytes_per_category(documents: list[Document]) -> dict[str, int]:
    available: dict[str, int] = defaultdict(int)
    for doc in documents:
        available[doc.category] += doc.size
    return dict(available)


def choose(documents: list[Document], size: int, category_share: float) -> list[Document]:
    """The corpus: about ``size`` bytes, each category within ``category_share`` of it."""
    budgets = waterfill(bytes_per_category(documents), size, int(size * category_share))
    return [
        doc
        for category in CATEGORIES
        for doc in select(
            [d for d in documents if d.category == category.name], budgets.get(category.name, 0)
        )
    ]


def dpkg_files(info_dir: Path = Path("/var/lib/dpkg/info")) -> dict[str, str]:
    """Every file path that an installed package lists, with its package (no :arch suffix)."""
    owners: dict[str, str] = {}
    for listing in sorted(info_dir.glob("*.list")):
        package = listing.name[: -len(".list")].split(":")[0]
        for line in listing.read_text("utf-8", "surrogateescape").splitlines():
            owners.setdefault(line, package)
    return owners


def local_packages() -> set[str]:
    """Installed packages that no configured archive provides."""
    out = subprocess.run(
        ["apt", "list", "--installed"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split("/")[0] for line in out.splitlines() if "[installed,local]" in line}


def package_versions() -> dict[str, str]:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


_LICENCE_GUESSES = (
    ("LGPL", r"GNU (Lesser|Library) General Public License"),
    ("GPL", r"GNU General Public License"),
    ("Apache-2.0", r"Apache License,? Version 2"),
    ("Artistic", r"Artistic License"),
    ("Expat", r"Permission is hereby granted, free of charge"),
    ("BSD", r"Redistribution and use in source and binary forms"),
    ("public-domain", r"(?i)public domain"),
)


def package_licence(package: str, doc_root: Path = Path("/usr/share/doc")) -> str:
    """The first License: field of the package's copyright file, else a marked guess."""
    try:
        text = (doc_root / package / "copyright").read_text("utf-8", "replace")
    except OSError:
        return "unknown (no copyright file)"
    field_match = re.search(r"^License:[ \t]*(\S[^\n]*)", text, re.MULTILINE)
    if field_match:
        return field_match.group(1).strip()
    for name, pattern in _LICENCE_GUESSES:
        if re.search(pattern, text):
            return f"{name} (guessed from copyright text)"
    return "unknown (see copyright file)"


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*(|KB|MB|GB|KiB|MiB|GiB)", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 36MB, 32MiB, 1000000)")
    units = {"": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20}
    units["gib"] = 2**30
    return int(match.group(1)) * units[match.group(2).lower()]


def write_corpus(
    out: Path, chosen: list[Document], chunk: int, max_file: int, root: Path
) -> tuple[list[dict], list[dict], str]:
    """Write the training files and heldout.txt; return (files, documents, corpus SHA-256)."""
    files: list[dict] = []
    documents: list[dict] = []
    streams: dict[str, bytearray] = {}
    heldout = bytearray()

    def flush(name: str, data: bytearray) -> None:
        (out / name).write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        files.append({"name": name, "bytes": len(data), "sha256": digest})

    order = {c.name: i for i, c in enumerate(CATEGORIES)}
    counters: dict[str, int] = defaultdict(int)
    current: str | None = None
    current_category = ""
    for doc in sorted(chosen, key=lambda d: (order[d.category], d.path)):
        data = cut(read_document(root / doc.path.lstrip("/")) or b"", max_file)
        if hashlib.sha256(data).hexdigest() != doc.sha256:
            raise SystemExit(f"{doc.path} changed while the corpus was being built")
        held = is_heldout(doc.path)
        if held:
            target_name, buffer = "heldout.txt", heldout
        else:
            if current is not None and (
                doc.category != current_category or len(streams[current]) >= chunk
            ):
                flush(current, streams.pop(current))
                current = None
            if current is None:
                index = counters[doc.category]
                counters[doc.category] += 1
                current = f"{order[doc.category]:02d}-{doc.category}-{index:03d}.txt"
                current_category = doc.category
                streams[current] = bytearray()
            target_name, buffer = current, streams[current]
        documents.append(
            {
                "path": doc.path,
                "category": doc.category,
                "package": doc.package,
                "file": target_name,
                "offset": len(buffer),
                "bytes": doc.size,
                "sha256": doc.sha256,
                "truncated": doc.truncated,
                "heldout": held,
            }
        )
        buffer += data
    if current is not None:
        flush(current, streams.pop(current))
    flush("heldout.txt", heldout)
    listing = "".join(f"{f['sha256']}  {f['name']}\n" for f in files)
    return files, documents, hashlib.sha256(listing.encode()).hexdigest()


def prepare_out(out: Path) -> None:
    """Create ``out``, removing the files of an earlier build there and refusing anything else."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.json"
    ours = {"manifest.json"}
    if manifest.exists():
        ours.update(f["name"] for f in json.loads(manifest.read_text())["files"])
    strangers = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if strangers:
        raise SystemExit(f"{out} holds files this script did not write: {', '.join(strangers)}")
    for name in ours:
        (out / name).unlink(missing_ok=True)


def install() -> None:
    if os.geteuid() != 0:
        raise SystemExit("--install runs apt-get and needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *APT_PACKAGES]
    subprocess.run(command, check=True, env=env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--size", type=parse_size, default="36MB", help="total bytes (36MB)")
    parser.add_argument("--install", action="store_true", help="apt-get install the packages")
    parser.add_argument("--max-file", type=parse_size, default="1MB", help="cap per document")
    parser.add_argument("--chunk", type=parse_size, default="1MB", help="output file size")
    parser.add_argument("--category-share", type=float, default=0.3, help="cap per category")
    parser.add_argument(
        "--reference",
        type=Path,
        default=REPO.parent / "shared",
        help="folder whose files must not appear in the corpus (the benchmark corpus)",
    )
    parser.add_argument(
        "--record",
        type=Path,
        # Not models/ itself: every models/*.json is read as a preset.
        default=REPO / "models" / "corpus" / "prior-corpus.json",
        help="where the record (manifest without the document list) is also written",
    )
    args = parser.parse_args(argv)
    if args.install:
        install()

    reference = Reference.from_folder(args.reference)
    print(f"reference: {reference.files} files under {args.reference}", file=sys.stderr)
    local = local_packages()
    files = {p: pkg for p, pkg in dpkg_files().items() if pkg not in local}
    found = scan(files, reference, args.max_file, ROOT)

    available = bytes_per_category(found.documents)
    chosen = choose(found.documents, args.size, args.category_share)

    prepare_out(args.out)
    out_files, documents, corpus_sha = write_corpus(
        args.out, chosen, args.chunk, args.max_file, ROOT
    )

    versions = package_versions()
    packages: dict[str, dict] = {}
    for doc in sorted(documents, key=lambda d: d["package"]):
        entry = packages.setdefault(
            doc["package"],
            {
                "version": versions.get(doc["package"], "unknown"),
                "licence": package_licence(doc["package"]),
                "bytes": 0,
                "documents": 0,
                "categories": [],
            },
        )
        entry["bytes"] += doc["bytes"]
        entry["documents"] += 1
        if doc["category"] not in entry["categories"]:
            entry["categories"].append(doc["category"])

    categories = {}
    for category in CATEGORIES:
        docs = [d for d in documents if d["category"] == category.name]
        categories[category.name] = {
            "description": category.description,
            "available_bytes": available.get(category.name, 0),
            "bytes": sum(d["bytes"] for d in docs if not d["heldout"]),
            "heldout_bytes": sum(d["bytes"] for d in docs if d["heldout"]),
            "documents": len(docs),
        }
    record = {
        "description": "Training corpus for mambazip's pretrained priors (issue 13), built by "
        "scripts/build_prior_corpus.py from installed Debian packages; no standard "
        "compression corpus (see exclusion).",
        "command": "python scripts/build_prior_corpus.py " + " ".join(sys.argv[1:]),
        "sha256": corpus_sha,
        "sha256_definition": "SHA-256 of the lines 'SHA256  NAME\\n' (sha256sum's output) of "
        "the files in this order",
        "bytes": sum(f["bytes"] for f in out_files),
        "training_bytes": sum(f["bytes"] for f in out_files if f["name"] != "heldout.txt"),
        "heldout_bytes": out_files[-1]["bytes"],
        "documents": len(documents),
        "format": "documents concatenated with no separator; offsets in manifest.json; man "
        "pages are roff source, .gz files are decompressed, documents over max_file are cut at "
        "a newline",
        "selection": {
            "size": args.size,
            "max_file": args.max_file,
            "category_share": args.category_share,
            "package_share": PACKAGE_SHARE,
            "rank": "ascending SHA-256(RANK_SALT + path)",
            "heldout": f"SHA-256(HELDOUT_SALT + path)[:8] big-endian % {HELDOUT_MODULUS} == 0",
        },
        "exclusion": {
            "reference_folder": str(args.reference),
            "reference_files": reference.files,
            "checks": [
                "path contains any of " + ", ".join(CORPUS_PATH_WORDS),
                "file name (without .gz) is a Canterbury, Calgary or Silesia name",
                "content contains a MediaWiki marker",
                "SHA-256 equal to a reference file",
                "a 4 KiB-aligned block equal to a 4 KiB-aligned block of a reference file",
                "4 KiB or more of consecutive lines that all occur in the reference files",
                "packages that no archive provides (apt list: local)",
            ],
            "excluded": [{"path": p, "reason": r} for p, r in found.excluded],
            "skipped_packages": sorted(local),
            "skipped_counts": dict(sorted(found.skipped.items())),
        },
        "categories": categories,
        "files": out_files,
        "packages": packages,
    }
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(record, indent=1) + "\n")
    manifest = {**record, "document_list": documents}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

    for path, reason in found.excluded:
        print(f"excluded {path}: {reason}", file=sys.stderr)
    for reason, count in sorted(found.skipped.items()):
        print(f"skipped {count} files: {reason}", file=sys.stderr)
    for name, entry in categories.items():
        print(
            f"{name:13} {entry['bytes']:>10,} bytes + {entry['heldout_bytes']:>8,} held out "
            f"({entry['documents']} documents, {entry['available_bytes']:,} available)",
            file=sys.stderr,
        )
    print(f"total {record['bytes']:,} bytes in {len(out_files)} files, sha256 {corpus_sha}")


if __name__ == "__main__":
    main()
