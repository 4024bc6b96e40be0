"""Training prompts for self-distillation: templates x fill-ins, seeded and reproducible.

Three categories, in the style of the held-out set ``assets/prompts/eval.jsonl``:
``chat`` (questions, instructions, explanations), ``math`` (word problems with random numbers)
and ``code`` (short programming requests). Prompts are short: SmolLM2-135M-Instruct answers
short, plain requests sensibly and drifts on long or tricky ones.

The training set is kept disjoint from the eval set: any prompt whose normalized text equals an
eval prompt, or that shares almost all its words with one, is dropped (``training_prompts``
asserts it).

    python -m dominotree.train.prompts --n 5 --seed 0     # print a sample
"""
from __future__ import annotations

import argparse
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

CATEGORIES = ("chat", "math", "code")
EVAL_PATH = Path(__file__).resolve().parents[2] / "assets" / "prompts" / "eval.jsonl"
DEFAULT_MIX = {"chat": 0.40, "math": 0.30, "code": 0.30}


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    prompt: str


# --------------------------------------------------------------------------------------------
# chat

TOPICS = [
    "photosynthesis", "gravity", "the water cycle", "volcanoes", "earthquakes", "black holes",
    "the moon's phases", "tides", "electricity", "magnets", "vaccines", "the immune system",
    "dinosaurs", "the Roman Empire", "the printing press", "the Industrial Revolution",
    "democracy", "inflation", "interest rates", "supply and demand", "recycling",
    "solar power", "wind turbines", "the internet", "email", "passwords", "GPS",
    "the human heart", "sleep", "dreams", "memory", "honey bees", "coral reefs",
    "rain forests", "deserts", "glaciers", "the seasons", "thunderstorms", "snowflakes",
    "the speed of light", "sound waves", "atoms", "DNA", "evolution", "the stock market",
    "budgeting", "composting", "coffee", "bread baking", "chess", "the Olympic Games",
    "the pyramids of Egypt", "the Great Wall of China", "airplanes", "rockets", "satellites",
    "clouds", "fossils", "the solar system", "Mars", "the sun", "batteries", "microwaves",
    "refrigerators", "bicycles", "trains", "maps", "libraries", "museums", "music notes",
    "the piano", "poetry", "novels", "photography", "meditation", "exercise", "nutrition",
    "vitamins", "water pollution", "plastic waste", "forests", "owls", "whales", "penguins",
    "octopuses", "ants", "butterflies", "volunteering", "teamwork", "public speaking",
    "the French Revolution", "ancient Greece", "the Vikings", "the Renaissance", "Shakespeare",
    "Albert Einstein", "Marie Curie", "Isaac Newton", "the Moon landing", "the Titanic",
    "the rule of law", "taxes", "banks", "credit cards", "renewable energy", "nuclear power",
    "climate change", "the ozone layer", "the greenhouse effect", "the food chain",
    "camouflage in animals", "hibernation", "bird migration", "the human brain", "the skeleton",
    "muscles", "blood", "the lungs", "digestion", "the five senses", "color mixing",
    "rainbows in the sky", "lightning", "the northern lights", "comets", "the Milky Way",
    "telescopes", "microscopes", "the wheel", "paper", "the telephone", "television",
    "video games", "social media", "artificial intelligence", "robots", "3D printing",
    "cloud computing", "electric cars", "traffic lights", "bridges", "skyscrapers",
    "volcanic islands", "the Amazon river", "the Sahara desert", "mountains", "caves",
    "soil", "seeds", "mushrooms", "yeast", "cheese making", "chocolate", "tea ceremonies",
    "jazz music", "the guitar", "ballet", "painting with watercolors", "origami", "gardening",
    "first aid", "fire safety", "kindness", "gratitude", "habits", "time management",
]

