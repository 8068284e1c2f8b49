"""At most BUDDY_TURN_SLOTS turns work at once outside the model call (agent/threads.py); a turn
waiting on the model lends its slot, except inside a transaction."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import transaction

from agent import threads
from agent.threads import turn_slot, turn_slot_lent

WAIT = 30  # seconds before a test fails instead of hanging


@pytest.fixture
def slots(settings):
    def use(count: int) -> None:
        settings.BUDDY_TURN_SLOTS = count
        threads._turn_slots.cache_clear()

    yield use
    threads._turn_slots.cache_clear()


def test_no_more_turns_work_at_once_than_there_are_slots(slots):
    slots(2)
    lock = threading.Lock()
    working = [0]
    most = [0]

    def turn() -> None:
        with turn_slot():
            with lock:
                working[0] += 1
                most[0] = max(most[0], working[0])
            time.sleep(0.02)
            with lock:
                working[0] -= 1

    turns = [threading.Thread(target=turn) for _ in range(8)]
    for one in turns:
        one.start()
    for one in turns:
        one.join(WAIT)
    assert most[0] == 2


def test_a_turn_waiting_on_the_model_lends_its_slot_and_takes_one_back(slots):
    slots(1)
    lent = threading.Event()
    other_worked = threading.Event()
    back = threading.Event()

    def waiting_on_the_model() -> None:
        with turn_slot():
            with turn_slot_lent():
                lent.set()
                assert other_worked.wait(WAIT)
            back.set()  # holds a slot again here
            time.sleep(0.05)

    def other() -> None:
        assert lent.wait(WAIT)
        with turn_slot():
            other_worked.set()

    first = threading.Thread(target=waiting_on_the_model)
    second = threading.Thread(target=other)
    first.start()
    second.start()
    first.join(WAIT)
    second.join(WAIT)
    assert other_worked.is_set() and back.is_set()
    # Both slots' worth given back: the one slot is free again.
    assert threads._turn_slots().acquire(timeout=1)


@pytest.mark.django_db(transaction=True)
def test_no_slot_is_lent_inside_a_transaction(slots):
    slots(1)
    with turn_slot(), transaction.atomic(), turn_slot_lent():
        # Still held: another thread can take no slot while this one may hold database locks.
        taken = []
        thief = threading.Thread(target=lambda: taken.append(threads._turn_slots().acquire(timeout=0.2)))
        thief.start()
        thief.join(WAIT)
        assert taken == [False]


def test_lending_is_a_no_op_on_a_thread_without_a_slot(slots):
    slots(1)
    with turn_slot_lent():
        pass
    assert threads._turn_slots().acquire(timeout=1)  # nothing was released or taken
    assert not threads._turn_slots().acquire(timeout=0.05)
