#!/usr/bin/env python3
"""Recomputes megatron's generation metrics with sacreBLEU itself: for every task of an eval
results JSON that reports "bleu,none" and/or "chrf,none", corpus BLEU and chrF are computed with
sacrebleu.corpus_bleu / corpus_chrf (their defaults, as src/eval/text_metrics.cpp follows) on the
same predictions and references, and both numbers are printed side by side.

  sacrebleu_check.py RESULTS.json

RESULTS.json: {"results": {TASK: {"bleu,none": x, "chrf,none": y, ...}},
               "generations": {TASK: [{"prediction": str, "references": [str, ...]}, ...]}}
megatron's numbers are taken at face value from "results". They are compared at the precision
sacreBLEU prints a score with (Score.format()'s default width of 2 decimals, "BLEU = 12.34"; the
command line's default is 1); exits 1 when any differs at that precision, or when no task has a
number to check. Needs sacreBLEU: pip install sacrebleu
"""
import json
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    results, generations = doc.get("results", {}), doc.get("generations", {})
    print(f"sacrebleu {sacrebleu.__version__}; scores compared at {WIDTH} decimals")

    checked, failed = 0, False
    for task in sorted(results):
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
        print("no task reports bleu,none or chrf,none: nothing was checked")
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