EXPLAIN_T = [
    "Explain {topic} in simple terms.",
    "What is {topic}?",
    "Can you explain {topic} to a beginner?",
    "Give me a short explanation of {topic}.",
    "Tell me three interesting facts about {topic}.",
    "Why is {topic} important?",
    "Describe {topic} in a few sentences.",
    "Explain {topic} to a ten-year-old.",
    "What are the main ideas behind {topic}?",
    "Write a short paragraph about {topic}.",
    "How does {topic} work?",
    "What should everyone know about {topic}?",
    "Write two sentences about {topic}.",
    "What is the history of {topic}?",
]

QUESTIONS = [
    "Why is the sky blue?", "How do birds know where to migrate?", "Why do leaves change color?",
    "How does a refrigerator keep food cold?", "Why do we have time zones?",
    "How do plants drink water?", "Why does bread rise?", "How do fish breathe underwater?",
    "Why do we yawn?", "How does a compass work?", "What makes a good friend?",
    "Why do onions make you cry?", "How do airplanes fly?", "Why is exercise good for you?",
    "How do bees make honey?", "Why does ice float?", "What causes hiccups?",
    "How does recycling help the planet?", "Why do stars twinkle?", "How do vaccines work?",
    "What is the tallest mountain in the world?", "What is the largest ocean on Earth?",
    "Who wrote Romeo and Juliet?", "How many continents are there?",
    "What is the capital of Japan?", "What is the capital of Canada?",
    "What is the capital of Italy?", "What is the capital of Brazil?",
    "What is the capital of Australia?", "What is the longest river in the world?",
    "How many planets are in the solar system?", "What do pandas eat?",
    "Why do dogs wag their tails?", "How long does it take light from the sun to reach Earth?",
    "What is the boiling point of water?", "Why do we need sleep?",
    "How do you make a cup of tea?", "What is the difference between a frog and a toad?",
    "What is the difference between a virus and a bacterium?",
    "What is the difference between a lake and a pond?",
    "How can I be more productive when working from home?",
    "How do I start learning to draw?", "What is a healthy breakfast?",
    "How can I save money on groceries?", "How do I keep a houseplant alive?",
    "What is a good way to start a conversation with someone new?",
    "How do I prepare for a job interview?", "How can I reduce stress before an exam?",
]

ADVICE_GOALS = [
    "staying focused while studying", "drinking more water", "waking up earlier",
    "keeping my desk organized", "making new friends in a new city", "writing a good essay",
    "running my first 5K", "cooking simple meals at home", "reading more books",
    "spending less time on my phone", "saving money each month", "staying calm in traffic",
    "taking care of a new puppy", "learning to swim as an adult", "remembering people's names",
    "keeping a journal", "planning a birthday party", "growing tomatoes on a balcony",
    "traveling on a small budget", "giving a presentation at work",
]
ADVICE_T = [
    "Give me {n} tips for {goal}.",
    "What are some good ways of {goal}?",
    "I need advice on {goal}. Any suggestions?",
    "List {n} simple ideas for {goal}.",
]

WRITE_KINDS = [
    ("a short poem", ["the ocean", "a rainy day", "friendship", "the city at night", "spring",
                      "a lost cat", "the stars", "morning coffee", "a quiet forest", "winter"]),
    ("a haiku", ["the moon", "cherry blossoms", "a mountain lake", "first snow", "a summer storm",
                 "an old tree", "the wind", "a sunrise"]),
    ("a short story", ["a robot who learns to paint", "a dragon who is afraid of fire",
                       "a girl who finds a secret door", "a lighthouse keeper", "a talking dog",
                       "a boy who can speak to birds", "a lost astronaut", "a magic pencil"]),
    ("a birthday message", ["my best friend", "my grandmother", "a coworker", "my brother",
                            "my teacher"]),
    ("a polite email", ["asking my manager for a day off", "thanking a client",
                        "asking a professor for an extension", "rescheduling a meeting",
                        "following up after a job interview"]),
    ("a product description", ["a reusable water bottle", "a wooden desk lamp",
                               "a pair of running shoes", "a backpack for hikers",
                               "a ceramic coffee mug"]),
    ("a short speech", ["a school graduation", "a friend's wedding", "a team that won a game",
                        "a retirement party"]),
]
WRITE_T = [
    "Write {kind} about {about}.",
    "Please write {kind} about {about}.",
    "Can you write {kind} about {about}?",
]
WRITE_FOR_T = [
    "Write {kind} for {about}.",
    "Please write {kind} for {about}.",
]

