"""The email settings are read strictly like every other: console by default, smtp only with a host, STARTTLS and
TLS-from-the-first-byte not both, the portal's address for links without its trailing slash."""

from __future__ import annotations

from tests.portal.core.test_settings_helpers import _manage

SHOW = ("shell", "--no-imports", "-c", "from django.conf import settings as s; "
        "print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS, s.DEFAULT_FROM_EMAIL, s.CERES_PORTAL_URL, "
        "s.CERES_FIXITY_DAYS * s.CERES_FIXITY_RUNS_PER_DAY, s.CELERY_BEAT_SCHEDULE['fixity-run-slice']['schedule'])")


def test_the_defaults_need_no_mail_server(tmp_path):
    result = _manage({"CERES_DATA_DIR": str(tmp_path)}, *SHOW)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.core.mail.backends.console.EmailBackend", "localhost", "587", "True",
                                     "CERES", "Portal", "<ceres@localhost>", "http://127.0.0.1:8000", "168", "3600.0"]


def test_smtp_is_configured_from_the_environment(tmp_path):
    env = {"CERES_DATA_DIR": str(tmp_path), "CERES_EMAIL_BACKEND": "smtp", "CERES_EMAIL_HOST": "smtp.example.org",
           "CERES_EMAIL_PORT": "465", "CERES_EMAIL_USE_TLS": "0", "CERES_EMAIL_USE_SSL": "1",
           "CERES_EMAIL_FROM": "ceres@example.org", "CERES_PORTAL_URL": "https://portal.example.org/",
           "CERES_FIXITY_DAYS": "2", "CERES_FIXITY_RUNS_PER_DAY": "4"}
    result = _manage(env, *SHOW)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.core.mail.backends.smtp.EmailBackend", "smtp.example.org", "465",
                                     "False", "ceres@example.org", "https://portal.example.org", "8", "21600.0"]


def test_bad_email_settings_stop_start_up_with_their_name(tmp_path):
    base = {"CERES_DATA_DIR": str(tmp_path)}
    for env, message in (({"CERES_EMAIL_BACKEND": "smtp"}, "CERES_EMAIL_HOST must be set"),
                         ({"CERES_EMAIL_BACKEND": "carrier-pigeon"}, "CERES_EMAIL_BACKEND='carrier-pigeon' is not one"),
                         ({"CERES_EMAIL_USE_SSL": "1"}, "CERES_EMAIL_USE_TLS and CERES_EMAIL_USE_SSL cannot both"),
                         ({"CERES_PORTAL_URL": "portal.example.org"}, "CERES_PORTAL_URL has scheme"),
                         ({"CERES_FIXITY_DAYS": "0"}, "CERES_FIXITY_DAYS=0 is below the minimum 1")):
        result = _manage({**base, **env}, "check")
        assert result.returncode != 0 and message in result.stderr, (env, result.stderr[-500:])
