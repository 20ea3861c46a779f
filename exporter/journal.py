"""Parse ``journal.ndjson`` (capture-source.md section 3) in memory that does not grow with its length.

A block of lines (4 MiB) goes first to the compiled block parser (``exporter/_journal_block.c``, built by
the install where a C compiler exists): in one call it reads every line that is a plainly well-formed
frame or gap (its source says exactly which; untracked joints and hands included) into slots, times and
float64 states, converting numbers as ``float()`` does, and leaves every other line to the paths below.
Runs of lines it took are added at once, with no Python work per line but the pinch distances.

Without it, or for a line it leaves: a plainly well-formed frame or gap line (ASCII, no duplicate or
unknown key, every joint tracked) is parsed by simdjson and its state written as float64 bytes straight
from the parse (``as_buffer``), no Python object per number. Any other frame or gap line is decoded by
msgspec into typed records (fixed-length float arrays, no booleans, slots in range), which checks it in
one C pass. The states of a block of such lines are then assembled and checked with numpy. Every other
line (one msgspec refuses, a line with a non-ASCII byte, a segment, a record of an unknown type) takes
the careful path: orjson or the standard library's json, then field-by-field checks that alone decide
each error and its message. A line simdjson takes is one msgspec would take with the same values.

A long journal is split at a line boundary and its two halves are decoded by two processes. Each
keeps per record only slot, time, gap flag, line, byte offset and pinch distances in typed arrays and
writes the 410-value float32 states to an anonymous scratch file, read back a block at a time.
Replays are found on the merged slot array: only replayed lines are read again and compared (byte
equal once trimmed, or equal as parsed Python values). The error reported is the one on the earliest
line, as if the journal had been read line by line.
"""

import gc
import itertools
import json
import math
import os
import tempfile
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Annotated, Any

import msgspec
import numpy as np
import orjson
import simdjson

from exporter import forked
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

try:
    from exporter import _journal_block
except ImportError:  # not compiled (no C compiler where the project was installed): the other paths decode
    _journal_block = None

