"""``ceres-pull``: fetch a released episode set or a one-dataset download from a CERES portal and check it.

    ceres-pull --portal URL --token TOKEN (--release STUDY/release-NNNN | --dataset STUDY/dataset-NNNN) DEST

The manifest and its signature come first, through signed links like every file; the signature is checked
against the portal's published key (``/.well-known/ceres-release-key``, or ``--public-key``) before anything
else is fetched. Every file is then downloaded through freshly requested short-lived links, a few at a time,
into ``DEST/.ceres-pull/`` and moved to its place only once its length and SHA-256 match the manifest. A
second run resumes: finished files are checked and kept (no request for them), a partial one continues where
it stopped (HTTP Range), a link that expired mid-run is asked for again. Exit status: 0 when everything is in
place and verified; 1 when a file or the manifest does not check out (the bad file is not left under its final
name); 2 for a usage, network or permission problem.

No Django: a plain client of the portal's API (``httpx``), the exporter's manifest format and hasher.
"""

from __future__ import annotations

import argparse
import email.utils
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from exporter import release as manifest_format

PARTIAL = ".ceres-pull"
LINK_BATCH = 100
# A link with less than this left is asked for again before use, so a download does not start on a dying link.
LINK_MARGIN_SECONDS = 15
CHUNK = 1 << 20
ATTEMPTS = 4
_TARGET = re.compile(r"^(?P<study>[-a-zA-Z0-9_]+)/(?P<kind>release|dataset)-?(?P<number>[0-9]+)$")


class PullError(Exception):
    """Something other than a bad file stopped the pull (usage, network, permission): exit status 2."""


class Mismatch(Exception):
    """A file or the manifest does not check out: exit status 1."""


@dataclass(frozen=True)
class Target:
    study: str
    kind: str  # "release" or "dataset"
    number: int

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.number:04d}"

    @property
    def api(self) -> str:
        return f"/api/studies/{self.study}/{'releases' if self.kind == 'release' else 'datasets'}/{self.number}/"

    @property
    def manifest(self) -> str:
        return manifest_format.MANIFEST if self.kind == "release" else manifest_format.DATASET_MANIFEST


def parse_target(value: str, kind: str) -> Target:
    """``STUDY/release-0001`` (or ``STUDY/1``) for ``--release``; ``STUDY/dataset-0001`` for ``--dataset``."""
    text = value.strip()
    if re.fullmatch(r"[-a-zA-Z0-9_]+/[0-9]+", text):
        study, number = text.split("/")
        return Target(study, kind, int(number))
    match = _TARGET.fullmatch(text)
    if not match or match["kind"] != kind:
        raise PullError(f"--{kind}: expected STUDY/{kind}-NNNN (for example demo/{kind}-0001), not {value!r}")
    return Target(match["study"], kind, int(match["number"]))


class Portal:
    """The portal's API with the caller's token: links to files, the public key."""

    def __init__(self, url: str, token: str, target: Target, *, timeout: float = 60.0):
        self.target = target
        self.http = httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Token {token}"},
                                 timeout=timeout, follow_redirects=False)
        self.files = httpx.Client(timeout=timeout, follow_redirects=True)

    def close(self) -> None:
        self.http.close()
        self.files.close()

    def _answer(self, response: httpx.Response, what: str) -> Any:
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text.strip()[:300]
            raise PullError(f"{what}: the portal answered {response.status_code}: {detail}")
        return response.json()

    def public_key(self) -> str:
        response = self.http.get("/.well-known/ceres-release-key")
        if response.status_code != 200:
            raise PullError(f"the portal's public key: answered {response.status_code}")
        return response.text

    def links(self, paths: list[str]) -> dict[str, tuple[str, float]]:
        """Fresh links to ``paths``: each URL with the local monotonic time it expires at."""
        asked_at = time.monotonic()
        response = self.http.post(f"{self.target.api}links/", json={"paths": paths})
        answer = self._answer(response, f"links to {self.target.study}/{self.target.name}")
        served = response.headers.get("Date")
        now = email.utils.parsedate_to_datetime(served) if served else datetime.now(UTC)
        links = {}
        for link in answer["links"]:
            left = (datetime.fromisoformat(link["expires_at"].replace("Z", "+00:00")) - now).total_seconds()
            links[link["path"]] = (link["url"], asked_at + left)
        return links


