"""The researchers' client, ``ceres-pull``, as the portal hands it out: its wheel, built from the distribution in
this repository (``clients/ceres-pull``) into ``CERES_CLIENT_DIR`` and served at ``/client/<wheel>``, and the
commands the release and dataset pages show with this portal's address filled in.

The wheel is built by ``python manage.py client_wheel`` (``infra/run.sh`` runs it at every start; a deployment
runs it after each update): ``pip wheel`` of the client alone, in a copy of its source so that nothing is written
into the repository, and only when a file of the client is newer than the wheel.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse

DISTRIBUTION = "ceres-pull"
SOURCE = Path(settings.BASE_DIR) / "clients" / "ceres-pull"
_BUILT = {"build", "dist", "__pycache__"}  # what a build leaves in a source tree; never part of the client


class ClientError(Exception):
    """The wheel cannot be built; the message says why."""


def version() -> str:
    """The version of the client the portal runs with (its pyproject pins it to the one in this repository)."""
    return importlib.metadata.version(DISTRIBUTION)


def wheel_name() -> str:
    return f"ceres_pull-{version()}-py3-none-any.whl"


def wheel_path() -> Path | None:
    """The built wheel of this version, or None when it has not been built."""
    path = Path(settings.CERES_CLIENT_DIR) / wheel_name()
    return path if path.is_file() else None


def _source_files() -> list[Path]:
    return [path for path in SOURCE.rglob("*") if path.is_file()
            and not _BUILT.intersection(path.relative_to(SOURCE).parts)
            and not any(part.endswith(".egg-info") for part in path.relative_to(SOURCE).parts)]


def up_to_date() -> bool:
    path = wheel_path()
    if path is None:
        return False
    built = path.stat().st_mtime
    return all(source.stat().st_mtime <= built for source in _source_files())


def build_wheel(*, force: bool = False) -> tuple[Path, bool]:
    """The wheel of the client in ``CERES_CLIENT_DIR``, built now unless it is newer than every file of the
    client (or ``force``); the path and whether it was built. ``ClientError`` naming what failed."""
    folder = Path(settings.CERES_CLIENT_DIR)
    if not force and up_to_date():
        return folder / wheel_name(), False
    if not (SOURCE / "pyproject.toml").is_file():
        raise ClientError(f"the client's source is not at {SOURCE} (its pyproject.toml is missing)")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ceres-pull-build-") as scratch:
        source = Path(scratch) / "source"
        shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns(*_BUILT, "*.egg-info"))
        out = Path(scratch) / "wheel"
        result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir",
                                 str(out), str(source)], capture_output=True, text=True, timeout=600)
        built = sorted(out.glob("*.whl")) if result.returncode == 0 else []
        if [path.name for path in built] != [wheel_name()]:
            detail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise ClientError(f"pip wheel of {SOURCE} made {[path.name for path in built]}, not {wheel_name()} "
                              f"(the installed client is {version()}: run infra/venv.sh after changing its "
                              f"version){': ' + ' / '.join(detail) if detail else ''}")
        staged = folder / f".{wheel_name()}.part"
        shutil.copyfile(built[0], staged)
        staged.replace(folder / wheel_name())  # whole, or not there
    return folder / wheel_name(), True


def commands(request: HttpRequest) -> dict[str, str]:
    """What the release and dataset pages fill in: the portal's address and the wheel's, absolute."""
    return {"portal_url": request.build_absolute_uri("/").rstrip("/"),
            "client_wheel_url": request.build_absolute_uri(reverse("client-wheel", args=[wheel_name()])),
            "client_version": version()}
