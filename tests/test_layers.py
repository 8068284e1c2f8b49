"""The layers of docs/architecture.md, checked on every first-party module with `ast`:

- an app imports only from its own layer's app or lower ones (never a higher layer, never a peer);
- a first-party import inside a function carries a comment on its line or the line above saying why
  (start-up cost, an optional dependency, Django not set up yet) — never a hidden cycle;
- a plain package (`lib`) imports neither Django nor any first-party module but its own;
- a migration imports no first-party module at all: it is frozen history, run against historical
  models, and carries its own SQL and code (editing a live module must never change what an old
  migration does).
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Higher numbers sit higher; an app may import its own layer's modules and any lower layer's.
LAYERS: dict[str, int] = {
    "buddy": 4,  # the project: settings, urls, asgi, the NinjaAPI and its exception handlers, auth
    "web": 3,  # transports: the page, the chat WebSocket consumer, routing
    "agent": 2,  # the turn, its request, model clients, cache policy, tools, schedules, tasks, limits
    "canvas": 1,  # canvas state (a domain: knows conversations only; returns what changed, pushes nothing)
    "memory": 1,  # summaries, search, the memory tools (a domain: knows conversations only)
    "realtime": 1,  # frame schemas, push, relay, the channel layer, socket signals (knows conversations only)
    "conversations": 0,  # the archive: agents, sessions, messages, the window, content, ChatRef, errors, ModelCall
    "lib": -1,  # plain Python every floor shares (the tool-input base): no Django, no app
    "textsearch": -1,  # terms, cues, ranking arithmetic of history search (memory.search adapts it)
    "embeddings": -1,  # the sentence encoder and 8-bit vector arithmetic (memory.semantic adapts it)
}
# Plain packages: they import no Django and no first-party module but their own.
PLAIN_PACKAGES = {"lib", "textsearch", "embeddings"}
_ISORT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["isort"]
FIRST_PARTY = set(_ISORT["known-first-party"])

# Apps on the domain floor (a peer of every other one there: tested above). For realtime this is the
# rule that keeps the transport out of the domains: it imports no domain app, so what a domain
# changed is shown by its caller.
DOMAIN_APPS = {app for app, layer in LAYERS.items() if layer == 1}


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: within the same package, never across apps
        return []
    return [node.module or ""]


def _function_local(tree: ast.Module) -> dict[int, int]:
    """The import nodes that sit inside a function (at any depth), by id, each with the line of the first
    import of the run of imports it belongs to (one comment above a run of imports covers the run)."""
    first_line: dict[int, int] = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            for field in ("body", "orelse", "finalbody", "handlers"):
                statements = getattr(node, field, None)
                if not isinstance(statements, list):
                    continue
                run_start = None
                for statement in statements:
                    if isinstance(statement, ast.Import | ast.ImportFrom):
                        run_start = run_start or statement.lineno
                        first_line[id(statement)] = run_start
                    else:
                        run_start = None
    return first_line


def _has_comment(lines: list[str], lineno: int, run_start: int) -> bool:
    """A `#` comment on the import's line (after the code), or alone on the line above its run."""
    above = lines[run_start - 2].strip() if run_start >= 2 else ""
    return "#" in lines[lineno - 1] or above.startswith("#")


def module_problems(path: str, source: str) -> list[Problem]:
    """What is wrong with the imports of one module; `path` is relative to the repository root."""
    app = path.split("/", 1)[0]
    own_layer = LAYERS[app]
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    local = _function_local(tree)
    problems: list[Problem] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for module in _imported_modules(node):
            target = module.split(".", 1)[0]
            if app in PLAIN_PACKAGES and (target == "django" or (target in FIRST_PARTY and target not in LAYERS)):
                problems.append(Problem(path, node.lineno, f"{app} imports {module} (a plain package)"))
            if target not in LAYERS:
                continue
            if target != app and LAYERS[target] >= own_layer:
                kind = "a higher layer" if LAYERS[target] > own_layer else "a peer app"
                problems.append(Problem(path, node.lineno, f"{app} imports {module} ({kind})"))
            if id(node) in local and not _has_comment(lines, node.lineno, local[id(node)]):
                problems.append(Problem(path, node.lineno, f"import of {module} inside a function without a comment"))
    return problems


def first_party_modules() -> list[Path]:
    modules = []
    for app in LAYERS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                modules.append(path)
    return modules


def test_every_app_has_a_layer():
    """A new app must be given its place here (and in docs/architecture.md)."""
    apps = {p.parent.name for p in ROOT.glob("*/apps.py")} | {"buddy"} | PLAIN_PACKAGES
    assert apps == set(LAYERS)


def test_plain_packages_sit_below_every_app_and_every_layer_sorts_as_first_party():
    lowest_app = min(LAYERS[app] for app in set(LAYERS) - PLAIN_PACKAGES)
    assert all(LAYERS[package] < lowest_app for package in PLAIN_PACKAGES)
    assert set(LAYERS) <= FIRST_PARTY


def test_arrows_point_down_and_no_import_hides_in_a_function():
    problems = []
    for path in first_party_modules():
        problems += module_problems(path.relative_to(ROOT).as_posix(), path.read_text())
    assert not problems, "\n".join(map(str, problems))


