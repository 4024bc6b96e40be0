"""Math word problems with random numbers, names and items."""
from __future__ import annotations

import random

NAMES = ["Anna", "Ben", "Carlos", "Dina", "Emma", "Farid", "Grace", "Hugo", "Ivy", "Jack",
         "Kira", "Liam", "Maya", "Noah", "Olga", "Pedro", "Rosa", "Sam", "Tara", "Yuki", "Zoe",
         "Omar", "Nina", "Leo"]
ITEMS = ["apples", "marbles", "pencils", "books", "cookies", "stamps", "cards", "balloons",
         "oranges", "stickers", "coins", "shells", "toy cars", "candies", "flowers", "eggs"]
SHOP_ITEMS = [("notebook", "notebooks"), ("pen", "pens"), ("sandwich", "sandwiches"),
              ("ticket", "tickets"), ("T-shirt", "T-shirts"), ("cupcake", "cupcakes"),
              ("bottle of juice", "bottles of juice"), ("toy", "toys"), ("book", "books"),
              ("plant", "plants")]


def money(rng: random.Random, lo: int, hi: int) -> str:
    v = rng.randint(lo, hi)
    if rng.random() < 0.3:
        return f"${v}.50"
    return f"${v}"


def word_problem(rng: random.Random) -> str:
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
        return (f"{name} buys {n1} {s1[1]} for {money(rng, 1, 9)} each and {n2} {s2[1]} for "
                f"{money(rng, 1, 12)} each. How much does {name} spend in total?")
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
