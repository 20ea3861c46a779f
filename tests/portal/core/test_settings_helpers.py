import base64
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_choice, env_int, env_key, env_list, env_str, env_url, kept_secret

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("raw, expected", [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)])
def test_env_bool_accepts_usual_spellings(raw, expected):
    assert env_bool("X", not expected, environ={"X": raw}) is expected


def test_env_bool_rejects_other_words():
    with pytest.raises(ImproperlyConfigured, match=r"X='maybe' is not a boolean"):
        env_bool("X", False, environ={"X": "maybe"})


def test_env_int_rejects_text_and_out_of_range():
    with pytest.raises(ImproperlyConfigured, match=r"PORT='80a' is not an integer"):
        env_int("PORT", 1, environ={"PORT": "80a"})
    with pytest.raises(ImproperlyConfigured, match=r"PORT=0 is below the minimum 1"):
        env_int("PORT", 1, minimum=1, environ={"PORT": "0"})
    with pytest.raises(ImproperlyConfigured, match=r"PORT=70000 is above the maximum 65535"):
        env_int("PORT", 1, maximum=65535, environ={"PORT": "70000"})
    assert env_int("PORT", 1, environ={"PORT": " 8080 "}) == 8080


def test_env_list_rejects_empty_items():
    with pytest.raises(ImproperlyConfigured, match="empty item"):
        env_list("HOSTS", environ={"HOSTS": "a.example,,b.example"})
    assert env_list("HOSTS", ["x"], environ={}) == ["x"]
    assert env_list("HOSTS", environ={"HOSTS": "a, b"}) == ["a", "b"]


def test_env_choice_names_the_allowed_values():
    with pytest.raises(ImproperlyConfigured, match=r"STORE='ftp' is not one of: local, s3"):
        env_choice("STORE", "local", ("local", "s3"), environ={"STORE": "ftp"})


def test_env_url_checks_the_scheme():
    with pytest.raises(ImproperlyConfigured, match=r"DATABASE_URL has scheme 'mysql'"):
        env_url("DATABASE_URL", schemes=("postgres",), environ={"DATABASE_URL": "mysql://x"})
    with pytest.raises(ImproperlyConfigured, match=r"scheme '\(none\)'"):
        env_url("DATABASE_URL", schemes=("postgres",), environ={"DATABASE_URL": "localhost"})


def test_env_str_required():
    with pytest.raises(ImproperlyConfigured, match="SECRET must be set"):
        env_str("SECRET", required=True, environ={"SECRET": "  "})


def test_env_key_reads_base64_of_its_size_strictly(tmp_path):
    kept = tmp_path / "key"
    raw = bytes(range(16))
    assert env_key("KEY", size=16, kept_in=kept, environ={"KEY": base64.b64encode(raw).decode()}) == raw
    assert not kept.exists()  # a key from the environment is not kept anywhere
    with pytest.raises(ImproperlyConfigured, match="KEY is not valid base64"):
        env_key("KEY", size=16, kept_in=kept, environ={"KEY": "not base64!"})
    with pytest.raises(ImproperlyConfigured, match="KEY must be base64 of 16 bytes, not 5 bytes"):
        env_key("KEY", size=16, kept_in=kept, environ={"KEY": "c2hvcnQ="})
    with pytest.raises(ImproperlyConfigured, match="KEY must be base64 of a 16-byte seed, not 5 bytes"):
        env_key("KEY", size=16, kept_in=kept, what="a 16-byte seed", environ={"KEY": "c2hvcnQ="})


def test_env_key_without_the_variable_is_made_once_in_its_file_with_mode_0600(tmp_path):
    kept = tmp_path / "data" / "key"
    first = env_key("KEY", size=32, kept_in=kept, environ={})
    assert len(first) == 32 and kept.stat().st_mode & 0o777 == 0o600
    assert base64.b64decode(kept.read_text()) == first
    assert env_key("KEY", size=32, kept_in=kept, environ={}) == first
    kept.write_text("c2hvcnQ=")  # a kept key of the wrong length is refused like the variable's
    with pytest.raises(ImproperlyConfigured, match="KEY must be base64 of 32 bytes, not 5 bytes"):
        env_key("KEY", size=32, kept_in=kept, environ={})


