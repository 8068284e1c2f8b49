"""tests/ and bench/ share what both need through devtools/, never through each other: neither tree
imports the other, and devtools/ imports neither (the apps never import any of the three)."""

from __future__ import annotations

import ast

import pytest

from devtools.servers import ROOT

DEVELOPMENT = {"tests", "bench", "devtools"}
# The project and its apps: every package at the root that is not a development tree.
PRODUCT = sorted(path.parent.name for path in ROOT.glob("*/__init__.py") if path.parent.name not in DEVELOPMENT)
# A tree's top-level package → the top-level packages its modules must not import.
FORBIDDEN = {
    "tests": {"bench"},
    "bench": {"tests"},
    "devtools": {"tests", "bench"},
    **dict.fromkeys(PRODUCT, DEVELOPMENT),
}


def imported_packages(source: str) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in `source`, at any depth of the module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def violations(tree: str) -> list[str]:
    forbidden = FORBIDDEN[tree]
    return [
        f"{path.relative_to(ROOT)}:{line} imports {package}"
        for path in sorted((ROOT / tree).rglob("*.py"))
        if "migrations" not in path.parts
        for line, package in imported_packages(path.read_text())
        if package in forbidden
    ]


@pytest.mark.parametrize("tree", sorted(FORBIDDEN))
def test_a_tree_never_imports_the_trees_it_must_not(tree):
    assert (ROOT / tree).is_dir()
    assert violations(tree) == []


def test_the_product_packages_are_all_checked():
    assert {"buddy", "conversations", "canvas", "memory"} <= set(PRODUCT)


def test_the_check_sees_imports_at_any_depth():
    source = "import os\nfrom bench import cost\n\ndef f():\n    import tests.servers\n    from bench.x import y\n"
    assert imported_packages(source) == [(1, "os"), (2, "bench"), (5, "tests"), (6, "bench")]


def test_the_shared_code_is_used_from_both_sides():
    """devtools/ is what tests/ and bench/ share: the fake API is used by both."""
    users = {
        tree
        for tree in ("tests", "bench")
        for path in (ROOT / tree).rglob("*.py")
        if any(package == "devtools" for _, package in imported_packages(path.read_text()))
    }
    assert users == {"tests", "bench"}
