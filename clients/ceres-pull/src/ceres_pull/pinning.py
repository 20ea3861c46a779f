"""Release keys pinned per portal on first use, as SSH pins host keys in ``known_hosts``.

Without ``--public-key``, ``ceres-pull`` takes the key the portal serves at ``/.well-known/ceres-release-key``.
The first time it meets a portal it writes that key into the known-portals file; every later run compares the
served key with the pinned one and refuses a changed key: a server that only pretends to be the portal (a
wrong address, a hijacked name) cannot hand over manifests signed with its own key. The file
(``$CERES_KNOWN_PORTALS``, or ``known-portals`` under ``$XDG_CONFIG_HOME/ceres/``, by default
``~/.config/ceres/``) holds one line per portal: its address and the base64 of the raw 32-byte Ed25519 key.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ceres_pull import manifest as release_format

ENV = "CERES_KNOWN_PORTALS"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class KeyChanged(Exception):
    """The portal serves another key than the one pinned for it."""

    def __init__(self, portal: str, path: Path, pinned: Ed25519PublicKey, served: Ed25519PublicKey):
        self.portal, self.path, self.pinned, self.served = portal, path, pinned, served
        super().__init__(
            f"the release key of {portal} has changed since it was pinned in {path}: pinned fingerprint "
            f"{release_format.fingerprint(pinned)}, now served {release_format.fingerprint(served)}. Someone "
            f"may be posing as the portal. Check the fingerprint with the portal's operators out of band (by "
            f"phone or in person, not through this portal); only if the new one is right, remove the line of "
            f"{portal} from {path} (or pass --public-key with the checked key) and run again")


def default_path() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "ceres" / "known-portals"


def portal_id(url: str) -> str:
    """The portal's address as pinned: scheme, host and port (lowercase, default port left out) and path."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError(f"--portal: expected an http:// or https:// address, not {url!r}")
    if ":" in host:
        host = f"[{host}]"
    port = parts.port if parts.port not in (None, _DEFAULT_PORTS[scheme]) else None
    return f"{scheme}://{host}{f':{port}' if port else ''}{parts.path.rstrip('/')}"


def read(path: Path) -> dict[str, Ed25519PublicKey]:
    """The pinned keys by portal; ``ValueError`` naming the line that is not ``ADDRESS BASE64-KEY``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    known = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError("expected two fields")
            known[fields[0]] = Ed25519PublicKey.from_public_bytes(base64.b64decode(fields[1], validate=True))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not 'ADDRESS BASE64-KEY' ({exc})") from None
    return known


def check_or_pin(path: Path, portal: str, key: Ed25519PublicKey) -> bool:
    """True when ``key`` was already pinned for ``portal``; False when it is pinned now (first use).
    ``KeyChanged`` when another key is pinned for it."""
    known = read(path)
    pinned = known.get(portal)
    if pinned is not None:
        if release_format.public_key_raw(pinned) != release_format.public_key_raw(key):
            raise KeyChanged(portal, path, pinned, key)
        return True
    line = f"{portal} {base64.b64encode(release_format.public_key_raw(key)).decode('ascii')}\n"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    staged = path.with_name(f".{path.name}.{os.getpid()}.part")
    staged.write_text(before + ("" if not before or before.endswith("\n") else "\n") + line, encoding="utf-8")
    os.replace(staged, path)
    return False
