"""CERES Portal settings: one file, every knob read from the environment.

Defaults need no server (SQLite, a Celery worker on the ``filesystem://`` broker, local folders
behind Django's storage API). Production sets ``DATABASE_URL``, ``CELERY_BROKER_URL``, the S3
variables, ``CERES_SECRET_KEY``, ``CERES_ALLOWED_HOSTS`` and ``CERES_HTTPS=1``; see
``infra/production/env.example``.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from exporter import limits as source_limits
from portal.env import env_bool, env_choice, env_int, env_key, env_list, env_rate, env_str, env_url, kept_secret

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("CERES_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("CERES_DEBUG", False)
HTTPS = env_bool("CERES_HTTPS", False)


def _secret_key() -> str:
    key = env_str("CERES_SECRET_KEY")
    if key:
        if len(key) < 50 or len(set(key)) < 5:
            raise ImproperlyConfigured("CERES_SECRET_KEY must be at least 50 characters with 5 distinct ones")
        return key
    # No key given: keep one per data folder, so sessions survive restarts on a dev machine.
    return kept_secret(DATA_DIR / "secret-key", lambda: secrets.token_urlsafe(64))


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("CERES_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CERES_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",  # second-factor recovery codes (only their hashes are kept)
    "portal.core",
    "portal.audit",
    "portal.studies",
    "portal.access",
    "portal.recordings",
    "portal.faces",
    "portal.releases",
    "portal.research",
    "portal.fixity",
    "portal.notifications",
    # After axes: its failed-login handler has marked a locked-out request when ours audits it.
    "portal.accounts",
    "portal.demo",  # demo data and scale seeding: above every app
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "portal.accounts.middleware.AuditActorMiddleware",
    "portal.accounts.middleware.SecondFactorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "portal.core.middleware.AdminScopeMiddleware",
    "portal.core.integers.ApiLookupMiddleware",
    # Last, as axes requires: turns a locked-out login attempt into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
CSRF_FAILURE_VIEW = "portal.core.views.csrf_failure"  # the portal's 403 page instead of Django's bare one
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.accounts.context_processors.header",
                "portal.fixity.context_processors.alert_banner",
                "portal.notifications.context_processors.unread",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql", "sqlite"))
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "portal.sqlite3",
            # The web server and the Celery worker share the file: wait for locks instead of failing,
            # and take the write lock at BEGIN so two writers never deadlock on an upgrade.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Axes first: it refuses any attempt from a locked-out user or address before a password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "portal.accounts.backends.ModelBackend",  # Django's, reading the user with a query compiled once
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "portal" / "static"]
# Serve straight from the app folders when `collectstatic` has not run (dev server, tests).
WHITENOISE_USE_FINDERS = True

# --- storage --------------------------------------------------------------------------------
# Three private storages: capture sources (and consent documents), episode shards, releases.
STORAGE_BACKEND = env_choice("CERES_STORAGE", "local", ("local", "s3"))
# Every object link the portal gives out (S3 presigned, or signed by the portal on local folders) expires
# after this many seconds.
CERES_DOWNLOAD_LINK_SECONDS = env_int("CERES_DOWNLOAD_LINK_SECONDS", 300, minimum=10, maximum=3600)
# Where the researchers' client's wheel is built (python manage.py client_wheel) and served from (/client/).
CERES_CLIENT_DIR = Path(env_str("CERES_CLIENT_DIR", str(DATA_DIR / "client")))
STORAGE_NAMES = ("captures", "shards", "releases")


def _storage(name: str) -> dict:
    if STORAGE_BACKEND == "local":
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(DATA_DIR / "storage" / name), "base_url": None},
        }
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str(f"CERES_S3_BUCKET_{name.upper()}", f"ceres-{name}"),
            "endpoint_url": env_url("CERES_S3_ENDPOINT_URL", schemes=("http", "https")),
            "access_key": env_str("CERES_S3_ACCESS_KEY_ID", required=True),
            "secret_key": env_str("CERES_S3_SECRET_ACCESS_KEY", required=True),
            "region_name": env_str("CERES_S3_REGION", "us-east-1"),
            "addressing_style": env_choice("CERES_S3_ADDRESSING_STYLE", "path", ("path", "virtual")),
            "signature_version": "s3v4",
            "default_acl": "private",
            "querystring_auth": True,
            "querystring_expire": CERES_DOWNLOAD_LINK_SECONDS,
            "file_overwrite": True,  # a PUT replaces whole: no existence check before each (storage.put)
        },
    }


STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "storage" / "default"), "base_url": None},
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    **{name: _storage(name) for name in STORAGE_NAMES},
}
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # larger uploads stream to a temporary file
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = env_str("CERES_UPLOAD_TEMP_DIR")

# --- Celery ---------------------------------------------------------------------------------
# A host name (which the filesystem transport ignores) keeps kombu from warning that none was supplied.
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", "filesystem://localhost/",
                            schemes=("filesystem", "redis", "rediss", "amqp", "amqps", "memory"))
BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {"visibility_timeout": env_int("CERES_TASK_VISIBILITY_TIMEOUT", 3 * 3600, minimum=10)}
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Two queues: the default one (ingest, inbox, purges: short) and a heavy one (export, verification: long,
# CPU and I/O bound), so a burst of exports never delays an ingest. Deployments (and tests) sharing one broker
# keep their tasks apart by the queue name, which also names the heavy queue ("<name>-heavy").
CELERY_TASK_DEFAULT_QUEUE = env_str("CERES_TASK_QUEUE", "ceres")
CERES_HEAVY_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-heavy"
# A worker started without --queues takes both; production runs one worker per queue (infra/production/).
# Each queue is bound by its own name: a task routed to one never reaches the other.
CELERY_TASK_QUEUES = [Queue(name, Exchange(name), routing_key=name)
                      for name in (CELERY_TASK_DEFAULT_QUEUE, CERES_HEAVY_QUEUE)]
CELERY_TASK_ROUTES = {name: {"queue": CERES_HEAVY_QUEUE}
                      for name in ("recordings.export_recording", "recordings.verify_episode", "faces.detect_episode",
                                   "releases.inspect_request", "releases.publish_release", "research.build_dataset",
                                   "audit.verify_chain", "fixity.run_slice")}
# Leased jobs (portal/core/leases.py): how long each kind of job's lease lasts without a heartbeat, after which a
# killed attempt's job is taken over (and the broker's visibility timeout has passed). A fixity run's is long: one
# very large object is hashed between two heartbeats.
CERES_EXPORT_LEASE_SECONDS = env_int("CERES_EXPORT_LEASE_SECONDS", 600, minimum=1)
CERES_RELEASE_LEASE_SECONDS = env_int("CERES_RELEASE_LEASE_SECONDS", 600, minimum=1)
CERES_DATASET_LEASE_SECONDS = env_int("CERES_DATASET_LEASE_SECONDS", 600, minimum=1)
CERES_WITHDRAWAL_LEASE_SECONDS = env_int("CERES_WITHDRAWAL_LEASE_SECONDS", 600, minimum=1)
CERES_FIXITY_LEASE_SECONDS = env_int("CERES_FIXITY_LEASE_SECONDS", 3600, minimum=1)
CERES_FACES_LEASE_SECONDS = env_int("CERES_FACES_LEASE_SECONDS", 600, minimum=1)
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# Signed checkpoints of the audit chain's head (seq, hash, time), written to the releases storage under this prefix
# every so many minutes; `audit_verify` checks the chain against the newest (docs/architecture.md, "Audit log").
CERES_AUDIT_CHECKPOINT_MINUTES = env_int("CERES_AUDIT_CHECKPOINT_MINUTES", 60, minimum=1, maximum=24 * 60)
# And a few seconds after any event commits (debounced: one pending at a time), so the newest events can be cut
# unseen for at most this long while a default-queue worker runs (docs/security.md).
CERES_AUDIT_CHECKPOINT_DELAY_SECONDS = env_int("CERES_AUDIT_CHECKPOINT_DELAY_SECONDS", 5, minimum=1, maximum=3600)
CERES_AUDIT_CHECKPOINT_PREFIX = env_str("CERES_AUDIT_CHECKPOINT_PREFIX", "audit/checkpoints").strip("/") + "/"
CELERY_BEAT_SCHEDULE: dict = {
    "recordings-poll-inbox": {"task": "recordings.poll_inbox", "schedule": 60.0},
    "recordings-purge-audio": {"task": "recordings.purge_expired_audio", "schedule": 3600.0},
    "recordings-reverify-shards": {"task": "recordings.reverify_shards", "schedule": 24 * 3600.0},
    "audit-write-checkpoint": {"task": "audit.write_checkpoint", "schedule": CERES_AUDIT_CHECKPOINT_MINUTES * 60.0},
    "audit-verify-chain": {"task": "audit.verify_chain", "schedule": 24 * 3600.0},
    # Researchers told 14 and 3 days before their access ends, and once it has (portal/research/notices.py).
    "notifications-access-reminders": {"task": "notifications.access_reminders", "schedule": 24 * 3600.0},
}
# Fixity (docs/fixity.md): every stored shard and released object is re-hashed, and every folder listed for orphans,
# once every CERES_FIXITY_DAYS days, a slice at a time: CERES_FIXITY_RUNS_PER_DAY runs a day, each checking one of
# days * runs-per-day slices.
CERES_FIXITY_DAYS = env_int("CERES_FIXITY_DAYS", 7, minimum=1, maximum=366)
CERES_FIXITY_RUNS_PER_DAY = env_int("CERES_FIXITY_RUNS_PER_DAY", 24, minimum=1, maximum=1440)
CELERY_BEAT_SCHEDULE["fixity-run-slice"] = {"task": "fixity.run_slice",
                                            "schedule": 24 * 3600.0 / CERES_FIXITY_RUNS_PER_DAY}

# --- email -----------------------------------------------------------------------------------
# Alerts are emailed to the study's coordinators and ethics officers. The console backend (the default) writes
# each message to the worker's log; smtp sends it through CERES_EMAIL_HOST.
EMAIL_BACKEND = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
}[env_choice("CERES_EMAIL_BACKEND", "console", ("console", "smtp"))]
EMAIL_HOST = env_str("CERES_EMAIL_HOST", "localhost", required=EMAIL_BACKEND.endswith("smtp.EmailBackend"))
EMAIL_PORT = env_int("CERES_EMAIL_PORT", 587, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("CERES_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("CERES_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("CERES_EMAIL_USE_TLS", True)  # STARTTLS on the submission port
EMAIL_USE_SSL = env_bool("CERES_EMAIL_USE_SSL", False)  # TLS from the first byte (port 465)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("CERES_EMAIL_USE_TLS and CERES_EMAIL_USE_SSL cannot both be on; set one to 0")
EMAIL_TIMEOUT = env_int("CERES_EMAIL_TIMEOUT", 30, minimum=1)
DEFAULT_FROM_EMAIL = env_str("CERES_EMAIL_FROM", "CERES Portal <ceres@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# The portal's address as its users reach it, for links in emails (no trailing slash).
CERES_PORTAL_URL = env_url("CERES_PORTAL_URL", "http://127.0.0.1:8000", schemes=("http", "https")).rstrip("/")

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "portal.accounts.authentication.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Counted per user in the cache (CERES_CACHE_URL: shared by every web process in production).
    # Anonymous requests are refused before throttling; tokens are 256-bit random, so guessing is no path.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_rate("CERES_API_RATE", "1200/hour"),
        "token-create": env_rate("CERES_API_TOKEN_CREATE_RATE", "10/hour"),
    },
    # Keyset pagination (?cursor=) on every list; each view names its order in `keyset` (docs/architecture.md).
    "DEFAULT_PAGINATION_CLASS": "portal.core.pagination.KeysetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.core.errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CERES Portal API",
    "DESCRIPTION": "Study registry, recordings, episodes, releases and researcher access of the CERES portal.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI from the portal's own static files (drf-spectacular-sidecar), never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RecordingStateEnum": "portal.recordings.models.Recording.State",
        "ReleaseRequestStateEnum": "portal.releases.models.ReleaseRequest.State",
        "RecordingViaEnum": "portal.recordings.models.Recording.Via",
        "LinkViaEnum": "portal.research.models.IssuedLink.Via",
        "AccessRequestStateEnum": "portal.research.models.AccessRequest.State",
        "DatasetStateEnum": "portal.research.models.Dataset.State",
        "AlertStateEnum": "portal.fixity.models.Alert.State",
        "AlertKindEnum": "portal.fixity.models.Alert.Kind",
        "FixityProblemKindEnum": "portal.fixity.models.FixityProblem.Kind",
    },
}

# --- cache ----------------------------------------------------------------------------------
# API throttling counts requests here. Several web processes must share one: Redis in production.
CACHE_URL = env_url("CERES_CACHE_URL", schemes=("redis", "rediss"))
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- security -------------------------------------------------------------------------------
# Django's database sessions, read with a query compiled once per process.
SESSION_ENGINE = "portal.accounts.sessions"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_AGE = env_int("CERES_SESSION_SECONDS", 8 * 3600, minimum=300)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("CERES_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# Content-Security-Policy on every response: scripts, styles, fonts and images from the portal only,
# no inline script or style, no framing. Swagger UI draws its icons as data: images.
def _download_origins() -> list[str]:
    """Where signed download links point besides the portal: the releases bucket's S3 origin."""
    if STORAGE_BACKEND != "s3":
        return []
    options = STORAGES["releases"]["OPTIONS"]
    endpoint = options["endpoint_url"]
    if endpoint is None:  # AWS itself: the bucket's host depends on the region
        return ["https://*.amazonaws.com"]
    parts = urlsplit(endpoint)
    host = parts.netloc if options["addressing_style"] == "path" else f"{options['bucket_name']}.{parts.netloc}"
    return [f"{parts.scheme}://{host}"]


CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        # A download button posts to the portal, which answers with a redirect to the object's signed link:
        # on S3 that link is on the storage's origin, which the form's redirect must be allowed to reach.
        "form-action": ["'self'", *_download_origins()],
        "frame-ancestors": ["'none'"],
    },
}

# Login throttling (django-axes): after CERES_LOGIN_FAILURE_LIMIT wrong passwords in a row for one
# username, or from one address, further attempts are refused for CERES_LOGIN_LOCKOUT_MINUTES, even
# with the right password. Every failure, lockout and unlock is an audit event (portal.accounts).
AXES_FAILURE_LIMIT = env_int("CERES_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CERES_LOGIN_LOCKOUT_MINUTES", 30, minimum=1))


def _lockout_parameters() -> list:
    """``username,ip_address``: each counted alone; ``username+ip_address``: the pair counted together."""
    parameters: list = []
    for item in env_list("CERES_LOGIN_LOCKOUT_BY", ["username", "ip_address"]):
        parts = item.split("+")
        unknown = sorted(set(parts) - {"username", "ip_address", "user_agent"})
        if unknown:
            raise ImproperlyConfigured(f"CERES_LOGIN_LOCKOUT_BY: unknown {', '.join(unknown)}; use username, "
                                       "ip_address or user_agent, joined by + to count a combination")
        parameters.append(parts if len(parts) > 1 else item)
    return parameters


