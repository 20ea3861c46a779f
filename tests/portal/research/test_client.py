"""``ceres-pull`` as a researcher gets it: the wheel the portal builds and serves at ``/client/``, the commands the
release and dataset pages show, and (slow) the wheel installed alone in a clean virtual environment, with nothing
of the portal, pulling a release from a live portal and checking it again with ``--verify-only``."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.accounts.services import issue_token
from portal.research.services import catalogue, client, datasets

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "clients" / "ceres-pull"


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory) -> Path:
    """The client's wheel, built once for the session as ``manage.py client_wheel`` builds it."""
    from django.conf import settings

    folder = tmp_path_factory.mktemp("client")
    before = settings.CERES_CLIENT_DIR
    settings.CERES_CLIENT_DIR = folder
    try:
        path, built = client.build_wheel()
    finally:
        settings.CERES_CLIENT_DIR = before
    assert built and path.parent == folder
    return folder


@pytest.fixture
def served(settings, wheel_dir) -> Path:
    settings.CERES_CLIENT_DIR = wheel_dir
    return wheel_dir / client.wheel_name()


def test_the_portal_pins_the_client_of_this_repository():
    portal = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    own = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]
    assert f"ceres-pull=={own['version']}" in portal["dependencies"]
    assert client.version() == own["version"]
    assert "ceres-pull" not in portal.get("scripts", {})
    assert sorted(own["dependencies"]) == sorted(["httpx>=0.27,<1", "cryptography>=42,<60", "tqdm>=4.66,<5"])
    assert own["requires-python"] == ">=3.10"


def test_the_wheel_holds_the_client_alone(served):
    with zipfile.ZipFile(served) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(name for name in names if name.endswith(".dist-info/METADATA"))).decode()
    assert {name.split("/")[0] for name in names} == {"ceres_pull", f"ceres_pull-{client.version()}.dist-info"}
    assert "ceres_pull/pull.py" in names and "ceres_pull/manifest.py" in names
    assert "Requires-Python: >=3.10" in metadata and "License-Expression: Apache-2.0" in metadata
    requires = sorted(line.split(":", 1)[1].strip() for line in metadata.splitlines()
                      if line.startswith("Requires-Dist:"))
    assert [requirement.split("<")[0].split(">")[0] for requirement in requires] == ["cryptography", "httpx", "tqdm"]


def test_a_wheel_newer_than_the_source_is_not_built_again(served, settings):
    assert client.up_to_date()
    assert client.build_wheel() == (served, False)


@pytest.mark.django_db
def test_the_portal_serves_the_wheel_to_anyone(client_factory, served):
    response = client_factory().get(f"/client/{client.wheel_name()}")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == served.read_bytes()
    assert response["Content-Disposition"] == f'attachment; filename="{client.wheel_name()}"'

    other = client_factory().get("/client/ceres_pull-0.0.1-py3-none-any.whl")
    assert other.status_code == 404 and f"the client's wheel here is /client/{client.wheel_name()}" in \
        other.content.decode()
    page = client_factory().get(reverse("client")).content.decode()
    assert f"pip install http://testserver/client/{client.wheel_name()}" in page


@pytest.mark.django_db
def test_a_wheel_not_built_yet_is_a_clear_404(client_factory, settings, tmp_path):
    settings.CERES_CLIENT_DIR = tmp_path / "empty"
    response = client_factory().get(f"/client/{client.wheel_name()}")
    assert response.status_code == 404
    assert "has not been built on this portal yet" in response.content.decode()
    assert "python manage.py client_wheel" in response.content.decode()
    page = client_factory().get(reverse("client")).content.decode()
    assert 'id="client-missing"' in page and "pip install" not in page


@pytest.fixture
def client_factory():
    from django.test import Client

    return Client


@pytest.mark.django_db
def test_the_release_and_dataset_pages_show_the_commands_filled_in(client_factory, released, researcher):
    study = released.study
    browser = client_factory()
    browser.force_login(researcher)
    page = browser.get(reverse("research-release", args=[study.code, released.number])).content.decode()
    wheel = f"http://testserver/client/{client.wheel_name()}"
    assert f"pip install {wheel}" in page
    assert (f"ceres-pull --portal http://testserver --token $CERES_TOKEN --release {study.code}/release-0001 "
            f"{study.code}-release-0001") in page
    assert f"ceres-pull --verify-only {study.code}-release-0001 --portal http://testserver" in page
    assert f'href="{reverse("account")}#api-tokens"' in page

    with scope(study=study):
        items = list(catalogue.released_items().order_by("episode_index"))[:2]
        dataset, _ = datasets.request_dataset(researcher, study, items)
        datasets.build_dataset(dataset.pk)
    page = browser.get(reverse("research-dataset", args=[study.code, dataset.number])).content.decode()
    assert f"pip install {wheel}" in page
    assert (f"ceres-pull --portal http://testserver --token $CERES_TOKEN --dataset {study.code}/dataset-0001 "
            f"{study.code}-dataset-0001") in page
    assert f'href="{reverse("account")}#api-tokens"' in page


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_wheel_alone_in_a_clean_environment_pulls_and_verifies_a_release(live_server, released, researcher,
                                                                              wheel_dir, tmp_path):
    """What CI checks of the client as a researcher installs it: a virtual environment without system site
    packages, the wheel and its own dependencies only (from the package index), none of the portal's."""
    env_dir = tmp_path / "researcher-venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python, script = env_dir / "bin" / "python", env_dir / "bin" / "ceres-pull"
    clean = {key: value for key, value in os.environ.items()
             if key not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")}
    clean["CERES_KNOWN_PORTALS"] = str(tmp_path / "known-portals")
    wheel = wheel_dir / client.wheel_name()
    installed = _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                     env=clean, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    listed = _run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"], env=clean,
                  cwd=tmp_path)
    names = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert {"ceres-pull", "httpx", "cryptography", "tqdm"} <= names
    assert not names & {"django", "celery", "ceres-portal", "djangorestframework", "pyarrow", "pandas", "boto3"}
    for absent in ("Django", "celery", "ceres-portal"):
        shown = _run([str(python), "-m", "pip", "show", absent], env=clean, cwd=tmp_path)
        assert shown.returncode != 0, shown.stdout
    imports = _run([str(python), "-c", "import ceres_pull.pull, sys; print(sorted(m for m in sys.modules if "
                    "m.split('.')[0] in ('django', 'exporter', 'portal', 'celery')))"], env=clean, cwd=tmp_path)
    assert imports.stdout.strip() == "[]", imports.stderr

    shown = _run([str(script), "--version"], env=clean, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.strip() == f"ceres-pull {client.version()}", shown

    token = issue_token(researcher, name="laptop")[1]
    dest = tmp_path / "pulled"
    target = f"{released.study.code}/release-0001"
    pulled = _run([str(script), "--portal", live_server.url, "--token", token, "--release", target, "--quiet",
                   str(dest)], env=clean, cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert f"pulled {target} into {dest}" in pulled.stdout

    checked = _run([str(script), "--verify-only", str(dest), "--portal", live_server.url], env=clean, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"release release-0001 of study {released.study.code}: signature valid")

    (dest / "episode-000000" / "meta" / "info.json").write_text("{}")
    broken = _run([str(script), "--verify-only", str(dest), "--portal", live_server.url], env=clean, cwd=tmp_path)
    assert broken.returncode == 1
    assert "problem: episode-000000/meta/info.json: " in broken.stderr
