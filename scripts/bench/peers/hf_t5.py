#!/usr/bin/python3
"""The transformers side of scripts/bench/t5_hf.sh: a seeded random T5 v1.1 model
(T5ForConditionalGeneration, gated-gelu, untied) saved with save_pretrained, a batch of encoder
and decoder tokens (the second sequence's encoder padded), and transformers' decoder logits for
them in float64, for the engine to compare with.

  hf_t5.py --out DIR [--layers N] [--d-model N] [--heads N] [--d-kv N] [--d-ff N]
           [--vocab N] [--seq N] [--decoder-seq N] [--seed N]
  hf_t5.py --compare ORIGINAL RETURNED
      transformers loads both model directories; their logits on DIR's batch (ORIGINAL/..) are
      compared; prints the largest difference and exits 1 unless they are equal.

Writes DIR/model (config.json, model.safetensors), DIR/inputs.json {"encoder": [[ids]],
"encoder_lengths": [n], "decoder": [[ids]]} and DIR/logits.f64 (batch x decoder-seq x vocab,
little-endian float64). Needs torch and transformers (the venv t5_hf.sh makes).
"""
import argparse
import json
import os

import torch


def compare(original, returned):
    import transformers
    base = os.path.dirname(os.path.abspath(original))
    with open(os.path.join(base, "inputs.json")) as f:
        inputs = json.load(f)
    encoder = torch.tensor(inputs["encoder"])
    decoder = torch.tensor(inputs["decoder"])
    mask = torch.zeros_like(encoder)
    for b, n in enumerate(inputs["encoder_lengths"]):
        mask[b, :n] = 1
    logits = []
    for path in (original, returned):
        model = transformers.T5ForConditionalGeneration.from_pretrained(path).eval()
        with torch.no_grad():
            logits.append(model(input_ids=encoder, attention_mask=mask, decoder_input_ids=decoder).logits)
    worst = float((logits[0] - logits[1]).abs().max())
    print(json.dumps({"max_abs_logit_difference": worst}))
    return 0 if worst == 0.0 else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--compare", nargs=2)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-kv", type=int, default=64)
    p.add_argument("--d-ff", type=int, default=640)
    p.add_argument("--vocab", type=int, default=32128)
    p.add_argument("--seq", type=int, default=96)
    p.add_argument("--decoder-seq", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.compare:
        return compare(*a.compare)
    import transformers
    torch.manual_seed(a.seed)
    config = transformers.T5Config(vocab_size=a.vocab, d_model=a.d_model, d_kv=a.d_kv, d_ff=a.d_ff,
                                   num_layers=a.layers, num_decoder_layers=a.layers,
                                   num_heads=a.heads, feed_forward_proj="gated-gelu",
                                   tie_word_embeddings=False, dropout_rate=0.0,
                                   relative_attention_num_buckets=32,
                                   relative_attention_max_distance=128, layer_norm_epsilon=1e-6)
    model = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():
        # transformers initialises norms to one; random norms keep a mapping mistake visible.
        for name, t in model.named_parameters():
            if "layer_norm" in name:
                t.copy_(1.0 + 0.1 * torch.randn_like(t))
    model.save_pretrained(os.path.join(a.out, "model"), safe_serialization=True)
    g = torch.Generator().manual_seed(a.seed + 1)
    encoder = torch.randint(2, a.vocab, (2, a.seq), generator=g)
    decoder = torch.randint(2, a.vocab, (2, a.decoder_seq), generator=g)
    decoder[:, 0] = 0  # decoder_start_token_id
    lengths = [a.seq, a.seq * 2 // 3]
    mask = torch.zeros(2, a.seq, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    with torch.no_grad():
        logits = model.double()(input_ids=encoder, attention_mask=mask, decoder_input_ids=decoder).logits
    logits.numpy().astype("<f8").tofile(os.path.join(a.out, "logits.f64"))
    with open(os.path.join(a.out, "inputs.json"), "w") as f:
        json.dump({"encoder": encoder.tolist(), "encoder_lengths": lengths, "decoder": decoder.tolist()}, f)
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                      "parameters": sum(t.numel() for t in model.parameters())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
