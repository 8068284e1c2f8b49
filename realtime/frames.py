"""Every frame of the chat WebSocket `/ws/` (README: "WebSocket frames"), both ways: one Pydantic model
per frame type, and one discriminated union on `type` each way.

The server builds every frame it sends through its model (the turn and agent.chat through
realtime.push, which sends nothing else; the consumer for its own answers); the consumer reads every
client frame with `client_frame_read`: the cheap checks first (size, binary, JSON, depth, NUL and lone
surrogates — before a deep or huge frame costs anything), then CLIENT_FRAMES, a TypeAdapter of the
client union, whose errors become the codes below. The README's frame table and the page
(`static/buddy/`, tests/web/test_frames.py) are held to these models by tests.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, TypeAdapter, ValidationError, field_validator

from conversations.content import TEXT_HAS_NUL, blank_problem, json_depth_exceeds, json_text_problem
from conversations.refs import AgentParam

# What started a turn, in its `user_message` frame.
PromptKind = Literal["typed", "confirmation", "scheduled"]
PROMPT_KINDS: tuple[str, ...] = get_args(PromptKind)

TOOL_SUMMARY_CHARS = 200  # of a tool result, in its `tool_result` frame

# The code of an `error` frame, by what sends it.
ErrorCode = Literal[
    # The handshake's query (then the socket closes: 4400, or 4404 for not_found).
    "invalid_chat_id",
    "invalid_agent",
    "not_found",
    # A client frame refused; the socket stays open.
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
    # A turn refused or failed (agent.turn, agent.submit, agent.limits).
    "turn_running",
    "too_large",
    "rate_limited",
    "model_failed",  # to every socket of the chat
    "logged_out",  # then the socket closes (4401)
    "internal_error",
    # A confirmation answer refused (canvas.services.confirmation_answer).
    "unknown_element",
    "not_a_confirmation",
    "already_answered",
]
ERROR_CODES: tuple[str, ...] = get_args(ErrorCode)


# --- server → client ------------------------------------------------------------------------------


class _ServerFrame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def dump(self) -> dict[str, Any]:
        """The frame as JSON-ready data, as a client receives it."""
        return self.model_dump(mode="json")


class CanvasCommandFrame(_ServerFrame):
    """A canvas change as it commits, to every socket of the chat (`version` grows by one with each: a gap
    means a frame was lost, so send `replay`); or one step of a replay: a clear carrying the version, one
    add per element in order (`params` are its fields), then the theme when one is set."""

    type: Literal["canvas_command"] = "canvas_command"
    command: str = Field(
        pattern=r"^canvas_[a-z_]+$",
        description="The canvas tool that makes the change; `canvas_update_card` carries the element's "
        "complete fields after it.",
    )
    params: dict[str, Any] = Field(description="The tool's input as the canvas stored it.")
    version: int = Field(
        ge=0, description="The canvas version after the change: a gap means a lost frame (send `replay`)."
    )


class UserMessageFrame(_ServerFrame):
    """A turn's prompt, archived, to every socket of the chat; `kind`: `typed`, `confirmation` or
    `scheduled`."""

    type: Literal["user_message"] = "user_message"
    text: str
    message_id: int
    kind: PromptKind = Field(description="What started the turn: `typed`, `confirmation` or `scheduled`.")


class ToolUseFrame(_ServerFrame):
    """The model called a tool (`id` as in the archive, so a reload shows the same turn). A call the
    Messages API would not take back in the next request is archived and shown as one it takes: a fresh
    id for an invalid or repeated one, `unnamed_tool` for a missing name, `{}` for an input that is not
    an object (that call is answered with an error, not run)."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: Any = Field(description="The tool's input, as the model wrote it (`{}` for one that is not an object).")