class LinkBook:
    """Links by path, asked for in batches and again when close to expiring (thread-safe)."""

    def __init__(self, portal: Portal, pending: list[str]):
        self.portal, self.pending, self.links = portal, list(pending), {}
        self.lock = threading.Lock()

    def get(self, path: str) -> str:
        with self.lock:
            url, until = self.links.get(path, ("", 0.0))
            if until - time.monotonic() > LINK_MARGIN_SECONDS:
                return url
            others = [other for other in self.pending if other != path and self._stale(other)]
            batch = [path, *others[:LINK_BATCH - 1]]
            self.links.update(self.portal.links(batch))
            return self.links[path][0]

    def _stale(self, path: str) -> bool:
        return self.links.get(path, ("", 0.0))[1] - time.monotonic() <= LINK_MARGIN_SECONDS

    def expired(self, path: str, url: str) -> None:
        """The storage refused ``url``: forget it (unless another thread already holds a newer link)."""
        with self.lock:
            if self.links.get(path, ("", 0.0))[0] == url:
                self.links.pop(path)

    def done(self, path: str) -> None:
        with self.lock:
            self.links.pop(path, None)
            if path in self.pending:
                self.pending.remove(path)


def _download(portal: Portal, book: LinkBook, path: str, part: Path, progress: tqdm) -> None:
    """Fetch ``path`` into ``part``, continuing a partial file with HTTP Range; a refused (expired) link is
    asked for again."""
    for _ in range(ATTEMPTS):
        url = book.get(path)
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        with portal.files.stream("GET", url, headers=headers) as response:
            if response.status_code in (401, 403, 410):  # expired (or otherwise refused): a new link
                book.expired(path, url)
                continue
            if response.status_code == 416:  # nothing left to fetch, or a part longer than the object
                part.unlink(missing_ok=True)
                continue
            if response.status_code not in (200, 206):
                raise PullError(f"{path}: the storage answered {response.status_code}")
            mode = "ab" if response.status_code == 206 else "wb"
            if mode == "wb" and have:
                progress.update(-have)
            part.parent.mkdir(parents=True, exist_ok=True)
            with part.open(mode) as out:
                for block in response.iter_bytes(CHUNK):
                    out.write(block)
                    progress.update(len(block))
        return
    raise PullError(f"{path}: the link was refused {ATTEMPTS} times in a row")


def fetch_file(portal: Portal, book: LinkBook, dest: Path, entry: dict[str, Any], progress: tqdm) -> str | None:
    """Download one file of the manifest and move it into place once it matches; the problem otherwise."""
    path = entry["path"]
    part = dest / PARTIAL / path
    _download(portal, book, path, part, progress)
    problem = manifest_format.check_file(part, entry)
    if problem:
        part.unlink(missing_ok=True)
        book.done(path)
        return f"{path}: {problem}; not kept"
    final = dest / path
    final.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(part, 0o644)
    os.replace(part, final)
    book.done(path)
    return None


def _fetch_manifest(portal: Portal, target: Target, dest: Path, public_key) -> tuple[dict[str, Any], bytes, bytes]:
    name = target.manifest
    links = portal.links([name, f"{name}.sig"])
    blobs = []
    for path in (name, f"{name}.sig"):
        response = portal.files.get(links[path][0])
        if response.status_code != 200:
            raise PullError(f"{path}: the storage answered {response.status_code}")
        blobs.append(response.content)
    data, signature = blobs
    try:
        manifest = manifest_format.parse_signed_manifest(data, signature, public_key, name=name)
    except manifest_format.ReleaseProblem as exc:
        raise Mismatch(str(exc)) from None
    section = manifest["release" if target.kind == "release" else "dataset"]
    if section["study"] != target.study or section[f"{target.kind}_id"] != target.name:
        raise Mismatch(f"{name}: it is the manifest of {section['study']}/{section[f'{target.kind}_id']}, not of "
                       f"{target.study}/{target.name}")
    kept = dest / name
    if kept.exists() and kept.read_bytes() != data:
        raise PullError(f"{dest} holds the manifest of another {target.kind}; pull into an empty folder")
    return manifest, data, signature


