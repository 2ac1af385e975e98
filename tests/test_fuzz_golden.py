"""Fuzzing over every format version's golden files (issue 15, "Tests and acceptance").

Each golden file tests/golden/v*/NAME.mz (a folder added for a new format version is picked up
by itself) is cut into its regions and mutated region by region by scripts/fuzz_mz.py:
truncation at and inside every region, header fields at extremes behind a valid header CRC,
nesting 100,000 deep, unknown keys, versions, block sizes and word counts against the data
present, bit flips, concatenations with a damaged second stream; in version 4 (frames and a
seek index) also the index's fields behind a valid index CRC, its tail, frames swapped,
dropped and repeated (with the index kept or made to agree) and the header's frame_size.
Every mutated file goes through the real command line (``mambazip decompress -o out in.mz``
and ``mambazip info in.mz``; version-4 files also ``mambazip decompress --range A:B -o out
in.mz``, each with one of four ranges: inside a frame, across a frame's edge, the whole
original, empty) in a process whose address space is limited to 1 GiB, and must either

- exit 0, and then (decompress) have written exactly the original, or (--range) exactly
  original[A:B], or
- exit 1 with exactly one line on stderr starting "mambazip: " and no traceback,

and in both cases leave no temporary file, no output after a failure, the input unchanged,
peak RSS at most 1 GB and wall time at most 30 s.

The full set (about 4,000 files, 8,000 runs) is ``python scripts/fuzz_mz.py``; this test runs
a fixed, seeded sample of it: of each (format version, kind of mutation) SAMPLE_PER_CATEGORY
files or SAMPLE_FRACTION of them, whichever is more, and every "big model" and "declared
size" mutation of one golden file per version, the one with the longest original (these
headers ask for the most memory and work; one of them runs for over a minute, so only one
file per version has them here). Version 4 has more kinds of mutation and its runs cost more
(frames decode in worker processes that start fresh), so of each of its kinds
SAMPLE_PER_CATEGORY_V4 files (SAMPLE_PER_FOCUS_V4 of the index, frames and frame_size
mutations); the range command runs on the version-4 files of the sample
(and on every unmutated golden file: older files decode from their start, then are sliced).
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"

_spec = importlib.util.spec_from_file_location("fuzz_mz", ROOT / "scripts" / "fuzz_mz.py")
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_mz"] = fuzz  # dataclasses look their module up by name
_spec.loader.exec_module(fuzz)

SAMPLE_PER_CATEGORY = 6
SAMPLE_FRACTION = 0.05
SAMPLE_PER_CATEGORY_V4 = 1
FOCUS_V4 = ("index", "frames", "frame_size")  # of these kinds SAMPLE_PER_FOCUS_V4
SAMPLE_PER_FOCUS_V4 = 3
FRAMED = ("v4",)  # the folders whose sampled cases also run the range command
FORCED = ("big_model", "declared")  # all of one golden file per version, none of the others
# Also always in the sample for that file: the largest stored mtime a header may hold.
FOCUS = (":v3_field:mtime=9223372036854775807",)
SEED = 15
# A run past 30 s fails anyway; past this it is killed, so a hang costs the suite 31 s.
TIMEOUT = 31.0
GOLDEN_FILES = sorted(GOLDEN.glob("v*/*.mz"))
VERSION_FOLDERS = sorted(p.name for p in GOLDEN.glob("v*") if p.is_dir())
ALL_CASES = fuzz.cases(GOLDEN)


def _framed(case):
    return case.id.split("/")[0] in FRAMED


def _sample():
    rest = [c for c in ALL_CASES if c.category not in FORCED and not _framed(c)]
    picked = {c.id for c in fuzz.sample(rest, SAMPLE_PER_CATEGORY, SEED, SAMPLE_FRACTION)}
    framed = [c for c in ALL_CASES if c.category not in FORCED + FOCUS_V4 and _framed(c)]
    picked |= {c.id for c in fuzz.sample(framed, SAMPLE_PER_CATEGORY_V4, SEED)}
    focus = [c for c in ALL_CASES if c.category in FOCUS_V4 and _framed(c)]
    picked |= {c.id for c in fuzz.sample(focus, SAMPLE_PER_FOCUS_V4, SEED)}
    for folder in VERSION_FOLDERS:
        # The file with the longest original: the most work for a header that asks for much.
        files = sorted(
            GOLDEN.glob(f"{folder}/*.mz"),
            key=lambda p: (-p.with_suffix(".bin").stat().st_size, p.name),
        )
        first = f"{folder}/{files[0].name}:"
        picked |= {
            c.id
            for c in ALL_CASES
            if c.id.startswith(first) and (c.category in FORCED or any(f in c.id for f in FOCUS))
        }
    return [c for c in ALL_CASES if c.id in picked]


SAMPLE = _sample()
BY_ID = {c.id: c for c in SAMPLE}
PLAIN = ("decompress", "info")  # on every sampled case; "range" on the framed ones too
RUNS = [(c.id, cmd) for c in SAMPLE for cmd in (*PLAIN, *(("range",) if _framed(c) else ()))]


@pytest.fixture(scope="module")
def runs():
    """Every command on every sampled case, two at a time: {(case id, command): Run}."""
    results, _ = fuzz.run_cases(SAMPLE, PLAIN, jobs=2, timeout=TIMEOUT)
    ranged, _ = fuzz.run_cases(
        [c for c in SAMPLE if _framed(c)], ("range",), jobs=2, timeout=TIMEOUT
    )
    return {(r.case.id, r.command): r for r in results + ranged}


# ------------------------------------------------------------------------- the fuzz set


def test_every_format_version_folder_has_golden_files_with_their_originals():
    assert VERSION_FOLDERS, "no tests/golden/v*/ folder"
    for folder in VERSION_FOLDERS:
        files = sorted(GOLDEN.glob(f"{folder}/*.mz"))
        assert files, f"{folder} holds no .mz file"
        for mz in files:
            assert mz.with_suffix(".bin").is_file(), f"{mz} has no original {mz.stem}.bin"


@pytest.mark.parametrize("golden", GOLDEN_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_file_is_mutated_in_every_region(golden):
    name = f"{golden.parent.name}/{golden.name}:"
    mine = [c for c in ALL_CASES if c.id.startswith(name)]
    kinds = {c.category for c in mine}
    if fuzz.compact(golden.read_bytes()):  # version 6: binary, no JSON header to rewrite
        assert {"truncate", "flip", "byte", "varint", "check", "concat"} <= kinds
        if golden.read_bytes()[2] >= 7:  # its transform records, in the header or a frame
            assert "transform" in kinds
        return
    assert {
        "truncate",
        "magic",
        "version",
        "header_len",
        "header_crc",
        "field",
        "unknown_key",
        "header_json",
        "nesting",
        "trailer",
        "overwrite",
        "concat",
        "v3_field",
    } <= kinds
    streams = fuzz.parse(golden.read_bytes())
    if "settings" in streams[0].header:  # not the short header of an empty stream
        assert {"declared", "big_model", "frame_size"} <= kinds
    if streams[0].version >= 4:
        assert {"index", "frames", "frame_size"} <= kinds
        names = {r[0] for r in streams[0].regions}
        for field in ("mark", "n_frames", "length", "crc", "index_crc", "index_len", "magic"):
            assert f"index.{field}" in names, field
        assert {f"index.entry{i}.{f}" for i in range(len(streams[0].frames))
                for f in ("packed_size", "size", "crc")} <= names  # fmt: skip
        assert {f"frame{i}.end" for i in range(len(streams[0].frames))} <= names
        details = {c.id.split(":", 2)[2] for c in mine if c.category == "frame_size"}
        own = str(fuzz.v4_size(streams[0].header, "frame_size"))  # no mutation: left out
        for value in ("0", "1", "1099511627776", "1099511627777", "-1", "1.5", '"500"'):
            assert value == own or f"frame_size={value}" in details, value
        assert "in a v3 header" in details
    if any(b for s in streams for b in s.blocks):
        assert {"n_bytes", "n_words", "blocks", "flip"} <= kinds
    # A truncation at and inside every region of every stream.
    cuts = {int(c.id.split(":")[2].split()[1]) for c in mine if c.category == "truncate"}
    for s in streams:
        for region, start, end in s.regions:
            assert {start, (start + end) // 2} <= cuts | {len(golden.read_bytes())}, region
    # Every numeric field of the model, training and mixing settings at every extreme.
    header = streams[0].header
    for section in ("model", "train", "mix"):
        for key, value in (header.get("settings", {}).get(section) or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                for extreme in (
                    "0",
                    "-1",
                    "2147483648",
                    "9223372036854775808",
                    "1e+308",
                    "true",
                    '"str"',
                    "[]",
                    "{}",
                    "null",
                ):
                    if json.dumps(value) == extreme:
                        continue  # the field has this value already: no mutation
                    case_id = f"{name}field:settings.{section}.{key}={extreme}"
                    assert any(c.id == case_id for c in mine), case_id


def test_the_sample_covers_every_version_and_every_kind_of_mutation():
    assert {c.id.split("/")[0] for c in SAMPLE} == set(VERSION_FOLDERS)
    for folder in VERSION_FOLDERS:
        kinds = {c.category for c in ALL_CASES if c.id.startswith(folder + "/")}
        assert {c.category for c in SAMPLE if c.id.startswith(folder + "/")} == kinds


def test_mutations_are_fixed_by_the_seed():
    assert [c.id for c in fuzz.cases(GOLDEN)] == [c.id for c in ALL_CASES]
    again = fuzz.cases(GOLDEN)
    assert [c.blob for c in again] == [c.blob for c in ALL_CASES]


# ------------------------------------------------------------------------- the harness


def test_every_range_kind_is_asked_of_every_golden_file():
    for golden in GOLDEN_FILES:
        blob, original = golden.read_bytes(), golden.with_suffix(".bin").read_bytes()
        spans = fuzz.ranges(blob, original)
        name = f"{golden.parent.name}/{golden.name}:"
        mine = {c.span for c in ALL_CASES if c.id.startswith(name)}
        assert mine == set(spans.values())
        if fuzz.compact(blob):
            assert spans == {
                "whole": (0, len(original)),
                "second half": (len(original) // 2, len(original)),
            }
            continue
        assert set(spans) == {"inside", "edge", "whole", "empty"}
        assert spans["whole"] == (0, len(original))
        assert spans["empty"][0] == spans["empty"][1]
        assert all(0 <= a <= b <= len(original) for a, b in spans.values())
        frames = fuzz.parse(blob)[0].frames
        if frames and len(frames) > 1:
            a, b = spans["edge"]
            assert a < frames[0].length < b, "the edge range crosses the first frame's end"
            a, b = spans["inside"]
            first = frames[0].length
            assert first <= a < b <= first + frames[1].length, "inside the second frame"


def test_unmutated_golden_files_decode_their_ranges_through_the_harness():
    # Every range of every golden file (older versions too: decoded from the start, then
    # sliced): exit 0 with exactly original[A:B]; a wrong expectation is reported.
    cases = []
    for p in GOLDEN_FILES:
        blob, original = p.read_bytes(), p.with_suffix(".bin").read_bytes()
        for kind, span in fuzz.ranges(blob, original).items():
            case_id = f"{p.parent.name}/{p.name}:none:{kind}"
            cases.append(fuzz.Case(case_id, "none", blob, original, span, original))
    past = fuzz.Case("past", "none", cases[0].blob, cases[0].expected, (0, 10**9), b"")
    wrong = fuzz.Case("wrong", "none", cases[0].blob, b"", cases[0].span, b"x" * 10**6)
    results, _ = fuzz.run_cases([*cases, past, wrong], ("range",), jobs=2, timeout=120)
    for run in results[:-2]:
        start, end = run.case.span
        assert run.code == 0 and run.output == run.case.expected[start:end], run.summary()
        assert run.files == ["in.mz", "out"] and run.tmp_files == []
        assert run.failures() == []
    assert results[-2].code == 1 and results[-2].failures() == [], results[-2].summary()
    assert results[-1].code == 0 and "wrong output" in results[-1].failures()


def test_unmutated_golden_files_decode_to_their_originals_through_the_harness():
    # The harness sees success when there is one: every golden file decompresses, exit 0,
    # to exactly its original; and a wrong expectation is reported as a wrong output.
    originals = [
        fuzz.Case(
            f"{p.parent.name}/{p.name}:none:",
            "none",
            p.read_bytes(),
            p.with_suffix(".bin").read_bytes(),
        )
        for p in GOLDEN_FILES
    ]
    wrong = fuzz.Case("wrong", "none", originals[0].blob, originals[0].expected + b"x")
    results, _ = fuzz.run_cases([*originals, wrong], ("decompress",), jobs=2, timeout=120)
    for run in results[:-1]:
        assert run.code == 0 and run.output == run.case.expected, run.summary()
        assert run.files == ["in.mz", "out"] and run.tmp_files == []
        assert run.failures() == []
    assert results[-1].code == 0
    assert "wrong output" in results[-1].failures()


def test_the_worker_matches_a_fresh_python_m_mambazip_process():
    # Cases run inside a long-lived worker for speed; a few of each outcome, also run as
    # their own `python -m mambazip` process, give the same exit code and stderr.
    picks = []
    for category in ("truncate", "field", "nesting", "declared", "concat", "index", "frames"):
        picks += [c for c in SAMPLE if c.category == category][:1]
    worker, _ = fuzz.run_cases(picks, tuple(fuzz.COMMANDS), jobs=2, timeout=TIMEOUT)
    alone, _ = fuzz.run_cases(
        picks, tuple(fuzz.COMMANDS), jobs=2, timeout=TIMEOUT, use_subprocess=True
    )
    for a, b in zip(worker, alone, strict=True):
        assert (a.code, a.stderr, a.stdout, a.files) == (b.code, b.stderr, b.stdout, b.files), (
            a.summary(),
            b.summary(),
        )
        assert a.rss > 20e6 and b.rss > 20e6  # Python with NumPy: the measure is real


# ------------------------------------------------------------------------- the acceptance


@pytest.mark.parametrize(
    ("case_id", "command"), RUNS, ids=[f"{fuzz.ascii_id(i)}-{cmd}" for i, cmd in RUNS]
)
def test_a_mutated_file_fails_in_one_line_or_decodes_to_the_original(runs, case_id, command):
    run = runs[case_id, command]
    case = BY_ID[case_id]
    assert run.code is not None, f"the run did not end: {run.note}"
    assert run.address_space == fuzz.ADDRESS_SPACE  # it ran under RLIMIT_AS 1 GiB
    assert "Traceback" not in run.stderr and "MemoryError" not in run.stderr, run.stderr
    if run.code == 0:
        if command == "decompress":
            assert case.expected is not None, "exit 0 on a file it must refuse"
            assert run.output == case.expected, "exit 0 with a wrong output"
            assert run.files == ["in.mz", "out"]
        elif command == "range":
            start, end = case.span
            assert case.ranged is not None and end <= len(case.ranged), (
                f"exit 0 on a range {start}:{end} it must refuse"
            )
            assert run.output == case.ranged[start:end], "exit 0 with wrong bytes"
            assert run.files == ["in.mz", "out"]
        else:
            assert run.stdout.startswith(b"in.mz:\n") and run.files == ["in.mz"]
    else:
        assert run.code == 1
        line = run.stderr.removesuffix("\n")
        assert line.startswith("mambazip: ") and "\n" not in line, run.stderr
        assert run.files == ["in.mz"], "output left behind"
    assert run.tmp_files == [], "temporary files left behind"
    assert run.input_intact, "the input was modified"
    assert run.rss <= fuzz.MAX_RSS, f"peak RSS {run.rss / 1e6:.0f} MB"
    assert run.seconds <= fuzz.MAX_SECONDS, f"{run.seconds:.1f} s"


def test_info_lists_every_sampled_file_that_decompresses(runs):
    # info reads the framing that decompress reads: a file that decompresses is listed.
    decoded = [
        case_id for (case_id, command), r in runs.items() if command == "decompress" and r.code == 0
    ]
    assert decoded, "no sampled file decompresses: nothing to compare"
    assert [i for i in decoded if runs[i, "info"].code != 0] == []
