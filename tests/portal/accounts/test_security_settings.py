"""Security settings: read strictly, and the API's per-user rate is enforced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

from portal.accounts.network import client_ip
from portal.env import env_rate

REPO = Path(__file__).resolve().parents[3]


def test_env_rate_names_a_bad_rate():
    assert env_rate("R", "1/hour", environ={"R": "30/minute"}) == "30/minute"
    for bad in ("30", "30/week", "0/hour", "x/hour"):
        with pytest.raises(ImproperlyConfigured, match=rf"R='{bad}' is not a rate"):
            env_rate("R", "1/hour", environ={"R": bad})


def test_a_bad_lockout_parameter_stops_start_up(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CERES_DATA_DIR": str(tmp_path), "CERES_LOGIN_LOCKOUT_BY": "username,email"}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode != 0 and "CERES_LOGIN_LOCKOUT_BY: unknown email" in result.stderr


def test_the_client_address_behind_a_trusted_proxy(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.5")
    assert client_ip(request) == "127.0.0.1"
    settings.CERES_TRUSTED_PROXIES = 1
    # The client wrote 6.6.6.6 itself; nginx appended the address it saw.
    assert client_ip(request) == "203.0.113.5"


def test_the_api_refuses_a_user_over_their_rate(make_user, monkeypatch):
    monkeypatch.setitem(UserRateThrottle.THROTTLE_RATES, "user", "3/minute")
    api = APIClient()
    api.force_login(make_user("busy"))
    answers = [api.get("/api/studies/").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    other = APIClient()
    other.force_login(make_user("calm"))
    assert other.get("/api/studies/").status_code == 200
