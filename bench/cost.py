"""What prompt caching saves: a 500-turn conversation against the fake Messages API.

Runs Buddy's real turn code (window, request layout, tools) through the real SDK against
devtools/fake_anthropic.py, which accounts prompt caching like the real API (prefix match at each
breakpoint with a 20-block lookback, ≥ 1,024 tokens to cache, entries living 5 minutes or 1 hour
after their last hit, writes 1.25× or 2×, reads 0.1×). The canvas changes every few turns. Then it
replays the same conversation as the original design would send it — the window drops one old
message per turn, the canvas snapshot in the system prompt, the API's default 5-minute lifetime — to
a fresh fake server, and prices both.

Without --pacing the turns follow each other at once, with the default BUDDY_CACHE_TTL. With
--pacing a person pauses before each prompt, for a time drawn from one of the mixes in PAUSE_MIXES
(seeded, so every run draws the same pauses); the fake server's clock and the archive's timestamps
move by each pause, and the conversation runs once per lifetime policy (5m, 1h, auto).

    .venv/bin/python bench/cost.py [--turns 500] [--plot]
    .venv/bin/python bench/cost.py --pacing [--mix typical|focused|intermittent] [--turns 500] [--plot]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import BENCH_DIR, setup  # noqa: E402

USER_TEXT = "Here is what happened today at work with the project, the team and the customers. " * 6
REPLY_TEXT = "That sounds like a lot. Let me reflect on the main points and what you could do next. " * 16

# How long a person pauses before the next prompt, as (share of turns, shortest, longest) in seconds,
# drawn log-uniformly inside each range. No measured Buddy traffic exists; "typical" is the mix issue
# 22 describes (most replies within a minute, some after 5–30 minutes, a few after hours), made
# concrete; "focused" and "intermittent" bracket it, to see whether the policies' ranking holds.
PAUSE_MIXES = {
    "typical": [  # 14 % of pauses over 5 minutes
        (0.72, 5, 60),
        (0.14, 60, 5 * 60),
        (0.10, 5 * 60, 30 * 60),
        (0.02, 30 * 60, 60 * 60),
        (0.02, 60 * 60, 8 * 3600),
    ],
    "focused": [  # 2 % over 5 minutes: one sitting, with a break or two
        (0.90, 5, 60),
        (0.08, 60, 5 * 60),
        (0.02, 5 * 60, 30 * 60),
    ],
    "intermittent": [  # 45 % over 5 minutes: a chat kept open beside other work
        (0.40, 5, 60),
        (0.15, 60, 5 * 60),
        (0.30, 5 * 60, 30 * 60),
        (0.10, 30 * 60, 60 * 60),
        (0.05, 60 * 60, 8 * 3600),
    ],
}
POLICIES = ("5m", "1h", "auto")


def run(turns: int, plot: bool) -> None:
    db = BENCH_DIR / "cost.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    setup(f"sqlite:///{db}", BUDDY_SUMMARIES="off", BUDDY_LLM="anthropic", BUDDY_LLM_RETRIES="0")
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations.models import Message, ModelCall
    from conversations.services import session_get_or_create
    from devtools.fake_anthropic import FakeAnthropic, Reply, cost_units

    server = FakeAnthropic().start()
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = server.base_url, "bench-key"
    user = get_user_model().objects.create_user("bench", password="x" * 12, first_name="Bench")
    session = session_get_or_create(user=user, agent_slug=None, chat_id="cost")
    turn_of_call = _converse(session, server, [0.0] * turns)

    calls = list(ModelCall.objects.filter(session=session).order_by("id").values())
    buddy_requests = [r["body"] for r in server.requests]
    server.stop()

    def total_input(usage) -> int:
        return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]

    first_step_call = _first_step(buddy_requests)
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
        response = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, **_original_request(body, archive))
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
        "input_cost_per_turn_steady": round(buddy_cost / (turns - turn_of_call[first_step_call])),
    }
    print(json.dumps(result, indent=2))
    if plot:
        _plot(calls, per_call)


def _converse(session, server, pauses: list[float]) -> list[int]:
    """Run one turn per pause, the person pausing that many seconds before each prompt; returns the
    turn of each model call, in order. A pause moves the fake server's clock and the archive's
    timestamps (everything recorded so far moves back by the pause), so the provider's cache entries
    and Buddy's view of the chat's pauses both see it."""
    from django.db.models import F

    from agent.turn import turn_run
    from conversations.models import Message, ModelCall
    from devtools.fake_anthropic import Reply

    counter = {"n": 0}

    def responder(request):
        last = request["messages"][-1]["content"]
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
        return Reply([{"type": "text", "text": f"{REPLY_TEXT} (reply {len(request['messages'])})"}])

    server.responder = responder
    turn_of_call: list[int] = []
    for turn, pause in enumerate(pauses):
        if pause:
            server.clock.advance(pause)
            earlier = timedelta(seconds=pause)
            Message.objects.filter(session=session).update(created_at=F("created_at") - earlier)
            ModelCall.objects.filter(session=session).update(created_at=F("created_at") - earlier)
        prefix = "[canvas] " if turn % 4 == 3 else ""
        turn_run(session=session, text=f"{prefix}Turn {turn}. {USER_TEXT}")
        turn_of_call += [turn] * (len(server.requests) - len(turn_of_call))
        if turn % 50 == 49:
            print(f"  {turn + 1} turns", file=sys.stderr)
    return turn_of_call


def draw_pauses(turns: int, mix: str, seed: int = 22) -> list[float]:
    """Seconds before each prompt (none before the first), log-uniform inside each range of the mix."""
    rng = random.Random(seed)
    shares, ranges = zip(*[(share, (low, high)) for share, low, high in PAUSE_MIXES[mix]], strict=True)
    pauses = [0.0]
    for _ in range(turns - 1):
        low, high = rng.choices(ranges, weights=shares)[0]
        pauses.append(math.exp(rng.uniform(math.log(low), math.log(high))))
    return pauses


def run_pacing(turns: int, mix: str, plot: bool) -> None:
    db = BENCH_DIR / "cost-pacing.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    setup(f"sqlite:///{db}", BUDDY_SUMMARIES="off", BUDDY_LLM="anthropic", BUDDY_LLM_RETRIES="0")
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations.models import Message, ModelCall
    from conversations.services import session_get_or_create
    from devtools.fake_anthropic import FakeAnthropic, Reply, cost_units

    pauses = draw_pauses(turns, mix)
    user = get_user_model().objects.create_user("bench", password="x" * 12, first_name="Bench")
    settings.ANTHROPIC_API_KEY = "bench-key"
    runs = {}
    for policy in POLICIES:
        print(f"BUDDY_CACHE_TTL={policy}", file=sys.stderr)
        settings.BUDDY_CACHE_TTL = policy
        server = FakeAnthropic().start()
        settings.ANTHROPIC_BASE_URL = server.base_url
        session = session_get_or_create(user=user, agent_slug=None, chat_id=f"pacing-{policy}")
        turn_of_call = _converse(session, server, pauses)
        calls = list(ModelCall.objects.filter(session=session).order_by("id").values())
        assert len(calls) == len(turn_of_call) and not any(call["error"] for call in calls)
        runs[policy] = {"calls": calls, "requests": [r["body"] for r in server.requests], "session": session}
        server.stop()

    # The original design, on the same archive (the same turns), its clock moved by the same pauses.
    reference = runs["5m"]
    archive = list(Message.objects.filter(session=reference["session"]).order_by("id").values_list("role", "content"))
    original = FakeAnthropic().start()
    original.responder = lambda request: Reply([{"type": "text", "text": "ok"}])
    client = original.client()
    original_calls = []
    previous_turn = 0
    for body, turn in zip(reference["requests"], turn_of_call, strict=True):
        if turn != previous_turn:
            original.clock.advance(pauses[turn])
            previous_turn = turn
        response = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, **_original_request(body, archive))
        original_calls.append(response.usage.model_dump())
    original.stop()

    first_step_call = _first_step(reference["requests"])
    steady_turns = turns - turn_of_call[first_step_call]

    def total_input(usage) -> int:
        return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]

    steady = slice(first_step_call, None)
    uncached = sum(total_input(call) for call in reference["calls"][steady])
    original_cost = sum(cost_units(usage) for usage in original_calls[steady])
    rows = {
        "no caching": {"cache_read_share": 0.0, "cost": uncached},
        "original design (5m)": {
            "cache_read_share": sum(u["cache_read_input_tokens"] for u in original_calls[steady]) / uncached,
            "cost": original_cost,
        },
    }
    for policy, run in runs.items():
        calls = run["calls"][steady]
        rows[f"BUDDY_CACHE_TTL={policy}"] = {
            "cache_read_share": sum(c["cache_read_input_tokens"] for c in calls) / max(1, sum(map(total_input, calls))),
            "cost": sum(cost_units(c) for c in calls),
            "writes_5m": sum(c["cache_creation_5m_input_tokens"] for c in calls),
            "writes_1h": sum(c["cache_creation_1h_input_tokens"] for c in calls),
        }
    long_pauses = sum(1 for pause in pauses if pause > 300)
    print(
        f"\n{turns} turns, mix {mix!r}: {long_pauses} pauses over 5 minutes, "
        f"{sum(1 for pause in pauses if pause > 3600)} over an hour; steady state from call {first_step_call} "
        f"(turn {turn_of_call[first_step_call]}), {steady_turns} turns\n"
    )
    print("| requests | cache-read share | input cost per turn | vs no caching | vs original design |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, row in rows.items():
        print(
            f"| {name} | {row['cache_read_share']:.1%} | {row['cost'] / steady_turns:,.0f} | "
            f"{row['cost'] / uncached:.1%} | {row['cost'] / original_cost:.1%} |"
        )
    print(json.dumps({name: {k: round(v, 4) for k, v in row.items()} for name, row in rows.items()}, indent=2))
    if plot:
        _plot_pacing(runs, original_calls, turn_of_call, pauses, mix)


def _first_step(requests) -> int:
    """Steady state: once the window has moved for the first time (before, the conversation is still
    growing into its budget and every call writes new cache)."""
    return next(
        (i for i, r in enumerate(requests) if i and _first_text(r) != _first_text(requests[0])),
        len(requests) // 4,
    )


def _original_request(body, archive) -> dict:
    """Buddy's request `body` as the original design would have sent it."""
    from django.conf import settings

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
    # Breakpoints where Buddy puts them (last tool, system prompt, last block), with the API's default lifetime.
    tools = [{key: value for key, value in tool.items() if key != "cache_control"} for tool in body["tools"]]
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return {"system": system, "messages": tail, "tools": tools}