JOURNAL = "journal.ndjson"
OUTCOMES = ("success", "completed", "failure", "retry")
DROPPED_KEYS = frozenset({"device_id", "user_agent"})  # never exported, wherever they appear
_NUMBER = (int, float)
_NUMBER_TYPES = frozenset(_NUMBER)
MAX_SLOT = 2**31 - 1  # 103 days at 240 Hz; keeps slot arithmetic exact in int64 and float64
# Missing slots become gap rows. A journal whose retained segments are mostly unrecorded, beyond this
# many seconds of slots, is damaged rather than lossy: refuse it instead of inventing the rows.
MAX_INVENTED_SECONDS = 60
# A journal at least this long is decoded by two processes (when the machine has two cores); below it
# starting a process costs more than it saves.
PARALLEL_BYTES = 16 * 1024 * 1024
_READ_BYTES = 4 * 1024 * 1024  # journal bytes decoded, checked and written to the scratch file at a time
_STATE_BYTES = STATE_DIM * 4


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
    """Observation states, one float32 row of 410 values per stored record, kept in anonymous scratch
    files (one per decoding process) and read back a block of records at a time."""

    def __init__(self) -> None:
        self._parts: list[tuple[IO[bytes], int]] = []  # (scratch file, rows) in record order
        self.count = 0

    def add_part(self, scratch: IO[bytes], rows: int) -> int:
        """Append a scratch file of ``rows`` states; returns the record number of its first row."""
        first = self.count
        self._parts.append((scratch, rows))
        self.count += rows
        return first

    def take(self, records: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """States of the given record numbers (-1: an all-zero row: a gap or missing slot), into ``out``
        (float32, len(records) x 410) when given."""
        if out is None:
            out = np.empty((len(records), STATE_DIM), dtype=np.float32)
        if len(records) and records[0] >= 0 and np.all(np.diff(records) == 1):  # the usual case: one read
            self._read(int(records[0]), out)
            return out
        out[:] = 0
        wanted = np.flatnonzero(records >= 0)
        if not wanted.size:
            return out
        order = np.argsort(records[wanted], kind="stable")
        ids = records[wanted][order]
        rows = np.empty((len(ids), STATE_DIM), dtype=np.float32)
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1  # runs of consecutive records, one read each
        for start, stop in zip(np.r_[0, breaks], np.r_[breaks, len(ids)], strict=True):
            self._read(int(ids[start]), rows[start:stop])
        out[wanted[order]] = rows
        return out

    def _read(self, record: int, into: np.ndarray) -> None:
        first = 0
        for scratch, rows in self._parts:
            if record < first + rows:
                count = min(len(into), first + rows - record)
                _read_exactly(scratch.fileno(), into[:count], (record - first) * _STATE_BYTES)
                into, record = into[count:], record + count
                if not len(into):
                    return
            first += rows
        raise IndexError(f"state record {record} was never stored")

    def close(self) -> None:
        for scratch, _ in self._parts:
            scratch.close()
        self._parts = []


def _read_exactly(fd: int, into: np.ndarray, offset: int) -> None:
    view = memoryview(into).cast("B")
    while view:
        done = os.preadv(fd, [view], offset)
        if done == 0:
            raise OSError("state scratch file ended early")
        view, offset = view[done:], offset + done


def _write_all(fd: int, data: np.ndarray) -> None:
    view = memoryview(np.ascontiguousarray(data)).cast("B")
    while view:
        view = view[os.write(fd, view) :]


@dataclass
class Journal:
    """Observed slots sorted by slot, with the record number of each in ``states``."""

    slots: np.ndarray  # int64
    times: np.ndarray  # float64, source clock
    gaps: np.ndarray  # bool
    pinch: np.ndarray  # float32 (n, 2)
    records: np.ndarray  # int64, row in ``states`` (-1 for a gap: all zeros)
    states: StateStore
    segments: list[Segment]  # every segment, retries included, by start_slot
    warnings: list[str] = field(default_factory=list)

    def nominal_times(self, slots: np.ndarray, rate_hz: int) -> np.ndarray:
        """Slot s is nominally at t_a + (s - a) / rate_hz, a being the lowest observed slot."""
        return self.times[0] + (slots - self.slots[0]) / rate_hz


# Typed records for msgspec: what a well-formed frame or gap line holds. Unknown keys are skipped (they
# take part in replay comparison only, which reads the lines again); ints are accepted as floats.
_Slot = Annotated[int, msgspec.Meta(ge=0, le=MAX_SLOT)]
_Joint = tuple[float, float, float, float, float, float, float, float]


class _Pose(msgspec.Struct, gc=False):
    p: tuple[float, float, float]
    q: tuple[float, float, float, float]


class _Hand(msgspec.Struct, gc=False):
    joints: Annotated[list[_Joint | None], msgspec.Meta(min_length=len(JOINTS), max_length=len(JOINTS))]


class _Frame(msgspec.Struct, tag="frame", tag_field="type", gc=False):
    slot: _Slot
    t: float
    head: _Pose | None = None
    left: _Hand | None = None
    right: _Hand | None = None


class _Gap(msgspec.Struct, tag="gap", tag_field="type", gc=False):
    slot: _Slot
    t: float


_TYPED = msgspec.json.Decoder(_Frame | _Gap)
_SIMD = True  # tests switch the simdjson path off to compare it with the others
# The compiled block parser (exporter/_journal_block.c), None where it was not built; tests switch it off
# to compare it with the others.
_BLOCK: Any = _journal_block
_FRAME_KEYS = frozenset({"type", "slot", "t", "head", "left", "right"})
_GAP_KEYS = frozenset({"type", "slot", "t"})
_POSE_KEYS = frozenset({"p", "q"})
_HAND_KEYS = frozenset({"joints"})
_JOINT_LENGTHS = [JOINT_VALUES] * len(JOINTS)
_ONE = array("d", [1.0]).tobytes()
_ZERO_HEAD_BYTES = bytes(HEAD_VALUES * 8)
_ZERO_HAND_BYTES = bytes(HAND_VALUES * 8)
# '[' in a well-formed frame line: two for a tracked head, 26 for a hand with all joints tracked
_HEAD_BRACKETS, _HAND_BRACKETS = 2, 1 + len(JOINTS)
_SIMD_REFUSED = (ValueError, TypeError, KeyError, IndexError, RuntimeError, AttributeError)
_ZERO_JOINT = (0.0,) * JOINT_VALUES
_UNTRACKED_JOINTS = [_ZERO_JOINT] * len(JOINTS)
_UNTRACKED_HEAD = (0.0,) * HEAD_VALUES


@dataclass
class _Part:
    """What one process decoded from a byte range of the journal: record arrays in line order, line
    numbers counted from the range's first line (1)."""

    lines: int = 0
    slots: array = field(default_factory=lambda: array("q"))
    times: array = field(default_factory=lambda: array("d"))
    gaps: array = field(default_factory=lambda: array("b"))
    numbers: array = field(default_factory=lambda: array("q"))
    offsets: array = field(default_factory=lambda: array("q"))
    pinch: array = field(default_factory=lambda: array("f"))
    states: array = field(default_factory=lambda: array("q"))  # row in the range's scratch file, or -1
    # record index -> what is wrong with its 't' or state: an error unless the line replays a slot
    failures: dict[int, str] = field(default_factory=dict)
    error: tuple[int, str] | None = None  # the first line in error whatever the other lines hold
    segments: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    torn: list[int] = field(default_factory=list)
    state_rows: int = 0
    first_state: int = 0  # record number of its first state in the journal's store


class _PartDecoder:
    """Decodes the lines of one byte range; states go to the scratch file a block of lines at a time."""

    def __init__(self, scratch_fd: int, start: int, *, ends_journal: bool):
        self.fd = scratch_fd
        self.start = start
        self.ends_journal = ends_journal
        self.part = _Part()
        self.typed: list[tuple[int, _Frame, bytes]] = []  # (record index, frame, line) of this block
        self.parser = simdjson.Parser() if _SIMD else None
        self.simd: list[tuple[int, bytes]] = []  # (record index, line) of this block's simdjson frames
        self.simd_states = bytearray()  # their float64 states, 410 values each
        self.rows: dict[int, np.ndarray] = {}  # record index -> state, from the careful path
        self.checked: list[tuple[np.ndarray, np.ndarray]] = []  # (record indices, float32 states), checked
        # the block parser's frames: record indices, float64 states, untracked tips, the line of a row
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, Callable[[int], bytes]]] = []

    def decode(self, stream: IO[bytes], stop: int) -> _Part:
        # The decoded records hold no reference cycles and die with their block; without the cyclic
        # collector scanning their millions of tuples, decoding takes about a sixth less time.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._decode(stream, stop)
        finally:
            if collecting:
                gc.enable()

    def _decode(self, stream: IO[bytes], stop: int) -> _Part:
        stream.seek(self.start)
        offset, number, rest, left = self.start, 0, b"", stop - self.start
        while True:
            block = stream.read(min(_READ_BYTES, left)) if left > 0 else b""
            left -= len(block)
            at_end = left <= 0 or not block
            data = rest + block
            if at_end:
                rest = b""
            else:  # a line cut by the block waits for the next one
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
            read = self.block if _BLOCK is not None else self.lines
            number, offset = read(data, number, offset, at_end=at_end, ascii_block=data.isascii())
            self.flush()
            if at_end or self.part.error is not None:
                self.part.lines = number
                return self.part

    def lines(self, data: bytes, number: int, offset: int, *, at_end: bool, ascii_block: bool) -> tuple[int, int]:
        """``block`` without the block parser: every line goes to ``line``."""
        pieces = data.split(b"\n") if data else []
        newline_at_end = bool(pieces) and pieces[-1] == b""
        if newline_at_end:
            pieces.pop()
        for i, piece in enumerate(pieces):
            number += 1
            final = at_end and i == len(pieces) - 1
            raw = piece if final and not newline_at_end else None
            self.line(piece, raw, number, offset, last=final and self.ends_journal, ascii_line=ascii_block)
            offset += len(piece) + 1
            if self.part.error is not None:
                break
        return number, offset

    def block(self, data: bytes, number: int, offset: int, *, at_end: bool, ascii_block: bool) -> tuple[int, int]:
        """The lines of ``data`` (whole lines; at the journal's end the last may lack its newline), ``number``
        and ``offset`` being those of the line before it, ``ascii_block`` whether it holds ASCII bytes only:
        each run of lines the block parser takes is added at once, and every other line goes to ``line``.
        Returns the number of the last line read (the line in error, when one is) and an offset past it."""
        kinds_, slots_, times_, starts_, states_, tips_ = _BLOCK.decode(data)
        kinds = np.frombuffer(kinds_, dtype=np.int8)
        starts = np.frombuffer(starts_, dtype=np.int64)
        slots = np.frombuffer(slots_, dtype=np.int64)
        times = np.frombuffer(times_, dtype=np.float64)
        states = np.frombuffer(states_, dtype=np.float64).reshape(-1, STATE_DIM)
        tips = np.frombuffer(tips_, dtype=np.uint8)
        frame_rows = np.cumsum(kinds == 1) - 1  # a frame line's row in ``states``
        count = len(kinds)
        newline_at_end = data.endswith(b"\n")

        def piece(line: int) -> bytes:
            stop = int(starts[line + 1]) - 1 if line + 1 < count else len(data) - newline_at_end
            return data[int(starts[line]) : stop]

        first = 0
        for refused in [*np.flatnonzero(kinds == 0).tolist(), count]:
            if refused > first:  # a run of lines taken
                part = self.part
                index = len(part.slots)
                taken = kinds[first:refused]
                part.slots.frombytes(slots[first:refused].tobytes())
                part.times.frombytes(times[first:refused].tobytes())
                part.gaps.frombytes((taken == 2).astype(np.int8).tobytes())
                part.numbers.frombytes(np.arange(number + first + 1, number + refused + 1, dtype=np.int64).tobytes())
                part.offsets.frombytes((starts[first:refused] + offset).tobytes())
                part.pinch.frombytes(bytes(8 * (refused - first)))
                part.states.frombytes(np.full(refused - first, -1, dtype=np.int64).tobytes())
                frames = np.flatnonzero(taken == 1)
                if frames.size:
                    frame_lines = first + frames
                    rows = slice(frame_rows[frame_lines[0]], frame_rows[frame_lines[-1]] + 1)  # consecutive
                    self.blocks.append((index + frames, states[rows], tips[rows],
                                        lambda row, frame_lines=frame_lines: piece(frame_lines[row])))
            if refused == count:
                break
            final = at_end and refused == count - 1
            line = piece(refused)
            raw = line if final and not newline_at_end else None
            at = offset + int(starts[refused])
            self.line(line, raw, number + refused + 1, at, last=final and self.ends_journal, ascii_line=ascii_block)
            if self.part.error is not None:
                return number + refused + 1, at
            first = refused + 1
        return number + count, offset + len(data)

    def line(
        self, piece: bytes, raw: bytes | None, number: int, offset: int, *, last: bool, ascii_line: bool = False
    ) -> None:
        """One line: ``piece`` without its newline, ``raw`` the line as read (None: piece + newline);
        ``ascii_line`` when it is known to hold ASCII bytes only."""
        if ascii_line or piece.isascii():
            if self.parser is not None:
                mark = len(self.simd_states)
                try:
                    decoded = _simd_record(self.parser, piece, self.simd_states)
                except _SIMD_REFUSED:
                    decoded = None
                if decoded is not None:
                    slot, t, frame = decoded
                    index = self.add_record(slot, t, number, offset, gap=not frame)
                    if frame:
                        self.simd.append((index, piece))
                    return
                del self.simd_states[mark:]  # what a refused line left
            try:
                record = _TYPED.decode(piece)
            except msgspec.DecodeError:
                pass
            else:
                index = self.add_record(record.slot, record.t, number, offset, gap=type(record) is _Gap)
                if type(record) is _Frame:
                    self.typed.append((index, record, piece))
                return
        self.careful(piece + b"\n" if raw is None else raw, number, offset, last=last)

    def add_record(self, slot: int, t: float, number: int, offset: int, *, gap: bool) -> int:
        part = self.part
        part.slots.append(slot)
        part.times.append(t)
        part.gaps.append(gap)
        part.numbers.append(number)
        part.offsets.append(offset)
        part.pinch.extend((0.0, 0.0))
        part.states.append(-1)
        return len(part.slots) - 1

    def careful(self, raw: bytes, number: int, offset: int, *, last: bool) -> None:
        """The line-by-line path: it alone decides what is an error and what the error says."""
        part = self.part
        try:
            record = _loads(raw)
        except ValueError as exc:
            if last:
                part.torn.append(number)
            else:
                part.error = (number, f"invalid JSON: {exc}")
            return
        if not isinstance(record, dict):
            part.error = (number, "record is not a JSON object")
            return
        kind = record.get("type")
        if not isinstance(kind, str):
            part.error = (number, "record has no string 'type'")
            return
        if kind == "segment":
            part.segments.append((number, record))
        if kind not in ("frame", "gap"):
            return  # records of an unknown type are skipped entirely
        try:
            slot = _non_negative_int(record, "slot", SourceError)
        except SourceError as exc:
            part.error = (number, str(exc))
            return
        t = record.get("t")
        finite = type(t) in _NUMBER and _finite(t)
        index = self.add_record(slot, float(t) if finite else math.nan, number, offset, gap=kind == "gap")
        if not finite:
            part.failures[index] = "'t' must be a finite number"
        elif kind == "frame":
            self.careful_state(index, record, raw)

    def careful_state(self, index: int, record: dict[str, Any], raw: bytes) -> None:
        try:
            values, pinch = _frame_state(record, raw, SourceError)
        except SourceError as exc:
            self.part.failures[index] = str(exc)
            return
        self.part.pinch[2 * index : 2 * index + 2] = array("f", pinch)
        self.rows[index] = values

    def flush(self) -> None:
        """Assemble and check the states of the block's decoded frames, and store the block's states."""
        blocks, self.blocks = self.blocks, []
        for indices, states, tips, line in blocks:
            pinch = _pinch(states)
            pinch[(tips & 1) != 0, 0] = 0.0  # a tracked hand without its thumb or index finger tip
            pinch[(tips & 2) != 0, 1] = 0.0
            self.store_states(indices, states, pinch, line)
        simd, self.simd = self.simd, []
        if simd:
            states = np.frombuffer(self.simd_states, dtype=np.float64).reshape(len(simd), STATE_DIM)
            self.simd_states = bytearray()
            indices = np.array([index for index, _ in simd], dtype=np.int64)
            self.store_states(indices, states, _pinch(states), lambda row: simd[row][1])
        typed, self.typed = self.typed, []
        if typed:
            states, pinch = _typed_states([frame for _, frame, _ in typed])
            indices = np.array([index for index, _, _ in typed], dtype=np.int64)
            self.store_states(indices, states, pinch, lambda row: typed[row][2])
        self.write_rows()

    def store_states(
        self, indices: np.ndarray, states: np.ndarray, pinch: np.ndarray, line: Callable[[int], bytes]
    ) -> None:
        """Check decoded float64 states and pinch distances (one row per record index; ``line(row)`` gives
        the row's line) and keep them; a row beyond the float32 range goes to the careful path, which names
        the error."""
        part = self.part
        with np.errstate(over="ignore"):
            states32, pinch32 = states.astype(np.float32), pinch.astype(np.float32)
        good = np.isfinite(states32).all(axis=1) & np.isfinite(pinch32).all(axis=1)
        view = np.frombuffer(part.pinch, dtype=np.float32).reshape(-1, 2)
        view[indices[good]] = pinch32[good]
        del view  # the array may grow again
        self.checked.append((indices, states32) if good.all() else (indices[good], states32[good]))
        for row in np.flatnonzero(~good).tolist():  # beyond the float32 range: the careful path names the error
            piece = line(row)
            self.careful_state(int(indices[row]), _loads(piece), piece)

    def write_rows(self) -> None:
        """Write the block's states to the scratch file in record order."""
        part = self.part
        rows, self.rows = self.rows, {}
        checked, self.checked = self.checked, []
        if not rows and len(checked) == 1:  # the usual block: one run of decoded states, in record order
            indices, states = checked[0]
            rows_in_order = states
            order = indices
        else:
            for indices, states in checked:
                rows.update(zip(indices.tolist(), states, strict=True))
            order = sorted(rows)
            rows_in_order = np.stack([rows[i] for i in order]) if rows else None
        if not len(order):
            return
        view = np.frombuffer(part.states, dtype=np.int64)
        view[order] = np.arange(part.state_rows, part.state_rows + len(order))
        del view
        part.state_rows += len(order)
        _write_all(self.fd, rows_in_order)


