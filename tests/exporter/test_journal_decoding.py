"""The journal's fast decoding gives what the careful line-by-line path gives: the compiled block parser's
runs of lines, simdjson's state rows and msgspec's typed records against orjson/json and field-by-field
checks, two processes against one, a failed process against none. Values are compared bit for bit, errors
by their whole message."""

import json
import os
import random
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exporter.journal
from exporter.errors import SourceError
from exporter.features import INDEX_TIP, STATE_DIM, THUMB_TIP
from exporter.generate import generate_capture
from exporter.journal import parse_journal
from exporter.shard import export_shard
from tests.exporter.conftest import frame, gap, hand, segment, standard_records

EXPORTED_AT = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
# the careful path casts values beyond the float32 range to find them
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


class _Refusing:
    """Stands in for the typed decoder: refuses every line, so every line takes the careful path."""

    def decode(self, raw: bytes):
        raise msgspec.DecodeError("typed decoding switched off for the test")


def outcome(path: Path, *, typed: bool = True, simd: bool = True, block: bool = True, parallel: bool = False):
    """What parsing the journal gives: the error message, or every array and state of the journal.
    ``typed=False``: every line takes the careful path; ``simd=False``: no line takes the simdjson path (nor
    the block parser); ``block=False``: no line takes the block parser."""
    with pytest.MonkeyPatch.context() as patch:
        if not typed:
            patch.setattr(exporter.journal, "_TYPED", _Refusing())
        if not (typed and simd):
            patch.setattr(exporter.journal, "_SIMD", False)
        if not (typed and simd and block):
            patch.setattr(exporter.journal, "_BLOCK", None)
        if parallel:
            patch.setattr(exporter.journal, "PARALLEL_BYTES", 0)
        try:
            with path.open("rb") as stream:
                journal = parse_journal(stream, 30, lambda: path.open("rb"))
        except SourceError as exc:
            return str(exc)
    try:
        arrays = {
            name: getattr(journal, name).tobytes() for name in ("slots", "times", "gaps", "pinch", "records")
        }
        arrays["states"] = journal.states.take(journal.records).tobytes()
        return arrays, journal.segments, journal.warnings
    finally:
        journal.states.close()


def write_journal(tmp_path: Path, lines: list, name: str = "journal.ndjson", tail: str = "\n") -> Path:
    path = tmp_path / name
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    path.write_bytes(("\n".join(text) + tail).encode("utf-8", "surrogatepass"))
    return path


def assert_same_everywhere(path: Path) -> None:
    careful = outcome(path, typed=False)
    assert outcome(path) == careful
    assert outcome(path, block=False) == careful
    assert outcome(path, simd=False) == careful
    assert outcome(path, parallel=True) == careful


numbers = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(width=32, allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([0, -0.0, 1e-45, 3.4028234e38, 3.4028236e38, 2**53 + 1, 2**64 + 1, 10**19, 0.1])
)
joints = st.none() | st.lists(numbers, min_size=8, max_size=8)
hands = st.none() | st.builds(lambda j: {"joints": j}, st.lists(joints, min_size=25, max_size=25))
heads = st.none() | st.builds(
    lambda p, q: {"p": p, "q": q}, st.lists(numbers, min_size=3, max_size=3), st.lists(numbers, min_size=4, max_size=4)
)


@settings(max_examples=150, deadline=None)
@given(head=heads, left=hands, right=hands, t=numbers, extra=st.none() | st.dictionaries(st.text(max_size=3), numbers))
def test_typed_frames_give_the_careful_values(tmp_path_factory, head, left, right, t, extra):
    record = {"type": "frame", "slot": 1, "t": t, "head": head, "left": left, "right": right}
    if extra:
        record["extra"] = extra
    path = write_journal(tmp_path_factory.mktemp("j"), [frame(0, t=-1e300), record, segment(0, 2, "Wipe")])
    careful = outcome(path, typed=False)
    assert outcome(path) == outcome(path, block=False) == outcome(path, simd=False) == careful


MUTATIONS = [
    b"true", b"false", b"null", b"-0", b"1e400", b"-1e-400", b"NaN", b'"\\ud800"', b"\xff", b"\xc3\xa9",
    b"99999999999999999999", b"[", b"]", b"{", b"}", b",", b'"', b"\\", b" ", b"0.5", b'"type"', b'"gap"',
    b'"slot"', b"1.", b"\xef\xbb\xbf",
]  # fmt: skip


