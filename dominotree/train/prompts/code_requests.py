"""Short programming requests: functions, how-tos, concepts, SQL, shell, classes, bug fixes."""
from __future__ import annotations

import random

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


def code_request(rng: random.Random) -> str:
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
