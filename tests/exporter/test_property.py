"""Mutated journals either export a shard that verifies or fail cleanly with nothing written."""

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.errors import SourceError
from exporter.shard import export_shard, verify_shard
from tests.exporter.conftest import standard_records, write_source

LINES = [json.dumps(r) for r in standard_records()]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _alter(value, path, new):
    if not path:
        return new
    key, rest = path[0], path[1:]
    value = dict(value) if isinstance(value, dict) else list(value)
    value[key] = _alter(value[key], rest, new)
    return value


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


@st.composite
def mutated_journal(draw) -> list[str]:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["drop", "duplicate", "alter", "garble", "swap"]))
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "duplicate":
            lines.insert(draw(st.integers(i, len(lines))), lines[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "garble":
            cut = draw(st.integers(0, max(len(lines[i]) - 1, 0)))
            lines[i] = lines[i][:cut]
        else:
            try:
                record = json.loads(lines[i])
            except ValueError:
                continue
            paths = list(_paths(record))
            path = draw(st.sampled_from(paths))
            lines[i] = json.dumps(_alter(record, path, draw(json_values)))
    return lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=mutated_journal())
def test_mutated_journal_exports_a_valid_shard_or_fails_cleanly(lines: list[str]):
    with tempfile.TemporaryDirectory() as tmp:
        source = write_source(Path(tmp) / "source", lines)
        out = Path(tmp) / "out"
        out.mkdir()
        try:
            result = export_shard(source, out)
        except SourceError as exc:
            assert str(exc)
            assert list(out.iterdir()) == []
        else:
            assert verify_shard(result.shard_dir) == []
            assert [p.name for p in out.iterdir()] == ["episode-000000"]
