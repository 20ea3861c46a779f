"""Gunicorn settings for the CERES web process: `gunicorn -c infra/production/gunicorn.conf.py portal.wsgi`.

nginx in front buffers request bodies (uploads) and responses, so sync-style workers are never held by a
slow client; threads let a worker overlap database and S3 waits.
"""

import multiprocessing
import os

bind = "127.0.0.1:8000"
# WEB_CONCURRENCY is gunicorn's own convention for the number of worker processes.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() * 2 + 1))
worker_class = "gthread"
threads = 4
# Parsing a multi-gigabyte capture upload into its temporary file takes a while once nginx hands it on.
timeout = 300
graceful_timeout = 60
keepalive = 5
# Recycle workers now and then so a slow leak in a library cannot grow without bound.
max_requests = 2000
max_requests_jitter = 200
# X-Forwarded-Proto is trusted only from nginx on the same host.
forwarded_allow_ips = "127.0.0.1"
# gunicorn >= 25.1 would open a control socket under $HOME, which the systemd unit hides (ProtectHome);
# reloads go through systemd (SIGHUP) instead.
control_socket_disable = True
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("CERES_LOG_LEVEL", "INFO").lower()
