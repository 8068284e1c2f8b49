"""Every frame of the chat WebSocket `/ws/` (README, "WebSocket frames"), both ways, in one place.

The server builds each frame it sends with a function of this module (the turn, the canvas services
and selectors, the consumer); the consumer accepts exactly CLIENT_FRAME_TYPES; `static/buddy/app.js`
handles exactly SERVER_FRAME_TYPES and no error code outside ERROR_CODES (tests/web/test_frames.py).
"""

from __future__ import annotations

from typing import Any

# --- server → client ------------------------------------------------------------------------------

SERVER_FRAME_TYPES = (
    "canvas_command",  # a canvas change (or a replay of the canvas): command, params, version
    "user_message",  # a prompt archived: text, message_id, kind (PROMPT_KINDS)
    "tool_use",  # the model called a tool: id, name, input
    "tool_result",  # a tool's result: tool_use_id, is_error, summary (at most TOOL_SUMMARY_CHARS)
    "assistant_delta",  # streamed text of the reply being written
    "assistant_message",  # the turn's final reply: text, message_id
    "agent_switch",  # the socket now follows another agent's chat: agent {id, name, avatar}
    "error",  # code (ERROR_CODES), detail
)

# What started a turn, in its `user_message` frame.
PROMPT_KINDS = ("typed", "confirmation", "scheduled")

TOOL_SUMMARY_CHARS = 200  # of a tool result, in its `tool_result` frame

# The codes of `error` frames, by what sends them.
HANDSHAKE_ERROR_CODES = ("invalid_chat_id", "unknown_agent")  # then the socket closes (4400 / 4404)
FRAME_ERROR_CODES = (  # a client frame refused; the socket stays open
    "frame_too_large",
    "binary_frame",
    "invalid_json",
    "invalid_unicode",
    "nul_character",
    "too_deep",
    "invalid_frame",
    "unknown_type",
    "invalid_field",
    "no_turn_running",
)
TURN_ERROR_CODES = (  # a turn refused or failed (agent.turn, agent.submit, agent.limits)
    "turn_failed",
    "turn_running",
    "too_large",
    "invalid",
    "not_found",
    "rate_limited",
    "model_failed",  # sent to every socket of the chat
    "logged_out",  # then the socket closes (4401)
    "internal_error",
)
CONFIRMATION_ERROR_CODES = ("invalid_input", "unknown_element", "not_a_confirmation", "already_answered")
ERROR_CODES = HANDSHAKE_ERROR_CODES + FRAME_ERROR_CODES + TURN_ERROR_CODES + CONFIRMATION_ERROR_CODES

# --- client → server ------------------------------------------------------------------------------

CLIENT_FRAME_TYPES = (
    "prompt",  # text: run a turn
    "cancel",  # stop the chat's running turn
    "replay",  # send the canvas again
    "switch_agent",  # agent: follow that agent's chat
    "confirmation_response",  # id, confirmed: answer a confirmation (runs as a turn)
)


# --- builders -------------------------------------------------------------------------------------


def canvas_command(command: str, params: dict[str, Any], version: int) -> dict[str, Any]:
    return {"type": "canvas_command", "command": command, "params": params, "version": version}


def user_message(*, text: str, message_id: int, kind: str) -> dict[str, Any]:
    if kind not in PROMPT_KINDS:
        raise ValueError(f"kind must be one of {PROMPT_KINDS}")
    return {"type": "user_message", "text": text, "message_id": message_id, "kind": kind}


def tool_use(*, tool_use_id: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}


def tool_result(*, tool_use_id: str, is_error: bool, text: str) -> dict[str, Any]:
    summary = text if len(text) <= TOOL_SUMMARY_CHARS else text[: TOOL_SUMMARY_CHARS - 1] + "…"
    return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": is_error, "summary": summary}


def assistant_delta(text: str) -> dict[str, Any]:
    return {"type": "assistant_delta", "text": text}


def assistant_message(
    *, text: str, message_id: int | None, sources: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The turn's reply; `sources` are the archived messages its memory tools drew on (README: Memory notes)."""
    return {"type": "assistant_message", "text": text, "message_id": message_id, "sources": sources or []}


def agent_switch(*, slug: str, name: str, avatar: str) -> dict[str, Any]:
    return {"type": "agent_switch", "agent": {"id": slug, "name": name, "avatar": avatar}}


def error(code: str, detail: str) -> dict[str, Any]:
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r}: list it in conversations.events")
    return {"type": "error", "code": code, "detail": detail}
