"""Streaming parse of ``journal.ndjson`` (capture-source.md section 3).

The journal is read one line at a time, each line decoded by orjson when that gives the values
json.loads gives. Per observed slot only compact numbers are kept: the 410-value state in fixed-size
float32 chunks, and slot, time, gap flag, line number and the two pinch distances in typed arrays.
Replays are detected with a digest of each slot's canonical JSON; when digests differ the earlier
line is read again by its byte offset and compared as Python values.
"""

import hashlib
import itertools
import json
import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import orjson

from exporter.errors import SourceError
from exporter.features import (
    HAND_VALUES,
    HEAD_VALUES,
    INDEX_TIP,
    JOINT_VALUES,
    JOINTS,
    STATE_DIM,
    THUMB_TIP,
)

JOURNAL = "journal.ndjson"
OUTCOMES = ("success", "completed", "failure", "retry")
DROPPED_KEYS = frozenset({"device_id", "user_agent"})  # never exported, wherever they appear
_CHUNK_ROWS = 4096
_NUMBER = (int, float)
_NUMBER_TYPES = frozenset(_NUMBER)
MAX_SLOT = 2**31 - 1  # 103 days at 240 Hz; keeps slot arithmetic exact in int64 and float64
# Missing slots become gap rows. A journal whose retained segments are mostly unrecorded, beyond this
# many seconds of slots, is damaged rather than lossy: refuse it instead of inventing the rows.
MAX_INVENTED_SECONDS = 60


@dataclass(frozen=True)
class Segment:
    cycle: int
    repetition: int
    take: int
    task: str
    start_slot: int
    end_slot: int
    outcome: str
    annotations: dict[str, Any]
    line: int

    @property
    def retained(self) -> bool:
        return self.outcome != "retry"


