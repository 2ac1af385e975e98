"""scripts/build_prior_corpus.py on a fake file tree: standard-corpus files stay out, the rest is
selected and written the same way every time. No apt, no network: the tree stands in for "/"."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "build_prior_corpus.py"


@pytest.fixture(scope="module")
def corpus():
    spec = importlib.util.spec_from_file_location("build_prior_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def prose(seed: str, lines: int) -> bytes:
    """Distinct text lines (none occurs in another call with a different seed)."""
    return b"".join(
        f"{seed} line {i}: {hashlib.sha256(f'{seed}{i}'.encode()).hexdigest()}\n".encode()
        for i in range(lines)
    )


@pytest.fixture
def tree(tmp_path):
    """(root, reference folder, {path: package}, {path: expected exclusion word or None})."""
    reference = tmp_path / "shared" / "bench" / "corpus" / "canterbury"
    reference.mkdir(parents=True)
    paper = prose("reference", 200)  # about 17 KB, so several 4 KiB blocks
    (reference / "paper1").write_bytes(paper)

    root = tmp_path / "root"
    files = {
        "/usr/share/doc/pkg-a/README": (prose("readme", 40), None),
        "/usr/share/doc/pkg-a/NEWS": (prose("news", 40), None),
        "/usr/share/man/man1/tool.1.gz": (gzip.compress(prose("roff", 30), mtime=0), None),
        "/usr/include/pkg/api.h": (prose("header", 50), None),
        "/usr/share/doc/pkg-b/book1": (prose("book", 40), "named like"),
        "/usr/share/man/man1/xargs.1.gz": (gzip.compress(prose("xargs", 30)), "named like"),
        "/usr/share/doc/pkg-c/calgary-notes.txt": (prose("notes", 40), "calgary"),
        "/usr/share/doc/pkg-d/paper.txt": (paper, "SHA-256"),
        # The reference file after one extra line: its blocks are no longer aligned here.
        "/usr/share/doc/pkg-e/copy.txt": (b"shifted\n" + paper[:6000], "consecutive lines"),
        # The reference file's first block, then other text: the block is still aligned.
        "/usr/share/doc/pkg-e/prefix.txt": (paper[:4096] + prose("tail", 20), "aligned"),
        "/usr/share/doc/pkg-f/dump.xml": (b"<mediawiki>" + prose("wiki", 20), "MediaWiki"),
    }
    for path, (data, _) in files.items():
        real = root / path.lstrip("/")
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_bytes(data)
    owners = {path: path.split("/")[4] if "/doc/" in path else "pkg-x" for path in files}
    expected = {path: reason for path, (_, reason) in files.items()}
    return root, tmp_path / "shared", owners, expected


def test_standard_corpus_files_are_excluded(corpus, tree):
    root, shared, owners, expected = tree
    reference = corpus.Reference.from_folder(shared)
    found = corpus.scan(owners, reference, 1 << 20, root)

    excluded = dict(found.excluded)
    for path, reason in expected.items():
        if reason is None:
            assert path not in excluded
        else:
            assert reason in excluded[path], (path, excluded.get(path))
    kept = {doc.path for doc in found.documents}
    assert kept == {path for path, reason in expected.items() if reason is None}
    man = next(doc for doc in found.documents if doc.category == "man-pages")
    assert man.size == len(prose("roff", 30))  # stored decompressed


def test_the_same_tree_gives_the_same_corpus(corpus, tree, tmp_path):
    root, shared, owners, _ = tree
    reference = corpus.Reference.from_folder(shared)
    results = []
    for name in ("one", "two"):
        out = tmp_path / name
        out.mkdir()
        found = corpus.scan(owners, reference, 1 << 20, root)
        chosen = corpus.choose(found.documents, 10_000, 0.3)
        results.append((corpus.write_corpus(out, chosen, 1000, 1 << 20, root), out))
    (files_one, docs_one, sha_one), one = results[0]
    (files_two, docs_two, sha_two), two = results[1]
    assert (files_one, docs_one, sha_one) == (files_two, docs_two, sha_two)
    for entry in files_one:
        assert (one / entry["name"]).read_bytes() == (two / entry["name"]).read_bytes()
    listing = "".join(
        f"{hashlib.sha256((one / f['name']).read_bytes()).hexdigest()}  {f['name']}\n"
        for f in files_one
    )
    assert sha_one == hashlib.sha256(listing.encode()).hexdigest()
    # Every document is where the manifest says, in the held-out file or a training file.
    for doc in docs_one:
        data = (one / doc["file"]).read_bytes()[doc["offset"] : doc["offset"] + doc["bytes"]]
        assert hashlib.sha256(data).hexdigest() == doc["sha256"]
        assert (doc["file"] == "heldout.txt") == doc["heldout"]


def test_waterfill_gives_small_categories_all_they_have(corpus):
    budgets = corpus.waterfill({"a": 100, "b": 5_000, "c": 9_000}, 6_000, 4_000)
    assert budgets == {"a": 100, "b": 2_950, "c": 2_950}
    assert corpus.waterfill({"a": 10_000, "b": 10_000}, 30_000, 9_000) == {"a": 9_000, "b": 9_000}


def test_heldout_rule_takes_about_two_percent(corpus):
    paths = [f"/usr/share/doc/pkg{i}/README" for i in range(20_000)]
    fraction = sum(map(corpus.is_heldout, paths)) / len(paths)
    assert 0.017 < fraction < 0.023