def mutate(line: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(line) + 1)
        kind = rng.random()
        if kind < 0.4:
            line = line[:at] + rng.choice(MUTATIONS) + line[at:]
        elif kind < 0.7:
            line = line[:at] + line[at + rng.randint(1, 4) :]
        else:
            line = line[:at] + rng.choice(MUTATIONS) + line[at + rng.randint(1, 4) :]
    return line


@pytest.mark.parametrize("seed", range(6))
def test_mutated_journals_get_the_careful_verdicts(tmp_path: Path, seed: int):
    """Random byte-level damage to real lines: each journal gets the same error (or the same values)."""
    rng = random.Random(seed)
    base = [json.dumps(r).encode() for r in standard_records()]
    verdicts = set()
    for case in range(60):
        lines = list(base)
        for _ in range(rng.randint(1, 2)):
            at = rng.randrange(len(lines))
            lines[at] = mutate(lines[at], rng)
        path = tmp_path / f"journal-{case}.ndjson"
        path.write_bytes(b"\n".join(lines) + b"\n")
        careful = outcome(path, typed=False)
        assert outcome(path) == careful, (case, careful)
        assert outcome(path, block=False) == careful, (case, careful)
        assert outcome(path, simd=False) == careful, (case, careful)
        verdicts.add(careful if isinstance(careful, str) else "accepted")
    assert len(verdicts) > 10  # the damage really reaches many different checks


def test_two_processes_give_one_journal(tmp_path: Path):
    records = standard_records()
    records.insert(30, json.dumps(frame(20), indent=1).replace("\n", ""))  # a replay in the second half
    records.insert(31, {"type": "pose-extra", "slot": 3})  # an unknown type, skipped
    path = write_journal(tmp_path, records, tail="")
    assert_same_everywhere(path)


FULL_HAND = '{"joints":[' + ",".join(["[1,2,3,0,0,0,1,0.01]"] * 25) + "]}"
HEAD = '{"p":[0,1.5,0],"q":[0,0,0,1]}'


def frame_line(head: str = HEAD, left: str = FULL_HAND, right: str = "null", extra: str = "") -> str:
    return f'{{"type":"frame","slot":3,"t":0.1{extra},"head":{head},"left":{left},"right":{right}}}'


def joints_line(joints: list[str]) -> str:
    return frame_line(left='{"joints":[' + ",".join(joints) + "]}")


PLAIN_JOINT = "[1,2,3,0,0,0,1,0.01]"
# Lines the simdjson path must leave to msgspec and the careful path: each differs from a well-formed
# frame in a way that only the structure (not the count of numbers) shows, or that msgspec refuses.
REFUSED_BY_SIMD = [
    frame_line(head='{"p":[[0],1.5,0],"q":[0,0,0,1]}'),  # an array where a number belongs
    frame_line(head='{"p":[0,1.5,0],"q":[0,0,[0,1]]}'),
    frame_line(head='{"p":[0,1.5,0],"q":[0,0,0,1],"p":[1,1,1]}'),  # a duplicate key
    frame_line(head='{"p":[0,1.5,0],"q":[0,0,0,1],"x":1}'),  # an unknown key
    frame_line(head='{"p":{"a":0,"b":1,"c":2},"q":[0,0,0,1]}'),
    frame_line(head="[0,1.5,0]"),
    frame_line(head="true"),
    frame_line(head='{"p":[0,true,0],"q":[0,0,0,1]}'),
    frame_line(extra=',"slot":4'),
    frame_line(extra=',"t":0.2'),
    frame_line(extra=',"note":"[x]"'),
    joints_line(["[1,2,3,0,0,0,1]", "[1,2,3,0,0,0,1,0.01,5]"] + [PLAIN_JOINT] * 23),  # 7 + 9 numbers: 200 in all
    joints_line(["[[1,2],3,0,0,0,1,0.01]", "1"] + [PLAIN_JOINT] * 23),
    joints_line(['{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1}'] + [PLAIN_JOINT] * 24),
    joints_line(["null"] + [PLAIN_JOINT] * 24),  # an untracked joint (msgspec's path)
    joints_line([PLAIN_JOINT] * 24),
    joints_line(["[1,2,3,0,0,0,1,false]"] + [PLAIN_JOINT] * 24),
    frame_line(left='{"joints":[' + ",".join([PLAIN_JOINT] * 25) + '],"extra":1}'),
    '{"type":"frame","slot":3.0,"t":0.1}',
    '{"type":"frame","slot":-1,"t":0.1}',
    '{"type":"frame","slot":true,"t":0.1}',
    '{"type":"frame","slot":3,"t":"0.1"}',
    '{"type":"frame","slot":3,"t":true}',
    '{"type":"frame","slot":3,"t":1e400}',
    '{"type":"frame","slot":3,"t":123456789012345678901234567890}',
    '{"type":"gap","slot":3,"t":0.1,"head":null}',
    '{"type":"gap","slot":2147483648,"t":0.1}',
    '{"type":"Frame","slot":3,"t":0.1}',
    '[{"type":"frame","slot":3,"t":0.1}]',
]
TAKEN_BY_SIMD = [
    frame_line(),
    frame_line(head="null", right=FULL_HAND),
    '{"type":"frame","slot":3,"t":18446744073709551615}',
    '{"type": "gap", "slot": 3, "t": 1E2}',
    frame_line(head='{"q":[0,0,0,1],"p":[0,-0.0,1e-320]}'),
    frame_line(left='{"joints":[' + ",".join(["[1e38,3.4028236e38,9007199254740993,0,0,0,1,0.01]"] * 25) + "]}"),
]