class ToolResultFrame(_ServerFrame):
    """That tool's result; `summary` is at most 200 characters."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    is_error: bool
    summary: str = Field(max_length=TOOL_SUMMARY_CHARS, description=f"At most {TOOL_SUMMARY_CHARS} characters.")

    @classmethod
    def summarized(cls, *, tool_use_id: str, is_error: bool, text: str) -> ToolResultFrame:
        summary = text if len(text) <= TOOL_SUMMARY_CHARS else text[: TOOL_SUMMARY_CHARS - 1] + "…"
        return cls(tool_use_id=tool_use_id, is_error=is_error, summary=summary)


class AssistantDeltaFrame(_ServerFrame):
    """A piece of the reply as it streams."""

    type: Literal["assistant_delta"] = "assistant_delta"
    text: str


class SourceOut(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    agent: str
    chat_id: str
    role: Literal["user", "assistant"]
    created_at: datetime
    snippet: str = Field(description="What the message said, as one line of plain text (not HTML).")


class AssistantMessageFrame(_ServerFrame):
    """The turn's reply when the turn ends (`message_id` null when nothing was said); `sources`: the
    archived messages its memory tools cited, `[{"id", "agent", "chat_id", "role", "created_at",
    "snippet"}]`, as in `GET /history`."""

    type: Literal["assistant_message"] = "assistant_message"
    text: str
    message_id: int | None = Field(description="The final assistant message; null when nothing was said.")
    sources: list[SourceOut] = Field(
        default_factory=list,
        description="The archived messages the turn's memory tools cited, as in `GET /history`.",
    )


class AgentOut(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    avatar: str


class AgentSwitchFrame(_ServerFrame):
    """The socket now follows that agent's chat (`agent`: `{"id", "name", "avatar"}`); its canvas replay
    follows."""

    type: Literal["agent_switch"] = "agent_switch"
    agent: AgentOut


ChatChange = Literal["message", "renamed", "deleted"]
CHAT_CHANGES: tuple[str, ...] = get_args(ChatChange)


class ChatsChangedFrame(_ServerFrame):
    """One of the user's chats changed, to every socket of the user (any chat, any tab): `change` is
    `message` (a new prompt, once per turn: the turn's replies follow without another; the first
    prompt creates the chat), `renamed` or `deleted`. The chat list reads `GET /chats` again."""

    type: Literal["chats_changed"] = "chats_changed"
    change: ChatChange = Field(
        description="`message` (a new prompt; the first one creates the chat), `renamed` or `deleted`."
    )
    agent: str
    chat_id: str


class ChatDeletedFrame(_ServerFrame):
    """The chat this socket follows was deleted (`DELETE /chats`): nothing of it is kept; a prompt sent
    now starts a new, empty chat of the same name."""

    type: Literal["chat_deleted"] = "chat_deleted"
    agent: str
    chat_id: str
    detail: str = "This chat was deleted."


class ErrorFrame(_ServerFrame):
    """Bad input or a refused turn (`code`: see below); the socket stays open unless the code closes it."""

    type: Literal["error"] = "error"
    code: ErrorCode
    detail: str


ServerFrame = Annotated[
    CanvasCommandFrame
    | UserMessageFrame
    | ToolUseFrame
    | ToolResultFrame
    | AssistantDeltaFrame
    | AssistantMessageFrame
    | AgentSwitchFrame
    | ChatsChangedFrame
    | ChatDeletedFrame
    | ErrorFrame,
    Field(discriminator="type"),
]
SERVER_FRAMES: TypeAdapter[ServerFrame] = TypeAdapter(ServerFrame)


# --- client → server ------------------------------------------------------------------------------


class _ClientFrame(BaseModel):
    # Strict: `"confirmed": "yes"` or `"text": 5` is refused, not coerced. Unknown fields are ignored,
    # so a newer page may send more than this server reads.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class PromptFrame(_ClientFrame):
    """Run a turn."""

    type: Literal["prompt"]
    text: StrictStr = Field(description="Not empty, not only spaces.")

    @field_validator("text")
    @classmethod
    def _says_something(cls, value: str) -> str:
        problem = blank_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class CancelFrame(_ClientFrame):
    """Stop the chat's running turn (what was archived stays)."""

    type: Literal["cancel"]


