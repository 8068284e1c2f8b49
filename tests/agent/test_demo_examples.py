"""README's examples of the memory tools in the offline demo: each runs, in order, in one chat, and the
demo answers exactly what the README says; the demo reports what a memory or search call did."""

from __future__ import annotations

import json
import re

import pytest

from agent.turn import turn_run
from canvas.models import CanvasState
from devtools.servers import ROOT
from memory.models import Note, NoteProposal

pytestmark = pytest.mark.django_db

SECTION = re.compile(r"<!-- demo examples:.*?-->\n(.*?)\n\n", re.DOTALL)
ROW = re.compile(r"^\| `(.+?)` \| `(.+?)`", re.MULTILINE)


def readme_demo() -> list[tuple[str, str]]:
    section = SECTION.search((ROOT / "README.md").read_text())
    assert section, "the README's demo examples are missing"
    rows = ROW.findall(section.group(1))
    return [(f"CANVAS: [{item}]" if item.startswith("{") else item, answer) for item, answer in rows]


def test_each_demo_example_answers_as_the_readme_says(session):
    examples = readme_demo()
    called = {json.loads(prompt.removeprefix("CANVAS: "))[0]["name"] for prompt, _ in examples[1:]}
    assert called == {"memory", "search_history"}
    for prompt, answer in examples:
        assert turn_run(session=session, text=prompt).reply == answer, prompt
    assert Note.objects.get().content == "Likes green tea in the morning"  # the chat note, and no profile note
    assert NoteProposal.objects.get().status == NoteProposal.Status.PENDING
    elements = CanvasState.objects.get(session=session).elements
    assert [e["title"] for e in elements] == ["Remember in all chats?"]


def canvas_prompt(*calls: tuple[str, dict]) -> str:
    return "CANVAS: " + json.dumps([{"name": name, "input": tool_input} for name, tool_input in calls])


def test_the_demo_says_what_each_call_of_a_round_did(session):
    turn_run(session=session, text="Lisbon in May, on a budget")
    note = {"command": "create", "path": "/memories/trip.md", "file_text": "Lisbon\nMay\nBudget"}
    reply = turn_run(
        session=session,
        text=canvas_prompt(
            ("canvas_add_card", {"id": "trip", "title": "Trip"}),
            ("memory", note),
            ("memory", {"command": "view", "path": "/memories/trip.md"}),
            ("memory", {"command": "view", "path": "/memories"}),
            ("memory", {"command": "rename", "old_path": "/memories/trip.md", "new_path": "/memories/lisbon.md"}),
            ("memory", {"command": "create", "path": "/etc/passwd", "file_text": "x"}),
            ("get_messages_by_date", {"date": "1999-01-01"}),
            ("search_history", {"query": ""}),
        ),
    ).reply
    assert reply.split("\n") == [
        "Done: 1 canvas change(s) made.",
        "memory create /memories/trip.md: saved.",
        "memory view /memories/trip.md: read 3 line(s).",
        "memory view /memories: 1 note(s).",
        "memory rename /memories/trip.md to /memories/lisbon.md: renamed.",
        "memory create /etc/passwd: failed — path: '/etc/passwd' is outside /memories/: every note lives under "
        "/memories/",
        "get_messages_by_date found no messages.",
        "search_history failed: `query` must not be empty",
    ]


def test_a_search_report_quotes_two_messages_briefly(session):
    long = "The pricing plan is forty euros a month for the team, billed yearly, with a discount for charities"
    turn_run(session=session, text=long)
    reply = turn_run(session=session, text=canvas_prompt(("get_extended_context", {"count": 5}))).reply
    assert reply == "get_extended_context found no messages."  # the whole chat is in the window
    reply = turn_run(session=session, text=canvas_prompt(("search_history", {"query": "pricing plan charities"}))).reply
    found = re.fullmatch(
        r"search_history found (\d+) messages: “(.+?)” \((you|Buddy)\); “(.+?)” \((you|Buddy)\)(.*)", reply
    )
    assert found, reply
    assert int(found.group(1)) >= 3 and found.group(6) == ", …"
    quotes = [found.group(2), found.group(4)]
    assert all(len(quote) <= 60 for quote in quotes)
    assert any("The pricing plan is forty euros" in quote and quote.endswith("…") for quote in quotes)
    assert not any("[" in quote for quote in quotes)  # the snippet's match marks are not shown