AXES_LOCKOUT_PARAMETERS = _lockout_parameters()
# A successful sign-in clears the failures of that username only, not those of others from its address.
AXES_RESET_ON_SUCCESS = True
AXES_HANDLER = "portal.accounts.lockout.UsernameResetHandler"
# Attempts during a lockout are refused without extending it (and without guessing a password).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "portal.accounts.network.client_ip"
AXES_VERBOSE = False
# The portal's own admin pages for failed logins: unlocking there goes through the audited service.
AXES_ENABLE_ADMIN = False
# Number of reverse proxies (nginx: 1) whose X-Forwarded-For entries are trusted for the client address.
CERES_TRUSTED_PROXIES = env_int("CERES_TRUSTED_PROXIES", 0, minimum=0, maximum=5)

# Second factor (django-otp, TOTP). When on, ethics officers and staff must pass it at every login.
CERES_REQUIRE_2FA = env_bool("CERES_REQUIRE_2FA", False)
OTP_TOTP_ISSUER = env_str("CERES_TOTP_ISSUER", "CERES Portal")
# With CERES_REQUIRE_2FA, those it requires set up their second factor with a site administrator's one-time
# enrolment code (the password alone does not open enrolment); how long such a code lasts.
CERES_ENROLMENT_CODE_HOURS = env_int("CERES_ENROLMENT_CODE_HOURS", 72, minimum=1, maximum=24 * 30)
# Recovery codes: how many are made at enrolment (and each time they are made again); each works once.
CERES_RECOVERY_CODES = env_int("CERES_RECOVERY_CODES", 10, minimum=1, maximum=50)