def _simd_record(parser: simdjson.Parser, line: bytes, state: bytearray) -> tuple[int, float, bool] | None:
    """Slot, time and whether it is a frame, of a well-formed frame or gap line read by simdjson; a
    frame's float64 state is appended to ``state`` without a Python object per number (what a refused
    line appended is the caller's to drop). None (or an exception) for any line that is not
    plainly well formed, which then takes the msgspec and careful paths. A line is taken only when
    msgspec's typed decoding would accept it with the same values: no duplicate or unknown key, no
    untracked joint, no array nested where a number belongs (the '[' count shows it)."""
    record = parser.parse(line)
    keys = list(record.keys())
    kind = record.get("type")
    allowed = _FRAME_KEYS if kind == "frame" else _GAP_KEYS if kind == "gap" else None
    if allowed is None or len(set(keys)) != len(keys) or not allowed.issuperset(keys):
        return None
    slot, t = record["slot"], record["t"]
    if type(slot) is not int or not 0 <= slot <= MAX_SLOT or type(t) not in _NUMBER:
        return None
    if kind == "gap":
        return slot, float(t), False
    start = len(state)
    brackets = 0
    head = record.get("head")
    if head is None:
        state += _ZERO_HEAD_BYTES
    else:
        head_keys = list(head.keys())
        if len(head_keys) != 2 or set(head_keys) != _POSE_KEYS:
            return None
        position, rotation = head["p"], head["q"]
        if len(position) != 3 or len(rotation) != 4:
            return None
        state += _ONE
        state += position.as_buffer(of_type="d")
        state += rotation.as_buffer(of_type="d")
        brackets += _HEAD_BRACKETS
    for name in ("left", "right"):
        hand = record.get(name)
        if hand is None:
            state += _ZERO_HAND_BYTES
            continue
        hand_keys = list(hand.keys())
        if hand_keys != ["joints"]:
            return None
        joints = hand["joints"]
        if list(map(len, joints)) != _JOINT_LENGTHS:  # TypeError for an untracked joint
            return None
        state += _ONE
        state += joints.as_buffer(of_type="d")  # TypeError for anything but a number
        brackets += _HAND_BRACKETS
    if len(state) - start != STATE_DIM * 8 or line.count(b"[") != brackets:
        return None
    return slot, float(t), True