def _first_text(body) -> str:
    """The text that opens the window (the first block of its first message)."""
    return body["messages"][0]["content"][0].get("text", "")


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


def _plot_pacing(runs, original_calls, turn_of_call, pauses, mix) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from devtools.fake_anthropic import cost_units

    def cumulative(costs) -> list[float]:
        per_turn = [0.0] * len(pauses)
        for cost, turn in zip(costs, turn_of_call, strict=True):
            per_turn[turn] += cost
        total, out = 0.0, []
        for cost in per_turn:
            total += cost
            out.append(total / 1e6)
        return out

    reference = runs["5m"]["calls"]
    uncached = cumulative(
        [c["input_tokens"] + c["cache_read_input_tokens"] + c["cache_creation_input_tokens"] for c in reference]
    )
    original = cumulative([cost_units(u) for u in original_calls])
    turns = range(1, len(pauses) + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for policy, run in runs.items():
        costs = cumulative([cost_units(c) for c in run["calls"]])
        top.plot(turns, costs, lw=1.3, label=f"BUDDY_CACHE_TTL={policy}: {costs[-1]:.1f}M")
    top.set_ylabel("input cost so far\n(million base input tokens)")
    top.set_ylim(0, None)
    top.legend(
        fontsize=8,
        loc="upper left",
        title=f"off the chart: original design {original[-1]:.1f}M, no caching {uncached[-1]:.1f}M",
        title_fontsize=8,
    )
    top.set_title(f"Buddy: input cost over a {len(pauses)}-turn conversation with pauses (mix {mix!r})")
    bottom.scatter(list(turns)[1:], [pause / 60 for pause in pauses[1:]], s=4)
    bottom.axhline(5, color="grey", lw=0.6, ls="--")
    bottom.axhline(60, color="grey", lw=0.6, ls=":")
    bottom.set_yscale("log")
    bottom.set_ylabel("pause before\nthe prompt (min)")
    bottom.set_xlabel("turn")
    fig.tight_layout()
    out = Path(__file__).resolve().parent.parent / "docs" / "cache-pacing.png"
    fig.savefig(out, dpi=110)
    print(f"plot: {out}", file=sys.stderr)


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
    parser.add_argument("--pacing", action="store_true", help="a person pauses before each prompt")
    parser.add_argument("--mix", choices=sorted(PAUSE_MIXES), default="typical", help="the pauses' mix (--pacing)")
    args = parser.parse_args()
    if args.pacing:
        run_pacing(args.turns, args.mix, args.plot)
    else:
        run(args.turns, args.plot)
