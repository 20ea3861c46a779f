"""Sealed raw audio (``portal.recordings.crypto``): a file of several chunks decrypts to its plain bytes, and a
truncated, reordered, extended or altered one fails with an error naming the chunk, leaving no plain file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from portal.recordings import crypto

HEADER = len(crypto.MAGIC) + 7  # the magic line and the 7-byte nonce prefix
SEALED_CHUNK = crypto.CHUNK + 16  # each chunk carries its 16-byte GCM tag
ASSOCIATED = b"6f1c0b9e-recording/media/microphone.m4a"


@pytest.fixture(scope="module")
def key() -> bytes:
    return crypto.new_key()


def seal(key: bytes, folder: Path, plain: bytes, associated: bytes = ASSOCIATED) -> Path:
    source, sealed = folder / "plain.m4a", folder / "sealed.enc"
    source.write_bytes(plain)
    crypto.encrypt_file(key, source, sealed, associated=associated)
    return sealed


def split(sealed: Path) -> tuple[bytes, list[bytes]]:
    """The header and the sealed chunks of a sealed file."""
    data = sealed.read_bytes()
    body = data[HEADER:]
    return data[:HEADER], [body[i:i + SEALED_CHUNK] for i in range(0, len(body), SEALED_CHUNK)]


def open_sealed(key: bytes, sealed: Path, associated: bytes = ASSOCIATED) -> bytes:
    target = sealed.with_name("decrypted.m4a")
    crypto.decrypt_file(key, sealed, target, associated=associated)
    return target.read_bytes()


@pytest.mark.parametrize("size", [0, 1, crypto.CHUNK, 2 * crypto.CHUNK, 3 * crypto.CHUNK + 12_345])
def test_a_file_of_any_size_comes_back_byte_for_byte(key, tmp_path, size):
    plain = os.urandom(size)
    sealed = seal(key, tmp_path, plain)
    _, chunks = split(sealed)
    assert len(chunks) == max(1, -(-size // crypto.CHUNK))  # an empty file is one empty, authenticated chunk
    if size >= 64:
        assert plain[:64] not in sealed.read_bytes()
    assert open_sealed(key, sealed) == plain


@pytest.fixture(scope="module")
def four_chunks(key, tmp_path_factory) -> tuple[bytes, list[bytes]]:
    """A sealed file of three full chunks and a short last one."""
    return split(seal(key, tmp_path_factory.mktemp("sealed"), os.urandom(3 * crypto.CHUNK + 12_345)))


def _tampered(header: bytes, chunks: list[bytes], how: str) -> bytes:
    if how == "last chunk dropped":
        return header + b"".join(chunks[:-1])
    if how == "last two chunks dropped":
        return header + b"".join(chunks[:-2])
    if how == "two chunks swapped":
        return header + b"".join([chunks[1], chunks[0], *chunks[2:]])
    if how == "last chunk moved forward":
        return header + b"".join([chunks[0], chunks[1], chunks[3], chunks[2]])
    if how == "a chunk appended":
        return header + b"".join([*chunks, chunks[1]])
    if how == "a chunk repeated":
        return header + b"".join([chunks[0], chunks[0], *chunks[1:]])
    if how == "a byte flipped":
        altered = bytearray(chunks[2])
        altered[100] ^= 1
        return header + b"".join([chunks[0], chunks[1], bytes(altered), chunks[3]])
    raise AssertionError(how)


@pytest.mark.parametrize(("how", "first_bad_chunk"), [
    ("last chunk dropped", 2),  # chunk 2 now ends the file but was sealed as "not last"
    ("last two chunks dropped", 1),
    ("two chunks swapped", 0),
    ("last chunk moved forward", 2),
    ("a chunk appended", 3),  # the real last chunk is no longer last
    ("a chunk repeated", 1),
    ("a byte flipped", 2),
])
def test_a_truncated_reordered_or_extended_file_fails_naming_the_chunk(key, four_chunks, tmp_path, how,
                                                                       first_bad_chunk):
    sealed = tmp_path / "sealed.enc"
    sealed.write_bytes(_tampered(*four_chunks, how))
    with pytest.raises(crypto.SealedFileError, match=rf"^sealed\.enc: chunk {first_bad_chunk} does not authenticate"):
        open_sealed(key, sealed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sealed.enc"], "no plain text may be left behind"


def test_a_file_sealed_for_another_recording_or_key_does_not_open(key, tmp_path):
    sealed = seal(key, tmp_path, os.urandom(crypto.CHUNK + 10))
    with pytest.raises(crypto.SealedFileError, match=r"^sealed\.enc: chunk 0 does not authenticate"):
        open_sealed(key, sealed, associated=b"another-recording/media/microphone.m4a")
    with pytest.raises(crypto.SealedFileError, match=r"^sealed\.enc: chunk 0 does not authenticate"):
        open_sealed(crypto.new_key(), sealed)


def test_a_file_that_is_not_sealed_is_named(key, tmp_path):
    plain = tmp_path / "plain.m4a"
    plain.write_bytes(b"\0\0\0\x20ftypM4A " + os.urandom(64))
    with pytest.raises(crypto.SealedFileError, match=r"^plain\.m4a is not an encrypted CERES audio file$"):
        crypto.decrypt_file(key, plain, tmp_path / "out.m4a", associated=ASSOCIATED)
    assert not (tmp_path / "out.m4a").exists()
