"""More training requests for self-distillation, beyond the short templates of ``chat``,
``word_problems`` and ``code_requests``:

- ``long_math``: multi-step word problems (three to five operations, several quantities);
- ``long_code``: programs with several requirements (input checks, a docstring, tests);
- ``FOLLOW_UPS``: second user turns for multi-turn chats (the first answer is the target's own);
- ``SELF_OPENERS``: the openings of a user turn that the target continues into a request of its
  own (``selfprompt.py``), per category.

All are seeded and reproducible; eval disjointness is checked by ``overlap.py``.
"""
from __future__ import annotations

import random

from dominotree.train.prompts.code_requests import PY_FUNCS
from dominotree.train.prompts.word_problems import ITEMS, NAMES, SHOP_ITEMS, money

LANGS = ["Python", "Python", "Python", "JavaScript", "Java", "C", "Go", "Rust"]


def long_math(rng: random.Random) -> str:
    r = rng.randint
    name, name2, name3 = rng.sample(NAMES, 3)
    item = rng.choice(ITEMS)
    kind = rng.randrange(10)
    if kind == 0:
        a, b, c, d = r(20, 90), r(2, 9), r(3, 15), r(2, 4)
        return (f"{name} has {a} {item}. {name} gives {b} to {name2} and {c} to {name3}, then "
                f"doubles what is left by buying the same amount again, and finally splits the total "
                f"equally into {d} boxes. How many {item} are in each box? Explain each step.")
    if kind == 1:
        s1, s2, s3 = rng.sample(SHOP_ITEMS, 3)
        n1, n2, n3, pct = r(2, 6), r(2, 5), r(1, 4), rng.choice([5, 10, 15, 20])
        return (f"{name} buys {n1} {s1[1]} at {money(rng, 2, 9)} each, {n2} {s2[1]} at "
                f"{money(rng, 3, 15)} each and {n3} {s3[1]} at {money(rng, 5, 20)} each. "
                f"There is a {pct}% discount on the whole order and then a $4 delivery fee. "
                f"What is the final cost? Show your work step by step.")
    if kind == 2:
        v1, t1, v2, t2 = r(30, 70), r(1, 4), r(40, 80), r(1, 3)
        return (f"A train travels at {v1} km/h for {t1} hours, stops for 30 minutes, then travels at "
                f"{v2} km/h for {t2} hours. What distance does it cover, and what is its average speed "
                f"over the whole trip including the stop?")
    if kind == 3:
        w, l, cost = r(4, 15), r(5, 20), r(3, 12)
        return (f"A rectangular garden is {l} meters long and {w} meters wide. A path 1 meter wide is "
                f"built all around the outside of it. What is the area of the path, and how much does "
                f"it cost to pave it at ${cost} per square meter?")
    if kind == 4:
        a, k, m = r(5, 14), r(2, 4), r(3, 9)
        return (f"{name} is {a} years old. {name2} is {k} times as old as {name}, and {name3} is {m} "
                f"years younger than {name2}. How old will {name3} be in 5 years, and what is the sum "
                f"of their three ages today?")
    if kind == 5:
        p, rate, yrs = r(5, 50) * 100, rng.choice([2, 3, 4, 5, 6]), r(2, 4)
        return (f"{name} puts ${p} in a savings account that earns {rate}% interest per year, "
                f"compounded yearly. How much money is in the account after {yrs} years? "
                f"Work it out year by year.")
    if kind == 6:
        n, a, b = r(20, 60), r(20, 40), r(10, 30)
        return (f"In a class of {n} students, {a}% play soccer, {b}% play basketball and the rest "
                f"play no sport. How many students play no sport? Explain your reasoning.")
    if kind == 7:
        x, y = r(2, 9), r(2, 9)
        return (f"Solve the system of equations and check your answer: {x}a + b = {x * 3 + 4} and "
                f"a - {y}b = {3 - y * 4}.")
    if kind == 8:
        h, m, rate, tip = r(2, 6), rng.choice([15, 30, 45]), r(10, 25), rng.choice([10, 15, 20])
        return (f"{name} babysits for {h} hours and {m} minutes at ${rate} per hour, and the family adds "
                f"a {tip}% tip. {name} then spends a third of the money on a book. How much is left?")
    tank, use, dist = r(40, 70), rng.choice([5, 6, 7, 8]), r(200, 600)
    return (f"A car's tank holds {tank} liters and the car uses {use} liters per 100 km. How many "
            f"full tanks are needed for a {dist} km trip there and back, and how many liters are "
            f"left in the tank at the end if it starts full?")


