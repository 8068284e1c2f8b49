"""The agent's HTTP endpoints: `POST /prompt` (one turn) and `GET /memory/stats` (what a chat's memory
holds). Refusals are domain exceptions (agent.turn, agent.submit, agent.limits, conversations); buddy/api.py
answers them with their status and the one `ErrorOut` body."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from agent.stats import memory_stats
from agent.submit import IDEMPOTENCY_KEY_HEADER, prompt_submit
from agent.threads import on_turn_thread_wait
from conversations.schemas import ChatIn, ErrorOut, PromptIn, PromptOut
from conversations.selectors import session_require
from memory.schemas import StatsOut

router = Router()

# The error answers of each endpoint, for the OpenAPI schema (every one is `ErrorOut`).
PROMPT_ERRORS = dict.fromkeys((401, 403, 404, 409, 413, 422, 429, 502), ErrorOut)
STATS_ERRORS = dict.fromkeys((401, 404, 422), ErrorOut)


@router.post(
    "/prompt",
    response={200: PromptOut, **PROMPT_ERRORS},
    summary="Run one turn and return the reply",
    tags=["conversations"],
)
def prompt(request: HttpRequest, payload: PromptIn):
    """Archives the prompt, runs the model and its tools, and returns the final text. With an
    `Idempotency-Key` header, a repeat of the same key returns the first answer and runs nothing.
    The same key with another text, agent or chat is 422. A running turn in the same chat gives 409; a
    prompt over `BUDDY_MAX_PROMPT_TOKENS` or a body over the upload limit 413; more than
    `BUDDY_PROMPTS_PER_MINUTE` prompts a minute 429 with `Retry-After`; a session cookie without the
    CSRF token 403."""
    user = request.auth  # the user the session cookie or the bearer token authenticated
    key = request.headers.get(IDEMPOTENCY_KEY_HEADER) or None
    # The turn waits on the model: on a turn thread (agent/threads.py), bounded, never the request's
    # thread (buddy/handlers.py), which only waits for it.
    return on_turn_thread_wait(prompt_submit, user=user, text=payload.text, chat=payload.chat, idempotency_key=key)


@router.get(
    "/memory/stats",
    response={200: StatsOut, **STATS_ERRORS},
    summary="What this chat's memory holds",
    description="The archive, the window the next model call would get, the latest summary, the canvas "
    "and the token usage of every model call of the chat.",
    tags=["memory"],
)
def memory_stats_view(request: HttpRequest, params: Query[ChatIn]):
    return memory_stats(session=session_require(user=request.user, chat=params.chat))