# Email address and password (portal.accounts): how long a confirmation link of a new address and a password-reset
# link last; how many confirmation links one user, and reset requests one address and one client address, may ask
# for an hour (more are refused until the hour is over).
CERES_EMAIL_CONFIRM_HOURS = env_int("CERES_EMAIL_CONFIRM_HOURS", 24, minimum=1, maximum=24 * 14)
PASSWORD_RESET_TIMEOUT = 3600 * env_int("CERES_PASSWORD_RESET_HOURS", 1, minimum=1, maximum=72)
CERES_EMAIL_CONFIRMATIONS_PER_HOUR = env_int("CERES_EMAIL_CONFIRMATIONS_PER_HOUR", 5, minimum=1)
CERES_PASSWORD_RESETS_PER_ADDRESS = env_int("CERES_PASSWORD_RESETS_PER_ADDRESS", 3, minimum=1)
CERES_PASSWORD_RESETS_PER_CLIENT = env_int("CERES_PASSWORD_RESETS_PER_CLIENT", 10, minimum=1)

# API tokens: their lifetime unless the user picks a shorter one, and the most one user may hold.
CERES_TOKEN_DAYS = env_int("CERES_TOKEN_DAYS", 90, minimum=1, maximum=366)
CERES_TOKENS_PER_USER = env_int("CERES_TOKENS_PER_USER", 10, minimum=1)

