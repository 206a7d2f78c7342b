"""Settings, all read from the environment (see docs/platform.md, "Configuration").

With nothing set but `DEBUG=1` the platform runs on an embedded default: SQLite in the project
folder and Celery tasks executed eagerly in the request. A value that cannot be parsed stops
start-up, and so does `DEBUG` off without a `SECRET_KEY`: a deployment never runs on a key
that is in the source. The TLS settings (HSTS, SSL redirect, Secure cookies) are off unless set,
so that plain HTTP on 127.0.0.1 works; production sets them (docs/platform.md lists the set).
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from yoco.lib.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set: set SECRET_KEY (a long random string, e.g. from "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`), or DEBUG=1 for "
            "development on this machine only"
        )
    SECRET_KEY = "yoco-insecure-development-key-only-with-DEBUG-1"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# TLS. Behind a proxy that terminates TLS, SECURE_PROXY_SSL_HEADER names the header it sets
# (e.g. HTTP_X_FORWARDED_PROTO) so that requests it forwarded count as HTTPS.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
_proxy_header = env_str("SECURE_PROXY_SSL_HEADER", "")
SECURE_PROXY_SSL_HEADER = (_proxy_header, "https") if _proxy_header else None
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_api_key",
    "drf_spectacular",
    "csp",
    "axes",
    "yoco.accounts",
    "yoco.events",
    "yoco.guarantee",
    "yoco.notifications",
    "yoco.portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

# Content-Security-Policy: scripts only from our own origin (the portal has no inline script:
# its charts' figures are JSON data blocks read by static/portal/portal.js). Styles allow
# 'unsafe-inline' because plotly.js sets style attributes while it draws, and the dashboard's
# meters are sized by one; a style cannot run code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# Login throttling (django-axes) for the portal's and the admin's login: after
# AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is locked
# out, the right password included, until AXES_COOLOFF_MINUTES have passed.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "yoco.urls"
WSGI_APPLICATION = "yoco.wsgi.application"

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
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
except Exception as exc:  # dj_database_url raises several types for a malformed URL
    raise ImproperlyConfigured(f"DATABASE_URL={DATABASE_URL!r} cannot be parsed: {exc}") from exc
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Ingest and the Celery-eager fold write from several threads under the dev server.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# `manage.py collectstatic` writes here; WhiteNoise serves it (hashed names, cached forever).
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
STATICFILES_DIRS = [BASE_DIR / "yoco" / "static"] if (BASE_DIR / "yoco" / "static").exists() else []

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "portal:home"
LOGOUT_REDIRECT_URL = "login"

# Celery: with no broker, tasks run eagerly inside the request (the embedded default).
CELERY_TASK_ALWAYS_EAGER = not env_str("CELERY_BROKER_URL", "")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or "memory://"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_BEAT_SCHEDULE = {
    "close-years": {"task": "yoco.guarantee.tasks.close_years_task", "schedule": 3600.0},
    "expire-pending": {"task": "yoco.guarantee.tasks.expire_pending_task", "schedule": 60.0},
    # Stored events a crash or a failed task left unprocessed: found within 30 s (SPEC 3).
    "process-pending": {"task": "yoco.guarantee.tasks.process_pending_task", "schedule": 30.0},
    # Notifications whose task was lost or whose worker died mid-send (lease run out).
    "deliver-notifications": {
        "task": "yoco.notifications.tasks.deliver_due_notifications_task",
        "schedule": 30.0,
    },
}

# Notifications (SPEC 4.8): e-mail through Django's mail framework, printed to the console
# unless EMAIL_HOST names an SMTP server; webhook retries back off exponentially.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", "")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "YOCO <notifications@yoco.invalid>")
YOCO_NOTIFY_MAX_ATTEMPTS = env_int("YOCO_NOTIFY_MAX_ATTEMPTS", 8, minimum=1)
YOCO_NOTIFY_BACKOFF_SECONDS = env_int("YOCO_NOTIFY_BACKOFF_SECONDS", 30, minimum=0)
# A send waits this long for the receiver; a claim is held three times as long.
YOCO_NOTIFY_SEND_TIMEOUT_SECONDS = env_int("YOCO_NOTIFY_SEND_TIMEOUT_SECONDS", 10, minimum=1)

# Ingest: the largest request body and the most events one request may carry (413 past them).
YOCO_INGEST_MAX_BYTES = env_int("YOCO_INGEST_MAX_BYTES", 5 * 1024 * 1024, minimum=1024)
YOCO_INGEST_MAX_EVENTS = env_int("YOCO_INGEST_MAX_EVENTS", 5000, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = YOCO_INGEST_MAX_BYTES + 1

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "yoco.accounts.auth.ReadKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "YOCO platform API",
    "DESCRIPTION": "Event ingest, guarantee status and billing export (SPEC section 5).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema is public (SPEC 5): no key needed, and any key sent is not looked at.
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
