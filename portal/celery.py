"""The Celery application. Tasks live in each app's ``tasks.py``."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _make_broker_folders(sender: Celery, **_kwargs) -> None:
    # The filesystem broker (the zero-server default) needs its folders before the first message.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        folder = options.get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
