#!/usr/bin/env python3
"""Builds the instruction-tuning task from the bundled Austen corpus (data/corpora/austen.jsonl).

Each example gives a passage of 20-50 words from one of Jane Austen's six novels and asks which
novel it is from; the response is the novel's title. The passages are real text; the question
is ours. Every fifth chapter (by its line in the corpus) is held out for validation (100
passages) and test, so those passages come from chapters the model never saw. Writes
OUT/train.jsonl, valid.jsonl and test.jsonl (fields "prompt" and "response") and prints the
majority-answer baseline of the test set.

    make_data.py CORPUS OUT [--train N] [--test N]
"""
import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from example_data import write_splits  # noqa: E402

TITLES = {
    "prideprejudice": "Pride and Prejudice",
    "emma": "Emma",
    "sensesensibility": "Sense and Sensibility",
    "mansfieldpark": "Mansfield Park",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}


def passages(text):
    """Paragraphs of 20-50 words, whitespace collapsed; longer ones cut at a sentence end."""
    for paragraph in re.split(r"\n\s*\n", text):
        words = paragraph.split()
        if len(words) < 20:
            continue
        if len(words) > 50:
            cut = " ".join(words[:50])
            end = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
            if end < 0 or len(cut[: end + 1].split()) < 20:
                continue
            words = cut[: end + 1].split()
        yield " ".join(words)


def prompt(passage):
    return f"Passage: {passage}\nWhich Jane Austen novel is this passage from?\nAnswer:"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--test", type=int, default=300)
    args = parser.parse_args()
    train, test = [], []
    with open(args.corpus, encoding="utf-8") as f:
        for line_number, line in enumerate(f):
            chapter = json.loads(line)
            title = TITLES[chapter["book"]]
            held_out = line_number % 5 == 0
            for p in passages(chapter["text"]):
                (test if held_out else train).append({"prompt": prompt(p), "response": " " + title})
    train, valid, test = write_splits(args.out, train, test, args.train, args.test, random.Random(1234))
    counts = collections.Counter(row["response"] for row in test)
    answer, n = counts.most_common(1)[0]
    print(f"{len(train)} training, {len(valid)} validation and {len(test)} test examples; always answering{answer} "
          f"scores exact match {n / len(test):.4f}")


if __name__ == "__main__":
    main()
