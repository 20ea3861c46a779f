"""Signed checkpoints of the audit chain's head, kept in the ``releases`` storage, out of a database-only attacker's
reach: the format, its Ed25519 signature (the portal's release signing key) and where the objects are.

One object per checkpoint, ``<prefix><YYYY-MM>/<UTC time>-<seq, 12 digits>.json``, so names sort by time and the
newest is found by listing the newest month's folder. The object is JSON::

    {"schema": "ceres-audit-checkpoint", "version": 1,
     "checkpoint": {"seq": 812, "hash": "<the event's hash>", "count": 812, "keyed_from": 1,
                    "at": "2026-12-01T12:00:00.123456Z"},
     "signature": "<base64 of the Ed25519 signature>", "key_fingerprint": "<SHA-256 of the public key>"}

The signature covers the canonical JSON (sorted keys, compact, UTF-8) of ``schema``, ``version`` and
``checkpoint``. ``count`` is the number of events up to ``seq``; ``keyed_from`` the seq of the first keyed
(version 2) event, from which on no unkeyed event may appear (null while there is none). What writes and compares
checkpoints is ``portal.audit.services``; this module only reads and writes the objects.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.files.storage import Storage

from exporter import release as signing
from portal.audit.models import canonical_json
from portal.core import storage

SCHEMA = "ceres-audit-checkpoint"
VERSION = 1
MAX_BYTES = 64 * 1024  # a checkpoint is a few hundred bytes; anything larger is not one
_NAME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-\d{12}\.json$")
_MONTH = re.compile(r"^\d{4}-\d{2}$")


class CheckpointProblem(Exception):
    """A stored checkpoint that cannot be trusted: unreadable, not a checkpoint, or its signature does not match
    the public key."""


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    count: int
    keyed_from: int | None
    at: datetime
    name: str = ""

    def section(self) -> dict:
        return {"seq": self.seq, "hash": self.hash, "count": self.count, "keyed_from": self.keyed_from,
                "at": self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}

    @property
    def when(self) -> str:
        """The time for messages: UTC to the second."""
        return self.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def prefix() -> str:
    return settings.CERES_AUDIT_CHECKPOINT_PREFIX


def _signed_bytes(section: dict) -> bytes:
    return canonical_json({"schema": SCHEMA, "version": VERSION, "checkpoint": section}).encode("utf-8")


def object_name(checkpoint: Checkpoint) -> str:
    at = checkpoint.at.astimezone(UTC)
    return f"{prefix()}{at:%Y-%m}/{at:%Y%m%dT%H%M%S.%fZ}-{checkpoint.seq:012d}.json"


def encode(checkpoint: Checkpoint, key: Ed25519PrivateKey) -> bytes:
    """The stored object: the checkpoint and its signature."""
    section = checkpoint.section()
    signature = signing.sign(key, _signed_bytes(section))
    return canonical_json({"schema": SCHEMA, "version": VERSION, "checkpoint": section,
                           "signature": base64.b64encode(signature).decode("ascii"),
                           "key_fingerprint": signing.fingerprint(key.public_key())}).encode("utf-8")


def decode(data: bytes, public_key: Ed25519PublicKey, *, name: str = "") -> Checkpoint:
    """The checkpoint in ``data`` once its signature checks with ``public_key``; ``CheckpointProblem`` otherwise."""
    label = name or "the checkpoint"
    try:
        stored = json.loads(data)
        if stored.get("schema") != SCHEMA or stored.get("version") != VERSION:
            raise ValueError(f"schema {stored.get('schema')!r} version {stored.get('version')!r}")
        section = stored["checkpoint"]
        signature = base64.b64decode(stored["signature"], validate=True)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise CheckpointProblem(f"{label} is not an audit checkpoint ({exc})") from None
    try:
        public_key.verify(signature, _signed_bytes(section))
    except InvalidSignature:
        raise CheckpointProblem(f"{label}: the signature does not match it and the public key (fingerprint "
                                f"{signing.fingerprint(public_key)}): changed, or signed with another key") from None
    try:
        keyed_from = section["keyed_from"]
        checkpoint = Checkpoint(seq=int(section["seq"]), hash=str(section["hash"]), count=int(section["count"]),
                                keyed_from=None if keyed_from is None else int(keyed_from),
                                at=datetime.strptime(section["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC),
                                name=name)
    except (ValueError, KeyError, TypeError) as exc:  # signed, but not by this format: a bug, not an attack
        raise CheckpointProblem(f"{label} is signed but not a checkpoint of this format ({exc})") from None
    return checkpoint


def store(checkpoint: Checkpoint, key: Ed25519PrivateKey, releases: Storage | None = None) -> str:
    """Write a checkpoint to the releases storage; its object's name."""
    name = object_name(checkpoint)
    storage.put(releases or storage.releases(), name, io.BytesIO(encode(checkpoint, key)))
    return name


def read(name: str, public_key: Ed25519PublicKey, releases: Storage | None = None) -> Checkpoint:
    try:
        with (releases or storage.releases()).open(name, "rb") as stored:
            data = stored.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise CheckpointProblem(f"{name}: missing from the releases storage") from None
    if len(data) > MAX_BYTES:
        raise CheckpointProblem(f"{name} is larger than a checkpoint can be")
    return decode(data, public_key, name=name)


def _listdir(releases: Storage, folder: str) -> tuple[list[str], list[str]]:
    try:
        return releases.listdir(folder.rstrip("/"))
    except FileNotFoundError:
        return [], []


def names(releases: Storage | None = None, *, limit: int | None = None) -> list[str]:
    """The stored checkpoints' names, newest first (at most ``limit``): month folders are listed newest first
    and only as many as needed, so finding the newest costs two listings however long the history."""
    releases = releases or storage.releases()
    months, _ = _listdir(releases, prefix())
    found: list[str] = []
    for month in sorted((m for m in months if _MONTH.match(m)), reverse=True):
        _, files = _listdir(releases, f"{prefix()}{month}")
        found.extend(f"{prefix()}{month}/{name}" for name in sorted((f for f in files if _NAME.match(f)),
                                                                     reverse=True))
        if limit is not None and len(found) >= limit:
            return found[:limit]
    return found


def latest(public_key: Ed25519PublicKey, releases: Storage | None = None) -> Checkpoint | None:
    """The newest stored checkpoint, its signature checked; None when there is none yet."""
    newest = names(releases, limit=1)
    return read(newest[0], public_key, releases) if newest else None