@pytest.mark.parametrize("line", REFUSED_BY_SIMD + TAKEN_BY_SIMD)
def test_the_simdjson_path_takes_only_plainly_well_formed_lines(tmp_path: Path, line: str):
    import simdjson

    try:
        decoded = exporter.journal._simd_record(simdjson.Parser(), line.encode(), bytearray())
    except exporter.journal._SIMD_REFUSED:
        decoded = None
    assert (decoded is not None) == (line in TAKEN_BY_SIMD)
    records = [frame(0), frame(1), frame(2), line, frame(4), segment(0, 5, "Wipe")]
    assert_same_everywhere(write_journal(tmp_path, records))


def test_the_block_parser_is_built():
    """The install compiles it (pyproject.toml); without it the journal is decoded the slower way."""
    block = exporter.journal._BLOCK
    assert block is not None
    assert (block.STATE_DIM, block.THUMB_TIP, block.INDEX_TIP) == (STATE_DIM, THUMB_TIP, INDEX_TIP)


def test_parse_journal_takes_plain_lines_through_the_block_parser(tmp_path, monkeypatch):
    """The comparisons above would pass if the journal never called the parser: here its frame lines go through it."""
    module = exporter.journal._BLOCK
    taken = []

    class Spy:
        def decode(self, data):
            result = module.decode(data)
            taken.append(result[0].count(1))  # frame lines it took
            return result

    monkeypatch.setattr(exporter.journal, "_BLOCK", Spy())
    path = write_journal(tmp_path, [frame(i) for i in range(20)] + [segment(0, 20, "Wipe")])
    with path.open("rb") as stream:
        parse_journal(stream, 30, lambda: path.open("rb")).states.close()
    assert sum(taken) == 20


def block_kinds(data: bytes) -> list[int]:
    kinds, *_ = exporter.journal._BLOCK.decode(data)
    return list(kinds)


# Lines the block parser leaves to the other paths (which may take them), beyond what simdjson's path leaves
REFUSED_BY_BLOCK = [
    '{"type":"fr\\u0061me","slot":3,"t":0.1}',  # an escape
    '{"t\\u0079pe":"gap","slot":3,"t":0.1}',
    '{"type":"gap","slot":3,"t":0.1,"x":1}',  # an unknown key
    '{"type":"gap","slot":03,"t":0.1}',  # not JSON
    '{"type":"gap","slot":3,"t":01.5}',
    '{"type":"gap","slot":3,"t":.5}',
    '{"type":"gap","slot":3,"t":1.}',
    '{"type":"gap","slot":3,"t":+1}',
    '{"type":"gap","slot":3,"t":0.1} x',
    '{"type":"gap","slot":3,"t":0.1}}',
    '{"type":"gap","slot":3,"t":0.1,}',
    '{"type":"gap","slot":3}',
    '{"slot":3,"t":0.1}',
    '{"type":"gap","slot":1e2,"t":0.1}',
    '{"type":"gap","slot":-0,"t":0.1}',
    '{"type":"gap","slot":3,"t":-1e309}',
    '{"type":"gap","slot":3,"t":"' + "1" * 90 + '"}',
    '{"type":"gap","slot":3,"t":' + "1" * 90 + "}",  # a number longer than the parser copies: refused
    "{}",
    "",
    "\u00e9",
]
TAKEN_BY_BLOCK = [
    ' { "slot" : 3 , "t" : 0.25 , "type" : "gap" } ',  # whitespace and any key order
    '{"type":"gap","slot":2147483647,"t":-0}',
    '{"type":"gap","slot":0,"t":1e-400}',  # underflows to 0.0, as float() gives
    '{"type":"gap","slot":0,"t":4.9406564584124654e-324}',
    '{"type":"gap","slot":0,"t":1.7976931348623157e308}',
    '{"type":"gap","slot":0,"t":123456789012345678901234567890}',
    '{"type":"gap","slot":0,"t":0.1e-0000000000000000000000001}',
    '{"right":null,"left":null,"head":null,"t":1,"slot":9,"type":"frame"}',
    frame_line(head='{"q":[0,0,0,1],"p":[0,-0.0,1e-320]}'),
    frame_line(right=FULL_HAND, left="null"),
    '{"type":"frame","slot":3,"t":123456789012345678901234567890}',  # beyond simdjson's integers
    joints_line(["null"] + [PLAIN_JOINT] * 24),  # untracked joints (msgspec's path)
    joints_line([PLAIN_JOINT] * 4 + ["null"] + [PLAIN_JOINT] * 20),  # no thumb tip: no pinch distance
    frame_line(right='{"joints":[' + ",".join([PLAIN_JOINT] * 9 + ["null"] + [PLAIN_JOINT] * 15) + "]}"),
    frame_line(left='{"joints":[' + ",".join(["null"] * 25) + "]}"),
]


