"""What prompt caching saves: a 500-turn conversation against the fake Messages API.

Runs Buddy's real turn code (window, request layout, tools) through the real SDK against
tests/fake_anthropic.py, which accounts prompt caching like the real API (prefix match at each
breakpoint with a 20-block lookback, ≥ 1,024 tokens to cache, writes 1.25×, reads 0.1×). The canvas
changes every few turns. Then it replays the same conversation as the original design would send
it — the window drops one old message per turn, the canvas snapshot in the system prompt — to a fresh
fake server, and prices both.

    .venv/bin/python bench/cost.py [--turns 500] [--plot]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import BENCH_DIR, setup  # noqa: E402

USER_TEXT = "Here is what happened today at work with the project, the team and the customers. " * 6
REPLY_TEXT = "That sounds like a lot. Let me reflect on the main points and what you could do next. " * 16


def run(turns: int, plot: bool) -> None:
    db = BENCH_DIR / "cost.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    setup(f"sqlite:///{db}", BUDDY_SUMMARIES="off", BUDDY_LLM="anthropic", BUDDY_LLM_RETRIES="0")
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations.models import Message, ModelCall
    from conversations.services import session_get_or_create
    from conversations.turn import turn_run
    from tests.fake_anthropic import FakeAnthropic, Reply, cost_units

    server = FakeAnthropic().start()
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = server.base_url, "bench-key"
    user = get_user_model().objects.create_user("bench", password="x" * 12, first_name="Bench")
    session = session_get_or_create(user=user, agent_slug=None, chat_id="cost")

    counter = {"n": 0}

    def responder(request):
        last = request["body"]["messages"][-1]["content"]
        if any(block.get("type") == "tool_result" for block in last):
            return Reply([{"type": "text", "text": "Updated the canvas."}])
        prompt = last[0].get("text", "")
        if prompt.startswith("[canvas]"):
            counter["n"] += 1
            n = counter["n"]
            return Reply(
                [
                    {
                        "type": "tool_use",
                        "id": f"toolu_bench{n}",
                        "name": "canvas_add_card",
                        "input": {"id": f"note{n % 7}", "title": f"Note {n}", "body": f"Point number {n}"},
                    }
                ]
            )
        return Reply([{"type": "text", "text": f"{REPLY_TEXT} (reply {len(request['body']['messages'])})"}])

    server.responder = responder
    for turn in range(turns):
        prefix = "[canvas] " if turn % 4 == 3 else ""
        turn_run(session=session, text=f"{prefix}Turn {turn}. {USER_TEXT}")
        if turn % 50 == 49:
            print(f"  {turn + 1} turns", file=sys.stderr)

    calls = list(ModelCall.objects.filter(session=session).order_by("id").values())
    buddy_requests = [r["body"] for r in server.requests]
    server.stop()

    def total_input(usage) -> int:
        return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]

    # Steady state: once the window has moved for the first time (before, the conversation is still
    # growing into its budget and every call writes new cache).
    first_step_call = next(
        (i for i, r in enumerate(buddy_requests) if i and _first_text(r) != _first_text(buddy_requests[0])),
        len(calls) // 4,
    )
    steady = calls[first_step_call:]
    buddy_cost = sum(cost_units(c) for c in steady)
    uncached_cost = sum(total_input(c) for c in steady)
    cache_share = sum(c["cache_read_input_tokens"] for c in steady) / max(1, sum(total_input(c) for c in steady))

    # The original design, replayed on the same archive and a fresh cache.
    original = FakeAnthropic().start()
    original.responder = lambda request: Reply([{"type": "text", "text": "ok"}])
    client = original.client()
    archive = list(Message.objects.filter(session=session).order_by("id").values_list("role", "content"))
    original_costs = []
    for body in buddy_requests[first_step_call:]:
        tail = _original_window(body, archive, settings.BUDDY_CONTEXT_TOKENS, settings.BUDDY_WINDOW_ROWS)
        snapshot = body["messages"][-1]["content"][-1]["text"]  # the same canvas, now in the system prompt
        system = [
            {
                "type": "text",
                "text": body["system"][0]["text"] + "\n\n" + snapshot,
                "cache_control": {"type": "ephemeral"},
            }
        ]
        tail[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        tools = body["tools"]
        response = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, system=system, messages=tail, tools=tools
        )
        original_costs.append(cost_units(response.usage))
    original.stop()
    original_cost = sum(original_costs)

    per_call = [cost_units(c) for c in calls]
    result = {
        "turns": turns,
        "model_calls": len(calls),
        "steady_state_from_call": first_step_call,
        "cache_read_share": round(cache_share, 4),
        "cost_vs_no_caching": round(buddy_cost / uncached_cost, 4),
        "cost_vs_original_design": round(buddy_cost / original_cost, 4),
        "median_cost_units_per_call_steady": round(statistics.median(cost_units(c) for c in steady)),
    }
    print(json.dumps(result, indent=2))
    if plot:
        _plot(calls, per_call)


def _first_text(body) -> str:
    return json.dumps(body["messages"][0], sort_keys=True)


def _original_window(body, archive, budget_tokens, max_rows):
    """The original design: the newest messages that fit, dropping the oldest one by one (never cut
    between a tool_use and its result), so the first message changes almost every turn."""
    from conversations.content import estimate_tokens

    # The request's messages end where Buddy's window ended; find that point in the archive.
    end = _archive_end(body, archive)
    start, tokens = end, 0
    while start > 0:
        role, content = archive[start - 1]
        cost = estimate_tokens(content)
        if tokens + cost > budget_tokens or end - (start - 1) > max_rows:
            break
        tokens += cost
        start -= 1
    # Start at a user message that is not a tool result, as the API needs.
    while start < end and not (
        archive[start][0] == "user" and not any(b.get("type") == "tool_result" for b in archive[start][1])
    ):
        start += 1
    return [{"role": role, "content": json.loads(json.dumps(content))} for role, content in archive[start:end]]


def _archive_end(body, archive) -> int:
    last = body["messages"][-1]["content"]
    archived_last = [{k: v for k, v in block.items() if k != "cache_control"} for block in last[:-1]]
    for index in range(len(archive) - 1, -1, -1):
        if archive[index][1] == archived_last:
            return index + 1
    raise LookupError("request not found in the archive")


def _plot(calls, per_call) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    share = [
        c["cache_read_input_tokens"]
        / max(1, c["input_tokens"] + c["cache_read_input_tokens"] + c["cache_creation_input_tokens"])
        for c in calls
    ]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(range(len(share)), share, lw=0.8)
    ax.set_xlabel("model call")
    ax.set_ylabel("share of input read from cache")
    ax.set_ylim(0, 1.02)
    ax.set_title("Buddy: prompt-cache share over a 500-turn conversation")
    fig.tight_layout()
    out = Path(__file__).resolve().parent.parent / "docs" / "cache-share.png"
    fig.savefig(out, dpi=110)
    print(f"plot: {out}", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--plot", action="store_true")
    args = parser.parse_args()
    run(args.turns, args.plot)
