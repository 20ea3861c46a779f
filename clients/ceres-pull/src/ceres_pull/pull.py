"""``ceres-pull``: fetch a released episode set or a one-dataset download from a CERES portal and check it.

    ceres-pull --portal URL --token TOKEN (--release STUDY/release-NNNN | --dataset STUDY/dataset-NNNN) DEST
    ceres-pull --verify-only DEST (--public-key KEY | --portal URL)

The manifest and its signature come first, through signed links like every file; the signature is checked
against the portal's release key before anything else is fetched. The key is ``--public-key`` when given;
otherwise the one the portal serves (``/.well-known/ceres-release-key``), pinned on first use in the
known-portals file (``--known-portals``) and refused when it changes; its fingerprint is printed on every run.
Every file is then downloaded through freshly requested short-lived links, a few at a time, into
``DEST/.ceres-pull/``, never past the length the manifest gives it, and moved to its place only once its
length and SHA-256 match. Nothing is read or written through a symbolic link in DEST, and every path the
manifest names must stay inside DEST. The run ends with the check ``verify-release`` makes (every file and
nothing else) and writes the manifest last. A second run resumes: finished files are checked and kept (no
request for them), a partial one continues where it stopped (HTTP Range), a link that expired mid-run is asked
for again. Ctrl-C stops within a second, keeping what is verified and the partial files.

``--verify-only DEST`` fetches nothing: it checks a folder already on disk (pulled, unzipped, copied) against its
signed manifest, as ``python -m exporter verify-release`` does: the signature, every file listed with its length
and SHA-256, nothing else there. The key is ``--public-key``, or the one pinned for ``--portal`` (asked of the
portal and pinned when it is not pinned yet).

Exit status:
  0    everything is in place and verified
  1    a file or the manifest does not check out (each is named; a bad file is not left under its name)
  2    usage, or DEST is in the way (a symbolic link, a file where a folder goes, another download's manifest)
  3    the portal refused or answered wrongly: no access, a changed release key, an answer that is not the API's
  4    network: the portal or its storage could not be reached or failed; run it again to resume
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM): verified files stay, the rest resume on the next run

A plain client of the portal's API (``httpx``, ``cryptography``, ``tqdm``), installable alone: nothing of the portal.
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import json
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from tqdm import tqdm

from ceres_pull import __version__, pinning, safefs
from ceres_pull import manifest as release_format

PARTIAL = ".ceres-pull"
LINK_BATCH = 100
# A link with less than this left is asked for again before use, so a download does not start on a dying link.
LINK_MARGIN_SECONDS = 15
# Read in blocks this size, so a stop (Ctrl-C) or a body longer than its entry is seen within one block.
BLOCK = 64 << 10
ATTEMPTS = 4
# Bounds on what is read from the portal before it is checked. A manifest lists every file with its path,
# length and SHA-256 (about 4 KiB an episode): 64 MiB is some 15,000 episodes.
MAX_MANIFEST_BYTES = 64 << 20
SIGNATURE_BYTES = 64
MAX_ANSWER_BYTES = 16 << 20
MAX_KEY_BYTES = 64 << 10
# How long Ctrl-C waits for the downloads to reach the end of their block before the client exits anyway.
STOP_GRACE_SECONDS = 0.5
_TARGET = re.compile(r"^(?P<study>[-a-zA-Z0-9_]+)/(?P<kind>release|dataset)-?(?P<number>[0-9]+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RESERVED = (PARTIAL, release_format.MANIFEST, release_format.SIGNATURE, release_format.DATASET_MANIFEST,
             release_format.DATASET_SIGNATURE, *(f".{name}.part" for name in (
                 release_format.MANIFEST, release_format.SIGNATURE, release_format.DATASET_MANIFEST,
                 release_format.DATASET_SIGNATURE)))


class PullError(Exception):
    """Something other than a bad file stopped the pull; ``code`` is the exit status (2: usage or DEST)."""

    code = 2


class Refused(PullError):
    """The portal (or its storage) refused, or answered something the API does not send: exit status 3."""

    code = 3


class NetworkError(PullError):
    """The portal or its storage could not be reached or failed (5xx): exit status 4."""

    code = 4


class Mismatch(Exception):
    """A file or the manifest does not check out: exit status 1."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (raised in the main thread by the signal handler)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Stopped(Exception):
    """A download saw the run's stop flag."""


class _TooLong(Exception):
    pass


