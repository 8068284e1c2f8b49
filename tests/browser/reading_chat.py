"""A chat with everything the page has to render for a reader: a day before today, replies with a
Markdown table and highlighted code, a reply that drew on six archived messages (sources), a canvas of
a card, a text element with a table and code, a chart, a table and an open question, and a note kept
from a turn. Written straight to the database, as the archive holds it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

TABLE_REPLY = """Here are the three plans side by side:

| Plan | Price | Who it suits |
| --- | ---: | --- |
| Starter | 9 € | Individuals trying things out |
| Team | 29 € | Small teams sharing one workspace |
| Enterprise | 99 € | Organisations with single sign-on and audits |

And the call to create one:

```python
def plan_create(*, name: str, seats: int = 1) -> dict:
    \"\"\"A new plan; `seats` is at least one.\"\"\"
    return {"name": name, "seats": max(seats, 1)}
```
"""

CANVAS_TEXT = """**Release checklist**

| Step | Owner | Status |
| --- | --- | --- |
| Freeze the branch | Enterprise team | done |
| Run the migrations on staging | Operations | waiting |

```bash
if [ -f .env ]; then echo "ready to migrate"; fi
```
"""

SOURCE_TEXTS = [
    "I moved to Lisbon in March and I work from home on Tuesdays.",
    "My sister Ana visits every summer; she is vegetarian.",
    "The pricing plan we picked is the Team one, 29 euros a month.",
    "Remind me to renew my passport before the trip to Japan.",
    "I prefer short answers with a list when there are steps.",
    "Our Wi-Fi password at the office changed last week.",
]


def reading_chat(user: Any) -> dict[str, Any]:
    """Alice's main chat as described above; answers the session, the sourced reply and the note's source."""
    from canvas.services import canvas_apply
    from conversations.models import Message
    from conversations.services import message_append, session_get_or_create
    from memory.notes.services import note_put

    session = session_get_or_create(user=user, agent_slug="buddy", chat_id="main")
    yesterday = timezone.now() - timedelta(days=1)
    sources = []
    for index, text in enumerate(SOURCE_TEXTS):
        said = message_append(
            session=session, role="user", content=text, created_at=yesterday + timedelta(minutes=2 * index)
        )
        message_append(
            session=session, role="assistant", content="Noted.", created_at=yesterday + timedelta(minutes=2 * index + 1)
        )
        sources.append(said)

    now = timezone.now() - timedelta(minutes=10)
    prompt = message_append(session=session, role="user", content="Compare the plans, with code?", created_at=now)
    message_append(session=session, role="assistant", content=TABLE_REPLY, created_at=now + timedelta(seconds=5))

    asked = message_append(session=session, role="user", content="What do you know about me?", created_at=now)
    cited = "\n".join(
        f"[#{said.id} {said.created_at:%Y-%m-%d %H:%M} user] {said.content[0]['text']}" for said in sources
    )
    call = message_append(
        session=session,
        role="assistant",
        content=[{"type": "tool_use", "id": "toolu_search1", "name": "search_history", "input": {"query": "about me"}}],
        created_at=now + timedelta(seconds=6),
    )
    message_append(
        session=session,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "toolu_search1", "content": cited}],
        created_at=now + timedelta(seconds=7),
    )
    reply = message_append(
        session=session,
        role="assistant",
        content="You live in **Lisbon**, your sister Ana is vegetarian, and you picked the Team plan.",
        created_at=now + timedelta(seconds=8),
    )
    Message.objects.filter(pk=asked.pk).update(created_at=now + timedelta(seconds=5))

    for command, params in [
        ("canvas_add_card", {"id": "plans", "title": "Plans", "body": "Pick **Team** if you share a workspace."}),
        ("canvas_show_text", {"id": "checklist", "title": "Checklist", "content": CANVAS_TEXT}),
        (
            "canvas_show_chart",
            {
                "id": "costs",
                "title": "Cost per year",
                "chart_type": "bar",
                "labels": ["Starter", "Team", "Enterprise"],
                "series": [{"name": "EUR", "values": [108, 348, 1188]}],
            },
        ),
        (
            "canvas_show_table",
            {
                "id": "seats",
                "title": "Seats",
                "columns": ["Plan", "Seats", "Support"],
                "rows": [["Starter", 1, "Community"], ["Team", 10, "Email"], ["Enterprise", 500, "Enterprise"]],
            },
        ),
        ("canvas_show_confirmation", {"id": "buy", "title": "Buy the Team plan?", "message": "29 € a month."}),
    ]:
        canvas_apply(session=session, command=command, params=params)

    note_put(user=user, session=session, path="/memories/plans.md", content="Team plan, 29 €", by="model", source=call)
    note_put(
        user=user,
        session=session,
        path="/memories/plans.md",
        content="Team plan, 29 € a month",
        by="model",
        source=call,
    )
    return {"session": session, "prompt": prompt, "reply": reply, "sources": sources, "note_prompt": asked}