def _write(path: Path, data: bytes) -> None:
    staged = path.with_name(f".{path.name}.part")
    staged.write_bytes(data)
    os.chmod(staged, 0o644)
    os.replace(staged, path)


def pull(portal: Portal, target: Target, dest: Path, public_key, *, connections: int = 4,
         quiet: bool = False) -> tuple[dict[str, Any], int, int]:
    """Pull ``target`` into ``dest``; returns the manifest, files fetched and files already in place. Raises
    ``Mismatch`` listing every file that did not check out."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest, data, signature = _fetch_manifest(portal, target, dest, public_key)
    entries = manifest_format.manifest_files(manifest)
    pending = [entry for entry in entries if not (dest / entry["path"]).exists()
               or manifest_format.check_file(dest / entry["path"], entry) is not None]
    kept = len(entries) - len(pending)
    book = LinkBook(portal, [entry["path"] for entry in pending])
    problems = []
    total = sum(entry["bytes"] for entry in pending)
    started = sum((dest / PARTIAL / entry["path"]).stat().st_size for entry in pending
                  if (dest / PARTIAL / entry["path"]).is_file())
    with tqdm(total=total, initial=min(started, total), unit="B", unit_scale=True, unit_divisor=1024,
              desc=f"{target.study}/{target.name}", disable=quiet, file=sys.stderr) as progress, \
            ThreadPoolExecutor(max_workers=max(1, connections)) as pool:
        futures = [pool.submit(fetch_file, portal, book, dest, entry, progress) for entry in pending]
        for future in as_completed(futures):
            problem = future.result()
            if problem:
                problems.append(problem)
    if problems:
        raise Mismatch("; ".join(sorted(problems)))
    name = target.manifest
    _write(dest / f"{name}.sig", signature)
    _write(dest / name, data)
    shutil.rmtree(dest / PARTIAL, ignore_errors=True)
    return manifest, len(pending), kept


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ceres-pull", description=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--portal", required=True, help="the portal's address, e.g. https://portal.example.org")
    parser.add_argument("--token", default=os.environ.get("CERES_TOKEN"),
                        help="an API token from your account page (default: $CERES_TOKEN)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--release", help="a published release: STUDY/release-NNNN")
    which.add_argument("--dataset", help="a one-dataset download: STUDY/dataset-NNNN")
    parser.add_argument("--public-key", help="the portal's release key (PEM file or text, or base64 of the raw 32 "
                                             "bytes); default: fetched from the portal")
    parser.add_argument("--connections", type=int, default=4, help="files downloaded at once (default 4)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("dest", type=Path, metavar="DEST", help="folder to pull into (made if absent)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.token:
        print("ceres-pull: error: --token (or CERES_TOKEN) is required", file=sys.stderr)
        return 2
    portal = None
    try:
        target = parse_target(args.release or args.dataset, "release" if args.release else "dataset")
        portal = Portal(args.portal, args.token, target)
        try:
            public_key = manifest_format.load_public_key(args.public_key or portal.public_key())
        except ValueError as exc:
            raise PullError(f"--public-key: {exc}") from None
        manifest, fetched, kept = pull(portal, target, args.dest, public_key, connections=args.connections,
                                       quiet=args.quiet)
    except Mismatch as exc:
        print(f"ceres-pull: problem: {exc}", file=sys.stderr)
        return 1
    except PullError as exc:
        print(f"ceres-pull: error: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"ceres-pull: error: {exc.__class__.__name__}: {exc} (run it again to resume)", file=sys.stderr)
        return 2
    finally:
        if portal is not None:
            portal.close()
    files = len(manifest_format.manifest_files(manifest))
    print(f"pulled {target.study}/{target.name} into {args.dest}: {files} files verified ({fetched} fetched, "
          f"{kept} already in place), signature valid (key {manifest_format.fingerprint(public_key)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