def test_kept_secret_is_made_once(tmp_path):
    made = []

    def make() -> str:
        made.append(1)
        return f"secret-{len(made)}\n"

    path = tmp_path / "nested" / "secret"
    assert kept_secret(path, make) == kept_secret(path, make) == "secret-1"
    assert made == [1] and path.stat().st_mode & 0o777 == 0o600


def test_processes_making_a_kept_secret_at_once_all_read_the_same_one(tmp_path):
    path = tmp_path / "secret"
    # Making the key takes a while (as a slow entropy source would), so every process finds no file and makes one.
    code = ("import secrets, sys, time; from pathlib import Path; from portal.env import kept_secret; "
            "time.sleep(max(0, float(sys.argv[2]) - time.time())); "
            "print(kept_secret(Path(sys.argv[1]), lambda: (time.sleep(0.5), secrets.token_hex(16))[1]))")
    start = str(time.time() + 2)
    runs = [subprocess.Popen([sys.executable, "-c", code, str(path), start], cwd=REPO, stdout=subprocess.PIPE,
                             text=True) for _ in range(8)]
    keys = {run.communicate(timeout=60)[0].strip() for run in runs}
    assert keys == {path.read_text()} and len(path.read_text()) == 32
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]  # no staged file left behind


def _manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings"}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env={**base, **env},
                          capture_output=True, text=True, timeout=120)


def test_bad_setting_stops_start_up_with_its_name(tmp_path):
    result = _manage({"CERES_DATA_DIR": str(tmp_path), "CERES_DEBUG": "sometimes"}, "check")
    assert result.returncode != 0
    assert "CERES_DEBUG='sometimes' is not a boolean" in result.stderr


def test_production_settings_pass_the_deploy_check(tmp_path):
    env = {
        "CERES_DATA_DIR": str(tmp_path),
        "CERES_SECRET_KEY": "k3y-" + "x7Qp9z!Lm2" * 6,
        "CERES_ALLOWED_HOSTS": "portal.example.org",
        "CERES_HTTPS": "1",
        "DATABASE_URL": "postgres://ceres@db.example.org:5432/ceres",
        "CELERY_BROKER_URL": "redis://cache.example.org:6379/0",
        "CERES_STORAGE": "s3",
        "CERES_S3_ENDPOINT_URL": "https://s3.example.org",
        "CERES_S3_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "CERES_S3_SECRET_ACCESS_KEY": "example-secret",
        "CERES_SIGNING_KEY": base64.b64encode(bytes(range(32))).decode(),
        "CERES_AUDIT_KEY": base64.b64encode(bytes(range(32, 64))).decode(),
    }
    result = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout

    for key, check in (("CERES_SIGNING_KEY", "ceres.W001"), ("CERES_AUDIT_KEY", "ceres.W002")):
        result = _manage({name: value for name, value in env.items() if name != key},
                         "check", "--deploy", "--fail-level", "WARNING")
        assert result.returncode != 0 and check in result.stderr + result.stdout, key


def test_the_signing_key_is_read_strictly_and_made_once_with_mode_0600(tmp_path):
    result = _manage({"CERES_DATA_DIR": str(tmp_path), "CERES_SIGNING_KEY": "c2hvcnQ="}, "check")
    assert result.returncode != 0
    assert "CERES_SIGNING_KEY must be base64 of a 32-byte Ed25519 seed, not 5 bytes" in result.stderr
    first = _manage({"CERES_DATA_DIR": str(tmp_path)}, "signing_key")
    assert first.returncode == 0 and (tmp_path / "signing-key").stat().st_mode & 0o777 == 0o600
    assert _manage({"CERES_DATA_DIR": str(tmp_path)}, "signing_key").stdout == first.stdout
