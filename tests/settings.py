"""Settings of the test suite: the project's settings, read from a pinned environment.

Pinned before buddy.settings reads the environment, so a developer's own ANTHROPIC_API_KEY or
BUDDY_* values never leak into the suite. DATABASE_URL and REDIS_URL are honoured: CI sets them to
run the suite on PostgreSQL and Redis. Subprocesses the tests start (daphne, workers) inherit this
environment and use buddy.settings.
"""

import os
import sys
import uuid

# A server process a test starts (daphne, a worker) loads these settings too: it inherits the test's
# environment as the test set it (e.g. the fake model server's URL) and must not pin it again.
if not os.environ.get("BUDDY_TEST_ENVIRONMENT"):
    for _name in list(os.environ):
        if _name.startswith(("ANTHROPIC_", "BUDDY_")):
            del os.environ[_name]
    os.environ["BUDDY_TEST_ENVIRONMENT"] = "1"
    os.environ["BUDDY_LLM"] = "offline"
    os.environ["BUDDY_SUMMARIES"] = "off"
    # Lexical search only, unless a test turns semantic search on (tests/memory/test_semantic.py).
    os.environ["BUDDY_SEMANTIC_SEARCH"] = "off"
    # The suite sends prompts faster than a person; tests/agent/test_limits.py sets its own limit.
    os.environ["BUDDY_PROMPTS_PER_MINUTE"] = "1000"
    os.environ["BUDDY_DB_POOL"] = "0"  # one database per run, created and dropped by the suite
    os.environ["BUDDY_TASKS_SYNC"] = "1"  # tasks run inline in the tests; test_tasks runs a real worker
    # A per-run prefix, so runs sharing one Redis never see each other's messages.
    os.environ["BUDDY_CHANNEL_PREFIX"] = f"buddy-test-{uuid.uuid4().hex[:8]}"
    if not os.environ.get("DATABASE_URL", "").strip():
        os.environ.pop("DATABASE_URL", None)

from buddy.settings import *  # noqa: E402, F403

# PBKDF2 is slow by design, and every test creates users; the tests are about conversations, not password storage.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Static files from the finders, with no collectstatic: also in the server processes tests start, where
# DEBUG is off as in production.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405

# The server relays frames the task worker writes to the database (realtime/relay.py); the test process
# itself never relays (its consumers' sockets are in this process), the daphne it starts does.
BUDDY_FRAME_RELAY = "pytest" not in sys.modules

# The suite's own threads (turn threads, the loop's executor) would keep connections to the test
# database open past the test, and PostgreSQL refuses to drop a database with open connections: the test
# process closes each connection after use. Server processes a test starts keep theirs, as deployed.
if "pytest" in sys.modules:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
