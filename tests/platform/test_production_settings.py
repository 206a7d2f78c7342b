"""Production settings: no start without a SECRET_KEY when DEBUG is off, and `check --deploy`
clean with exactly the production variables docs/platform.md documents."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TLS_WARNINGS = {"security.W004", "security.W008", "security.W012", "security.W016"}


def documented_production_variables() -> dict[str, str]:
    """The `sh` block under docs/platform.md's "### Production", with a real key put in."""
    text = (ROOT / "docs" / "platform.md").read_text()
    block = re.search(r"### Production\n.*?```sh\n(.*?)```", text, re.S).group(1)
    variables = dict(line.split("=", 1) for line in block.strip().splitlines())
    assert variables["SECRET_KEY"].startswith("<")  # a placeholder in the docs
    variables["SECRET_KEY"] = secrets.token_urlsafe(50)
    return variables


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    unset = ("SECRET_KEY", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")  # the browser tests set the last
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "yoco.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_debug_off_without_a_secret_key_does_not_start():
    result = manage("check", DEBUG="0")
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in result.stderr


def test_debug_on_without_a_secret_key_starts_for_development():
    result = manage("check", DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_check_deploy_is_clean_with_the_documented_production_variables():
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    **documented_production_variables())  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_is_missing_without_the_tls_variables():
    variables = documented_production_variables()
    plain = {
        k: v for k, v in variables.items() if not k.startswith(("SECURE_", "SESSION_", "CSRF_C"))
    }
    result = manage("check", "--deploy", "--fail-level", "WARNING", **plain)
    assert result.returncode != 0
    assert TLS_WARNINGS <= set(re.findall(r"security\.W\d+", result.stdout + result.stderr))