LONG_CODE_T = [
    "Write a {lang} function that {f}. Check the input and raise an error for invalid values, "
    "add a docstring, and show three example calls with their results.",
    "Write a {lang} program that {f}, reads its input from the user, and prints the result. "
    "Explain how it works step by step.",
    "Implement a function in {lang} that {f}, then write unit tests for it covering normal "
    "cases and edge cases.",
    "Write two different {lang} solutions for a function that {f}, and compare their time "
    "complexity.",
]

LONG_CODE_TASKS = [
    "Write a Python class for a bank account with deposit, withdraw and balance methods. "
    "Withdrawing more than the balance should raise an error. Include example usage.",
    "Write a Python script that reads a CSV file of names and ages, computes the average age, "
    "and prints the oldest person. Handle a missing file gracefully.",
    "Write a Python function that parses a date string like '2024-03-15' and returns the day of "
    "the week, without using the datetime module. Explain the formula you use.",
    "Write a command-line to-do list in Python that can add, list and remove tasks, saving them "
    "to a JSON file between runs.",
    "Write a JavaScript function that debounces another function, and explain when you would use "
    "debouncing with an example.",
    "Write a Python function that merges two sorted lists into one sorted list in linear time, "
    "with tests for empty lists and duplicates.",
    "Implement a stack and a queue in Python using lists, with push, pop, peek and is_empty, and "
    "explain the difference between them.",
    "Write a Python program that counts word frequencies in a text file and prints the ten most "
    "common words, ignoring case and punctuation.",
    "Write a SQL schema for a library with books, members and loans, and a query that lists all "
    "books currently on loan with the member's name.",
    "Write a Python function that validates an email address with a regular expression, and "
    "explain each part of the pattern.",
    "Write a binary search in Python, iterative and recursive, and explain why it needs a sorted "
    "list.",
    "Write a Python generator that yields prime numbers forever, and show how to take the first "
    "twenty of them.",
]


def long_code(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(LONG_CODE_TASKS)
    return rng.choice(LONG_CODE_T).format(lang=rng.choice(LANGS), f=rng.choice(PY_FUNCS))


FOLLOW_UPS = {
    "chat": [
        "Can you explain that in more detail?", "Can you give me an example?",
        "Now summarize that in one sentence.", "Can you make that simpler?",
        "What is a common misconception about this?", "Can you put that in a short list?",
        "Why is that?", "Thank you! Can you tell me one more thing about it?",
    ],
    "math": [
        "Can you check your answer another way?", "Can you explain the second step again?",
        "What if the numbers were doubled?", "Can you write the solution as a single equation?",
        "Explain it to a ten-year-old.",
    ],
    "code": [
        "Can you add comments to the code?", "How would you test this?",
        "What is the time complexity?", "Can you make it shorter?",
        "Can you write it in another language?", "What happens with an empty input?",
    ],
}

SELF_OPENERS = {
    "chat": ["", "", "Explain", "What", "Why", "How", "Can you", "Write", "Give me", "Tell me",
             "I need", "Describe", "Help me", "Please"],
    "math": ["Solve", "If", "A", "Calculate", "What is", "How many", "Find"],
    "code": ["Write a Python", "Write a function", "How do I", "Write a program", "Explain how",
             "Write a JavaScript", "Fix", "Create a"],
}


def follow_up(rng: random.Random, category: str) -> str:
    return rng.choice(FOLLOW_UPS.get(category, FOLLOW_UPS["chat"]))