@pytest.mark.parametrize("line", REFUSED_BY_SIMD + TAKEN_BY_SIMD + REFUSED_BY_BLOCK + TAKEN_BY_BLOCK)
def test_the_block_parser_takes_only_plainly_well_formed_lines(tmp_path: Path, line: str):
    taken = line in TAKEN_BY_BLOCK or (line in TAKEN_BY_SIMD and line not in REFUSED_BY_BLOCK)
    assert block_kinds(line.encode() + b"\n") == [(2 if '"gap"' in line else 1) if taken else 0]
    records = [frame(0), frame(1), frame(2), line, frame(4), segment(0, 5, "Wipe")]
    assert_same_everywhere(write_journal(tmp_path, records))
    assert_same_everywhere(write_journal(tmp_path, records[:4], tail=""))  # the last line, without its newline


def test_the_block_parser_reads_every_line_of_a_block():
    data = b'{"type":"gap","slot":1,"t":1}\n\nnot json\n{"type":"gap","slot":2,"t":2}'
    kinds, slots, times, starts, states, tips = exporter.journal._BLOCK.decode(data)
    assert list(kinds) == [2, 0, 0, 2]
    assert np.frombuffer(slots, dtype=np.int64)[[0, 3]].tolist() == [1, 2]
    assert np.frombuffer(times, dtype=np.float64)[[0, 3]].tolist() == [1.0, 2.0]
    assert np.frombuffer(starts, dtype=np.int64).tolist() == [0, 30, 31, 40]
    assert len(states) == len(tips) == 0
    assert block_kinds(b"") == []
    assert block_kinds(b"\n") == [0]


def test_the_block_parser_makes_room_for_any_number_of_frames():
    lines = [frame_line(head="null", left="null").replace('"slot":3', f'"slot":{i}') for i in range(1000)]
    lines[500:500] = ['{"type":"gap","slot":0,"t":0}'] * 700
    kinds, slots, _, _, states, tips = exporter.journal._BLOCK.decode("\n".join(lines).encode())
    assert list(kinds) == [1] * 500 + [2] * 700 + [1] * 500
    assert np.frombuffer(slots, dtype=np.int64)[1200:].tolist() == list(range(500, 1000))
    rows = np.frombuffer(states, dtype=np.float64).reshape(-1, STATE_DIM)
    assert len(rows) == len(tips) == 1000 and not rows.any()


number_texts = st.one_of(
    numbers.map(lambda value: json.dumps(value)),
    st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)


@settings(max_examples=2000, deadline=None)
@given(text=number_texts)
def test_the_block_parser_converts_numbers_as_float_does(text: str):
    line = f'{{"type":"gap","slot":0,"t":{text}}}'.encode()
    kinds, _, times, *_ = exporter.journal._BLOCK.decode(line)
    expected = float(json.loads(text))  # an int's value, as the careful path converts it
    if not np.isfinite(expected) or len(text) >= 80:
        assert list(kinds) == [0]
    else:
        assert list(kinds) == [2]
        assert np.frombuffer(times, dtype=np.float64).tobytes() == np.float64(expected).tobytes(), text


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.append(frame(16, head={"p": [0, 0, 1], "q": [0, 0, 0, 1]})),  # a conflicting replay late
        lambda r: r.insert(40, '{"type":"frame","slot":'),  # invalid JSON in the second half
        lambda r: r.append('{"type":"frame","slot":'),  # a torn last line
        lambda r: r.append(""),  # a blank last line
        lambda r: r.insert(3, frame(3, t=float(2**40) ** 9)),  # 't' beyond the float32 range is fine
        lambda r: r.insert(3, '{"type":"gap","slot":3,"t":1e400}'),  # a replayed slot with a bad 't'
        lambda r: r.insert(2, gap(45)) or r.insert(44, gap(45)),  # a replay whose first record is a gap
        lambda r: r.insert(39, frame(17, t=7.0)),  # a replay that differs only in 't'
        lambda r: r.insert(5, frame(50, left=hand(50, 0, untracked_joints=(4,)), right={"joints": [None] * 25})),
    ],
)
def test_errors_and_values_do_not_depend_on_the_path(tmp_path: Path, change):
    records = standard_records()
    change(records)
    assert_same_everywhere(write_journal(tmp_path, records))


