"""``ceres-pull`` against a hostile portal: an in-test HTTP server that plays the portal's API and storage and
lies as a hostile server would (over-long bodies, huge manifests and signatures, unsafe and clashing paths,
missing links, another key), and a destination that holds symbolic links or files in the way. The client runs
as the researcher runs it, a subprocess; what it must do is computed here from the bytes served.

``CERES_PULL_PYTHON`` runs the client with another interpreter (a virtual environment of Python 3.10 with only
the client's wheel installed, say): the in-test portal and the expectations stay in this one."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import pytest
from ceres_pull import pinning
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from exporter import release as release_format

REPO = Path(__file__).resolve().parents[2]
CLIENT_PYTHON = os.environ.get("CERES_PULL_PYTHON") or sys.executable
MiB = 1 << 20
MANIFEST, SIGNATURE, RECEIPT = (release_format.DATASET_MANIFEST, release_format.DATASET_SIGNATURE,
                                release_format.DATASET_RECEIPT)
LINKS = "/api/studies/demo/datasets/1/links/"
KEY = "/.well-known/ceres-release-key"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(key: Ed25519PrivateKey) -> str:
    return sha256(release_format.public_key_raw(key.public_key()))


def stream(total: int, block: int = MiB) -> Callable[[], Iterable[bytes]]:
    """A body of ``total`` spaces, made as it is sent (never held whole)."""
    def blocks():
        left = total
        while left > 0:
            yield b" " * min(block, left)
            left -= block
    return blocks


class Portal:
    """What the in-test server serves, and what it saw."""

    def __init__(self):
        self.key = Ed25519PrivateKey.generate()  # signs the manifest
        self.served_key = self.key  # its public half is what /.well-known/ceres-release-key answers
        self.files: dict[str, bytes] = {}
        self.bodies: dict[str, tuple[Callable[[], Iterable[bytes]], int | None]] = {}  # URL path -> body, length
        self.no_link_for: set[str] = set()
        self.stall: set[str] = set()  # files sent half, then held until ``release`` is set
        self.release = threading.Event()
        self.requests: list[tuple[str, str]] = []  # (path, Range header) of every GET of a file
        self.asked: list[str] = []  # every path links were asked for
        self.sent: dict[str, int] = defaultdict(int)  # bytes written to the socket per URL path
        self.url = ""

    def publish(self, files: dict[str, bytes], entries: list[dict] | None = None) -> None:
        """A dataset download of ``files`` (its receipt added), its manifest listing ``entries`` (by default
        the files as they are), signed with ``self.key``."""
        self.files = {RECEIPT: b'{"receipt": "of the dataset"}\n', **files}
        listed = entries if entries is not None else [
            {"path": path, "bytes": len(data), "sha256": sha256(data)} for path, data in self.files.items()]
        if entries is not None:
            listed = [*listed, {"path": RECEIPT, "bytes": len(self.files[RECEIPT]),
                                "sha256": sha256(self.files[RECEIPT])}]
        section = release_format.dataset_section(
            study="demo", dataset_id="dataset-0001", created_at="2026-01-01T00:00:00Z", episodes=[], files=listed,
            dataset_receipt_sha256=sha256(self.files[RECEIPT]))
        self.sign(release_format.dataset_manifest_bytes(dataset=section, signed_at="2026-01-01T00:00:00Z",
                                                         audit_chain_head={"seq": 1, "hash": "0" * 64}))

    def sign(self, manifest: bytes) -> None:
        self.files[MANIFEST] = manifest
        self.files[SIGNATURE] = self.key.sign(manifest)

    def file_requests(self) -> list[str]:
        return [path for path, _ in self.requests if path not in (MANIFEST, SIGNATURE)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    portal: Portal

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes | None, *, headers: dict | None = None, what: str = "",
              blocks: Callable[[], Iterable[bytes]] | None = None, length: int | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            length = len(body)
        if length is None:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        try:
            for block in ([body] if body is not None else blocks()):
                self.wfile.write(block)
                self.portal.sent[what] += len(block)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):
        portal, path = self.portal, unquote(urlsplit(self.path).path)
        if path in portal.bodies:
            blocks, length = portal.bodies[path]
            return self._send(200, None, what=path, blocks=blocks, length=length)
        if path == KEY:
            return self._send(200, release_format.public_key_pem(portal.served_key.public_key()).encode())
        name = path.removeprefix("/files/")
        if not path.startswith("/files/") or name not in portal.files:
            return self._send(404, b'{"detail": "not found"}')
        data, asked = portal.files[name], self.headers.get("Range", "")
        portal.requests.append((name, asked))
        if name in portal.bodies:
            blocks, length = portal.bodies[name]
            return self._send(200, None, what=name, blocks=blocks, length=length)
        start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
        if start >= len(data) and asked:
            return self._send(416, b"")
        headers = {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"} if asked else {}
        if name in portal.stall and not asked:
            half = len(data) // 2

            def held():
                yield data[:half]
                portal.release.wait(60)
                yield data[half:]
            return self._send(200, None, what=name, blocks=held, length=len(data))
        return self._send(206 if asked else 200, data[start:], headers=headers, what=name)

    def do_POST(self):
        portal, path = self.portal, urlsplit(self.path).path
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["paths"]
        portal.asked.extend(asked)
        if path in portal.bodies:
            blocks, length = portal.bodies[path]
            return self._send(200, None, what=path, blocks=blocks, length=length)
        if path != LINKS:
            return self._send(404, b'{"detail": "not found"}')
        until = (datetime.now(UTC) + timedelta(minutes=10)).isoformat()
        links = [{"path": name, "url": f"{portal.url}/files/{quote(name)}", "expires_at": until}
                 for name in asked if name not in portal.no_link_for]
        self._send(200, json.dumps({"links": links}).encode(), headers={"Content-Type": "application/json"})


@pytest.fixture
def portal():
    state = Portal()
    handler = type("PortalHandler", (Handler,), {"portal": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def known(tmp_path) -> Path:
    return tmp_path / "config" / "known-portals"


def command(portal: Portal, dest: Path, known: Path, *extra: str) -> list[str]:
    return [CLIENT_PYTHON, "-m", "ceres_pull", "--portal", portal.url, "--token=t", "--dataset",
            "demo/dataset-0001", "--quiet", *extra, str(dest)]


def environment(known: Path, **more: str) -> dict[str, str]:
    """Keys are pinned in the test's own known-portals file (``$CERES_KNOWN_PORTALS``)."""
    return {**os.environ, "PYTHONPATH": str(REPO), "CERES_KNOWN_PORTALS": str(known), **more}


