"""A probe set of short-answer prompts (issue 49, item 2): the kinds of the instruction set (facts, arithmetic,
formats), written for this probe, none of them a prompt of the instruction set or of the validation set, and no
answer word of either. Used to ask whether the 20 % cut lost short-answer knowledge that no recovery round's data
asked for; never used to choose a model."""
PROBE = [
    # facts
    ("fact", "What is the capital of Egypt?", {"all": ["cairo"]}),
    ("fact", "What is the capital of Norway?", {"all": ["oslo"]}),
    ("fact", "What is the capital city of Portugal?", {"all": ["lisbon"]}),
    ("fact", "Which city is the capital of Kenya?", {"all": ["nairobi"]}),
    ("fact", "What is the capital of Argentina?", {"all": ["buenos aires"]}),
    ("fact", "Who wrote the novel Pride and Prejudice?", {"all": ["austen"]}),
    ("fact", "Who discovered penicillin?", {"all": ["fleming"]}),
    ("fact", "How many sides does a triangle have?", {"any": ["three", "3"]}),
    ("fact", "How many wheels does a bicycle have?", {"any": ["two", "2"]}),
    ("fact", "What is the smallest planet in our solar system?", {"all": ["mercury"]}),
    ("fact", "Which animal is known as the king of the jungle?", {"all": ["lion"]}),
    ("fact", "What do bees make?", {"all": ["honey"]}),
    ("fact", "What is the longest river in Africa?", {"all": ["nile"]}),
    ("fact", "Which metal is liquid at room temperature?", {"all": ["mercury"]}),
    ("fact", "How many players are on a soccer team on the field?", {"any": ["eleven", "11"]}),
    ("fact", "What is the main language spoken in Brazil?", {"all": ["portuguese"]}),
    ("fact", "Which instrument has 88 keys?", {"all": ["piano"]}),
    ("fact", "What is the freezing point of water in Fahrenheit?", {"all": ["32"]}),
    ("fact", "Which bird is a symbol of peace?", {"all": ["dove"]}),
    ("fact", "What is the color of a ripe banana?", {"all": ["yellow"]}),
    # arithmetic
    ("arithmetic", "What is 8 + 6? Answer with the number only.", {"regex": r"\b14\b"}),
    ("arithmetic", "What is 13 minus 4? Answer with the number only.", {"regex": r"\b9\b"}),
    ("arithmetic", "What is 6 times 7? Answer with the number only.", {"regex": r"\b42\b"}),
    ("arithmetic", "What is 36 divided by 9? Answer with the number only.", {"regex": r"\b4\b"}),
    ("arithmetic", "Add 12 and 13. What do you get?", {"regex": r"\b25\b"}),
    ("arithmetic", "What is half of 80?", {"regex": r"\b40\b"}),
    ("arithmetic", "What is double 15?", {"regex": r"\b30\b"}),
    ("arithmetic", "How many hours are there in three days?", {"regex": r"\b72\b"}),
    ("arithmetic", "How many weeks are in a year?", {"regex": r"\b52\b|fifty-two"}),
    ("arithmetic", "Ben has 6 marbles and finds 3 more. How many marbles does he have now?", {"regex": r"\b9\b|nine"}),
    ("arithmetic", "What is 90 - 30? Answer with the number only.", {"regex": r"\b60\b"}),
    ("arithmetic", "Which number is larger, 38 or 83?", {"regex": r"\b83\b"}),
    ("arithmetic", "Is 9 an even number or an odd number?", {"regex": "odd"}),
    ("arithmetic", "How many legs do three dogs have in total?", {"regex": r"\b12\b|twelve"}),
    # formats
    ("format", "Is water wet? Answer with only yes or no.", {"regex": r"^\W*yes\b"}),
    ("format", "Can a fish climb a tree? Answer with only yes or no.", {"regex": r"^\W*no\b"}),
    ("format", "Write the word welcome in capital letters only.", {"case_sensitive": True, "regex": "WELCOME"}),
    ("format", "List three countries, one per line, each line starting with a dash.",
     {"regex": r"(?m)^\s*- .+\n\s*- .+\n\s*- .+"}),
    ("format", "Give a numbered list of three sports.", {"regex": r"(?s)1\..*2\..*3\."}),
    ("format", "In one word, what color is coal?", {"all": ["black"]}),
    ("format", 'Return a JSON object with a single key "pet" whose value is "dog".',
     {"regex": r"\{\s*\"pet\"\s*:\s*\"dog\"\s*\}"}),
    ("format", "Repeat exactly this sentence: The train leaves at noon.", {"all": ["the train leaves at noon"]}),
    ("format", "Translate the German word 'danke' into English.", {"any": ["thank"]}),
    ("format", "What is the opposite of up? Answer in one word.", {"any": ["down"]}),
    ("format", "What is the opposite of light? Answer in one word.", {"any": ["dark", "heavy"]}),
    ("format", "What is the plural of goose?", {"all": ["geese"]}),
    ("format", "What is the plural of tooth?", {"all": ["teeth"]}),
    ("format", "What is the past tense of go?", {"all": ["went"]}),
    ("format", "Give one synonym for smart.", {"any": ["intelligent", "clever", "bright", "wise", "brilliant", "sharp"]}),
    ("format", "What is the first letter of the word banana?", {"regex": r"\b[Bb]\b|\"b\"|'b'"}),
    ("format", "Complete the sentence: Actions speak louder than", {"all": ["words"]}),
    ("format", "Complete the sentence: Every cloud has a silver", {"all": ["lining"]}),
]


def probe_prompts() -> list[dict]:
    return [{"id": f"probe-{i}", "kind": kind, "prompt": prompt, "check": check}
            for i, (kind, prompt, check) in enumerate(PROBE)]