COMPARE_PAIRS = [
    ("a cat", "a dog"), ("tea", "coffee"), ("a city", "a village"), ("summer", "winter"),
    ("reading a book", "watching a movie"), ("the sun", "the moon"), ("a lake", "a river"),
    ("a laptop", "a desktop computer"), ("walking", "running"), ("trains", "planes"),
    ("renting", "buying a house"), ("email", "a phone call"), ("an apple", "an orange"),
    ("a hurricane", "a tornado"), ("weather", "seasons"), ("a star", "a planet"),
]
COMPARE_T = [
    "What is the difference between {a} and {b}?",
    "Compare {a} and {b}.",
    "What are the pros and cons of {a} versus {b}?",
]

REWRITE_SENTENCES = [
    "The meeting was moved to Thursday because many people were sick.",
    "Our team finished the project two days before the deadline.",
    "I can't come to the party tonight because I have to work late.",
    "The new park has a playground, a pond and a small cafe.",
    "Please remember to turn off the lights when you leave the room.",
    "The library will be closed on Monday for cleaning.",
    "She practiced the piano every day and won the school contest.",
    "The train was late, so we missed the start of the movie.",
]
REWRITE_T = [
    "Rewrite this sentence to sound more formal: {s}",
    "Make this sentence shorter: {s}",
    "Rewrite this sentence in a friendly tone: {s}",
    "Translate this sentence into French: {s}",
    "Translate this sentence into Spanish: {s}",
    "Fix any mistakes and improve this sentence: {s}",
]

SUMMARIZE_STORIES = [
    "Little Red Riding Hood", "Goldilocks and the Three Bears", "The Tortoise and the Hare",
    "Jack and the Beanstalk", "The Three Little Pigs", "Snow White", "The Ugly Duckling",
    "Hansel and Gretel", "Peter Pan", "The Boy Who Cried Wolf",
]
SUMMARIZE_T = [
    "Summarize the story of {s} in a few sentences.",
    "What is the moral of {s}?",
    "Retell {s} in three sentences.",
]

NAME_T = [
    "Suggest a name for {thing}.",
    "Give me five name ideas for {thing}.",
]
NAME_THINGS = [
    "a coffee shop", "a pet goldfish", "a hiking club", "a book club", "a food truck",
    "a bookstore", "a small garden center", "a podcast about science", "a robot toy",
    "a family board game night", "a running team", "a cooking blog",
]


def _chat(rng: random.Random) -> str:
    kind = rng.choices(
        ["explain", "question", "advice", "write", "compare", "rewrite", "summarize", "name"],
        weights=[24, 18, 12, 16, 8, 8, 6, 4],
    )[0]
    if kind == "explain":
        return rng.choice(EXPLAIN_T).format(topic=rng.choice(TOPICS))
    if kind == "question":
        return rng.choice(QUESTIONS)
    if kind == "advice":
        return rng.choice(ADVICE_T).format(n=rng.choice(["three", "five", "3", "4"]),
                                           goal=rng.choice(ADVICE_GOALS))
    if kind == "write":
        k, abouts = rng.choice(WRITE_KINDS)
        about = rng.choice(abouts)
        tpl = WRITE_FOR_T if k in ("a birthday message", "a short speech", "a product description") \
            and not about.startswith("asking") else WRITE_T
        if k == "a polite email":
            return rng.choice(["Write a polite email {a}.", "Please write a short, polite email {a}."]
                              ).format(a=about)
        return rng.choice(tpl).format(kind=k, about=about)
    if kind == "compare":
        a, b = rng.choice(COMPARE_PAIRS)
        return rng.choice(COMPARE_T).format(a=a, b=b)
    if kind == "rewrite":
        return rng.choice(REWRITE_T).format(s=rng.choice(REWRITE_SENTENCES))
    if kind == "summarize":
        return rng.choice(SUMMARIZE_T).format(s=rng.choice(SUMMARIZE_STORIES))
    return rng.choice(NAME_T).format(thing=rng.choice(NAME_THINGS))


