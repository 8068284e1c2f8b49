"""Turns run on their own bounded pool (agent/threads.py): a server whose turn threads all wait on a
slow model still answers /healthz and requests that need the event loop's default executor."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request

import pytest

from conversations.tokens import api_token_create
from devtools.servers import daphne

pytestmark = pytest.mark.django_db(transaction=True)

TURN_THREADS = 2
# More turns than the turn pool and the loop's default executor (Python's default size) hold together.
TURNS = TURN_THREADS + min(32, (os.cpu_count() or 1) + 4) + 1
WAIT = 60  # seconds any one request may take here before the test fails instead of hanging


def prompt(url: str, token: str, chat_id: str, answers: list[int]) -> None:
    request = urllib.request.Request(
        f"{url}/prompt",
        data=json.dumps({"text": "slow one", "chat_id": chat_id}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        answers.append(response.status)


class SlowModel:
    """The fake model holding every call until `release` is set; `reached` counts the calls waiting."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.reached = threading.Semaphore(0)

    def __call__(self, body):
        self.reached.release()
        self.release.wait(WAIT)
        return None  # the default echo


@pytest.fixture
def slow_model(model):
    slow = SlowModel()
    model.responder = slow
    yield slow
    slow.release.set()
    model.responder = None


def test_healthz_and_a_404_answer_while_every_turn_thread_waits_on_the_model(model, slow_model, user):
    token = api_token_create(user=user)
    answers: list[int] = []
    with daphne(BUDDY_TURN_THREADS=str(TURN_THREADS)) as url:
        turns = [
            threading.Thread(target=prompt, args=(url, token, f"chat-{n}", answers), daemon=True) for n in range(TURNS)
        ]
        try:
            for turn in turns:
                turn.start()
            for _ in range(TURN_THREADS):
                assert slow_model.reached.acquire(timeout=WAIT)
            # Every turn thread is waiting on the model, and the other turns wait for a turn thread.
            with urllib.request.urlopen(f"{url}/healthz", timeout=WAIT) as response:
                assert (response.status, json.load(response)) == (200, {"status": "ok"})
            # A 4xx answer (logged on its request's own thread) while every turn thread is taken.
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(f"{url}/no-such-page", timeout=WAIT)
            assert missing.value.code == 404
            assert len(model.requests) == TURN_THREADS
            assert all(turn.is_alive() for turn in turns) and not answers
        finally:
            slow_model.release.set()
            for turn in turns:
                turn.join(WAIT)
    assert answers == [200] * TURNS


def test_turns_waiting_on_the_model_lend_their_slots(slow_model, user):
    """With one slot, both turn threads still reach the model together: a turn waiting on it lends
    its slot (agent/threads.py)."""
    token = api_token_create(user=user)
    answers: list[int] = []
    with daphne(BUDDY_TURN_THREADS=str(TURN_THREADS), BUDDY_TURN_SLOTS="1") as url:
        turns = [
            threading.Thread(target=prompt, args=(url, token, f"chat-{n}", answers), daemon=True)
            for n in range(TURN_THREADS)
        ]
        try:
            for turn in turns:
                turn.start()
            for _ in range(TURN_THREADS):
                assert slow_model.reached.acquire(timeout=WAIT)
        finally:
            slow_model.release.set()
            for turn in turns:
                turn.join(WAIT)
    assert answers == [200] * TURN_THREADS


def test_a_view_has_its_answer_before_the_work_left_for_after_it():
    """on_turn_thread_wait answers as soon as the function returns; what the function left for after
    its answer (agent.threads.after_answer) runs then, on the same turn thread. Elsewhere, such work runs
    at once; a failing one is logged and breaks nothing."""
    from agent.threads import after_answer, on_turn_thread_wait

    started, release, done, threads = threading.Event(), threading.Event(), threading.Event(), []

    def follow_up() -> None:
        threads.append(threading.current_thread().name)
        started.set()
        assert release.wait(WAIT)
        done.set()

    def work() -> str:
        threads.append(threading.current_thread().name)
        after_answer(lambda: 1 / 0)
        after_answer(follow_up)
        return "answer"

    assert on_turn_thread_wait(work) == "answer"
    assert started.wait(WAIT) and not done.is_set()  # the answer came while the follow-up was held
    release.set()
    assert done.wait(WAIT)
    assert threads[0] == threads[1] and threads[0].startswith("buddy-turn")
    ran = []
    after_answer(lambda: ran.append(threading.current_thread().name))  # not on a turn thread: now
    assert ran == [threading.current_thread().name]


def test_a_failing_function_answers_its_view_with_its_error():
    from agent.threads import after_answer, on_turn_thread_wait

    ran = threading.Event()

    def failing() -> None:
        after_answer(ran.set)
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        on_turn_thread_wait(failing)
    assert ran.wait(WAIT)  # what it left for after its answer still runs


def test_a_failure_before_the_function_runs_answers_the_view(monkeypatch):
    """Taking a turn slot failing (or the pool shutting down) answers the waiting view with the error,
    never leaves it waiting."""
    import agent.threads
    from agent.threads import on_turn_thread_wait

    def broken_slot():
        raise RuntimeError("no slot")

    monkeypatch.setattr(agent.threads, "turn_slot", broken_slot)
    outcome = []

    def wait() -> None:
        try:
            on_turn_thread_wait(lambda: "never")
        except RuntimeError as error:
            outcome.append(str(error))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(WAIT)
    assert outcome == ["no slot"]
