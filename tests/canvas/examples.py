"""Valid inputs of every element-adding canvas tool, and a tiny client-side canvas for checking frames."""

from __future__ import annotations

import copy
from typing import Any

ADD_EXAMPLES: dict[str, dict[str, Any]] = {
    "canvas_add_card": {"id": "plan", "title": "Plan", "body": "1. Book flights\n2. Pack"},
    "canvas_show_text": {"id": "poem", "content": "Roses are red", "title": "A poem"},
    "canvas_show_chart": {
        "id": "sales",
        "title": "Sales",
        "chart_type": "bar",
        "labels": ["Jan", "Feb", 2026],
        "series": [{"name": "EU", "values": [1, 2.5, None]}, {"name": "US", "values": [3, 4, 5]}],
    },
    "canvas_show_table": {
        "id": "people",
        "title": "People",
        "columns": ["Name", "Age", "Admin"],
        "rows": [["Ann", 31, True], ["Bo", None, False]],
    },
    "canvas_play_media": {"id": "cat", "url": "/media/cat.png", "media_type": "image", "title": "Cat"},
    "canvas_show_confirmation": {
        "id": "go",
        "title": "Deploy?",
        "message": "Deploy version 2 to production?",
        "confirm_label": "Deploy",
        "cancel_label": "Not now",
    },
}
TYPE_OF = {
    "canvas_add_card": "card",
    "canvas_show_text": "text",
    "canvas_show_chart": "chart",
    "canvas_show_table": "table",
    "canvas_play_media": "media",
    "canvas_show_confirmation": "confirmation",
}
COMMAND_OF = {kind: command for command, kind in TYPE_OF.items()}


class CanvasMirror:
    """What a browser keeps: the canvas rebuilt from `canvas_command` frames, as the server sends them."""

    def __init__(self) -> None:
        self.elements: list[dict[str, Any]] = []
        self.theme = ""
        self.version: int | None = None
        self.notifications: list[dict[str, Any]] = []

    def apply(self, frame: dict[str, Any]) -> None:
        assert frame["type"] == "canvas_command", frame
        command, params = frame["command"], copy.deepcopy(frame["params"])
        self.version = frame["version"]
        if command == "canvas_set_mode":
            if params["mode"] == "clear":  # the theme stays: it is not an element; `keep` elements stay
                self.elements = [e for e in self.elements if e["id"] in params.get("keep", [])]
        elif command in TYPE_OF:
            element = {"type": TYPE_OF[command], **params}
            index = self._index(params["id"])
            if index is None:
                self.elements.append(element)
            else:
                self.elements[index] = element
        elif command == "canvas_update_card":
            index = self._index(params["id"])
            self.elements[index] = {"type": self.elements[index]["type"], **params}
        elif command == "canvas_remove_element":
            self.elements.pop(self._index(params["id"]))
        elif command == "canvas_set_theme":
            self.theme = params["theme"]
        elif command == "canvas_show_notification":
            self.notifications.append(params)
        else:
            raise AssertionError(f"unknown command {command}")

    def _index(self, element_id: str) -> int | None:
        for index, element in enumerate(self.elements):
            if element["id"] == element_id:
                return index
        return None

    def state(self) -> dict[str, Any]:
        return {"elements": self.elements, "theme": self.theme, "version": self.version}
