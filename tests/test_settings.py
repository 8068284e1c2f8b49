"""What `make run` serves with when nothing is configured: DEBUG off, a secret key of its own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from devtools.servers import ROOT, daphne

PRINT_SETTINGS = "from django.conf import settings; print(settings.DEBUG); print(settings.SECRET_KEY)"


def settings_of_a_fresh_start(var_dir) -> tuple[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DJANGO_SETTINGS_MODULE": "buddy.settings",
        "BUDDY_VAR_DIR": str(var_dir),
    }
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {PRINT_SETTINGS}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    debug, key = result.stdout.split()
    return debug, key


def test_debug_is_off_and_the_secret_key_is_generated_once_and_kept_private(tmp_path):
    debug, key = settings_of_a_fresh_start(tmp_path)
    assert debug == "False"
    assert len(key) >= 50 and "insecure" not in key
    key_file = tmp_path / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text().strip() == key
    assert settings_of_a_fresh_start(tmp_path) == ("False", key)  # the next start keeps it: sessions survive
    assert settings_of_a_fresh_start(tmp_path / "elsewhere")[1] != key  # never a fixed value


@pytest.mark.django_db(transaction=True)
def test_a_bad_host_gets_a_short_400_not_a_debug_page():
    with daphne() as url:
        request = urllib.request.Request(f"{url}/admin/", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=10)
    body = answer.value.read()
    assert answer.value.code == 400
    assert len(body) < 1000 and b"Traceback" not in body and b"DisallowedHost" not in body


@pytest.mark.parametrize("debug", ["0", "1"])
def test_a_forbidden_admin_page_logs_one_traceback(tmp_path, debug):
    """Django's own console handler (under DEBUG) and the root's printed each django.* record twice."""
    log_a_403 = (
        "import django, logging; django.setup()\n"
        "from django.core.exceptions import PermissionDenied\n"
        "try:\n    raise PermissionDenied\n"
        "except PermissionDenied:\n"
        "    logging.getLogger('django.request').warning('Forbidden (Permission denied): /admin/', exc_info=True)\n"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DJANGO_SETTINGS_MODULE": "buddy.settings",
        "BUDDY_VAR_DIR": str(tmp_path),
        "DJANGO_DEBUG": debug,
    }
    result = subprocess.run(
        [sys.executable, "-c", log_a_403], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Traceback") == 1, result.stderr


def database_settings_of(var_dir, **env: str) -> dict:
    script = "import json; from django.conf import settings; print(json.dumps(settings.DATABASES['default']))"
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "DJANGO_SETTINGS_MODULE": "buddy.settings",
            "BUDDY_VAR_DIR": str(var_dir),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_connections_are_kept_and_checked_and_pooled_on_postgresql_when_asked(tmp_path):
    sqlite = database_settings_of(tmp_path)
    assert (sqlite["CONN_MAX_AGE"], sqlite["CONN_HEALTH_CHECKS"]) == (600, True)
    postgres = "postgres://buddy@127.0.0.1:5432/buddy"
    kept = database_settings_of(tmp_path, DATABASE_URL=postgres, BUDDY_DB_CONN_MAX_AGE="60", BUDDY_DB_POOL="0")
    assert (kept["CONN_MAX_AGE"], kept["CONN_HEALTH_CHECKS"]) == (60, True) and "pool" not in kept["OPTIONS"]
    pooled = database_settings_of(tmp_path, DATABASE_URL=postgres, BUDDY_DB_POOL="12")
    assert pooled["CONN_MAX_AGE"] == 0  # a pooled connection goes back to the pool when Django closes it
    assert pooled["OPTIONS"]["pool"]["max_size"] == 12
    assert database_settings_of(tmp_path, DATABASE_URL=postgres)["OPTIONS"]["pool"]["max_size"] == 20
    assert database_settings_of(tmp_path, BUDDY_DB_POOL="12")["OPTIONS"].get("pool") is None  # SQLite: no pool
