"""Helpers of the memory tests that run turns over HTTP."""

from __future__ import annotations


def post(client, text: str, chat_id: str = "main") -> dict:
    """`POST /prompt` that must succeed; its JSON answer."""
    response = client.post("/prompt", {"text": text, "chat_id": chat_id}, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()
