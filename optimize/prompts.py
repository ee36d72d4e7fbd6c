"""Training prompts for recovering a pruned chat model: instructions the teacher answers.

Why: the generation gate measures agreement on the baseline's own greedy chat answers, so the
pruned model is distilled on the same kind of text — the teacher's greedy answers to user turns —
rather than on Wikipedia prose alone. None of these is, or paraphrases, a held-out prompt
(optimize/evaluate/heldout.py), and none shares a topic word with the instruction set that gates a pruned
model (optimize/evaluate/instruction_set.json): tests/test_prune.py checks both. Questions from the SQuAD
*training* articles are added by `prompts()`.

Until 2026-11-23 `prompts()` drew on every topic, seven of which share a word with eight prompts of
the instruction set ("recycling", "tea", "the moon landing", "the human heart", ...). The recovery
deltas committed then were distilled on those; measured afterwards, the 2 % `pruned` model of that
time passed 6 of the 8 overlapping prompts where the baseline passes 7, so they did not lift its
score. The default `pruned` since 2026-11-26 was distilled without them (experiments/gpu/gpu_reading_distill.py).
"""
from __future__ import annotations

import random

TEMPLATES: tuple[str, ...] = (
    "What is {topic}? Answer briefly.",
    "Explain {topic} to a ten-year-old.",
    "Write a four-line poem about {topic}.",
    "Give two interesting facts about {topic}.",
    "List three things people often get wrong about {topic}.",
    "Write a short story that involves {topic}.",
    "Why do people care about {topic}?",
    "Describe {topic} in one paragraph.",
    "What are the pros and cons of {topic}?",
    "Write a tweet about {topic}.",
)

TOPICS: tuple[str, ...] = (
    "volcanoes", "the moon landing", "honeybees", "chess", "the Roman Empire", "rainforests",
    "electric cars", "jazz music", "the human heart", "recycling", "mountain climbing", "bread baking",
    "the printing press", "earthquakes", "owls", "the Olympic Games", "gardening", "the internet",
    "dinosaurs", "coral reefs", "democracy", "bicycles", "the piano", "glaciers", "vaccines",
    "public libraries", "the stock market", "tea", "origami", "penguins", "solar panels",
    "the Great Wall of China", "friendship", "deserts", "trains", "museums", "thunderstorms",
    "video games", "the violin", "rivers", "ancient Egypt", "robots", "winter", "chocolate",
    "lighthouses", "elephants", "the alphabet", "maps", "bridges", "running a marathon",
)


def prompts(squad_questions: list[str], count: int = 640, seed: int = 42,
            topics: tuple[str, ...] | None = None) -> list[str]:
    """Half templated instructions, half SQuAD training questions, shuffled deterministically.
    `topics`: None = the topics that may teach (`teaching_topics`); calibration, which sets
    activation scales and teaches nothing, passes TOPICS (the shipped INT8 graphs were calibrated so)."""
    rng = random.Random(seed)
    topics = teaching_topics() if topics is None else topics
    instructions = [t.format(topic=topic) for t in TEMPLATES for topic in topics]
    rng.shuffle(instructions)
    questions = list(dict.fromkeys(squad_questions))
    rng.shuffle(questions)
    taken = instructions[: count // 2]
    chosen = taken + questions[: count - len(taken)]
    rng.shuffle(chosen)
    return chosen


# Instructions that ask for a shape of answer (lists, JSON, one sentence, yes/no first, steps):
# the instruction set scores such shapes, and a 20 % cut lost them first (issue 13), so longer
# distillation adds the teacher's own answers to these. Their topics share no word with a prompt
# of the instruction set (tests/test_prune.py), so the set still measures and never teaches.
FORMAT_TEMPLATES: tuple[str, ...] = (
    "Name three facts about {topic}, one per line, each line starting with an asterisk.",
    "Give a numbered list of four steps for learning about {topic}.",
    "Summarize {topic} in exactly one sentence.",
    "Write a JSON object with the keys \"topic\" and \"fact\" for {topic}.",
    "Write a short email to a colleague about {topic}.",
    "Describe {topic} in three short stages, one per line.",
    "Give one adjective that describes {topic}. Reply with the adjective only.",
    "Write a two-sentence summary of {topic} for a school report.",
    "Does {topic} matter in everyday life? Start your answer with yes or no.",
    "Write a title for an article about {topic}, in quotation marks.",
)
_COMMON = {"the", "a", "of", "in", "and"}


def _words(text: str) -> set[str]:
    import re

    return set(re.findall(r"[a-z]+", text.lower())) - _COMMON


def format_prompts(seed: int = 42) -> list[str]:
    """FORMAT_TEMPLATES over the topics that share no word with an instruction-set prompt."""
    topics = teaching_topics()
    chosen = [template.format(topic=topic) for template in FORMAT_TEMPLATES for topic in topics]
    random.Random(seed).shuffle(chosen)
    return chosen


def teaching_topics() -> tuple[str, ...]:
    """TOPICS that share no word with an instruction-set prompt: the set measures, it never teaches."""
    from optimize.evaluate.instructions import load

    measured = set().union(*(_words(item["prompt"]) for item in load()))
    return tuple(topic for topic in TOPICS if not _words(topic) & measured)