def _pinch(states: np.ndarray) -> np.ndarray:
    """float64 pinch distances (n, 2) of float64 states, by math.dist as the other paths compute them
    (0.0 for an untracked hand)."""
    hands = states[:, HEAD_VALUES:].reshape(len(states), 2, HAND_VALUES)
    tracked = hands[:, :, 0].tolist()
    thumbs = hands[:, :, 1 + THUMB_TIP * JOINT_VALUES : 4 + THUMB_TIP * JOINT_VALUES].tolist()
    tips = hands[:, :, 1 + INDEX_TIP * JOINT_VALUES : 4 + INDEX_TIP * JOINT_VALUES].tolist()
    return np.array(
        [
            [math.dist(t, i) if on else 0.0 for on, t, i in zip(flags, thumb, tip, strict=True)]
            for flags, thumb, tip in zip(tracked, thumbs, tips, strict=True)
        ],
        dtype=np.float64,
    ).reshape(len(states), 2)


def _typed_states(frames: list[_Frame]) -> tuple[np.ndarray, np.ndarray]:
    """float64 states (n, 410) and pinch distances (n, 2) of typed frames, in a few C-level passes."""
    heads = []
    tracked = []
    joints: list[Any] = []
    pinch = []
    for record in frames:
        head = record.head
        heads.append(_UNTRACKED_HEAD if head is None else (1.0, *head.p, *head.q))
        for hand in (record.left, record.right):
            if hand is None:
                tracked.append(0.0)
                joints.extend(_UNTRACKED_JOINTS)
                pinch.append(0.0)
                continue
            hand_joints = hand.joints
            thumb, index = hand_joints[THUMB_TIP], hand_joints[INDEX_TIP]
            pinch.append(0.0 if thumb is None or index is None else math.dist(thumb[:3], index[:3]))
            if None in hand_joints:
                hand_joints = [_ZERO_JOINT if j is None else j for j in hand_joints]
            tracked.append(1.0)
            joints.extend(hand_joints)
    n = len(frames)
    states = np.empty((n, STATE_DIM), dtype=np.float64)
    states[:, :HEAD_VALUES] = np.array(heads, dtype=np.float64).reshape(n, HEAD_VALUES)
    hands = states[:, HEAD_VALUES:].reshape(n, 2, HAND_VALUES)
    hands[:, :, 0] = np.array(tracked, dtype=np.float64).reshape(n, 2)
    hands[:, :, 1:] = np.fromiter(
        itertools.chain.from_iterable(joints), dtype=np.float64, count=n * 2 * (HAND_VALUES - 1)
    ).reshape(n, 2, HAND_VALUES - 1)
    return states, np.array(pinch, dtype=np.float64).reshape(n, 2)


