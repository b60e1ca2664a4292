#!/usr/bin/env python3
"""Builds a translation-like task for T5 from the bundled Austen corpus (data/corpora/austen.jsonl).

This is a generated task, not a real language pair: the source is a short real clause of
Austen's (lower case, punctuation dropped, 4-10 words, every word among the corpus's 400 most
frequent), and the target is the same clause "translated" by a fixed word-for-word substitution
cipher: each of those 400 words is replaced by another of them, the pairing drawn once from seed
1234 (no word maps to itself), and the order of the last two words is swapped (so that the
model must also move words, not only look them up). Copying the source scores near 0 BLEU.
Every fifth chapter is held out for validation (100 pairs) and test. Writes OUT/train.jsonl,
valid.jsonl and test.jsonl (fields "source" and "target").

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


def clauses(text):
    for clause in re.split(r"[.!?;:,\n]+\s*", text.replace("\n", " ")):
        words = re.findall(r"[a-z]+", clause.lower())
        if 4 <= len(words) <= 10:
            yield words


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=6000)
    parser.add_argument("--test", type=int, default=200)
    args = parser.parse_args()
    chapters = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]
    counts = collections.Counter(w for c in chapters for w in re.findall(r"[a-z]+", c["text"].lower()))
    words = sorted(w for w, _ in counts.most_common(400))
    rng = random.Random(1234)
    while True:  # a derangement: no word is its own translation
        shuffled = words[:]
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(words, shuffled)):
            break
    cipher = dict(zip(words, shuffled))
    known = set(words)
    train, test, seen = [], [], set()
    for number, chapter in enumerate(chapters):
        for clause in clauses(chapter["text"]):
            if not all(w in known for w in clause) or tuple(clause) in seen:
                continue
            seen.add(tuple(clause))
            target = [cipher[w] for w in clause]
            target[-2], target[-1] = target[-1], target[-2]
            row = {"source": " ".join(clause), "target": " ".join(target)}
            (test if number % 5 == 0 else train).append(row)
    train, valid, test = write_splits(args.out, train, test, args.train, args.test, rng)
    print(f"{len(train)} training, {len(valid)} validation and {len(test)} test pairs over a vocabulary of {len(words)} words")


if __name__ == "__main__":
    main()