# --------------------------------------------------------------------------------------------
# math

NAMES = ["Anna", "Ben", "Carlos", "Dina", "Emma", "Farid", "Grace", "Hugo", "Ivy", "Jack",
         "Kira", "Liam", "Maya", "Noah", "Olga", "Pedro", "Rosa", "Sam", "Tara", "Yuki", "Zoe",
         "Omar", "Nina", "Leo"]
ITEMS = ["apples", "marbles", "pencils", "books", "cookies", "stamps", "cards", "balloons",
         "oranges", "stickers", "coins", "shells", "toy cars", "candies", "flowers", "eggs"]
SHOP_ITEMS = [("notebook", "notebooks"), ("pen", "pens"), ("sandwich", "sandwiches"),
              ("ticket", "tickets"), ("T-shirt", "T-shirts"), ("cupcake", "cupcakes"),
              ("bottle of juice", "bottles of juice"), ("toy", "toys"), ("book", "books"),
              ("plant", "plants")]


def _money(rng: random.Random, lo: int, hi: int) -> str:
    v = rng.randint(lo, hi)
    if rng.random() < 0.3:
        return f"${v}.50"
    return f"${v}"


def _math(rng: random.Random) -> str:
    r = rng.randint
    name, name2 = rng.sample(NAMES, 2)
    item = rng.choice(ITEMS)
    kind = rng.randrange(16)
    if kind == 0:
        a, b, c = r(10, 60), r(2, 9), r(3, 20)
        return (f"{name} has {a} {item}. {name} gives {b} to {name2} and then finds {c} more. "
                f"How many {item} does {name} have now?")
    if kind == 1:
        d, t = r(2, 8) * 10 * r(1, 3), r(2, 6)
        return f"A car travels {d * t} miles in {t} hours. What is its average speed?"
    if kind == 2:
        p, pct = r(10, 120), rng.choice([10, 20, 15, 30, 40, 50])
        thing = rng.choice(["jacket", "lamp", "pair of shoes", "backpack", "video game", "bike helmet"])
        return f"A {thing} costs ${p}. It is on sale for {pct}% off. How much does it cost now?"
    if kind == 3:
        n, w = r(5, 40), r(2, 8)
        return f"{name} saves ${n} every week. How much money will {name} have saved after {w} weeks?"
    if kind == 4:
        a, b = r(3, 25), r(2, 15)
        shape = rng.choice(["rectangle", "garden", "room", "rectangular field"])
        unit = rng.choice(["meters", "feet", "cm"])
        q = rng.choice(["area", "perimeter"])
        return f"A {shape} is {a} {unit} long and {b} {unit} wide. What is its {q}?"
    if kind == 5:
        s1, s2 = rng.sample(SHOP_ITEMS, 2)
        n1, n2 = r(2, 7), r(2, 6)
        return (f"{name} buys {n1} {s1[1]} for {_money(rng, 1, 9)} each and {n2} {s2[1]} for "
                f"{_money(rng, 1, 12)} each. How much does {name} spend in total?")
    if kind == 6:
        per, boxes = r(4, 12), r(3, 15)
        return (f"A farmer packs {per * boxes} {item} into bags of {per}. "
                f"How many bags does the farmer fill?")
    if kind == 7:
        age, k = r(4, 15), r(2, 5)
        return (f"{name}'s mother is {k} times as old as {name}. {name} is {age} years old. "
                f"How old is {name}'s mother?")
    if kind == 8:
        a, b = r(20, 90), r(2, 5)
        frac = rng.choice(["1/2", "1/3", "1/4", "2/3", "3/5"])
        den = int(frac.split("/")[1])
        total = den * r(3, 20)
        return (f"There are {total} people at a concert and {frac} of them are children. "
                f"How many children are at the concert?")
    if kind == 9:
        x, y = r(2, 12), r(2, 12)
        k = rng.choice([
            f"What is {x * y} divided by {y}?",
            f"What is {x} times {y} plus {r(1, 30)}?",
            f"Solve for x: {x}x + {y} = {x * r(1, 12) + y}.",
            f"What is {r(100, 999)} plus {r(100, 999)}?",
            f"What is {r(200, 999)} minus {r(10, 199)}?",
            f"What is {r(10, 40)} percent of {r(2, 20) * 10}?",
        ])
        return k
    if kind == 10:
        h, rate = r(2, 9), r(8, 25)
        return f"{name} earns ${rate} per hour and works {h} hours on Saturday. How much does {name} earn?"
    if kind == 11:
        cap, flow = r(3, 12) * 10, rng.choice([2, 5, 10])
        return (f"A pool holds {cap * flow} liters of water. A hose fills it at {flow} liters per minute. "
                f"How many minutes does it take to fill the pool?")
    if kind == 12:
        a, b, c = r(60, 100), r(60, 100), r(60, 100)
        return f"{name} scored {a}, {b} and {c} on three tests. What is the average score?"
    if kind == 13:
        n = r(5, 20)
        which = rng.choice(["odd", "whole", "positive"])
        return f"What is the sum of all {which} numbers from 1 to {n}?"
    if kind == 14:
        pizzas, slices, people = r(2, 6), rng.choice([6, 8, 10, 12]), r(3, 9)
        return (f"{name} orders {pizzas} pizzas with {slices} slices each and shares them equally "
                f"among {people} friends. How many slices does each friend get, and how many are left over?")
    start, dur = r(1, 11), r(2, 5)
    mins = rng.choice([0, 15, 30, 45])
    return (f"A movie starts at {start}:{mins:02d} and lasts {dur} hours and {rng.choice([10, 20, 40])} minutes. "
            f"What time does it end?")


