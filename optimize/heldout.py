"""Held-out prompts for generation accuracy (never used to train or prune anything)."""

PROMPTS: tuple[str, ...] = (
    "What is the capital of France? Answer in one sentence.",
    "Explain in two sentences why the sky is blue.",
    "Write a short poem about the sea.",
    "Give three tips for learning a new language.",
    "What is photosynthesis?",
    "Summarize the story of Cinderella in three sentences.",
    "How do I boil an egg?",
    "What are the main differences between a cat and a dog as pets?",
    "Name the planets of the solar system.",
    "Why is exercise good for your health?",
    "Write a friendly email inviting a colleague to lunch.",
    "What does a computer's CPU do?",
    "Describe a sunset to someone who has never seen one.",
    "What is the boiling point of water at sea level?",
    "Suggest a name for a small coffee shop and explain why.",
    "How many days are there in a leap year?",
)