def pull(portal: Portal, dest: Path, known: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(portal, dest, known, *extra), cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=environment(known))


def refused_in_one_line(result: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """The run ended with ``code`` and one line on stderr (after the key's line) holding ``words``."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("ceres-pull: release key ")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def files_under(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if not path.is_dir())


FILES = {"meta/info.json": b'{"codebase_version": "v3.0"}\n', "data/chunk-000/file-000.parquet": b"PAR1" * 300,
         "videos/cam/chunk-000/file-000.mp4": bytes(range(256)) * 64}


# --- a clean pull, and the release key pinned on first use (item 15) -------------------------------------------


def test_a_clean_pull_verifies_pins_the_key_and_prints_its_fingerprint_every_run(portal, known, tmp_path):
    portal.publish(FILES)
    dest = tmp_path / "pulled"
    first = pull(portal, dest, known)
    assert first.returncode == 0, first.stderr
    assert f"release key {fingerprint(portal.key)} of {portal.url}, first use: pinned in {known}" in first.stderr
    assert known.read_text() == (f"{portal.url} "
                                 f"{base64.b64encode(release_format.public_key_raw(portal.key.public_key())).decode()}\n")
    assert files_under(dest) == sorted([*portal.files])
    assert all((dest / path).read_bytes() == data for path, data in portal.files.items())
    release_format.verify_release(dest, portal.key.public_key())

    again = pull(portal, dest, known, "--known-portals", str(known))  # the option names the same file
    assert again.returncode == 0, again.stderr
    assert f"release key {fingerprint(portal.key)} of {portal.url}, as pinned in {known}" in again.stderr
    assert f"(0 fetched, {len(portal.files) - 2} already in place)" in again.stdout


def verify_only(known: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLIENT_PYTHON, "-m", "ceres_pull", "--verify-only", *arguments], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=environment(known))


def test_verify_only_checks_a_folder_on_disk_with_the_pinned_or_given_key(portal, known, tmp_path):
    portal.publish(FILES)
    dest = tmp_path / "pulled"
    assert pull(portal, dest, known).returncode == 0
    portal.served_key = Ed25519PrivateKey.generate()  # were the portal asked, the changed key would be refused
    checked = verify_only(known, str(dest), "--portal", portal.url)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == (f"dataset dataset-0001 of study demo: signature valid (key {fingerprint(portal.key)}), "
                              f"0 episodes, {len(portal.files) - 2} files match the manifest\n")
    assert f"as pinned in {known}" in checked.stderr
    key_file = tmp_path / "key.pem"
    key_file.write_text(release_format.public_key_pem(portal.key.public_key()))
    assert verify_only(known, str(dest), "--public-key", str(key_file)).returncode == 0

    (dest / "meta/info.json").write_bytes(b"{}")
    refused_in_one_line(verify_only(known, str(dest), "--portal", portal.url), 1,
                        "problem: meta/info.json: 2 bytes, the manifest says")
    other = tmp_path / "other.pem"
    other.write_text(release_format.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    refused_in_one_line(verify_only(known, str(dest), "--public-key", str(other)), 1,
                        f"problem: {SIGNATURE}: the signature does not match")


@pytest.mark.parametrize(("arguments", "said"), [
    ([], "--verify-only needs --public-key KEY or --portal URL"),
    (["--portal", "http://127.0.0.1:9", "extra-dest"], "--verify-only takes the folder itself; no DEST after it"),
])
def test_verify_only_without_a_key_or_with_a_dest_is_a_usage_error(known, tmp_path, arguments, said):
    refused_in_one_line(verify_only(known, str(tmp_path), *arguments), 2, said)


def test_version_is_the_distributions(known):
    from importlib.metadata import version

    result = subprocess.run([CLIENT_PYTHON, "-m", "ceres_pull", "--version"], capture_output=True, text=True,
                            timeout=60, env=environment(known))
    assert result.returncode == 0 and result.stdout == f"ceres-pull {version('ceres-pull')}\n"


def test_a_changed_key_is_refused_before_any_file_and_says_how_to_check_it(portal, known, tmp_path):
    portal.publish(FILES)
    assert pull(portal, tmp_path / "first", known).returncode == 0
    pinned = known.read_text() if known.exists() else None
    old = portal.key
    portal.key = portal.served_key = Ed25519PrivateKey.generate()  # a server posing as the portal
    portal.publish({**FILES, "meta/info.json": b'{"codebase_version": "evil"}\n'})
    portal.requests.clear()
    result = pull(portal, tmp_path / "second", known)
    line = refused_in_one_line(result, 3, f"pinned fingerprint {fingerprint(old)}",
                               f"now served {fingerprint(portal.key)}", "out of band", str(known))
    assert line.startswith("ceres-pull: refused: the release key of ")
    assert known.read_text() == pinned
    assert portal.requests == [] and portal.asked.count(MANIFEST) == 1  # the first run's only
    assert not (tmp_path / "second").exists() or files_under(tmp_path / "second") == []


def test_keys_are_pinned_per_portal_address_and_a_broken_file_is_named(portal, known, tmp_path):
    assert pinning.portal_id("HTTPS://Portal.Example.ORG:443/ceres/") == "https://portal.example.org/ceres"
    assert pinning.portal_id("http://portal.example.org:8000") == "http://portal.example.org:8000"
    portal.publish(FILES)
    known.parent.mkdir(parents=True)
    known.write_text(f"{portal.url} not-base64!\n")
    refused_in_one_line(pull(portal, tmp_path / "pulled", known), 2, f"--known-portals: {known}:1: not 'ADDRESS "
                                                                     f"BASE64-KEY'")
    assert portal.asked == []


def test_a_manifest_signed_with_another_key_fails_whichever_key_is_trusted(portal, known, tmp_path):
    portal.publish(FILES)
    portal.served_key = Ed25519PrivateKey.generate()  # serves one key, signs with another
    result = pull(portal, tmp_path / "served", known)
    refused_in_one_line(result, 1, f"{SIGNATURE}: the signature does not match {MANIFEST}")
    key_file = tmp_path / "key.pem"
    key_file.write_text(release_format.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    result = pull(portal, tmp_path / "given", known, "--public-key", str(key_file))
    refused_in_one_line(result, 1, f"{SIGNATURE}: the signature does not match {MANIFEST}")
    assert portal.file_requests() == []


# --- reads within limits (item 13) -------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [False, True], ids=["unannounced", "declared"])
def test_a_body_longer_than_its_entry_stops_at_the_declared_size(portal, known, tmp_path, declared):
    portal.publish({**FILES, "meta/tiny.txt": b"hello"})
    portal.bodies["meta/tiny.txt"] = (stream(64 * MiB), 64 * MiB if declared else None)
    dest = tmp_path / "pulled"
    result = pull(portal, dest, known)
    said = "the storage sends 67108864 bytes" if declared else "the storage sent more than the 5 bytes"
    refused_in_one_line(result, 1, f"meta/tiny.txt: {said}", "not kept")
    assert portal.sent["meta/tiny.txt"] < 16 * MiB  # the client hung up (what reached the socket's buffers)
    assert not (dest / "meta/tiny.txt").exists() and not (dest / ".ceres-pull/meta/tiny.txt").exists()
    assert (dest / "meta/info.json").read_bytes() == FILES["meta/info.json"]  # the others are in place
    assert not (dest / MANIFEST).exists()


# The client, then its peak resident memory (VmHWM: of this process image only, not of the test's fork) to a file.
PEAK = ("import os, sys\nfrom ceres_pull import pull\ntry:\n    code = pull.main(sys.argv[1:])\nfinally:\n"
        "    with open('/proc/self/status') as status, open(os.environ['PEAK'], 'w') as out:\n"
        "        out.write(next(line for line in status if line.startswith('VmHWM:')))\nsys.exit(code)\n")


@pytest.mark.parametrize("declared", [False, True], ids=["unannounced", "declared"])
def test_a_huge_manifest_is_refused_before_it_is_read_whole(portal, known, tmp_path, declared):
    portal.publish(FILES)
    portal.bodies[f"/files/{MANIFEST}"] = (stream(200 * MiB), 200 * MiB if declared else None)
    peak = tmp_path / "peak"
    result = subprocess.run([CLIENT_PYTHON, "-c", PEAK, *command(portal, tmp_path / "pulled", known)[3:]],
                            cwd=REPO, capture_output=True, text=True, timeout=120,
                            env=environment(known, PEAK=str(peak)))
    refused_in_one_line(result, 1, f"{MANIFEST}: longer than {64 * MiB} bytes", "refused before reading it whole")
    assert portal.sent[f"/files/{MANIFEST}"] < 100 * MiB
    kib = int(peak.read_text().split()[1])
    assert kib * 1024 < 160 * MiB, kib  # the 200 MiB served were never held
    assert portal.file_requests() == [] and not (tmp_path / "pulled" / MANIFEST).exists()


@pytest.mark.parametrize(("signature", "said"), [
    (lambda good: good + b"\n", "longer than 64 bytes (65 read or declared)"),
    (lambda good: good[:63], "63 bytes, not one 64-byte Ed25519 signature"),
    (lambda good: b"", "0 bytes, not one 64-byte Ed25519 signature"),
    (lambda good: good + good, "longer than 64 bytes (128 read or declared)"),
], ids=["trailing-newline", "short", "empty", "two"])
def test_the_signature_is_exactly_one_64_byte_signature(portal, known, tmp_path, signature, said):
    portal.publish(FILES)
    portal.files[SIGNATURE] = signature(portal.files[SIGNATURE])
    refused_in_one_line(pull(portal, tmp_path / "pulled", known), 1, f"{SIGNATURE}: {said}")
    assert portal.file_requests() == []


def test_a_huge_signature_is_not_read(portal, known, tmp_path):
    portal.publish(FILES)
    portal.bodies[f"/files/{SIGNATURE}"] = (stream(64 * MiB), None)
    refused_in_one_line(pull(portal, tmp_path / "pulled", known), 1, f"{SIGNATURE}: longer than 64 bytes")
    assert portal.sent[f"/files/{SIGNATURE}"] < 16 * MiB


@pytest.mark.parametrize("where", [KEY, LINKS])
def test_huge_answers_of_the_api_are_refused_unread(portal, known, tmp_path, where):
    portal.publish(FILES)
    portal.bodies[where] = (stream(100 * MiB), None)
    refused_in_one_line(pull(portal, tmp_path / "pulled", known), 3, "the portal's answer is longer than")
    assert portal.sent[where] < 50 * MiB
    assert portal.file_requests() == []


# --- paths: symbolic links, traversal, unsafe and clashing names (item 14) ---------------------------------------


@pytest.mark.parametrize("link", ["data", "videos/cam", ".ceres-pull", "meta/info.json"])
def test_nothing_is_read_or_written_through_a_symbolic_link_in_the_destination(portal, known, tmp_path, link):
    """A folder of the download (or the partial folder, or one file) is a link to a folder outside holding
    the very files the manifest lists: the run refuses it rather than write there or count them verified."""
    portal.publish(FILES)
    dest, outside = tmp_path / "pulled", tmp_path / "outside"
    for path, data in portal.files.items():
        if path.startswith(f"{link}/") or path == link:
            (outside / path).parent.mkdir(parents=True, exist_ok=True)
            (outside / path).write_bytes(data)
    if not (outside / link).exists():
        (outside / link).mkdir(parents=True)
    before = {path: (outside / path).read_bytes() for path in files_under(outside)}
    (dest / link).parent.mkdir(parents=True, exist_ok=True)
    (dest / link).symlink_to(outside / link, target_is_directory=(outside / link).is_dir())
    result = pull(portal, dest, known)
    refused_in_one_line(result, 2, f"{link}: a symbolic link in {dest}", "never reads or writes through one")
    assert {path: (outside / path).read_bytes() for path in files_under(outside)} == before
    assert (dest / link).is_symlink() and not (dest / MANIFEST).exists()


@pytest.mark.parametrize("paths", [
    [".ceres-pull/meta/info.json"], ["../outside.txt"], ["/tmp/absolute.txt"], ["a\x00b"], ["a\nb"],
    ["n" * 300], [f"{'d' * 200}/" * 6 + "f"], ["meta//info.json"], ["meta/./info.json"], ["meta/"],
    ["dup.bin", "dup.bin"], ["Case.bin", "case.bin"], ["meta", "meta/info.json"], [f".{MANIFEST}.part"],
    [f"{MANIFEST}/inside"],
], ids=["partial-folder", "traversal", "absolute", "nul", "newline", "300-character-name", "1200-byte-path",
        "empty-component", "dot-component", "trailing-slash", "duplicate", "case-duplicate", "file-folder-clash",
        "staged-manifest", "inside-the-manifest"])
def test_an_unsafe_path_in_a_signed_manifest_is_refused_before_any_file(portal, known, tmp_path, paths):
    entries = [{"path": path, "bytes": 5, "sha256": sha256(b"hello")} for path in paths]
    portal.publish({}, entries=entries)
    for path in paths:
        portal.files.setdefault(path, b"hello")
    dest = tmp_path / "pulled"
    line = refused_in_one_line(pull(portal, dest, known), 1, f"problem: {MANIFEST}: ")
    assert "file path" in line or "a file path" in line
    assert portal.file_requests() == [] and set(portal.asked) == {MANIFEST, SIGNATURE}
    assert [path for path in files_under(tmp_path) if not path.startswith("config/")] == []  # nothing written


@pytest.mark.parametrize(("in_the_way", "said"), [
    ("meta/info.json/", "meta/info.json: a folder in {dest} where a file is needed"),
    ("meta", "meta: a file in {dest} where a folder is needed"),
    (".ceres-pull", ".ceres-pull: a file in {dest} where a folder is needed"),
])
def test_a_file_or_folder_in_the_way_is_named(portal, known, tmp_path, in_the_way, said):
    portal.publish(FILES)
    dest = tmp_path / "pulled"
    if in_the_way.endswith("/"):
        (dest / in_the_way).mkdir(parents=True)
    else:
        dest.mkdir()
        (dest / in_the_way).write_bytes(b"mine")
    refused_in_one_line(pull(portal, dest, known), 2, said.format(dest=dest))
    assert not (dest / MANIFEST).exists()


def test_a_missing_link_is_named(portal, known, tmp_path):
    portal.publish(FILES)
    portal.no_link_for.add("meta/info.json")
    refused_in_one_line(pull(portal, tmp_path / "pulled", known), 3, "the portal gave no link for 'meta/info.json'")
    assert not (tmp_path / "pulled" / MANIFEST).exists()


def test_the_run_ends_with_the_check_verify_release_makes(portal, known, tmp_path):
    """A file the manifest does not list fails the run, as it fails ``verify-release``; no manifest is written."""
    portal.publish(FILES)
    dest = tmp_path / "pulled"
    (dest / "data").mkdir(parents=True)
    (dest / "data/planted.parquet").write_bytes(b"not released")
    refused_in_one_line(pull(portal, dest, known), 1, "data/planted.parquet: extra file not in the manifest")
    assert not (dest / MANIFEST).exists() and not (dest / SIGNATURE).exists()
    assert (dest / "meta/info.json").read_bytes() == FILES["meta/info.json"]


# --- Ctrl-C and SIGTERM (item 12) --------------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_at_once_keeps_what_is_verified_and_the_next_run_resumes(portal, known, tmp_path, signum,
                                                                                  code):
    """The receipt comes whole; the two other files are sent half and then held. The signal, sent once the
    receipt is in place and a half has reached the partial folder, ends the run (well before the held files
    could finish); the next run asks for the rest of the partial file only."""
    held = {"data/chunk-000/file-000.parquet": os.urandom(256 << 10), "videos/cam/chunk-000/file-000.mp4":
            os.urandom(256 << 10)}
    portal.publish(held)
    portal.stall.update(held)
    dest = tmp_path / "pulled"
    process = subprocess.Popen(command(portal, dest, known, "--connections", "2"), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment(known))
    first, partial = dest / RECEIPT, dest / ".ceres-pull/data/chunk-000/file-000.parquet"
    half = len(held["data/chunk-000/file-000.parquet"]) // 2
    try:
        deadline = time.monotonic() + 60
        while not (first.is_file() and partial.is_file() and partial.stat().st_size == half) \
                and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.is_file() and partial.stat().st_size == half, process.poll()
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=15)  # the held halves would come only after 60 s
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert f"stopped by {signal.Signals(signum).name}: files fetched, verified and in place in {dest}: 1;" in stderr
    assert first.read_bytes() == portal.files[RECEIPT]
    assert partial.read_bytes() == held["data/chunk-000/file-000.parquet"][:half]
    assert not (dest / MANIFEST).exists()

    portal.stall.clear()
    portal.requests.clear()
    result = pull(portal, dest, known)
    assert result.returncode == 0, result.stderr
    assert "(2 fetched, 1 already in place)" in result.stdout
    assert ("data/chunk-000/file-000.parquet", f"bytes={half}-") in portal.requests
    assert RECEIPT not in portal.file_requests()
    release_format.verify_release(dest, portal.key.public_key())
