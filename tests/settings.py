"""Settings for the tests and the in-process benchmarks: production's (yoco.settings) with two
choices of their own.

* A SECRET_KEY for this run when none is set (yoco.settings refuses to start without one),
  put in the environment so that the servers and commands tests start inherit it.
* Static files through the plain storage: production's manifest storage needs
  `collectstatic` first (tests/platform/test_static_files.py runs that path under gunicorn).
"""

import os
import secrets

os.environ.setdefault("SECRET_KEY", f"tests-{secrets.token_urlsafe(48)}")

from yoco.settings import *  # noqa: E402, F403

STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