def domain_imports(path: str, source: str) -> list[str]:
    """The domain apps other than its own that a module imports (at any depth, in functions too)."""
    app = path.split("/", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += [m for m in _imported_modules(node) if m.split(".", 1)[0] in DOMAIN_APPS - {app}]
    return found


def test_realtime_imports_no_domain_app():
    assert "realtime" in DOMAIN_APPS and {"canvas", "memory"} <= DOMAIN_APPS
    imports = {
        path.relative_to(ROOT).as_posix(): domain_imports(path.relative_to(ROOT).as_posix(), path.read_text())
        for path in sorted((ROOT / "realtime").rglob("*.py"))
    }
    assert {path: found for path, found in imports.items() if found} == {}
    assert domain_imports("realtime/x.py", "def f():\n    from canvas.limits import MAX_ELEMENTS\n") == [
        "canvas.limits"
    ]
    assert domain_imports("realtime/x.py", "from conversations.models import Session\n") == []


def migration_problems(path: str, source: str) -> list[Problem]:
    """The first-party imports of one migration (at any depth: in functions too, relative ones too)."""
    problems = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.ImportFrom) and node.level:
            problems.append(Problem(path, node.lineno, f"migration imports .{node.module or ''} (relative)"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for module in _imported_modules(node):
                if module.split(".", 1)[0] in FIRST_PARTY:
                    problems.append(Problem(path, node.lineno, f"migration imports {module} (a live module)"))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in {
            "import_module",
            "__import__",
        }:
            problems.append(Problem(path, node.lineno, "migration imports a module by name"))
    return problems


def migration_modules() -> list[Path]:
    return sorted(path for app in LAYERS for path in (ROOT / app).glob("migrations/*.py"))


def test_migrations_import_no_live_module():
    assert len(migration_modules()) > 20  # the glob finds the migrations
    problems = []
    for path in migration_modules():
        problems += migration_problems(path.relative_to(ROOT).as_posix(), path.read_text())
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from memory.search import postgres\n", "migration imports memory.search (a live module)"),
        (
            "def f(apps, schema_editor):\n    from memory.search.text import index_terms\n",
            "migration imports memory.search.text (a live module)",
        ),
        ("import conversations.models\n", "migration imports conversations.models (a live module)"),
        ("from ._postgres import statements\n", "migration imports ._postgres (relative)"),
        ("import importlib\nimportlib.import_module('memory.search')\n", "migration imports a module by name"),
    ],
)
def test_the_migration_check_refuses(source, expected):
    assert [p.text for p in migration_problems("memory/migrations/0099_x.py", source)] == [expected]


def test_the_migration_check_accepts_django_and_third_parties():
    source = "import django.db.models.deletion\nfrom django.db import migrations\nimport snowballstemmer\n"
    assert migration_problems("memory/migrations/0099_x.py", source) == []


# --- the check itself fails on what it must refuse -------------------------------------------------


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        (
            "conversations/x.py",
            "from agent.turn import turn_run\n",
            "conversations imports agent.turn (a higher layer)",
        ),
        ("canvas/x.py", "import memory.search\n", "canvas imports memory.search (a peer app)"),
        (
            "realtime/x.py",
            "from canvas.elements import CanvasChange\n",
            "realtime imports canvas.elements (a peer app)",
        ),
        ("memory/x.py", "from web import consumers\n", "memory imports web (a higher layer)"),
        ("agent/x.py", "if True:\n    from buddy.api import api\n", "agent imports buddy.api (a higher layer)"),
        ("lib/x.py", "from conversations import content\n", "lib imports conversations (a higher layer)"),
        ("lib/x.py", "from django.conf import settings\n", "lib imports django.conf (a plain package)"),
        ("lib/x.py", "import django\n", "lib imports django (a plain package)"),
        ("textsearch/x.py", "from django.db import connection\n", "textsearch imports django.db (a plain package)"),
        ("textsearch/x.py", "from memory.search import sqlite\n", "textsearch imports memory.search (a higher layer)"),
        ("textsearch/x.py", "from lib import tool_inputs\n", "textsearch imports lib (a peer app)"),
        (
            "embeddings/x.py",
            "def f():\n    from django.conf import settings\n",
            "embeddings imports django.conf (a plain package)",
        ),
        ("lib/x.py", "from devtools.servers import daphne\n", "lib imports devtools.servers (a plain package)"),
        (
            "agent/x.py",
            "def f():\n    from canvas.services import canvas_apply\n",
            "import of canvas.services inside a function without a comment",
        ),
        (
            "agent/x.py",
            "def f():\n    # a comment, then code: it covers nothing below\n    x = 1\n    import memory.semantic\n",
            "import of memory.semantic inside a function without a comment",
        ),
        (
            "agent/x.py",
            "async def f():\n    x = 1\n    import memory.semantic\n",
            "import of memory.semantic inside a function without a comment",
        ),
    ],
)
def test_the_check_refuses(path, source, expected):
    assert [p.text for p in module_problems(path, source)] == [expected]


@pytest.mark.parametrize(
    "source",
    [
        "from conversations.models import Session\nfrom agent.tools import tool_definitions\n",
        "def f():\n    from memory import semantic  # numpy and the model load on first use\n",
        "def f():\n    # Django must be set up first\n    from conversations.models import Session\n",
        "def f():\n    from django.db import connection\n    import json\n",
        "def f():\n    # the models are not ready yet\n    from canvas import models\n"
        "    from conversations import models\n",
        "from .tools import tool_definitions\n",
    ],
)
def test_the_check_accepts(source):
    assert module_problems("agent/x.py", source) == []