# --------------------------------------------------------------------------------------------
# code

PY_FUNCS = [
    "checks whether a number is prime", "returns the factorial of a number",
    "computes the n-th Fibonacci number", "reverses a string",
    "counts the words in a sentence", "finds the largest number in a list",
    "returns the sum of the digits of a number", "checks whether a year is a leap year",
    "converts Celsius to Fahrenheit", "removes all spaces from a string",
    "returns the average of a list of numbers", "finds the most common element in a list",
    "checks whether two strings are anagrams", "flattens a list of lists",
    "capitalizes the first letter of every word", "returns the even numbers from a list",
    "computes the greatest common divisor of two numbers", "sorts a list of dictionaries by a key",
    "counts how many times each character appears in a string", "checks whether a list is sorted",
    "returns the intersection of two lists", "converts a binary string to an integer",
    "finds the length of the longest word in a sentence", "generates a random password",
    "reads a text file and returns its number of lines", "returns the squares of numbers from 1 to n",
    "splits a list into chunks of size n", "checks whether a string contains only digits",
    "returns the minimum and maximum of a list", "implements binary search on a sorted list",
    "implements bubble sort", "converts a list of strings to uppercase",
    "calculates compound interest", "checks whether a number is a perfect square",
    "returns the n smallest elements of a list", "rotates a list by k positions",
    "counts the lines in a string", "checks whether a number is even or odd",
    "returns the last n characters of a string", "converts minutes to hours and minutes",
    "calculates the area of a circle", "checks whether a password is strong",
    "removes the vowels from a string", "finds the sum of a list of numbers",
    "returns a list without duplicates", "converts a number to binary",
    "prints a multiplication table", "counts the uppercase letters in a string",
    "returns the median of a list", "merges two dictionaries", "finds all divisors of a number",
    "checks whether a string is a valid email address", "reverses the words in a sentence",
    "returns the first non-repeating character of a string", "computes the power of a number",
    "swaps two variables", "finds the missing number in a list from 1 to n",
]
LANGS = ["Python", "Python", "Python", "Python", "JavaScript", "Java", "C", "Go", "Rust", "C++"]
CODE_T = [
    "Write a {lang} function that {f}.",
    "Write a {lang} program that {f2}.",
    "How do I write a function in {lang} that {f}?",
    "Show me {lang} code that {f2}.",
    "Implement a function in {lang} that {f}.",
]
PY_HOWTO = [
    "open and write to a text file", "sort a dictionary by its values", "loop over a dictionary",
    "get the current date and time", "convert a string to an integer", "handle an exception",
    "create a virtual environment", "make an HTTP request", "use a for loop with an index",
    "join a list of strings", "check if a key exists in a dictionary", "parse a JSON string",
    "write a list to a file, one item per line", "get user input from the keyboard",
    "use the map function", "create a class with a constructor", "format a float with two decimals",
    "measure how long a function takes to run", "generate a random number between 1 and 100",
    "split a string by commas", "find the index of an item in a list",
]
HOWTO_T = ["How do I {h} in Python?", "How can I {h} in Python?", "Show me how to {h} in Python."]
CONCEPTS = [
    "a for loop", "a while loop", "recursion", "a dictionary in Python", "a tuple", "a set",
    "a lambda function", "a class and an object", "inheritance", "a decorator in Python",
    "a generator in Python", "the difference between a list and a tuple", "Big O notation",
    "a variable", "an API", "a hash table", "a stack", "a queue", "a linked list",
    "exception handling", "unit testing", "git branches", "a SQL JOIN", "JSON",
    "the difference between == and is in Python", "type hints in Python", "an array",
    "async and await in Python", "the difference between a compiler and an interpreter",
]
CONCEPT_T = [
    "Explain {c} with a short example.", "What is {c}?",
    "Can you explain {c} in simple terms?", "Give an example of {c}.",
]
SQL_T = [
    "Write a SQL query that selects all customers from a table called customers who live in {city}.",
    "Write a SQL query that counts the orders per customer in a table called orders.",
    "Write a SQL query that finds the average salary in each department of an employees table.",
    "Write a SQL query to create a table called {tbl} with an id and a name column.",
    "Write a SQL query that deletes rows older than {n} days from a table called logs.",
]
SHELL_T = [
    "Write a bash command that finds all files larger than {n} MB in the current folder.",
    "How do I list all files in a directory sorted by size using the command line?",
    "Write a bash script that prints the numbers from 1 to {n}.",
    "How do I rename all .jpeg files to .jpg in a folder with bash?",
    "Write a shell command that shows the {n} most recently modified files.",
]
CLASS_T = [
    "Write a Python class for a {thing} with {a} and {b} methods.",
    "Create a simple {lang} class that represents a {thing}.",
]
CLASS_THINGS = [("stack", "push", "pop"), ("queue", "enqueue", "dequeue"),
                ("to-do list", "add", "remove"), ("shopping cart", "add_item", "total"),
                ("counter", "increment", "reset"), ("temperature sensor", "read", "average"),
                ("library book", "borrow", "return_book"), ("rectangle", "area", "perimeter"),
                ("student", "add_grade", "average_grade"), ("timer", "start", "stop")]