# The key that wraps every recording's audio key. Without it (dev machines) one is kept in the data folder, like
# the secret key.
CERES_AUDIO_MASTER_KEY = env_key("CERES_AUDIO_MASTER_KEY", size=32, kept_in=DATA_DIR / "audio-master-key")
# A folder polled by Celery beat for capture sources: <inbox>/<study code>/<folder or .zip>. With S3 storage
# the inbox is the prefix "inbox/<study code>/" of the captures bucket instead.
CERES_INBOX_DIR = env_str("CERES_INBOX_DIR", str(DATA_DIR / "inbox"))
# Bounds on one capture source: the exporter's own (exporter/limits.py) unless a deployment lowers them.
CERES_MAX_SOURCE_BYTES = env_int("CERES_MAX_SOURCE_BYTES", source_limits.MAX_SOURCE_BYTES, minimum=1024,
                                 maximum=source_limits.MAX_SOURCE_BYTES)
CERES_MAX_SOURCE_ENTRIES = env_int("CERES_MAX_SOURCE_ENTRIES", source_limits.MAX_SOURCE_ENTRIES, minimum=3,
                                   maximum=source_limits.MAX_SOURCE_ENTRIES)
# How many times its own size a capture ZIP may expand to (beyond a 4 MiB allowance): refused before, or as soon
# as, a member passes it.
CERES_MAX_SOURCE_EXPANSION = env_int("CERES_MAX_SOURCE_EXPANSION", source_limits.MAX_EXPANSION_RATIO, minimum=1,
                                     maximum=source_limits.MAX_EXPANSION_RATIO)

