from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations.history_io import history_import, history_validate
from conversations.models import Agent, ApiToken, Message, Session
from conversations.tokens import token_hash

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


GOOD = [
    {"role": "user", "content": "My name is Diego", "created_at": "2026-01-02T10:00:00+00:00"},
    {"role": "assistant", "content": [{"type": "text", "text": "Hi Diego!"}], "created_at": "2026-01-02T10:00:05Z"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "canvas_add_card", "input": {"id": "c", "title": "T"}}
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
]


def test_import_then_export_round_trips(tmp_path, user):
    run("import_history", str(write_lines(tmp_path / "in.jsonl", GOOD)), "--user", "alice", "--chat-id", "c1")
    first = run("export_history", "--user", "alice", "--chat-id", "c1")
    assert len(first.splitlines()) == 4
    assert json.loads(first.splitlines()[0])["content"] == [{"type": "text", "text": "My name is Diego"}]
    (tmp_path / "out.jsonl").write_text(first, encoding="utf-8")
    run("import_history", str(tmp_path / "out.jsonl"), "--user", "alice", "--chat-id", "c2")
    second = run("export_history", "--user", "alice", "--chat-id", "c2")
    assert second == first


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{not json", "not valid JSON"),
        ({"role": "system", "content": "x"}, "role must be"),
        ({"role": "user", "content": ""}, "empty string"),
        ({"role": "user", "content": [{"type": "text", "text": ""}]}, "non-empty 'text'"),
        ({"role": "user", "content": "x", "created_at": "yesterday"}, "ISO-8601"),
        ({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}, "assistant"),
        ({"role": "user", "content": "x", "extra": 1}, "unknown field"),
    ],
)
def test_a_bad_line_imports_nothing_and_names_its_line(tmp_path, user, bad, reason):
    path = write_lines(tmp_path / "in.jsonl", [*GOOD, bad, *GOOD])
    with pytest.raises(CommandError, match=rf"line 5: .*{reason}"):
        run("import_history", str(path), "--user", "alice")
    assert Message.objects.count() == 0
    assert not Session.objects.exists()


def test_import_refuses_unknown_user_agent_and_file(tmp_path, user):
    path = write_lines(tmp_path / "in.jsonl", GOOD)
    with pytest.raises(CommandError, match="No user"):
        run("import_history", str(path), "--user", "nobody")
    with pytest.raises(CommandError, match="No agent"):
        run("import_history", str(path), "--user", "alice", "--agent", "ghost")
    with pytest.raises(CommandError, match="No such file"):
        run("import_history", str(tmp_path / "missing.jsonl"), "--user", "alice")


def test_export_of_a_missing_chat_is_an_error_and_creates_nothing(user):
    with pytest.raises(CommandError, match="no chat"):
        run("export_history", "--user", "alice", "--chat-id", "nope")
    assert not Session.objects.exists()


def _peak_import_memory(path: Path, session: Session) -> int:
    tracemalloc.start()
    try:
        with path.open() as stream:
            history_validate(stream)
        with path.open() as stream:
            history_import(session=session, stream=stream)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_import_memory_stays_flat_as_the_file_grows(tmp_path, session):
    def make(n: int) -> Path:
        path = tmp_path / f"h{n}.jsonl"
        with path.open("w") as f:
            for i in range(n):
                role = "user" if i % 2 == 0 else "assistant"
                # A bounded vocabulary: the search stemmer keeps a bounded cache of the words it has
                # seen, which a stream of never-repeated words would fill (up to its cap) as it goes.
                f.write(json.dumps({"role": role, "content": f"message number {i % 97} with some words"}) + "\n")
        return path

    small, large = make(10_000), make(50_000)
    peak_small = _peak_import_memory(small, session)
    peak_large = _peak_import_memory(large, session)
    assert Message.objects.filter(session=session).count() == 60_000
    # Five times the lines must not mean five times the memory: streaming keeps one batch in memory.
    assert peak_large < peak_small * 1.5, (peak_small, peak_large)


def test_api_tokens_are_stored_hashed_and_revocable(user):
    token = run("create_api_token", "alice").strip()
    stored = ApiToken.objects.get(user=user)
    assert token not in (stored.key_hash, stored.prefix)
    assert stored.key_hash == token_hash(token)
    run("create_api_token", "alice")
    assert "Revoked 2" in run("revoke_api_token", "alice")
    assert not ApiToken.objects.exists()


def test_create_agent_creates_then_updates():
    assert "Created" in run("create_agent", "coach", "--name", "Coach", "--avatar", "🏋", "--personality", "Firm")
    assert "Updated" in run("create_agent", "coach", "--name", "Head Coach")
    agent = Agent.objects.get(slug="coach")
    assert (agent.name, agent.avatar, agent.personality) == ("Head Coach", "🏋", "Firm")
    with pytest.raises(CommandError, match="slug"):
        run("create_agent", "bad slug!", "--name", "X")


def test_bootstrap_creates_one_admin_once(django_user_model):
    out = run("bootstrap")
    assert "admin" in out and "changepassword" in out
    assert run("bootstrap") == ""
    assert django_user_model.objects.filter(is_superuser=True).count() == 1


def test_a_json_error_names_what_and_where_without_cutting_the_sentence(tmp_path, user):
    path = write_lines(tmp_path / "in.jsonl", [*GOOD, '{"role": "user", "content": "tab\there"}'])
    with pytest.raises(CommandError) as error:
        run("import_history", str(path), "--user", "alice")
    assert "line 5: not valid JSON (Invalid control character at column 33). Nothing was imported." in str(error.value)
