#!/usr/bin/env python3
"""Recomputes megatron's generation metrics with their references: for every task of an eval
results JSON that reports "bleu,none" and/or "chrf,none", corpus BLEU and chrF are computed with
sacrebleu.corpus_bleu / corpus_chrf (their defaults, as src/eval/text_metrics.cpp follows) on the
same predictions and references, and both numbers are printed side by side; "exact_match,none"
and "f1,none" are recomputed with SQuAD v1.1's evaluation script's functions (below), to 1e-9.

  sacrebleu_check.py RESULTS.json

RESULTS.json: {"results": {TASK: {"bleu,none": x, "chrf,none": y, ...}},
               "generations": {TASK: [{"prediction": str, "references": [str, ...]}, ...]}}
megatron's numbers are taken at face value from "results". They are compared at the precision
sacreBLEU prints a score with (Score.format()'s default width of 2 decimals, "BLEU = 12.34"; the
command line's default is 1); exits 1 when any differs at that precision, or when no task has a
number to check. Needs sacreBLEU: pip install sacrebleu
"""
import collections
import json
import re
import string
import sys

import sacrebleu

WIDTH = 2  # sacrebleu.metrics.base.Score.format(width=2): what str(score) prints


def reference_streams(examples):
    """Transposes per-example reference lists into sacreBLEU's streams (refs[k][i]). Examples
    with fewer references are padded with None, which sacreBLEU reads as "no k-th reference"."""
    per_example = []
    for ex in examples:
        refs = ex["references"]
        per_example.append([refs] if isinstance(refs, str) else list(refs))
    count = max((len(r) for r in per_example), default=0)
    return [[r[k] if k < len(r) else None for r in per_example] for k in range(count)], \
        len({len(r) for r in per_example}) > 1


# SQuAD v1.1's evaluation script (evaluate-v1.1.py): normalize_answer, exact_match_score and
# f1_score, maximised over the ground truths.
def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_score(prediction, truth):
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad(metric, prediction, truths):
    score = (lambda p, t: float(normalize_answer(p) == normalize_answer(t))) if metric == "exact_match" else f1_score
    return max(score(prediction, t) for t in truths)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    results, generations = doc.get("results", {}), doc.get("generations", {})
    print(f"sacrebleu {sacrebleu.__version__}; scores compared at {WIDTH} decimals")

    checked, failed = 0, False
    for task in sorted(results):
        for metric in ("exact_match", "f1"):
            if f"{metric},none" not in results[task] or not generations.get(task):
                continue
            examples = generations[task]
            theirs = sum(squad(metric, ex["prediction"], ex["references"]) for ex in examples) / len(examples)
            ours = float(results[task][f"{metric},none"])
            same = abs(ours - theirs) <= 1e-9
            failed |= not same
            checked += 1
            print(f"{task}: {metric} megatron = {ours:.6f}  SQuAD v1.1 script = {theirs:.6f}  "
                  f"{'same' if same else 'DIFFERENT'}  ({len(examples)} answers)")
        wanted = [m for m in ("bleu", "chrf") if f"{m},none" in results[task]]
        if not wanted:
            continue
        examples = generations.get(task)
        if not examples:
            print(f"{task}: no generations to recompute {', '.join(wanted)} from")
            failed = True
            continue
        hyps = [ex["prediction"] for ex in examples]
        refs, variable = reference_streams(examples)
        if variable:
            print(f"{task}: examples have different numbers of references (sacreBLEU nrefs:var)")
        for metric in wanted:
            ours = float(results[task][f"{metric},none"])
            score = (sacrebleu.corpus_bleu if metric == "bleu" else sacrebleu.corpus_chrf)(hyps, refs)
            ours_str, theirs_str = f"{ours:.{WIDTH}f}", f"{score.score:.{WIDTH}f}"
            same = ours_str == theirs_str
            failed |= not same
            checked += 1
            print(f"{task}: {score.name} megatron = {ours_str}  sacrebleu = {theirs_str}  "
                  f"{'same' if same else 'DIFFERENT'}  ({len(hyps)} segments; "
                  f"sacrebleu: {score.format(width=WIDTH)})")

    if checked == 0:
        print("no task reports bleu, chrf, exact_match or f1: nothing was checked")
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
