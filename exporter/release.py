"""Signed manifests, the writer's half: how ``release-manifest.json`` (a release of episode shards) and
``dataset-manifest.json`` (a one-dataset download: released episodes assembled as one LeRobot dataset) are built
and signed (``<manifest>.sig``), and the tombstones a withdrawal leaves. The reader's half (what a manifest holds,
its digest, the keys, the check of a downloaded folder) is ``ceres_pull.manifest``, the client's, imported here
so that the portal and the exporter name the format in one place.

The portal builds manifests through ``release_section``/``manifest_bytes`` and ``dataset_section``/
``dataset_manifest_bytes`` and signs them with ``sign``; ``python -m exporter verify-release FOLDER --public-key
KEY`` (and ``ceres-pull --verify-only``) checks either kind with nothing but the public key. The formats are
written down in the project's docs (``docs/releases.md``, ``docs/research.md``).
"""

from typing import Any

# The downloader's half of the format: what a manifest holds, its digest, the keys and the check of a folder,
# one implementation in the ceres-pull client (clients/ceres-pull), which the portal depends on.
from ceres_pull.manifest import (  # noqa: F401  (the format's names, for the portal and the exporter)
    DATASET_MANIFEST,
    DATASET_RECEIPT,
    DATASET_SCHEMA,
    DATASET_SIGNATURE,
    MANIFEST,
    SCHEMA,
    SIGNATURE,
    VERSION,
    ReleaseProblem,
    bytes_digest,
    check_file,
    check_files,
    episode_folder,
    fingerprint,
    json_bytes,
    load_public_key,
    manifest_files,
    parse_signed_manifest,
    public_key_pem,
    public_key_raw,
    read_manifest,
    read_signed_manifest,
    section_digest,
    summary,
    superseding,
    verify_release,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def release_section(*, study: str, release_id: str, purpose: str, requested_by: str, requested_at: str,
                    episodes: list[dict[str, Any]], supersedes: str | dict[str, Any] | None = None,
                    withdrawal: int | None = None, carried_approvals: list[dict[str, Any]] | None = None,
                    face_policy: str | None = None) -> dict[str, Any]:
    """What ethics officers are shown and approve. ``episodes``: ``episode_index``, ``episode_id``,
    ``receipt_sha256`` and ``files`` (the shard's files, receipt included: ``path`` relative to the shard,
    ``bytes``, ``sha256``). File paths become relative to the release folder. ``supersedes``: the release this
    one replaces after a withdrawal (absent otherwise, so other manifests keep their bytes): its ``release_id``,
    ``number`` and ``manifest_sha256`` (a bare release id in releases made before they were named). ``withdrawal``:
    the id of the withdrawal that made it; ``carried_approvals``: the superseded release's approvals it carries
    (``officer``, ``approved_at``, ``manifest_sha256``), when it carries them instead of being approved again.
    ``face_policy``: the study's face policy the request was made under (``off``, ``detect``, ``redact``; absent in
    requests made before faces were looked for), approved with the rest, so it cannot be changed after approval
    without the section's digest changing."""
    section = {
        "study": study,
        "release_id": release_id,
        "purpose": purpose,
        "requested_by": requested_by,
        "requested_at": requested_at,
        "episodes": [
            {
                "episode_index": episode["episode_index"],
                "episode_id": episode["episode_id"],
                "receipt_sha256": episode["receipt_sha256"],
                "files": [
                    {"path": f"{episode_folder(episode['episode_index'])}/{item['path']}", "bytes": item["bytes"],
                     "sha256": item["sha256"]}
                    for item in sorted(episode["files"], key=lambda item: item["path"])
                ],
            }
            for episode in sorted(episodes, key=lambda episode: episode["episode_index"])
        ],
    }
    if face_policy:
        section["face_policy"] = face_policy
    if supersedes is not None:
        section["supersedes"] = supersedes
    if withdrawal is not None:
        section["withdrawal"] = withdrawal
    if carried_approvals:
        section["carried_approvals"] = [
            {"officer": a["officer"], "approved_at": a["approved_at"], "manifest_sha256": a["manifest_sha256"]}
            for a in sorted(carried_approvals, key=lambda a: (a["approved_at"], a["officer"]))]
    return section


def manifest_bytes(*, release: dict[str, Any], approvals: list[dict[str, Any]], released_at: str,
                   audit_chain_head: dict[str, Any], card_files: list[dict[str, Any]] | None = None,
                   redacted_episodes: list[dict[str, Any]] | None = None) -> bytes:
    """The manifest's exact bytes (what the signature covers). ``approvals``: ``officer``, ``approved_at``,
    ``manifest_sha256`` (the ``release`` section's digest the officer was shown). ``card_files``: the dataset
    card and metadata at the release's root (``card_entries``), written when it is published: outside the
    approved section, covered by the signature like every file (absent in releases made before them).
    ``redacted_episodes``: under the ``redact`` face policy, the derived shards published instead of the approved
    ones (``redacted_entries``), also outside the approved section (absent when none was)."""
    manifest = {
        "schema": SCHEMA,
        "version": VERSION,
        "release": release,
        "manifest_sha256": section_digest(release),
        "approvals": approvals,
        "released_at": released_at,
        "audit_chain_head": audit_chain_head,
    }
    if card_files is not None:
        manifest["card_files"] = card_files
    if redacted_episodes:
        manifest["redacted_episodes"] = redacted_episodes
    return json_bytes(manifest)


def redacted_entries(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's ``redacted_episodes``: for each episode published as a derived (redacted) shard, its
    ``episode_index``, the derived shard's ``receipt_sha256`` (what the released files are checked against), the
    approved original's ``original_receipt_sha256``, the derived ``files`` (paths relative to the release folder,
    as in the section) and the ``redaction`` facts (detector, weights digest, threshold, box counts, the officers'
    changes and review, the original video's digest)."""
    return [
        {
            "episode_index": episode["episode_index"],
            "receipt_sha256": episode["receipt_sha256"],
            "original_receipt_sha256": episode["original_receipt_sha256"],
            "files": [
                {"path": f"{episode_folder(episode['episode_index'])}/{item['path']}", "bytes": item["bytes"],
                 "sha256": item["sha256"]}
                for item in sorted(episode["files"], key=lambda item: item["path"])
            ],
            "redaction": episode["redaction"],
        }
        for episode in sorted(episodes, key=lambda episode: episode["episode_index"])
    ]


def card_entries(files: dict[str, bytes]) -> list[dict[str, Any]]:
    """The manifest's ``card_files``: each card or metadata file at the root (``path``, ``bytes``, ``sha256``)."""
    return [{"path": name, "bytes": len(data), "sha256": bytes_digest(data)[0]} for name, data in sorted(files.items())]


TOMBSTONE_SCHEMA = "ceres-release-tombstone"


def tombstone_bytes(*, study: str, release_id: str | None, dataset_id: str | None, episodes_removed: list[int],
                    removed_at: str, reason: str, superseded_by: str | None) -> bytes:
    """A tombstone's exact bytes: which study episode indexes left a release (or that a dataset was removed),
    when, why, and the release that replaces it. Content-free by construction: no designator, no headset, no
    value of the episodes."""
    return json_bytes({
        "schema": TOMBSTONE_SCHEMA,
        "version": VERSION,
        "study": study,
        "release_id": release_id,
        "dataset_id": dataset_id,
        "episodes_removed": sorted(episodes_removed),
        "removed_at": removed_at,
        "reason": reason,
        "superseded_by": superseded_by,
    })


def dataset_section(*, study: str, dataset_id: str, created_at: str, episodes: list[dict[str, Any]],
                    files: list[dict[str, Any]], dataset_receipt_sha256: str) -> dict[str, Any]:
    """What a one-dataset download holds. ``episodes``: ``episode_index`` (in the dataset), ``episode_id``,
    ``source_release``, ``source_episode_index`` and ``source_receipt_sha256``; ``files``: every file of the
    assembled dataset (``path`` relative to its folder, ``bytes``, ``sha256``), its receipt included."""
    return {
        "study": study,
        "dataset_id": dataset_id,
        "created_at": created_at,
        "episodes": sorted(({key: episode[key] for key in ("episode_index", "episode_id", "source_release",
                                                            "source_episode_index", "source_receipt_sha256")}
                            for episode in episodes), key=lambda episode: episode["episode_index"]),
        "files": [{"path": item["path"], "bytes": item["bytes"], "sha256": item["sha256"]}
                  for item in sorted(files, key=lambda item: item["path"])],
        "dataset_receipt_sha256": dataset_receipt_sha256,
    }


def dataset_manifest_bytes(*, dataset: dict[str, Any], signed_at: str, audit_chain_head: dict[str, Any],
                           card_files: list[dict[str, Any]] | None = None) -> bytes:
    """The dataset manifest's exact bytes (what its signature covers); ``card_files`` as in ``manifest_bytes``."""
    manifest = {
        "schema": DATASET_SCHEMA,
        "version": VERSION,
        "dataset": dataset,
        "manifest_sha256": section_digest(dataset),
        "signed_at": signed_at,
        "audit_chain_head": audit_chain_head,
    }
    if card_files is not None:
        manifest["card_files"] = card_files
    return json_bytes(manifest)


# --- keys and signatures --------------------------------------------------------------------------


def private_key_from_seed(seed: bytes) -> Ed25519PrivateKey:
    if len(seed) != 32:
        raise ValueError(f"an Ed25519 private key is 32 bytes, not {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed)


def sign(private_key: Ed25519PrivateKey, data: bytes) -> bytes:
    """The raw 64-byte Ed25519 signature of ``data`` (what ``release-manifest.json.sig`` holds)."""
    return private_key.sign(data)
