"""``verify``: the shard's files are exactly the receipt's artefacts, digests and lengths."""

import hashlib
import shutil
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.receipt import bytes_digest, file_digest, stream_digest
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


def test_many_shards_are_verified_at_once_and_each_problem_names_its_shard(shard: Path, tmp_path: Path, capsys):
    copies = [tmp_path / f"copy-{n}" for n in range(3)]
    for copy in copies:
        shutil.copytree(shard, copy)
    assert main(["verify", *map(str, copies)]) == 0 and capsys.readouterr().out == ""
    (copies[1] / "meta" / "stats.json").unlink()
    (copies[2] / "meta" / "notes.txt").write_text("hello")
    assert main(["verify", *map(str, copies)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{copies[1]}: meta/stats.json: missing", f"{copies[2]}: meta/notes.txt: extra file not in the receipt"]


def test_bytes_file_and_stream_digests_agree(tmp_path: Path):
    data = b"abc" * 1000
    path = tmp_path / "blob"
    path.write_bytes(data)
    with path.open("rb") as stream:
        assert bytes_digest(data) == file_digest(path) == stream_digest(stream) == (hashlib.sha256(data).hexdigest(),
                                                                                     3000)
    assert bytes_digest(b"abc")[0] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