class StateStore:
    """Observation states, one float32 row of 410 values per stored record, in fixed-size chunks."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray | None] = []
        self.count = 0

    def append(self, values: np.ndarray) -> None:
        row = self.count % _CHUNK_ROWS
        if row == 0:
            self._chunks.append(np.zeros((_CHUNK_ROWS, STATE_DIM), dtype=np.float32))
        self._chunks[-1][row] = values
        self.count += 1

    def append_zeros(self) -> None:
        if self.count % _CHUNK_ROWS == 0:
            self._chunks.append(np.zeros((_CHUNK_ROWS, STATE_DIM), dtype=np.float32))
        self.count += 1

    def take(self, records: np.ndarray) -> np.ndarray:
        """States of the given record numbers (-1: an all-zero row, a missing slot). Each chunk is
        released once copied, so the store and the result never both hold all states; the store is
        empty afterwards."""
        out = np.zeros((len(records), STATE_DIM), dtype=np.float32)
        chunk_of = np.where(records >= 0, records // _CHUNK_ROWS, -1)
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(len(self._chunks) + 1))
        for chunk in range(len(self._chunks)):
            rows = order[bounds[chunk] : bounds[chunk + 1]]
            out[rows] = self._chunks[chunk][records[rows] % _CHUNK_ROWS]
            self._chunks[chunk] = None
        self._chunks = []
        return out


@dataclass
class Journal:
    """Observed slots sorted by slot, with the record number of each in ``states``."""

    slots: np.ndarray  # int64
    times: np.ndarray  # float64, source clock
    gaps: np.ndarray  # bool
    pinch: np.ndarray  # float32 (n, 2)
    records: np.ndarray  # int64, row in ``states``
    states: StateStore
    segments: list[Segment]  # every segment, retries included, by start_slot
    warnings: list[str] = field(default_factory=list)

    def nominal_times(self, slots: np.ndarray, rate_hz: int) -> np.ndarray:
        """Slot s is nominally at t_a + (s - a) / rate_hz, a being the lowest observed slot."""
        return self.times[0] + (slots - self.slots[0]) / rate_hz


class _Reader:
    def __init__(self, rate_hz: int, reopen: Callable[[], IO[bytes]]):
        self.rate_hz = rate_hz
        self.reopen = reopen
        self.slot_seen: dict[int, tuple[bytes, int, int]] = {}  # slot -> (digest, line, byte offset)
        self.segment_seen: dict[tuple[int, int, int], tuple[dict[str, Any], Segment]] = {}
        self.slots = array("q")
        self.times = array("d")
        self.gaps = array("b")
        self.lines = array("q")
        self.pinch = array("f")
        self.states = StateStore()
        self.warnings: list[str] = []

    def fail(self, line: int, message: str) -> SourceError:
        return SourceError(message, path=JOURNAL, line=line)

    def read(self, lines: Iterable[bytes]) -> None:
        offset = 0
        pending: tuple[bytes, int, int] | None = None
        for number, raw in enumerate(lines, start=1):
            if pending is not None:
                self.line(*pending, last=False)
            pending = (raw, number, offset)
            offset += len(raw)
        if pending is not None:
            self.line(*pending, last=True)

    def line(self, raw: bytes, number: int, offset: int, *, last: bool) -> None:
        try:
            record = _loads(raw)
        except ValueError as exc:
            if last:
                self.warnings.append(f"{JOURNAL}:{number}: torn last line ignored (not valid JSON)")
                return
            raise self.fail(number, f"invalid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise self.fail(number, "record is not a JSON object")
        kind = record.get("type")
        if not isinstance(kind, str):
            raise self.fail(number, "record has no string 'type'")
        if kind in ("frame", "gap"):
            self.slot_record(record, kind, raw, number, offset)
        elif kind == "segment":
            self.segment(record, number)

    def slot_record(self, record: dict[str, Any], kind: str, raw: bytes, number: int, offset: int) -> None:
        slot = _non_negative_int(record, "slot", lambda m: self.fail(number, m))
        # Replays are mostly byte-identical: a digest of the line settles those; any other replay is
        # compared as parsed values against the earlier line, read again from its offset.
        digest = hashlib.blake2b(raw.strip(), digest_size=16).digest()
        seen = self.slot_seen.get(slot)
        if seen is not None:
            if seen[0] == digest or self.earlier_record(seen[2]) == record:
                return
            raise self.fail(number, f"slot {slot} conflicts with the record on line {seen[1]}")
        t = record.get("t")
        if type(t) not in _NUMBER or not _finite(t):
            raise self.fail(number, "'t' must be a finite number")
        if kind == "gap":
            self.states.append_zeros()
            pinch = (0.0, 0.0)
        else:
            values, pinch = _frame_state(record, raw, lambda m: self.fail(number, m))
            self.states.append(values)
        self.slot_seen[slot] = (digest, number, offset)
        self.slots.append(slot)
        self.times.append(float(t))
        self.gaps.append(kind == "gap")
        self.lines.append(number)
        self.pinch.extend(pinch)

    def earlier_record(self, offset: int) -> Any:
        with self.reopen() as stream:
            stream.seek(offset)
            return _loads(stream.readline())

    def segment(self, record: dict[str, Any], number: int) -> None:
        def fail(message: str) -> SourceError:
            return self.fail(number, message)

        cycle, repetition, take = (_non_negative_int(record, k, fail) for k in ("cycle", "repetition", "take"))
        task = record.get("task")
        if not isinstance(task, str) or not task or not _utf8(task):
            raise fail("'task' must be a non-empty string")
        start, end = (_non_negative_int(record, k, fail) for k in ("start_slot", "end_slot"))
        if start >= end:
            raise fail("'start_slot' must be less than 'end_slot'")
        outcome = record.get("outcome")
        if outcome not in OUTCOMES:
            raise fail(f"'outcome' must be one of {', '.join(OUTCOMES)}")
        annotations = record.get("annotations")
        if not isinstance(annotations, dict):
            raise fail("'annotations' must be an object")
        for key, value in annotations.items():
            scalar = isinstance(value, bool) or (type(value) in _NUMBER and _finite(value))
            if not _utf8(key) or not (scalar or (isinstance(value, str) and _utf8(value))):
                raise fail(f"annotation {key!r} must be a string, a finite number or a boolean")
        key = (cycle, repetition, take)
        earlier = self.segment_seen.get(key)
        if earlier is not None:
            if earlier[0] == record:
                return
            raise fail(
                f"segment cycle {cycle} repetition {repetition} take {take} conflicts with the "
                f"record on line {earlier[1].line}"
            )
        self.segment_seen[key] = (
            record,
            Segment(
                cycle,
                repetition,
                take,
                task,
                start,
                end,
                outcome,
                {k: v for k, v in annotations.items() if k not in DROPPED_KEYS},
                number,
            ),
        )

    def journal(self) -> Journal:
        slots = np.frombuffer(self.slots, dtype=np.int64)
        order = np.argsort(slots, kind="stable")
        slots = slots[order]
        times = np.frombuffer(self.times, dtype=np.float64)[order]
        lines = np.frombuffer(self.lines, dtype=np.int64)[order]
        broken = np.flatnonzero(np.diff(times) <= 0)
        if len(broken):
            i = broken[0]
            raise self.fail(
                int(max(lines[i], lines[i + 1])),
                f"'t' must increase with 'slot': slot {slots[i]} (line {lines[i]}) has t={float(times[i])!r}, "
                f"slot {slots[i + 1]} (line {lines[i + 1]}) has t={float(times[i + 1])!r}",
            )
        segments = sorted((s for _, s in self.segment_seen.values()), key=lambda s: s.start_slot)
        for before, after in itertools.pairwise(segments):
            if after.start_slot < before.end_slot:
                raise self.fail(
                    max(before.line, after.line),
                    f"segment [{after.start_slot}, {after.end_slot}) overlaps segment "
                    f"[{before.start_slot}, {before.end_slot}) on line {min(before.line, after.line)}",
                )
        self.check_coverage(slots, segments)
        return Journal(
            slots=slots,
            times=times,
            gaps=np.frombuffer(self.gaps, dtype=np.int8)[order].astype(bool),
            pinch=np.frombuffer(self.pinch, dtype=np.float32).reshape(-1, 2)[order],
            records=order.astype(np.int64),
            states=self.states,
            segments=segments,
            warnings=self.warnings,
        )

    def check_coverage(self, slots: np.ndarray, segments: list[Segment]) -> None:
        retained = [s for s in segments if s.retained]
        starts = np.array([s.start_slot for s in retained], dtype=np.int64)
        ends = np.array([s.end_slot for s in retained], dtype=np.int64)
        recorded = np.searchsorted(slots, ends) - np.searchsorted(slots, starts)
        missing = (ends - starts) - recorded
        if missing.sum() > max(MAX_INVENTED_SECONDS * self.rate_hz, recorded.sum()):
            worst = retained[int(np.argmax(missing))]
            raise self.fail(
                worst.line,
                f"retained segments have {missing.sum()} slots with no frame or gap record but only "
                f"{recorded.sum()} recorded slots (segment [{worst.start_slot}, {worst.end_slot}) lacks "
                f"{missing.max()}): the journal is damaged",
            )


def parse_journal(lines: Iterable[bytes], rate_hz: int, reopen: Callable[[], IO[bytes]]) -> Journal:
    """Parse journal lines (bytes, newline included); ``reopen`` opens the journal again for seeking."""
    reader = _Reader(rate_hz, reopen)
    reader.read(lines)
    return reader.journal()


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# Byte classes for spotting an integer literal of 19 or more digits: a digit run after anything but
# '.' (a fraction) or 'e' (an exponent). orjson turns integers beyond 64 bits into floats.
_NUMBER_CLASSES = bytes(ord("d") if chr(b) in "0123456789" else b if chr(b) in ".eE" else ord(" ") for b in range(256))
_LONG_INTEGER = b" " + b"d" * 19


def _loads(raw: bytes) -> Any:
    """The value ``json.loads(raw, parse_constant=...)`` gives, decoded by orjson when it can.

    orjson gives the same Python values for everything it accepts except integers beyond 64 bits,
    which are left to the standard library, as is every line orjson refuses (NaN, Infinity, 1e400,
    lone surrogates, a byte order mark, UTF-16, invalid JSON): the standard library decides what is
    an error and what the error says.
    """
    if _LONG_INTEGER not in (b" " + raw).translate(_NUMBER_CLASSES):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _utf8(text: str) -> bool:
    """False for a string holding a lone surrogate (valid JSON escape, but not encodable text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _non_negative_int(record: dict[str, Any], key: str, fail: Callable[[str], SourceError]) -> int:
    value = record.get(key)
    if type(value) is not int or not 0 <= value <= MAX_SLOT:
        raise fail(f"{key!r} must be an integer from 0 to {MAX_SLOT}")
    return value


def _numbers(values: Any, count: int, what: str, fail: Callable[[str], SourceError]) -> list[float]:
    """Check an array's length and element types; finiteness is checked on the whole float32 row."""
    if type(values) is not list or len(values) != count:
        raise fail(f"{what} must be an array of {count} numbers")
    if not set(map(type, values)) <= _NUMBER_TYPES:
        raise fail(f"{what} must hold numbers only")
    return values


def _frame_state(
    record: dict[str, Any], raw: bytes, fail: Callable[[str], SourceError]
) -> tuple[np.ndarray, tuple[float, float]]:
    """The 410-value state and the two pinch distances of a frame record (``raw`` is its line)."""
    # JSON booleans come only from the literals, so a line without them holds none, and the fast path's
    # array('d') (which would take True as 1.0) sees ints and floats only.
    if b"true" not in raw and b"false" not in raw:
        state = _fast_frame_state(record)
        if state is not None:
            return state
    return _checked_frame_state(record, fail)


def _fast_frame_state(record: dict[str, Any]) -> tuple[np.ndarray, tuple[float, float]] | None:
    """The state of a well-formed frame, checked and converted by a few C-level passes over all values.
    None when anything (an untracked joint, a bad value) needs the joint-by-joint path, which also
    names what is wrong; both give the same values."""
    head = record.get("head")
    if head is None:
        values = [0.0] * HEAD_VALUES
    elif type(head) is dict and _sized_list(head.get("p"), 3) and _sized_list(head.get("q"), 4):
        values = [1.0, *head["p"], *head["q"]]
    else:
        return None
    tips = []
    for hand in (record.get("left"), record.get("right")):
        if hand is None:
            values += _UNTRACKED_HAND
            tips.append(None)
            continue
        joints = hand.get("joints") if type(hand) is dict else None
        if not (
            _sized_list(joints, len(JOINTS))
            and set(map(type, joints)) == _LIST_TYPE
            and set(map(len, joints)) == _JOINT_LENGTH
        ):
            return None
        values.append(1.0)
        values += itertools.chain.from_iterable(joints)
        tips.append((joints[THUMB_TIP][:3], joints[INDEX_TIP][:3]))
    try:
        numbers = array("d", values)  # TypeError for anything but a number
    except (TypeError, OverflowError):
        return None
    pinch = tuple(0.0 if pair is None else math.dist(*pair) for pair in tips)
    numbers.extend(pinch)
    row = np.frombuffer(numbers, dtype=np.float64).astype(np.float32)
    if not np.isfinite(row).all():
        return None
    return row[:STATE_DIM], pinch


def _sized_list(value: Any, size: int) -> bool:
    return type(value) is list and len(value) == size


def _checked_frame_state(
    record: dict[str, Any], fail: Callable[[str], SourceError]
) -> tuple[np.ndarray, tuple[float, float]]:
    values: list[float] = []
    head = record.get("head")
    if head is None:
        values += [0.0] * HEAD_VALUES
    elif isinstance(head, dict):
        values.append(1.0)
        values += _numbers(head.get("p"), 3, "head.p", fail)
        values += _numbers(head.get("q"), 4, "head.q", fail)
    else:
        raise fail("'head' must be a pose object or null")
    left, left_pinch = _hand_state(record.get("left"), "left", fail)
    right, right_pinch = _hand_state(record.get("right"), "right", fail)
    try:
        row = np.array(values + left + right + [left_pinch, right_pinch], dtype=np.float32)
    except OverflowError:
        row = None
    if row is None or not np.isfinite(row).all():
        raise fail("numbers must be finite and within the float32 range")
    return row[:STATE_DIM], (left_pinch, right_pinch)


_UNTRACKED_HAND = [0.0] * HAND_VALUES
_UNTRACKED_JOINT = [0.0] * JOINT_VALUES
_LIST_TYPE = {list}
_JOINT_LENGTH = {JOINT_VALUES}


def _hand_state(hand: Any, key: str, fail: Callable[[str], SourceError]) -> tuple[list[float], float]:
    if hand is None:
        return _UNTRACKED_HAND, 0.0
    joints = hand.get("joints") if isinstance(hand, dict) else None
    if type(joints) is not list or len(joints) != len(JOINTS):
        raise fail(f"'{key}.joints' must be an array of {len(JOINTS)} joints")
    values = [1.0]
    for i, joint in enumerate(joints):
        if joint is None:
            values += _UNTRACKED_JOINT
        else:
            values += _numbers(joint, JOINT_VALUES, f"{key}.joints[{i}]", fail)
    thumb, index = joints[THUMB_TIP], joints[INDEX_TIP]
    try:
        distance = 0.0 if thumb is None or index is None else math.dist(thumb[:3], index[:3])
    except OverflowError:  # an integer too large for a float
        raise fail("numbers must be finite and within the float32 range") from None
    return values, distance