FIX_SNIPPETS = [
    "def add(a, b):\n    return a - b",
    "for i in range(10)\n    print(i)",
    "def is_even(n):\n    return n % 2 == 1",
    "numbers = [1, 2, 3]\nprint(numbers[3])",
    "def greet(name):\n    print('Hello ' + name)\ngreet()",
    "x = '5' + 3",
]
FIX_T = [
    "Find the bug in this Python code:\n{s}",
    "Why does this Python code not work?\n{s}",
    "Fix this code:\n{s}",
]


def _code(rng: random.Random) -> str:
    kind = rng.choices(["func", "howto", "concept", "sql", "shell", "class", "fix"],
                       weights=[40, 16, 16, 7, 6, 8, 7])[0]
    if kind == "func":
        f = rng.choice(PY_FUNCS)
        # "program that" reads better with a verb in 3rd person too; same fill-in works.
        return rng.choice(CODE_T).format(lang=rng.choice(LANGS), f=f, f2=f)
    if kind == "howto":
        return rng.choice(HOWTO_T).format(h=rng.choice(PY_HOWTO))
    if kind == "concept":
        return rng.choice(CONCEPT_T).format(c=rng.choice(CONCEPTS))
    if kind == "sql":
        return rng.choice(SQL_T).format(city=rng.choice(["Paris", "Berlin", "Tokyo", "Chicago"]),
                                        tbl=rng.choice(["users", "books", "movies", "pets"]),
                                        n=rng.choice([7, 30, 90]))
    if kind == "shell":
        return rng.choice(SHELL_T).format(n=rng.choice([5, 10, 20, 100]))
    if kind == "class":
        thing, a, b = rng.choice(CLASS_THINGS)
        return rng.choice(CLASS_T).format(thing=thing, a=a, b=b,
                                          lang=rng.choice(["Python", "Java", "JavaScript"]))
    return rng.choice(FIX_T).format(s=rng.choice(FIX_SNIPPETS))


