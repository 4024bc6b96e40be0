"""Chat requests: questions, instructions, explanations, writing, comparisons, rewrites."""
from __future__ import annotations

import random

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


def chat_request(rng: random.Random) -> str:
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
