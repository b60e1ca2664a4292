#!/usr/bin/env python3
"""The lm-evaluation-harness side of scripts/bench/eval_lm_eval.sh.

  lm_eval_tasks.py make --corpus data/corpora/austen.jsonl --out DIR [--docs N] [--questions N]
      writes DIR/{perplexity,cloze,choice}.jsonl (built from the corpus, deterministically) and
      DIR/tasks/*.yaml: lm-evaluation-harness tasks reading those files (dataset_path: json),
      laid out like its wikitext (loglikelihood_rolling), lambada_openai (loglikelihood) and
      multiple-choice tasks; `mt_choice_fewshot` is the multiple-choice task with the first
      --fewshot questions of the same file as examples (sampler first_n).
  lm_eval_tasks.py tokenizer --vocab VOCAB --merges MERGES --out HF_DIR
      saves the GPT-2 tokenizer into a Hugging Face model directory, as lm-eval's hf model wants.
  lm_eval_tasks.py compare --megatron-dir DIR --lm-eval-dir DIR [--rtol 1e-4]
      every metric (and mean standard error) both report, task by task, and every request's
      log-likelihood and is_greedy in both sides' logged samples; exits 1 on a mismatch.
"""
import argparse
import glob
import json
import os
import random
import sys

# megatron eval task -> (lm-eval task, megatron's --json file stem)
TASKS = {
    "perplexity": "mt_perplexity",
    "cloze": "mt_cloze",
    "multiple_choice": "mt_choice",
    "multiple_choice_fewshot": "mt_choice_fewshot",
}


def paragraphs(corpus):
    out = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            for p in text.split("\n\n"):
                p = " ".join(p.split())
                if p:
                    out.append(p)
    return out


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def yaml_task(name, data, body):
    return (f"task: {name}\ndataset_path: json\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files: {data}\ntest_split: train\n{body}")


def make(args):
    rng = random.Random(args.seed)
    paras = paragraphs(args.corpus)
    # Later chapters than the training run starts with; long enough for several windows.
    docs = []
    with open(args.corpus, encoding="utf-8") as f:
        chapters = [json.loads(line)["text"] for line in f]
    for text in chapters[-args.docs:]:
        docs.append({"text": text})
    # Cloze: a paragraph of 8-60 words, its last word without trailing punctuation.
    cloze = []
    for p in paras:
        words = p.split(" ")
        if 8 <= len(words) <= 60:
            last = words[-1].rstrip(".,;:!?\"'")
            if last.isalpha():
                cloze.append({"text": " ".join(words[:-1] + [last])})
    rng.shuffle(cloze)
    cloze = cloze[: args.questions]
    # Multiple choice: a paragraph's last four words among three other paragraphs' last four.
    pool = [p.split(" ") for p in paras if 10 <= len(p.split(" ")) <= 50]
    rng.shuffle(pool)
    choice = []
    for i in range(args.questions):
        words = pool[i]
        endings = [" ".join(pool[(i + k * 97 + 1) % len(pool)][-4:]) for k in range(3)]
        gold = rng.randrange(4)
        endings.insert(gold, " ".join(words[-4:]))
        choice.append({"context": " ".join(words[:-4]), "choices": endings, "gold": gold})
    os.makedirs(os.path.join(args.out, "tasks"), exist_ok=True)
    files = {n: os.path.abspath(os.path.join(args.out, n + ".jsonl"))
             for n in ("perplexity", "cloze", "choice")}
    write_jsonl(files["perplexity"], docs)
    write_jsonl(files["cloze"], cloze)
    write_jsonl(files["choice"], choice)
    tasks = {
        "mt_perplexity": yaml_task("mt_perplexity", files["perplexity"],
                                   "output_type: loglikelihood_rolling\ndoc_to_text: ''\n"
                                   "doc_to_target: '{{text}}'\nmetric_list:\n"
                                   "  - metric: word_perplexity\n  - metric: byte_perplexity\n"
                                   "  - metric: bits_per_byte\n"),
        "mt_cloze": yaml_task("mt_cloze", files["cloze"],
                              "output_type: loglikelihood\n"
                              "doc_to_text: \"{{text.split(' ')[:-1]|join(' ')}}\"\n"
                              "doc_to_target: \"{{' '+text.split(' ')[-1]}}\"\nmetric_list:\n"
                              "  - metric: perplexity\n    aggregation: perplexity\n"
                              "    higher_is_better: false\n"
                              "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"),
    }
    mc = ("output_type: multiple_choice\ndoc_to_text: context\ndoc_to_choice: choices\n"
          "doc_to_target: gold\nmetric_list:\n"
          "  - metric: acc\n  - metric: acc_norm\n  - metric: acc_bytes\n")
    tasks["mt_choice"] = yaml_task("mt_choice", files["choice"], mc)
    tasks["mt_choice_fewshot"] = yaml_task(
        "mt_choice_fewshot", files["choice"],
        mc + f"fewshot_split: train\nnum_fewshot: {args.fewshot}\nfewshot_config:\n"
             "  sampler: first_n\n")
    for name, text in tasks.items():
        with open(os.path.join(args.out, "tasks", name + ".yaml"), "w") as f:
            f.write(text)
    print(json.dumps({"documents": len(docs), "cloze": len(cloze), "choice": len(choice)}))


