"""``verify``: the shard's files are exactly the receipt's artefacts, digests and lengths."""

import hashlib
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.shard import export_shard, verify_shard


@pytest.fixture
def shard(source: Path, tmp_path: Path) -> Path:
    return export_shard(source, tmp_path / "out").shard_dir


def verify(shard: Path, capsys) -> tuple[int, list[str]]:
    code = main(["verify", str(shard)])
    return code, capsys.readouterr().out.splitlines()


def test_intact_shard_verifies(shard: Path, capsys):
    assert verify(shard, capsys) == (0, [])
    assert verify_shard(shard) == []


def test_flipped_byte(shard: Path, capsys):
    path = shard / "data" / "chunk-000" / "file-000.parquet"
    body = bytearray(path.read_bytes())
    body[len(body) // 2] ^= 0x01
    path.write_bytes(bytes(body))
    flipped = hashlib.sha256(body).hexdigest()
    expected = f"data/chunk-000/file-000.parquet: SHA-256 {flipped} does not match the receipt"
    assert verify(shard, capsys) == (1, [expected])


def test_truncated_file_reports_length(shard: Path, capsys):
    path = shard / "meta" / "info.json"
    body = path.read_bytes()[:-1]
    path.write_bytes(body)
    assert verify(shard, capsys) == (1, [
        f"meta/info.json: {len(body)} bytes, receipt says {len(body) + 1}",
        f"meta/info.json: SHA-256 {hashlib.sha256(body).hexdigest()} does not match the receipt",
    ])


def test_missing_file(shard: Path, capsys):
    (shard / "meta" / "stats.json").unlink()
    assert verify(shard, capsys) == (1, ["meta/stats.json: missing"])


def test_extra_file(shard: Path, capsys):
    (shard / "meta" / "notes.txt").write_text("hello")
    assert verify(shard, capsys) == (1, ["meta/notes.txt: extra file not in the receipt"])


def test_missing_receipt(shard: Path, capsys):
    (shard / "ceres" / "browser-export-receipt.json").unlink()
    code, lines = verify(shard, capsys)
    assert code == 1 and len(lines) == 1 and "receipt" in lines[0]


def test_malformed_receipt(shard: Path, capsys):
    (shard / "ceres" / "browser-export-receipt.json").write_text('{"artefacts": [{"path": 3}, {"path": "a"}]}')
    code, lines = verify(shard, capsys)
    assert code == 1 and len(lines) == 1 and "unreadable receipt" in lines[0]
