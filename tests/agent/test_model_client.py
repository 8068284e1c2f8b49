"""What a model call costs the process beyond the call: nothing built again per turn (docs/benchmarks.md,
"A turn's own cost")."""

from __future__ import annotations

import gc

import pytest
from pydantic._internal import _generics

from agent.llm import AnthropicClient


@pytest.fixture
def generic_classes_built(monkeypatch) -> list[str]:
    """The names of the pydantic generic classes built from now on."""
    built: list[str] = []
    build = _generics.create_generic_submodel

    def counting(name, *args, **kwargs):
        built.append(name)
        return build(name, *args, **kwargs)

    monkeypatch.setattr(_generics, "create_generic_submodel", counting)
    return built


def test_a_stream_after_a_garbage_collection_builds_no_pydantic_class(model, generic_classes_built):
    client = AnthropicClient()

    def one_call() -> str:
        reply = client.stream(
            model="claude-test",
            system=[{"type": "text", "text": "Be brief."}],
            messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
            tools=[],
            max_tokens=100,
            on_text=lambda text: None,
            should_stop=lambda: False,
        )
        return reply.content[0]["text"]

    assert one_call() == "Echo: hello"
    gc.collect()
    generic_classes_built.clear()
    assert one_call() == "Echo: hello"
    assert generic_classes_built == []


def test_the_server_freezes_the_heap_it_starts_with(settings):
    from buddy.server import heap_freeze

    settings.BUDDY_LLM = "offline"
    threshold = gc.get_threshold()
    try:
        heap_freeze()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] > threshold[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
