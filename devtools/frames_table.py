"""The README's table of WebSocket frames, rendered from the frame models (realtime/frames.py).

    .venv/bin/python -m devtools.frames_table     # prints the table to paste between its README markers

tests/realtime/test_frames.py fails when the README's table is not this one.
"""

from __future__ import annotations

import os
import sys
from typing import Any, get_args

BEGIN = "<!-- WebSocket frames: generated from realtime/frames.py (python -m devtools.frames_table) -->"
END = "<!-- end of the WebSocket frames -->"


def _members(union: Any) -> tuple[Any, ...]:
    return get_args(get_args(union)[0])


def _row(direction: str, model: Any, *, mark_optional: bool) -> str:
    kind = get_args(model.model_fields["type"].annotation)[0]
    fields = [
        f"`{name}`" + ("?" if mark_optional and not info.is_required() else "")
        for name, info in model.model_fields.items()
        if name != "type"
    ]
    what = " ".join((model.__doc__ or "").split())
    return f"| {direction} | `{kind}` | {', '.join(fields) or '—'} | {what} |"


def frames_table() -> str:
    from realtime.frames import ClientFrame, ServerFrame

    rows = [BEGIN, "| direction | `type` | fields | what it is |", "| --- | --- | --- | --- |"]
    rows += [_row("server → client", model, mark_optional=False) for model in _members(ServerFrame)]
    rows += [_row("client → server", model, mark_optional=True) for model in _members(ClientFrame)]
    return "\n".join([*rows, END])


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "buddy.settings")
    import django

    django.setup()
    sys.stdout.write(frames_table() + "\n")
