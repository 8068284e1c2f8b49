"""LoCoMo conversations as Buddy chats, and their questions, as ../shared/data/README.md defines them.

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents", 2024;
CC BY-NC 4.0) is read from a path the user passes, never shipped with Buddy:

- one conversation is one chat; its turns in order, `speaker_a` as role `user`, `speaker_b` as
  `assistant`; each turn's text is `"{speaker}: {text}"`, plus `" [shares an image: {blip_caption}]"`
  when the turn has one; `created_at` is the session's `session_N_date_time` plus the turn's index
  in seconds;
- the questions are those of categories 1–4 with evidence (category 5 is adversarial); a question is
  answered at k when one of its evidence turns is among the first k results.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEFAULT_PATH = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SESSION_KEY = re.compile(r"session_(\d+)$")


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    answers: frozenset[int]  # indexes into Conversation.messages


@dataclass
class Conversation:
    sample_id: str
    messages: list[tuple[str, str, datetime]] = field(default_factory=list)  # (role, text, created_at)
    questions: list[Question] = field(default_factory=list)


def session_time(text: str) -> datetime:
    """LoCoMo's session dates, e.g. "1:56 pm on 8 May, 2023", as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path | str = DEFAULT_PATH) -> list[Conversation]:
    with open(path, encoding="utf-8") as file:
        samples = json.load(file)
    return [_conversation(sample) for sample in samples]


def _conversation(sample: dict) -> Conversation:
    dialogue = sample["conversation"]
    roles = {dialogue["speaker_a"]: "user", dialogue["speaker_b"]: "assistant"}
    conversation = Conversation(sample_id=sample.get("sample_id", ""))
    index_of: dict[str, int] = {}
    numbers = sorted(int(match.group(1)) for key in dialogue if (match := _SESSION_KEY.match(key)))
    for number in numbers:
        started = session_time(dialogue[f"session_{number}_date_time"])
        for position, turn in enumerate(dialogue[f"session_{number}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            index_of[turn["dia_id"]] = len(conversation.messages)
            conversation.messages.append((roles[turn["speaker"]], text, started + timedelta(seconds=position)))
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        answers = frozenset(index_of[dia_id] for dia_id in _evidence(qa) if dia_id in index_of)
        if answers:
            conversation.questions.append(Question(text=qa["question"], category=qa["category"], answers=answers))
    return conversation


def _evidence(qa: dict) -> list[str]:
    """Evidence ids as listed; a few entries hold several ids in one string ("D8:6; D9:17")."""
    ids: list[str] = []
    for entry in qa.get("evidence") or []:
        ids += [f"D{session}:{turn}" for session, turn in re.findall(r"D:?(\d+):(\d+)", str(entry))]
    return ids