def parse_journal(stream: IO[bytes], rate_hz: int, reopen: Callable[[], IO[bytes]]) -> Journal:
    """Parse the journal open as ``stream`` (a file); ``reopen`` opens it again, for a second process
    and for reading a replayed line by its byte offset."""
    size = os.fstat(stream.fileno()).st_size
    ranges = _split(stream, size)
    store = StateStore()
    parts = _decode_ranges(stream, reopen, ranges, store)
    try:
        return _merge(parts, store, rate_hz, reopen)
    except BaseException:
        store.close()
        raise


def _split(stream: IO[bytes], size: int) -> list[tuple[int, int]]:
    """Byte ranges to decode, cut after a newline: two when the journal is long and two cores exist."""
    if size < PARALLEL_BYTES or not forked.usable():
        return [(0, size)]
    stream.seek(size // 2)
    stream.readline()
    middle = stream.tell()
    return [(0, middle), (middle, size)] if middle < size else [(0, size)]


def _decode_ranges(
    stream: IO[bytes], reopen: Callable[[], IO[bytes]], ranges: list[tuple[int, int]], store: StateStore
) -> list[_Part]:
    """Decode each byte range, all but the first in forked processes, and add their states to ``store``.
    A process that fails (killed, out of memory) has its range decoded here instead."""
    size = ranges[-1][1]
    scratches = [tempfile.TemporaryFile(prefix="ceres-states-") for _ in ranges]  # noqa: SIM115 - closed by the store
    children: list[forked.Child] = []
    try:
        for scratch, (start, stop) in zip(scratches[1:], ranges[1:], strict=True):
            children.append(_fork_decoder(reopen, scratch.fileno(), start, stop, ends_journal=stop == size))
        start, stop = ranges[0]
        parts = [_PartDecoder(scratches[0].fileno(), start, ends_journal=stop == size).decode(stream, stop)]
        for i, (start, stop) in enumerate(ranges[1:], start=1):
            part = children[i - 1].join()
            if part is None:
                fd = scratches[i].fileno()
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                with reopen() as again:
                    part = _PartDecoder(fd, start, ends_journal=stop == size).decode(again, stop)
            parts.append(part)
    except BaseException:
        for child in children:
            child.stop()
        for scratch in scratches:
            scratch.close()
        raise
    for part, scratch in zip(parts, scratches, strict=True):
        part.first_state = store.add_part(scratch, part.state_rows)
    return parts


def _fork_decoder(
    reopen: Callable[[], IO[bytes]], scratch_fd: int, start: int, stop: int, *, ends_journal: bool
) -> forked.Child:
    """Decode a byte range in a forked process."""

    def decode() -> _Part:
        with reopen() as stream:
            return _PartDecoder(scratch_fd, start, ends_journal=ends_journal).decode(stream, stop)

    return forked.Child(decode)


def _merge(parts: list[_Part], store: StateStore, rate_hz: int, reopen: Callable[[], IO[bytes]]) -> Journal:
    """One journal from the decoded parts: the earliest error, as a line-by-line reader would find it,
    or the observed slots (replays dropped) sorted by slot, with the whole-journal checks done."""
    columns: dict[str, list[np.ndarray]] = {
        name: [] for name in ("slots", "times", "gaps", "lines", "offsets", "pinch", "states")
    }
    errors: list[tuple[int, str]] = []
    failures: dict[int, str] = {}
    segments: list[tuple[int, dict[str, Any]]] = []
    warnings: list[str] = []
    first_line = records = 0
    for part in parts:
        states = np.frombuffer(part.states, dtype=np.int64)
        columns["slots"].append(np.frombuffer(part.slots, dtype=np.int64))
        columns["times"].append(np.frombuffer(part.times, dtype=np.float64))
        columns["gaps"].append(np.frombuffer(part.gaps, dtype=np.int8).astype(bool))
        columns["lines"].append(np.frombuffer(part.numbers, dtype=np.int64) + first_line)
        columns["offsets"].append(np.frombuffer(part.offsets, dtype=np.int64))
        columns["pinch"].append(np.frombuffer(part.pinch, dtype=np.float32).reshape(-1, 2))
        columns["states"].append(np.where(states >= 0, states + part.first_state, -1))
        failures.update({records + index: message for index, message in part.failures.items()})
        segments += [(first_line + number, record) for number, record in part.segments]
        warnings += [
            f"{JOURNAL}:{first_line + number}: torn last line ignored (not valid JSON)" for number in part.torn
        ]
        records += len(part.slots)
        if part.error is not None:  # nothing after this line can matter
            errors.append((first_line + part.error[0], part.error[1]))
            break
        first_line += part.lines
    slots, times, gaps, lines, offsets, pinch, states = (np.concatenate(columns[name]) for name in columns)
    unique, first = np.unique(slots, return_index=True)
    is_first = np.zeros(len(slots), dtype=bool)
    is_first[first] = True
    errors += [(int(lines[i]), message) for i, message in failures.items() if is_first[i]]
    limit = min(errors)[0] if errors else None
    conflict = _replay_conflict(slots, lines, offsets, first[np.searchsorted(unique, slots)], ~is_first, reopen, limit)
    if conflict is not None:
        errors.append(conflict)
    segment_table, segment_error = _segments(segments, min(errors)[0] if errors else None)
    if segment_error is not None:
        errors.append(segment_error)
    if errors:
        line, message = min(errors)
        raise SourceError(message, path=JOURNAL, line=line)

    kept = np.flatnonzero(is_first)
    order = kept[np.argsort(slots[kept], kind="stable")]
    slots, times, lines = slots[order], times[order], lines[order]
    broken = np.flatnonzero(np.diff(times) <= 0)
    if len(broken):
        i = broken[0]
        raise SourceError(
            f"'t' must increase with 'slot': slot {slots[i]} (line {lines[i]}) has t={float(times[i])!r}, "
            f"slot {slots[i + 1]} (line {lines[i + 1]}) has t={float(times[i + 1])!r}",
            path=JOURNAL,
            line=int(max(lines[i], lines[i + 1])),
        )
    for before, after in itertools.pairwise(segment_table):
        if after.start_slot < before.end_slot:
            raise SourceError(
                f"segment [{after.start_slot}, {after.end_slot}) overlaps segment "
                f"[{before.start_slot}, {before.end_slot}) on line {min(before.line, after.line)}",
                path=JOURNAL,
                line=max(before.line, after.line),
            )
    _check_coverage(slots, segment_table, rate_hz)
    return Journal(
        slots=slots,
        times=times,
        gaps=gaps[order],
        pinch=pinch[order],
        records=states[order],
        states=store,
        segments=segment_table,
        warnings=warnings,
    )


def _replay_conflict(
    slots: np.ndarray,
    lines: np.ndarray,
    offsets: np.ndarray,
    earlier: np.ndarray,
    replayed: np.ndarray,
    reopen: Callable[[], IO[bytes]],
    limit: int | None,
) -> tuple[int, str] | None:
    """The first replayed line (before ``limit``) that differs from the earlier record of its slot:
    equal once trimmed, or equal as parsed Python values (so 1 and 1.0, or key order, do not matter)."""
    replays = np.flatnonzero(replayed)
    if not len(replays):
        return None
    with reopen() as stream:

        def read(offset: int) -> bytes:
            stream.seek(offset)
            return stream.readline()

        for i in replays:
            if limit is not None and lines[i] >= limit:
                return None
            line, first = read(int(offsets[i])), read(int(offsets[earlier[i]]))
            if line.strip() != first.strip() and _loads(line) != _loads(first):
                return int(lines[i]), f"slot {slots[i]} conflicts with the record on line {lines[earlier[i]]}"
    return None


def _segments(
    records: list[tuple[int, dict[str, Any]]], limit: int | None
) -> tuple[list[Segment], tuple[int, str] | None]:
    """Segments by start_slot (replays dropped), or the first segment line (before ``limit``) in error."""
    seen: dict[tuple[int, int, int], tuple[dict[str, Any], Segment]] = {}
    for number, record in records:
        if limit is not None and number >= limit:
            break
        try:
            segment = _segment(record, number)
        except SourceError as exc:
            return [], (number, str(exc))
        key = (segment.cycle, segment.repetition, segment.take)
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = (record, segment)
        elif earlier[0] != record:
            return [], (
                number,
                f"segment cycle {key[0]} repetition {key[1]} take {key[2]} conflicts with the "
                f"record on line {earlier[1].line}",
            )
    return sorted((s for _, s in seen.values()), key=lambda s: s.start_slot), None


def _segment(record: dict[str, Any], number: int) -> Segment:
    fail = SourceError
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
    kept = {k: v for k, v in annotations.items() if k not in DROPPED_KEYS}
    return Segment(cycle, repetition, take, task, start, end, outcome, kept, number)


def _check_coverage(slots: np.ndarray, segments: list[Segment], rate_hz: int) -> None:
    retained = [s for s in segments if s.retained]
    starts = np.array([s.start_slot for s in retained], dtype=np.int64)
    ends = np.array([s.end_slot for s in retained], dtype=np.int64)
    recorded = np.searchsorted(slots, ends) - np.searchsorted(slots, starts)
    missing = (ends - starts) - recorded
    if missing.sum() > max(MAX_INVENTED_SECONDS * rate_hz, recorded.sum()):
        worst = retained[int(np.argmax(missing))]
        raise SourceError(
            f"retained segments have {missing.sum()} slots with no frame or gap record but only "
            f"{recorded.sum()} recorded slots (segment [{worst.start_slot}, {worst.end_slot}) lacks "
            f"{missing.max()}): the journal is damaged",
            path=JOURNAL,
            line=worst.line,
        )


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
    try:
        return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except RecursionError:
        raise ValueError("arrays or objects nested deeper than can be read") from None


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