GENERATORS = {"chat": _chat, "math": _math, "code": _code}


# --------------------------------------------------------------------------------------------
# eval disjointness

def normalize(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: the key for exact-overlap checks."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _words(text: str) -> set[str]:
    return set(normalize(text).split())


def load_eval(path: Path | str = EVAL_PATH) -> list[Prompt]:
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out.append(Prompt(d["id"], d["category"], d["prompt"]))
    return out


def overlaps(prompt: str, eval_norms: set[str], eval_words: list[set[str]],
             jaccard: float = 0.8) -> bool:
    """True when ``prompt`` equals an eval prompt after normalization, or shares at least
    ``jaccard`` of its word set with one (near-exact: same template, one number changed)."""
    if normalize(prompt) in eval_norms:
        return True
    w = _words(prompt)
    for ew in eval_words:
        if w and ew and len(w & ew) / len(w | ew) >= jaccard:
            return True
    return False


def training_prompts(n: int = 6000, seed: int = 0, mix: dict[str, float] | None = None,
                     eval_path: Path | str = EVAL_PATH) -> list[Prompt]:
    """``n`` distinct training prompts (fewer only if the templates run dry), shuffled so any
    prefix keeps the category mix. Same ``seed`` -> same list."""
    mix = mix or DEFAULT_MIX
    rng = random.Random(seed)
    ev = load_eval(eval_path)
    eval_norms = {normalize(p.prompt) for p in ev}
    eval_words = [_words(p.prompt) for p in ev]
    seen: set[str] = set()
    out: list[Prompt] = []
    for cat in CATEGORIES:
        want = round(n * mix[cat])
        gen = GENERATORS[cat]
        got, tries = 0, 0
        while got < want and tries < want * 50:
            tries += 1
            p = gen(rng)
            key = normalize(p)
            if key in seen or overlaps(p, eval_norms, eval_words):
                continue
            seen.add(key)
            out.append(Prompt(f"train-{cat}-{got:05d}", cat, p))
            got += 1
    rng.shuffle(out)
    for p in out:  # the guarantee, checked
        assert normalize(p.prompt) not in eval_norms, p
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--total", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ps = training_prompts(a.total, a.seed)
    counts = {c: sum(p.category == c for p in ps) for c in CATEGORIES}
    print(f"{len(ps)} prompts {counts}")
    for p in ps[: a.n]:
        print(json.dumps(p.__dict__))


if __name__ == "__main__":
    main()
