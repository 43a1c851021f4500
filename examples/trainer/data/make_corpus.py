#!/usr/bin/env python3
"""Writes corpus.txt: a generated English-like text for the masked-LM task.

The text comes from a small grammar with structure a model can learn (subject-verb agreement,
adjective order, fixed facts such as which animal lives where, counting sequences), so the
masked-LM loss can fall well below the unigram entropy. Deterministic: same seed, same file.
Run:  /usr/bin/python3 make_corpus.py > corpus.txt
"""
import random

rng = random.Random(20240611)

names = ["anna", "ben", "clara", "david", "eva", "felix", "grace", "henry", "iris", "jonas",
         "kate", "leo", "mia", "noah", "olga", "paul"]
animals_sg = ["cat", "dog", "horse", "bird", "fox", "goat", "mouse", "owl", "rabbit", "sheep"]
animals_pl = ["cats", "dogs", "horses", "birds", "foxes", "goats", "mice", "owls", "rabbits",
              "sheep"]
homes = {"cat": "house", "dog": "yard", "horse": "stable", "bird": "nest", "fox": "den",
         "goat": "hill", "mouse": "hole", "owl": "tree", "rabbit": "burrow", "sheep": "field"}
foods = {"cat": "fish", "dog": "meat", "horse": "hay", "bird": "seeds", "fox": "eggs",
         "goat": "grass", "mouse": "cheese", "owl": "mice", "rabbit": "carrots", "sheep": "clover"}
colors = ["red", "green", "blue", "yellow", "black", "white", "brown", "grey"]
sizes = ["small", "big", "tiny", "huge", "little", "tall"]
verbs = [("sees", "see"), ("likes", "like"), ("follows", "follow"), ("watches", "watch"),
         ("finds", "find"), ("chases", "chase"), ("helps", "help"), ("meets", "meet")]
places = ["the market", "the river", "the school", "the garden", "the station", "the forest",
          "the village", "the beach", "the library", "the bridge"]
days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
numbers = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
capitals = {"france": "paris", "italy": "rome", "spain": "madrid", "germany": "berlin",
            "norway": "oslo", "egypt": "cairo", "japan": "tokyo", "peru": "lima",
            "kenya": "nairobi", "canada": "ottawa"}


def noun_phrase(plural):
    words = ["the"]
    if rng.random() < 0.5:
        words.append(rng.choice(sizes))
    if rng.random() < 0.5:
        words.append(rng.choice(colors))
    i = rng.randrange(len(animals_sg))
    words.append(animals_pl[i] if plural else animals_sg[i])
    return " ".join(words)


def sentence():
    kind = rng.random()
    if kind < 0.30:
        plural = rng.random() < 0.5
        verb = rng.choice(verbs)
        subj = noun_phrase(plural) if rng.random() < 0.7 else rng.choice(names)
        if subj in names:
            plural = False
        obj = noun_phrase(rng.random() < 0.5) if rng.random() < 0.6 else rng.choice(names)
        s = f"{subj} {verb[1] if plural else verb[0]} {obj}"
        if rng.random() < 0.4:
            s += f" near {rng.choice(places)}"
        if rng.random() < 0.3:
            s += f" on {rng.choice(days)}"
        return s + " ."
    if kind < 0.45:
        a = rng.choice(animals_sg)
        return f"the {a} lives in the {homes[a]} and eats {foods[a]} ."
    if kind < 0.55:
        country = rng.choice(list(capitals))
        return f"the capital of {country} is {capitals[country]} ."
    if kind < 0.65:
        start = rng.randrange(0, 6)
        n = rng.randrange(3, 5)
        return "she counts " + " ".join(numbers[start:start + n]) + " ."
    if kind < 0.75:
        d = rng.randrange(7)
        return f"after {days[d]} comes {days[(d + 1) % 7]} ."
    if kind < 0.88:
        who = rng.choice(names)
        return f"{who} goes to {rng.choice(places)} with {rng.choice(names)} ."
    n = rng.randrange(2, 10)
    a = rng.randrange(len(animals_sg))
    return f"there are {numbers[n - 1]} {animals_pl[a]} in the {homes[animals_sg[a]]} ."


out = []
size = 0
while size < 300_000:
    paragraph = " ".join(sentence() for _ in range(rng.randrange(3, 8)))
    out.append(paragraph)
    size += len(paragraph) + 1
print("\n".join(out))
