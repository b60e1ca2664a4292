#!/usr/bin/env python3
"""The transformers side of scripts/bench/bert_hf.sh: scores one training iteration's global
batch with transformers' MegatronBertForPreTraining loaded from what `megatron convert --to hf`
wrote, and compares its LM and sentence-order losses with the ones megatron logged for the same
iteration (computed with the same weights, before that iteration's update).

  hf_bert.py --hf DIR --prefix DATA --vocab VOCAB --metrics RUN/metrics.jsonl --iteration N
             --seq S --micro-batch b --global-batch B --train-iters T [--seed 1234]

The batch is rebuilt with tests/data/reference_bert_samples.py (an independent rewrite of
Megatron-Core's BERT dataset) for data.split 100,0,0 (every document in the training split).
Prints one JSON line; exits 1 when a loss differs by more than --rtol (default 1e-4).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "data"))
import reference_bert_samples as ref  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    for name in ("--hf", "--prefix", "--vocab", "--metrics"):
        p.add_argument(name, required=True)
    for name in ("--iteration", "--seq", "--micro-batch", "--global-batch", "--train-iters"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--rtol", type=float, default=1e-4)
    a = p.parse_args()

    import transformers
    vocab = [line.rstrip("\n") for line in open(a.vocab, encoding="utf-8")]
    ids = {t: i for i, t in enumerate(vocab)}
    d = {"cls": ids["[CLS]"], "sep": ids["[SEP]"], "mask": ids["[MASK]"], "pad": ids["[PAD]"],
         "seq_length": a.seq, "seed": a.seed, "short_seq_prob": 0.1, "mask_prob": 0.15,
         "max_ngram": 3, "full_word": True, "binary_head": True}
    data, lengths, docs = ref.read_dataset(a.prefix)
    index = ref.build_mapping(docs, lengths, a.global_batch * a.train_iters, a.seq - 3,
                              d["short_seq_prob"], a.seed, 2)

    model = transformers.MegatronBertForPreTraining.from_pretrained(a.hf, torch_dtype=torch.float32)
    model.eval()
    first = (a.iteration - 1) * a.global_batch
    lm_losses, sop_losses = [], []
    for m in range(a.global_batch // a.micro_batch):
        samples = [ref.sample(d, data, index, first + m * a.micro_batch + k, vocab)
                   for k in range(a.micro_batch)]
        tokens = torch.tensor([s["tokens"] for s in samples])
        types = torch.tensor([s["types"] for s in samples])
        mask = torch.tensor([[1 if t < s["valid_length"] else 0 for t in range(a.seq)]
                             for s in samples])
        labels = torch.tensor([s["labels"] for s in samples])
        order = torch.tensor([s["is_random"] for s in samples])
        with torch.no_grad():
            out = model(input_ids=tokens, token_type_ids=types, attention_mask=mask)
        logits = out.prediction_logits.double()
        lm = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                               ignore_index=-1)
        sop = torch.nn.functional.cross_entropy(out.seq_relationship_logits.double(), order)
        lm_losses.append(lm.item())
        sop_losses.append(sop.item())
    hf_lm, hf_sop = float(np.mean(lm_losses)), float(np.mean(sop_losses))
    logged = None
    for line in open(a.metrics):
        j = json.loads(line)
        if j.get("iteration") == a.iteration and "lm_loss" in j:
            logged = j
    if logged is None:
        print(json.dumps({"error": "iteration %d is not in %s" % (a.iteration, a.metrics)}))
        return 1
    rel_lm = abs(logged["lm_loss"] - hf_lm) / abs(hf_lm)
    rel_sop = abs(logged["sop_loss"] - hf_sop) / abs(hf_sop)
    ok = rel_lm <= a.rtol and rel_sop <= a.rtol
    print(json.dumps({"iteration": a.iteration, "megatron_lm_loss": logged["lm_loss"],
                      "transformers_lm_loss": hf_lm, "lm_rel_diff": rel_lm,
                      "megatron_sop_loss": logged["sop_loss"], "transformers_sop_loss": hf_sop,
                      "sop_rel_diff": rel_sop, "transformers": transformers.__version__,
                      "torch": torch.__version__, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