def tokenizer(args):
    import shutil
    import tempfile
    from transformers import GPT2TokenizerFast
    # from_pretrained on a directory of vocab.json + merges.txt works across transformers
    # versions (5.x no longer builds one from file arguments).
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(args.vocab, os.path.join(tmp, "vocab.json"))
        shutil.copy(args.merges, os.path.join(tmp, "merges.txt"))
        tok = GPT2TokenizerFast.from_pretrained(tmp)
    if tok.encode("Hello world") != [15496, 995]:
        sys.exit("the GPT-2 tokenizer did not load: 'Hello world' is not [15496, 995]")
    tok.save_pretrained(args.out)


def lm_eval_results(directory):
    files = sorted(glob.glob(os.path.join(directory, "**", "results_*.json"), recursive=True))
    if not files:
        sys.exit(f"no lm-eval results under {directory}")
    merged = {}
    for path in files:
        with open(path) as f:
            merged.update(json.load(f)["results"])
    return merged


def compare(args):
    theirs = lm_eval_results(args.lm_eval_dir)
    failures = 0
    rows = 0
    for ours_name, their_name in TASKS.items():
        path = os.path.join(args.megatron_dir, ours_name + ".json")
        if not os.path.exists(path) or their_name not in theirs:
            continue
        with open(path) as f:
            ours = json.load(f)["results"]
        ours = next(iter(ours.values()))
        their = theirs[their_name]
        for key, value in ours.items():
            if "," not in key or key not in their:
                continue
            other = their[key]
            if not isinstance(value, (int, float)) or not isinstance(other, (int, float)):
                continue
            # lm-eval's perplexity stderr is a bootstrap estimate: random, not comparable.
            if key.startswith("perplexity_stderr"):
                continue
            diff = abs(value - other) / max(abs(other), 1e-12)
            ok = diff <= args.rtol or abs(value - other) <= 1e-12
            failures += not ok
            rows += 1
            print(f"{ours_name:24} {key:26} megatron {value:<14.8g} lm-eval {other:<14.8g} "
                  f"rel {diff:.1e} {'ok' if ok else 'MISMATCH'}")
    for ours_name, their_name in TASKS.items():
        mine = os.path.join(args.megatron_dir, ours_name + ".samples.jsonl")
        found = glob.glob(os.path.join(args.lm_eval_dir, "**", f"samples_{their_name}_*.jsonl"),
                          recursive=True)
        if not os.path.exists(mine) or not found:
            continue
        with open(mine) as f:
            ours = {j["doc_id"]: j["filtered_resps"] for j in map(json.loads, f)}
        with open(found[0]) as f:
            theirs_s = {j["doc_id"]: j["filtered_resps"] for j in map(json.loads, f)}
        requests = worst = greedy_diff = 0
        for doc, resps in theirs_s.items():
            got = ours.get(doc)
            if got is None or len(got) != len(resps):
                failures += 1
                print(f"{ours_name}: sample {doc} missing or of another length")
                continue
            for a, b in zip(got, resps):
                a_ll, b_ll = (a, b) if ours_name == "perplexity" else (a[0], b[0])
                b_ll = float(b_ll)
                worst = max(worst, abs(a_ll - b_ll) / max(abs(b_ll), 1.0))
                if ours_name != "perplexity" and bool(a[1]) != (str(b[1]) == "True"):
                    greedy_diff += 1
                requests += 1
        ok = worst <= args.rtol and greedy_diff == 0 and len(ours) == len(theirs_s)
        failures += not ok
        rows += 1
        print(f"{ours_name:24} samples: {len(theirs_s)} docs, {requests} requests, worst log-likelihood "
              f"rel {worst:.1e}, is_greedy differs {greedy_diff} {'ok' if ok else 'MISMATCH'}")
    if rows == 0:
        sys.exit("nothing to compare")
    print(f"# {rows} metrics compared, {failures} mismatches (rtol {args.rtol})")
    sys.exit(1 if failures else 0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--docs", type=int, default=4)
    m.add_argument("--questions", type=int, default=100)
    m.add_argument("--fewshot", type=int, default=3)
    m.add_argument("--seed", type=int, default=1234)
    t = sub.add_parser("tokenizer")
    t.add_argument("--vocab", required=True)
    t.add_argument("--merges", required=True)
    t.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--megatron-dir", required=True)
    c.add_argument("--lm-eval-dir", required=True)
    c.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    {"make": make, "tokenizer": tokenizer, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