# The Ed25519 key that signs release manifests: its 32-byte private seed. Without it (dev machines) one is kept in
# the data folder, like the secret key. A deployment sets it (`check --deploy` says so): every web and worker
# process must sign with the same key.
CERES_SIGNING_KEY = env_key("CERES_SIGNING_KEY", size=32, kept_in=DATA_DIR / "signing-key",
                            what="a 32-byte Ed25519 seed")
CERES_SIGNING_KEY_FROM_ENV = env_str("CERES_SIGNING_KEY") is not None
# The key of the audit chain's keyed hashes (HMAC-SHA256; docs/architecture.md, "Audit log"): base64 of 32 bytes.
# It lives here, not in the database, so a database-only attacker cannot re-make an event's hash. Every web and
# worker process must hold the same key (`check --deploy` warns without the variable); without it (dev machines)
# one is kept in the data folder, like the secret key.
CERES_AUDIT_KEY = env_key("CERES_AUDIT_KEY", size=32, kept_in=DATA_DIR / "audit-key")
CERES_AUDIT_KEY_FROM_ENV = env_str("CERES_AUDIT_KEY") is not None
# Releases: how recent a shard's receipt verification must be for the gate, how long a second factor
# counts as fresh for an approval and a running release's copies at once.
CERES_RELEASE_RECEIPT_MAX_AGE_HOURS = env_int("CERES_RELEASE_RECEIPT_MAX_AGE_HOURS", 48, minimum=1)
CERES_APPROVAL_SECOND_FACTOR_MINUTES = env_int("CERES_APPROVAL_SECOND_FACTOR_MINUTES", 10, minimum=1, maximum=720)
# How many objects a release copies at once (bench/release.py measures the choice).
CERES_RELEASE_THREADS = env_int("CERES_RELEASE_THREADS", 8, minimum=1, maximum=64)
# On S3, an object larger than this is copied server-side in parts of this size (UploadPartCopy) rather than by
# one CopyObject (S3 takes at most 5 GiB in one; a part at least 5 MiB); core/storage.copy.
CERES_S3_COPY_PART_BYTES = env_int("CERES_S3_COPY_PART_BYTES", 256 * 1024 * 1024, minimum=5 * 1024 * 1024,
                                   maximum=5 * 1024 * 1024 * 1024)
# On S3, a shard object larger than this whose MD5 the verification job recorded is copied by the gateway without
# a read; one no larger is read, checked and stored by a PUT (on Swift quicker for small objects: bench/release.py,
# docs/releases.md). 0 copies every such object without a read.
CERES_S3_VERIFIED_COPY_MIN_BYTES = env_int("CERES_S3_VERIFIED_COPY_MIN_BYTES", 1024 * 1024, minimum=0,
                                           maximum=5 * 1024 * 1024 * 1024)
# Researcher access: the longest grant a coordinator or ethics officer may give at once; how long a download
# link lives (S3 presigned, or a portal link on local storage); how many links one request may ask for; the
# largest one-dataset download.
CERES_ACCESS_MAX_DAYS = env_int("CERES_ACCESS_MAX_DAYS", 365, minimum=1, maximum=3660)
CERES_LINKS_PER_REQUEST = env_int("CERES_LINKS_PER_REQUEST", 1000, minimum=1, maximum=10000)
CERES_DATASET_MAX_EPISODES = env_int("CERES_DATASET_MAX_EPISODES", 1000, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice("CERES_LOG_LEVEL", "INFO",
                                                          ("DEBUG", "INFO", "WARNING", "ERROR"))},
}
