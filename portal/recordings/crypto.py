"""Raw-audio encryption: one AES-256-GCM key per recording, wrapped by the portal's master key.

Files are encrypted in 1 MiB chunks (the STREAM construction: a random 7-byte nonce prefix, a 4-byte
chunk counter and a last-chunk flag form each 12-byte nonce), so a large camera file is never held in
memory and a reordered, truncated or extended ciphertext fails to decrypt.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap
from django.conf import settings

MAGIC = b"CERES-AUDIO-1\n"
CHUNK = 1 << 20
_TAG = 16


class SealedFileError(ValueError):
    """A sealed file that does not decrypt: not one of ours, or altered, truncated, reordered or extended."""


def new_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def wrap_key(key: bytes) -> bytes:
    return aes_key_wrap(settings.CERES_AUDIO_MASTER_KEY, key)


def unwrap_key(wrapped: bytes) -> bytes:
    return aes_key_unwrap(settings.CERES_AUDIO_MASTER_KEY, bytes(wrapped))


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    return prefix + struct.pack(">I?", counter, last)


def encrypt_file(key: bytes, source: Path, target: Path, *, associated: bytes) -> None:
    """Encrypt ``source`` into ``target``; ``associated`` (e.g. recording and file name) is authenticated."""
    aead = AESGCM(key)
    prefix = os.urandom(7)
    with source.open("rb") as plain, target.open("wb") as out:
        out.write(MAGIC + prefix)
        counter = 0
        block = plain.read(CHUNK)
        while True:
            following = plain.read(CHUNK)
            last = not following
            out.write(aead.encrypt(_nonce(prefix, counter, last), block, associated))
            if last:
                return
            block, counter = following, counter + 1


def decrypt_file(key: bytes, source: Path, target: Path, *, associated: bytes) -> None:
    """Inverse of ``encrypt_file``; raises ``SealedFileError`` naming the file and the first chunk that does not
    authenticate. ``target`` appears only when every chunk did (written beside it, then renamed)."""
    aead = AESGCM(key)
    staged = target.with_name(target.name + ".part")
    try:
        with source.open("rb") as sealed, staged.open("wb") as out:
            header = sealed.read(len(MAGIC) + 7)
            if header[: len(MAGIC)] != MAGIC:
                raise SealedFileError(f"{source.name} is not an encrypted CERES audio file")
            prefix = header[len(MAGIC) :]
            counter = 0
            block = sealed.read(CHUNK + _TAG)
            while True:
                following = sealed.read(CHUNK + _TAG)
                try:
                    out.write(aead.decrypt(_nonce(prefix, counter, not following), block, associated))
                except InvalidTag:
                    raise SealedFileError(
                        f"{source.name}: chunk {counter} does not authenticate (the file was altered, truncated, "
                        "reordered or extended, or it belongs to another recording or key)") from None
                if not following:
                    break
                block, counter = following, counter + 1
        staged.replace(target)
    finally:
        staged.unlink(missing_ok=True)
