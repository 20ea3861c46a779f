"""From journal to rows (capture-source.md section 4): one row per slot of each retained segment.

The rows hold small per-row arrays; the 410-value states stay in the journal's scratch store and are
read a block of rows at a time (``Rows.state``), so memory does not grow with 410 values per row."""

from dataclasses import dataclass

import numpy as np

from exporter.journal import Journal, Segment, StateStore


@dataclass(frozen=True)
class SegmentRows:
    segment: Segment
    task_index: int
    frame_from: int
    frame_to: int  # exclusive
    gap_frames: int

    @property
    def durable_frames(self) -> int:
        return self.frame_to - self.frame_from - self.gap_frames


@dataclass
class Rows:
    states: StateStore
    records: np.ndarray  # int64: the row's state in ``states`` (-1: all zeros, a gap or missing slot)
    action: np.ndarray  # float32 (n, 2)
    source_slot: np.ndarray  # int64
    source_time: np.ndarray  # float64: the record's t, or the nominal time of a missing slot
    slot_time: np.ndarray  # float64: nominal slot time (what the camera frames are matched against)
    gap: np.ndarray  # bool
    task_index: np.ndarray  # int64
    segments: list[SegmentRows]

    def __len__(self) -> int:
        return len(self.source_slot)

    def state(self, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """float32 states (stop - start, 410) of rows start .. stop - 1, into ``out`` when given."""
        return self.states.take(self.records[start:stop], out)

    @property
    def consecutive(self) -> bool:
        """True when the rows are consecutive slots (no retry or idle slot between segments)."""
        return bool(np.all(np.diff(self.source_slot) == 1))


def build_rows(journal: Journal, rate_hz: int, task_indices: dict[str, int]) -> Rows:
    """Rows of the retained segments in ascending start_slot order; missing slots become gap rows."""
    parts: list[tuple[np.ndarray, ...]] = []
    segments: list[SegmentRows] = []
    frame = 0
    for segment in journal.segments:
        if not segment.retained:
            continue
        slots = np.arange(segment.start_slot, segment.end_slot, dtype=np.int64)
        pos = np.searchsorted(journal.slots, slots).clip(max=len(journal.slots) - 1)
        present = journal.slots[pos] == slots
        nominal = journal.nominal_times(slots, rate_hz)
        records = np.where(present, journal.records[pos], -1)
        times = np.where(present, journal.times[pos], nominal)
        gaps = ~present | journal.gaps[pos]
        pinch = np.where(present[:, None], journal.pinch[pos], np.float32(0))
        task_index = np.full(len(slots), task_indices[segment.task], dtype=np.int64)
        parts.append((slots, records, times, nominal, gaps, pinch, task_index))
        segments.append(SegmentRows(segment, task_indices[segment.task], frame, frame + len(slots), int(gaps.sum())))
        frame += len(slots)
    slots, records, times, nominal, gaps, pinch, task_index = (np.concatenate(p) for p in zip(*parts, strict=True))
    return Rows(
        states=journal.states,
        records=records,
        action=pinch.astype(np.float32),
        source_slot=slots,
        source_time=times,
        slot_time=nominal,
        gap=gaps,
        task_index=task_index,
        segments=segments,
    )