class ReplayFrame(_ClientFrame):
    """Send the canvas again (after a gap in `version`)."""

    type: Literal["replay"]


class SwitchAgentFrame(_ClientFrame):
    """Follow another agent's chat of the same chat id: answered with `agent_switch` and its replay."""

    type: Literal["switch_agent"]
    agent: AgentParam | None = None


class ConfirmationResponseFrame(_ClientFrame):
    """Answer a confirmation on the canvas: the element is marked answered and the answer runs as a turn."""

    type: Literal["confirmation_response"]
    id: StrictStr
    confirmed: StrictBool


ClientFrame = Annotated[
    PromptFrame | CancelFrame | ReplayFrame | SwitchAgentFrame | ConfirmationResponseFrame,
    Field(discriminator="type"),
]
CLIENT_FRAMES: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)


def _types(union: Any) -> tuple[str, ...]:
    members = get_args(get_args(union)[0])
    return tuple(get_args(member.model_fields["type"].annotation)[0] for member in members)


SERVER_FRAME_TYPES = _types(ServerFrame)
CLIENT_FRAME_TYPES = _types(ClientFrame)


# --- reading a client frame -----------------------------------------------------------------------


class FrameError(Exception):
    """A client frame refused; the consumer answers an `error` frame with this code, the socket stays open."""

    def __init__(self, code: ErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


_TEXT_PROBLEM_CODES: dict[str, ErrorCode] = {TEXT_HAS_NUL: "nul_character"}  # anything else: invalid_unicode


def client_frame_read(
    text_data: str | None, bytes_data: bytes | None, *, max_bytes: int, max_depth: int
) -> ClientFrame:
    """One client frame, checked and parsed; FrameError says why not.

    The cheap checks run before the frame is parsed into a model: binary, size (a lone surrogate from
    the transport counts as its escape), JSON, nesting within `max_depth` (iteratively, so no frame
    can exhaust the stack) and text holding NUL or a lone surrogate, keys included (the rule of
    conversations.content.text_problem, as everywhere).
    """
    if text_data is None:
        raise FrameError("binary_frame", "frames must be JSON text, not binary")
    if len(text_data) > max_bytes or len(text_data.encode("utf-8", "surrogatepass")) > max_bytes:
        raise FrameError("frame_too_large", f"a frame is at most {max_bytes} bytes")
    try:
        content = json.loads(text_data)
    except RecursionError:
        raise FrameError("too_deep", f"a frame nests arrays and objects at most {max_depth} deep") from None
    except ValueError:
        raise FrameError("invalid_json", "the frame is not valid JSON") from None
    if json_depth_exceeds(content, max_depth):
        raise FrameError("too_deep", f"a frame nests arrays and objects at most {max_depth} deep")
    problem = json_text_problem(content)
    if problem:
        raise FrameError(_TEXT_PROBLEM_CODES.get(problem, "invalid_unicode"), f"a string in the frame {problem}")
    try:
        return CLIENT_FRAMES.validate_python(content)
    except ValidationError as error:
        raise _frame_error(error, content) from None


def _frame_error(error: ValidationError, content: Any) -> FrameError:
    """The code and words of the first problem Pydantic found, in the terms of the frame as sent."""
    first = error.errors(include_url=False)[0]
    kind = first["type"]
    if kind == "union_tag_invalid" and isinstance(content, dict) and isinstance(content.get("type"), str):
        known = ", ".join(CLIENT_FRAME_TYPES)
        return FrameError("unknown_type", f"unknown frame type {content['type'][:64]!r}; known: {known}")
    if kind in {"union_tag_invalid", "union_tag_not_found", "model_attributes_type", "model_type", "dict_type"}:
        return FrameError("invalid_frame", 'a frame is a JSON object with a string "type"')
    field = ".".join(str(part) for part in first["loc"][1:])  # loc[0] is the frame type
    code: ErrorCode = kind if kind in ("invalid_chat_id", "invalid_agent") else "invalid_field"
    message = first["msg"].removeprefix("Value error, ")
    return FrameError(code, f"`{field}`: {message}" if field else message)
