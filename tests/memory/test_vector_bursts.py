"""One vector job per burst of turns, and always one after its last turn (memory.semantic.vectors_schedule)."""

from __future__ import annotations

import threading

from memory import semantic


def test_a_burst_of_turns_queues_one_job_then_one_when_it_ends(settings, monkeypatch):
    settings.BUDDY_SEMANTIC_SEARCH = "on"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    monkeypatch.setattr(semantic._vector_bursts, "span", 0.5)
    queued: list[int] = []
    trailing = threading.Event()

    def queue(session_id: int) -> None:
        queued.append(session_id)
        if len(queued) == 3:
            trailing.set()

    monkeypatch.setattr(semantic, "_vectors_queue", queue)
    for _ in range(5):  # five turns of chat 7, faster than the burst span
        semantic.vectors_schedule(session_id=7)
    semantic.vectors_schedule(session_id=8)  # another chat has its own burst
    assert queued == [7, 8]  # the first turn's job at once; the others wait for the burst's end
    assert trailing.wait(30)
    assert queued == [7, 8, 7]  # one job for the four turns after the first


def test_inline_task_runs_queue_every_time(settings, monkeypatch):
    settings.BUDDY_SEMANTIC_SEARCH = "on"
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    queued: list[int] = []
    monkeypatch.setattr(semantic, "_vectors_queue", queued.append)
    semantic.vectors_schedule(session_id=7)
    semantic.vectors_schedule(session_id=7)
    assert queued == [7, 7]