def test_the_earliest_error_wins_across_the_halves(tmp_path: Path):
    records = standard_records()
    bad_t = frame(16, t=True)
    records[records.index(frame(16))] = bad_t  # a boolean 't'
    records.append(frame(2**40))  # a slot out of range, later
    records.insert(1, frame(1, head={"p": [1e39, 0, 0], "q": [0, 0, 0, 1]}))  # state beyond float32, earliest
    path = write_journal(tmp_path, records)
    message = outcome(path)
    assert message == outcome(path, typed=False) == outcome(path, parallel=True)
    assert message.startswith("journal.ndjson:2: numbers must be finite")


def test_a_failed_decoding_process_is_replaced(tmp_path: Path, monkeypatch):
    path = write_journal(tmp_path, standard_records())
    expected = outcome(path)
    parent = os.getpid()
    decode = exporter.journal._PartDecoder.decode

    def dying(self, stream, stop):
        if os.getpid() != parent:
            os._exit(3)  # killed half-way, as by the out-of-memory killer
        return decode(self, stream, stop)

    monkeypatch.setattr(exporter.journal._PartDecoder, "decode", dying)
    assert outcome(path, parallel=True) == expected


def shard_files(shard: Path) -> dict[str, bytes]:
    return {p.relative_to(shard).as_posix(): p.read_bytes() for p in sorted(shard.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_generated_corpus_gives_the_same_shards_on_every_path(tmp_path: Path, monkeypatch):
    """Every file of every shard (parquet tables, statistics, metadata, video) is byte-identical whether
    lines are decoded by the block parser, typed or carefully, by one process or two."""
    corpus = [
        {"seed": 1, "retries": 0, "camera": "mp4", "seconds": 4},
        {"seed": 2, "retries": 3, "camera": "none", "seconds": 20},
        {"seed": 3, "retries": 1, "camera": "webm", "aligned": False, "seconds": 4},
        {"seed": 4, "retries": 2, "camera": "none", "aligned": False, "seconds": 20, "rate_hz": 90},
    ]
    for number, options in enumerate(corpus):
        source = generate_capture(tmp_path / f"capture-{number}", **options)
        shards = []
        for path, (typed, simd, block, parallel) in enumerate(
            [(True, True, True, False), (False, False, False, False), (True, True, True, True),
             (True, False, False, False), (True, True, False, False)]
        ):
            with monkeypatch.context() as patch:
                if not typed:
                    patch.setattr(exporter.journal, "_TYPED", _Refusing())
                if not simd:
                    patch.setattr(exporter.journal, "_SIMD", False)
                if not block:
                    patch.setattr(exporter.journal, "_BLOCK", None)
                if parallel:
                    patch.setattr(exporter.journal, "PARALLEL_BYTES", 0)
                result = export_shard(source, tmp_path / f"out-{number}-{path}", exported_at=EXPORTED_AT)
            shards.append(shard_files(result.shard_dir))
        assert shards[0] == shards[1] == shards[2] == shards[3] == shards[4], options


def test_states_are_read_back_in_any_order(tmp_path: Path):
    records = [frame(s) for s in (5, 3, 4, 0, 1, 2)] + [gap(6), segment(0, 7, "Wipe")]
    path = write_journal(tmp_path, records)
    with path.open("rb") as stream:
        journal = parse_journal(stream, 30, lambda: path.open("rb"))
    wanted = np.array([3, -1, 0, 5, 4, 2, 1, -1], dtype=np.int64)
    states = journal.states.take(wanted)
    assert not states[1].any() and not states[7].any()
    in_order = journal.states.take(np.arange(6))
    np.testing.assert_array_equal(states[[0, 2, 3, 4, 5, 6]], in_order[[3, 0, 5, 4, 2, 1]])
    np.testing.assert_array_equal(journal.slots, np.arange(7))
    journal.states.close()
