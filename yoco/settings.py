"""Settings, all read from the environment (see docs/configuration.md).

With nothing set the platform runs on an embedded default: SQLite in the project folder and
Celery tasks executed eagerly in the request. A value that cannot be parsed stops start-up.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from yoco.lib.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("YOCO_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("SECRET_KEY is required when YOCO_REQUIRE_SECRET_KEY is set")
    # A development-only key: fine for the embedded demo, never for a deployment.
    SECRET_KEY = "yoco-insecure-development-key-set-SECRET_KEY-in-production"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])

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
    "yoco.accounts",
    "yoco.events",
    "yoco.guarantee",
    "yoco.portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
STATIC_ROOT = BASE_DIR / "staticfiles"
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
    "expire-pending": {"task": "yoco.events.tasks.expire_pending_task", "schedule": 60.0},
    # Stored events a crash or a failed task left unprocessed: found within 30 s (SPEC 3).
    "process-pending": {"task": "yoco.events.tasks.process_pending_task", "schedule": 30.0},
}

# Ingest: the largest request body and the most events one request may carry (413 past them).
YOCO_INGEST_MAX_BYTES = env_int("YOCO_INGEST_MAX_BYTES", 5 * 1024 * 1024, minimum=1024)
YOCO_INGEST_MAX_EVENTS = env_int("YOCO_INGEST_MAX_EVENTS", 5000, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = YOCO_INGEST_MAX_BYTES + 1

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "yoco.lib.auth.ReadKeyAuthentication",
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
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
