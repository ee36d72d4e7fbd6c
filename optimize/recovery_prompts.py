"""Training prompts for recovering a pruned chat model: instructions the teacher answers.

Why: the generation gate measures agreement on the baseline's own greedy chat answers, so the
pruned model is distilled on the same kind of text — the teacher's greedy answers to user turns —
rather than on Wikipedia prose alone. None of these is, or paraphrases, a held-out prompt
(optimize/heldout.py); tests/test_prune.py checks that no held-out prompt or topic is reused.
Questions from the SQuAD *training* articles are added by `prompts()`.
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


def prompts(squad_questions: list[str], count: int = 640, seed: int = 42) -> list[str]:
    """Half templated instructions, half SQuAD training questions, shuffled deterministically."""
    rng = random.Random(seed)
    instructions = [t.format(topic=topic) for t in TEMPLATES for topic in TOPICS]
    rng.shuffle(instructions)
    questions = list(dict.fromkeys(squad_questions))
    rng.shuffle(questions)
    taken = instructions[: count // 2]
    chosen = taken + questions[: count - len(taken)]
    rng.shuffle(chosen)
    return chosen
