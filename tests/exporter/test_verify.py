"""``verify``: the shard's files are exactly the receipt's artefacts, digests and lengths."""

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
    code, lines = verify(shard, capsys)
    assert code == 1
    assert lines == ["data/chunk-000/file-000.parquet: SHA-256 " + lines[0].split("SHA-256 ")[1]]
    assert "does not match the receipt" in lines[0]


def test_truncated_file_reports_length(shard: Path, capsys):
    path = shard / "meta" / "info.json"
    path.write_bytes(path.read_bytes()[:-1])
    code, lines = verify(shard, capsys)
    assert code == 1
    assert any(line.startswith("meta/info.json:") and "bytes" in line for line in lines)


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