@dataclass
class Run:
    """What a run shares with its download threads: the stop flag, the threads, the files verified so far."""

    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    verified: int = 0
    signalled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


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
        return release_format.MANIFEST if self.kind == "release" else release_format.DATASET_MANIFEST

    @property
    def schema(self) -> str:
        return release_format.SCHEMA if self.kind == "release" else release_format.DATASET_SCHEMA


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


@contextlib.contextmanager
def _network(what: str) -> Iterator[None]:
    """httpx's failures as the client's: unreachable or cut off (4), anything else the server got wrong (3)."""
    try:
        yield
    except httpx.TransportError as exc:
        raise NetworkError(f"{what}: {exc.__class__.__name__}: {exc} (run it again to resume)") from None
    except httpx.HTTPError as exc:
        raise Refused(f"{what}: {exc.__class__.__name__}: {exc}") from None


def _read_capped(response: httpx.Response, limit: int) -> bytearray:
    """The body, read block by block; ``_TooLong`` as soon as it (or its declared length) passes ``limit``.
    Kept as the bytearray it was read into: a copy would double the memory a large manifest takes."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _TooLong(int(declared))
    data = bytearray()
    for block in response.iter_raw(BLOCK):
        data += block
        if len(data) > limit:
            raise _TooLong(len(data))
    return data


def _refusal(response: httpx.Response, what: str, by: str) -> PullError:
    try:
        body = _read_capped(response, 4096)
        detail = json.loads(body).get("detail", "")
    except (_TooLong, ValueError, AttributeError, httpx.HTTPError):
        detail = ""
    if not isinstance(detail, str) or not detail:
        detail = "no reason given"
    detail = " ".join(detail.split())[:300]
    kind = NetworkError if response.status_code >= 500 else Refused
    return kind(f"{what}: {by} answered {response.status_code}: {detail}")


class Portal:
    """The portal's API with the caller's token: links to files, the public key; every answer read within a
    bound."""

    def __init__(self, url: str, token: str, target: Target, *, timeout: float = 60.0):
        self.target = target
        headers = {"Accept-Encoding": "identity", **({"Authorization": f"Token {token}"} if token else {})}
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, follow_redirects=False, headers=headers)
        self.files = httpx.Client(timeout=timeout, follow_redirects=True, headers={"Accept-Encoding": "identity"})

    def close(self) -> None:
        self.http.close()
        self.files.close()

    def _call(self, method: str, path: str, what: str, limit: int, **kwargs) -> tuple[httpx.Headers, bytearray]:
        with _network(what), self.http.stream(method, path, **kwargs) as response:
            if response.status_code != 200:
                raise _refusal(response, what, "the portal")
            try:
                return response.headers, _read_capped(response, limit)
            except _TooLong as exc:
                raise Refused(f"{what}: the portal's answer is longer than {limit} bytes ({exc.args[0]} "
                              f"read or declared)") from None

    def public_key(self) -> Ed25519PublicKey:
        what = "the portal's release key (/.well-known/ceres-release-key)"
        _, body = self._call("GET", "/.well-known/ceres-release-key", what, MAX_KEY_BYTES)
        try:
            text = body.decode("ascii").strip()
            if "BEGIN PUBLIC KEY" not in text and not re.fullmatch(r"[A-Za-z0-9+/=]+", text):
                raise ValueError("neither PEM text nor base64")
            return release_format.load_public_key(text)
        except ValueError as exc:
            raise Refused(f"{what}: not an Ed25519 public key ({exc})") from None

    def links(self, paths: list[str]) -> dict[str, tuple[str, float]]:
        """Fresh links to ``paths``: each URL with the local monotonic time it expires at."""
        what = f"links to {self.target.study}/{self.target.name}"
        asked_at = time.monotonic()
        headers, body = self._call("POST", f"{self.target.api}links/", what, MAX_ANSWER_BYTES,
                                   json={"paths": paths})
        links = {}
        try:
            served = headers.get("Date")
            now = email.utils.parsedate_to_datetime(served) if served else datetime.now(timezone.utc)
            for link in json.loads(body)["links"]:
                path, url = link["path"], link["url"]
                if not isinstance(path, str) or not isinstance(url, str) \
                        or urlsplit(url).scheme not in ("http", "https"):
                    raise ValueError(f"not a path and an http(s) address: {str(link)[:200]}")
                left = (datetime.fromisoformat(link["expires_at"].replace("Z", "+00:00")) - now).total_seconds()
                links[path] = (url, asked_at + left)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Refused(f"{what}: the portal's answer is not a list of links ({exc})") from None
        missing = [path for path in paths if path not in links]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise Refused(f"{what}: the portal gave no link for {missing[0]!r}{more}")
        return {path: links[path] for path in paths}

    def fetch(self, url: str, what: str, limit: int) -> bytearray:
        """A whole (small) object, ``_TooLong`` past ``limit``."""
        with _network(what), self.files.stream("GET", url) as response:
            if response.status_code != 200:
                raise _refusal(response, what, "the storage")
            return _read_capped(response, limit)


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _download(portal: Portal, book: LinkBook, folder: safefs.Folder, entry: dict[str, Any], part: str,
              progress: tqdm, stop: threading.Event) -> str | None:
    """Fetch ``entry`` into ``part``, continuing a partial file with HTTP Range, never past the entry's length;
    a refused (expired) link is asked for again. The problem when the storage sends more than the entry."""
    path, size = entry["path"], entry["bytes"]
    for _ in range(ATTEMPTS):
        have = folder.size(part) or 0
        if have > size:
            folder.unlink(part)
            progress.update(-have)
            have = 0
        if have == size:
            return None
        url = book.get(path)
        headers = {"Range": f"bytes={have}-"} if have else {}
        with _network(path), portal.files.stream("GET", url, headers=headers) as response:
            if response.status_code in (401, 403, 410):  # expired (or otherwise refused): a new link
                book.expired(path, url)
                continue
            if response.status_code == 416:  # nothing left to fetch, or a part longer than the object
                folder.unlink(part)
                progress.update(-have)
                continue
            if response.status_code not in (200, 206):
                raise _refusal(response, path, "the storage")
            start = 0
            if response.status_code == 206:
                answered = re.fullmatch(r"bytes ([0-9]+)-[0-9]+/([0-9]+|\*)", response.headers.get("Content-Range",
                                                                                                     ""))
                if not answered or int(answered[1]) != have:
                    raise Refused(f"{path}: the storage answered another range than bytes={have}-")
                start = have
            elif have:
                progress.update(-have)
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and start + int(declared) > size:
                folder.unlink(part)
                return f"{path}: the storage sends {start + int(declared)} bytes, the manifest says {size}; not kept"
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if start else os.O_TRUNC)
            fd = folder.open(part, flags, create_folders=True)
            try:
                written = start
                for block in response.iter_raw(BLOCK):
                    if stop.is_set():
                        raise _Stopped
                    if written + len(block) > size:
                        folder.unlink(part)
                        return (f"{path}: the storage sent more than the {size} bytes the manifest says; stopped "
                                f"there, not kept")
                    _write_all(fd, block)
                    written += len(block)
                    progress.update(len(block))
            finally:
                os.close(fd)
        return None
    raise Refused(f"{path}: the link was refused {ATTEMPTS} times in a row")


def _compare(found: tuple[str, int] | None, entry: dict[str, Any]) -> str | None:
    if found is None:
        return "missing"
    sha256, size = found
    if size != entry["bytes"]:
        return f"{size} bytes, the manifest says {entry['bytes']}"
    if sha256 != entry["sha256"]:
        return f"SHA-256 {sha256} does not match the manifest"
    return None


def fetch_file(portal: Portal, book: LinkBook, folder: safefs.Folder, entry: dict[str, Any], progress: tqdm,
               stop: threading.Event) -> str | None:
    """Download one file of the manifest and move it into place once it matches; the problem otherwise."""
    path = entry["path"]
    part = f"{PARTIAL}/{path}"
    problem = _download(portal, book, folder, entry, part, progress, stop)
    if problem is None:
        problem = _compare(folder.digest(part), entry)
        if problem:
            folder.unlink(part)
            problem = f"{path}: {problem}; not kept"
        else:
            folder.replace(part, path)
    book.done(path)
    return problem


def _fetch_all(portal: Portal, book: LinkBook, folder: safefs.Folder, entries: list[dict[str, Any]],
               progress: tqdm, connections: int, run: Run) -> list[str]:
    """Every entry fetched by ``connections`` threads; the problems. The threads are daemons and stop at the
    end of their block once ``run.stop`` is set, so Ctrl-C never waits for a download to finish."""
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    for entry in entries:
        jobs.put(entry)
    problems: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        while not run.stop.is_set():
            try:
                entry = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                problem = fetch_file(portal, book, folder, entry, progress, run.stop)
            except _Stopped:
                return
            except BaseException as exc:  # handed to the main thread, which reports it
                errors.append(exc)
                run.stop.set()
                return
            if problem:
                problems.append(problem)
            else:
                with run.lock:
                    run.verified += 1

    threads = [threading.Thread(target=work, name=f"ceres-pull-{number}", daemon=True)
               for number in range(max(1, min(connections, len(entries))))]
    run.threads.extend(threads)
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # short waits: the signal handler runs between them
    if errors:
        raise errors[0]
    return problems


def _fetch_manifest(portal: Portal, target: Target, folder: safefs.Folder, public_key: Ed25519PublicKey) \
        -> tuple[dict[str, Any], bytes, bytes]:
    name, signature_name = target.manifest, f"{target.manifest}.sig"
    links = portal.links([name, signature_name])
    try:
        data = portal.fetch(links[name][0], name, MAX_MANIFEST_BYTES)
    except _TooLong as exc:
        raise Mismatch(f"{name}: longer than {MAX_MANIFEST_BYTES} bytes ({exc.args[0]} read or declared); "
                       f"refused before reading it whole") from None
    try:
        signature = portal.fetch(links[signature_name][0], signature_name, SIGNATURE_BYTES)
    except _TooLong as exc:
        raise Mismatch(f"{signature_name}: longer than {SIGNATURE_BYTES} bytes ({exc.args[0]} read or declared), "
                       f"not one {SIGNATURE_BYTES}-byte Ed25519 signature") from None
    if len(signature) != SIGNATURE_BYTES:
        raise Mismatch(f"{signature_name}: {len(signature)} bytes, not one {SIGNATURE_BYTES}-byte Ed25519 "
                       f"signature")
    try:
        manifest = release_format.parse_signed_manifest(data, signature, public_key, name=name)
    except release_format.ReleaseProblem as exc:
        raise Mismatch(str(exc)) from None
    if manifest.get("schema") != target.schema:
        raise Mismatch(f"{name}: a {manifest.get('schema')} manifest, not the {target.schema} asked for")
    section = manifest[target.kind]
    if section.get("study") != target.study or section.get(f"{target.kind}_id") != target.name:
        raise Mismatch(f"{name}: it is the manifest of {section.get('study')}/{section.get(f'{target.kind}_id')}, "
                       f"not of {target.study}/{target.name}")
    entries = release_format.manifest_files(manifest)
    try:
        safefs.check_paths((entry.get("path") for entry in entries), reserved=_RESERVED)
    except safefs.UnsafePath as exc:
        raise Mismatch(f"{name}: {exc}") from None
    for entry in entries:
        length, sha256 = entry.get("bytes"), entry.get("sha256")
        if type(length) is not int or length < 0 or not isinstance(sha256, str) or not _SHA256.match(sha256):
            raise Mismatch(f"{name}: the entry of {entry['path']!r} needs a length in bytes and a lowercase hex "
                           f"SHA-256")
    kept = folder.read(name, MAX_MANIFEST_BYTES)
    if kept is not None and kept != data:
        raise PullError(f"{folder.path} holds the manifest of another {target.kind}; pull into an empty folder")
    return manifest, data, signature


def pull(portal: Portal, target: Target, dest: Path, public_key: Ed25519PublicKey, *, connections: int = 4,
         quiet: bool = False, run: Run | None = None) -> tuple[dict[str, Any], int, int]:
    """Pull ``target`` into ``dest``; returns the manifest, files fetched and files already in place. Raises
    ``Mismatch`` listing every file that did not check out; ``safefs.UnsafeFolder`` for a link or a file in the
    way in ``dest``."""
    run = run or Run()
    created = None  # the outermost folder this pull makes (the destination, or a missing parent of it)
    for folder in (dest, *dest.absolute().parents):
        if os.path.lexists(folder):
            break
        created = folder
    try:
        return _pull_into(portal, target, dest, public_key, connections=connections, quiet=quiet, run=run)
    except BaseException:
        if created is not None:
            _remove_empty_folders(created)
        raise


def _remove_empty_folders(dest: Path) -> None:
    """After a failed pull into a folder it created: remove the folders it left empty (the destination itself
    included), so a refused or mistyped pull leaves nothing behind. A file (a partial download to resume) and the
    folders holding it stay; only empty directories are removed, never followed links."""
    for root, folders, _files in os.walk(dest, topdown=False):
        for name in folders:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
    with contextlib.suppress(OSError):
        if not os.path.islink(dest):
            os.rmdir(dest)


def _pull_into(portal: Portal, target: Target, dest: Path, public_key: Ed25519PublicKey, *, connections: int,
               quiet: bool, run: Run) -> tuple[dict[str, Any], int, int]:
    with safefs.Folder(dest) as folder:
        manifest, data, signature = _fetch_manifest(portal, target, folder, public_key)
        entries = release_format.manifest_files(manifest)
        pending = [entry for entry in entries if _compare(folder.digest(entry["path"]), entry) is not None]
        kept = len(entries) - len(pending)
        book = LinkBook(portal, [entry["path"] for entry in pending])
        total = sum(entry["bytes"] for entry in pending)
        started = sum(min(folder.size(f"{PARTIAL}/{entry['path']}") or 0, entry["bytes"]) for entry in pending)
        with tqdm(total=total, initial=started, unit="B", unit_scale=True, unit_divisor=1024,
                  desc=f"{target.study}/{target.name}", disable=quiet, file=sys.stderr) as progress:
            try:
                problems = _fetch_all(portal, book, folder, pending, progress, connections, run)
            except Interrupted:
                run.stop.set()
                deadline = time.monotonic() + STOP_GRACE_SECONDS
                for thread in run.threads:
                    thread.join(max(0.0, deadline - time.monotonic()))
                # A thread still blocked in a read is abandoned (a daemon); the fd it may use stays open.
                folder.keep_open = any(thread.is_alive() for thread in run.threads)
                raise
        if problems:
            raise Mismatch("; ".join(sorted(problems)))
        folder.remove_tree(PARTIAL)
        try:  # what verify-release checks of the files: each one listed, nothing else, the receipts named
            release_format.check_files(dest, manifest)
        except release_format.ReleaseProblem as exc:
            raise Mismatch(f"{dest}: {exc}") from None
        name = target.manifest
        folder.write(f"{name}.sig", signature)
        folder.write(name, data)  # last: a folder with a manifest is complete
    return manifest, len(pending), kept


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ceres-pull", description=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--portal", help="the portal's address, e.g. https://portal.example.org")
    parser.add_argument("--token", default=os.environ.get("CERES_TOKEN"),
                        help="an API token from your account page (default: $CERES_TOKEN)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--release", help="a published release: STUDY/release-NNNN")
    which.add_argument("--dataset", help="a one-dataset download: STUDY/dataset-NNNN")
    which.add_argument("--verify-only", type=Path, metavar="FOLDER",
                       help="fetch nothing: check FOLDER against its signed manifest (with --public-key, or the key "
                            "pinned for --portal)")
    parser.add_argument("--public-key", help="the portal's release key (PEM file or text, or base64 of the raw 32 "
                                             "bytes); default: the key the portal serves, pinned on first use")
    parser.add_argument("--known-portals", type=Path, default=None,
                        help=f"where keys are pinned (default: ${pinning.ENV}, or "
                             f"$XDG_CONFIG_HOME/ceres/known-portals, by default under ~/.config)")
    parser.add_argument("--connections", type=int, default=4, help="files downloaded at once (1 to 32, default 4)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("dest", type=Path, metavar="DEST", nargs="?", help="folder to pull into (made if absent)")
    return parser


def _release_key(args: argparse.Namespace, portal: Portal | None) -> Ed25519PublicKey:
    """``--public-key``, or the portal's key checked against (or pinned in) the known-portals file; its
    fingerprint printed either way."""
    if args.public_key:
        try:
            key = release_format.load_public_key(args.public_key)
        except ValueError as exc:
            raise PullError(f"--public-key: {exc}") from None
        print(f"ceres-pull: release key {release_format.fingerprint(key)} (given with --public-key)",
              file=sys.stderr)
        return key
    assert portal is not None  # without --public-key there is a portal to ask
    try:
        address = pinning.portal_id(args.portal)
    except ValueError as exc:
        raise PullError(str(exc)) from None
    known = args.known_portals or pinning.default_path()
    key = portal.public_key()
    try:
        seen = pinning.check_or_pin(known, address, key)
    except pinning.KeyChanged as exc:
        raise Refused(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise PullError(f"--known-portals: {exc}") from None
    if seen:
        print(f"ceres-pull: release key {release_format.fingerprint(key)} of {address}, as pinned in {known}",
              file=sys.stderr)
    else:
        print(f"ceres-pull: release key {release_format.fingerprint(key)} of {address}, first use: pinned in "
              f"{known}; check this fingerprint with the portal's operators out of band", file=sys.stderr)
    return key


def _pinned_key(args: argparse.Namespace) -> Ed25519PublicKey:
    """For ``--verify-only``: ``--public-key``, or the key pinned for ``--portal`` (asked of the portal, and
    pinned, only when none is pinned yet)."""
    if args.public_key:
        return _release_key(args, None)
    try:
        address = pinning.portal_id(args.portal)
        known = args.known_portals or pinning.default_path()
        pinned = pinning.read(known).get(address)
    except (OSError, ValueError) as exc:
        raise PullError(str(exc)) from None
    if pinned is None:
        portal = Portal(args.portal, args.token or "", Target("", "release", 0))
        try:
            return _release_key(args, portal)
        finally:
            portal.close()
    print(f"ceres-pull: release key {release_format.fingerprint(pinned)} of {address}, as pinned in {known}",
          file=sys.stderr)
    return pinned


def verify_only(args: argparse.Namespace) -> int:
    """Check a folder on disk against its signed manifest; the exit status (0, 1 naming the problem, 2, 3, 4)."""
    if args.dest is not None:
        print("ceres-pull: error: --verify-only takes the folder itself; no DEST after it", file=sys.stderr)
        return 2
    if not args.public_key and not args.portal:
        print("ceres-pull: error: --verify-only needs --public-key KEY or --portal URL (the key pinned for it)",
              file=sys.stderr)
        return 2
    try:
        public_key = _pinned_key(args)
        manifest = release_format.verify_release(args.verify_only, public_key)
    except release_format.ReleaseProblem as exc:
        print(f"ceres-pull: problem: {exc}", file=sys.stderr)
        return 1
    except PullError as exc:
        return _failed(exc)
    except OSError as exc:
        print(f"ceres-pull: error: {args.verify_only}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print("\n".join(release_format.summary(manifest, public_key)))
    return 0


def _failed(exc: PullError) -> int:
    """Say what stopped the run, by its kind (usage, refusal, network), and give its exit status."""
    print(f"ceres-pull: {'error' if exc.code == 2 else 'refused' if exc.code == 3 else 'network'}: {exc}",
          file=sys.stderr)
    return exc.code


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.verify_only is not None:
        return verify_only(args)
    if not args.portal or not (args.release or args.dataset) or args.dest is None:
        parser.print_usage(sys.stderr)
        print("ceres-pull: error: --portal, --release or --dataset, and DEST are required (or --verify-only "
              "FOLDER)", file=sys.stderr)
        return 2
    if not args.token:
        print("ceres-pull: error: --token (or CERES_TOKEN) is required", file=sys.stderr)
        return 2
    if not 1 <= args.connections <= 32:
        print(f"ceres-pull: error: --connections: 1 to 32, not {args.connections}", file=sys.stderr)
        return 2
    portal, run = None, Run()

    def on_signal(signum: int, frame: Any) -> None:
        if not run.signalled:  # the first one stops the run; another during the stop changes nothing
            run.signalled = True
            raise Interrupted(signum)

    handling = threading.current_thread() is threading.main_thread()
    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)} \
        if handling else {}
    try:
        target = parse_target(args.release or args.dataset, "release" if args.release else "dataset")
        portal = Portal(args.portal, args.token, target)
        public_key = _release_key(args, portal)
        manifest, fetched, kept = pull(portal, target, args.dest, public_key, connections=args.connections,
                                       quiet=args.quiet, run=run)
    except Interrupted as exc:
        portal = None  # the threads still reading are abandoned (daemons), not waited for by a close
        name = signal.Signals(exc.signum).name
        print(f"ceres-pull: stopped by {name}: files fetched, verified and in place in {args.dest}: {run.verified}; "
              f"partial ones are kept in {args.dest / PARTIAL} and the same command resumes them", file=sys.stderr)
        return 128 + exc.signum
    except Mismatch as exc:
        print(f"ceres-pull: problem: {exc}", file=sys.stderr)
        return 1
    except PullError as exc:
        return _failed(exc)
    except safefs.UnsafeFolder as exc:
        print(f"ceres-pull: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ceres-pull: error: {args.dest}: {exc.strerror or exc}"
              f"{f' ({exc.filename})' if exc.filename else ''}", file=sys.stderr)
        return 2
    finally:
        if portal is not None:
            portal.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
    files = len(release_format.manifest_files(manifest))
    print(f"pulled {target.study}/{target.name} into {args.dest}: {files} files verified ({fetched} fetched, "
          f"{kept} already in place) and the manifest with its signature, signature valid "
          f"(key {release_format.fingerprint(public_key)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
