"""The transformers side of scripts/bench/generate_hf.sh.

  hf_generate.py make --arch gpt2|llama --out DIR [--layers N ...]
      a seeded random GPT-2 (124M shape by default) or Llama-shaped model with the bundled GPT-2
      tokenizer, saved as a Hugging Face directory;
  hf_generate.py generate --dir DIR --prompts FILE --max-tokens N --out FILE
      greedy generation with transformers' generate (end-of-text ignored), one jsonl line per
      prompt: generated token ids and each one's log-probability (log_softmax of the raw logits);
  hf_generate.py speed --dir DIR --prompt-tokens P --max-tokens N --threads T
      prefill and decode tokens/s of generate at batch 1.
"""
import argparse
import json
import shutil
import time

import torch
import transformers


def make(a):
    torch.manual_seed(1234)
    if a.arch == "gpt2":
        config = transformers.GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads,
                                         n_positions=a.positions, vocab_size=50257)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(num_hidden_layers=a.layers, hidden_size=a.hidden,
                                          num_attention_heads=a.heads, num_key_value_heads=a.heads // 2,
                                          intermediate_size=a.hidden * 8 // 3 // 64 * 64,
                                          max_position_embeddings=a.positions, vocab_size=50257,
                                          rms_norm_eps=1e-5, tie_word_embeddings=False,
                                          bos_token_id=50256, eos_token_id=50256)
        model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(a.out, safe_serialization=True)
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(f"data/tokenizers/gpt2/{f}", f"{a.out}/{f}")
    with open(f"{a.out}/tokenizer_config.json", "w") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer", "model_max_length": a.positions,
                   "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                   "unk_token": "<|endoftext|>"}, f)


def load(directory, threads):
    torch.set_num_threads(threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def greedy(model, ids, max_tokens):
    with torch.no_grad():
        return model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                              do_sample=False, num_beams=1, eos_token_id=None, pad_token_id=0,
                              return_dict_in_generate=True, output_logits=True)


def generate(a):
    tokenizer, model = load(a.dir, a.threads)
    with open(a.prompts) as f, open(a.out, "w") as out:
        for line in f:
            prompt = json.loads(line)["prompt"]
            ids = tokenizer(prompt)["input_ids"]
            r = greedy(model, ids, a.max_tokens)
            tokens = r.sequences[0, len(ids):].tolist()
            logprobs = [torch.log_softmax(l[0].double(), -1)[t].item() for l, t in zip(r.logits, tokens)]
            out.write(json.dumps({"prompt": prompt, "prompt_tokens": ids, "tokens": tokens,
                                  "logprobs": logprobs}) + "\n")


def speed(a):
    tokenizer, model = load(a.dir, a.threads)
    ids = list(range(1000, 1000 + a.prompt_tokens))
    greedy(model, ids, 2)  # warm-up
    best_prefill = best_total = float("inf")
    for _ in range(a.repeats):
        t = time.perf_counter()
        greedy(model, ids, 1)
        best_prefill = min(best_prefill, time.perf_counter() - t)
        t = time.perf_counter()
        greedy(model, ids, a.max_tokens)
        best_total = min(best_total, time.perf_counter() - t)
    decode_s = best_total - best_prefill
    print(json.dumps({"prefill_tokens_per_s": a.prompt_tokens / best_prefill,
                      "decode_tokens_per_s": (a.max_tokens - 1) / decode_s,
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--arch", choices=["gpt2", "llama"], required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=12)
    m.add_argument("--hidden", type=int, default=768)
    m.add_argument("--heads", type=int, default=12)
    m.add_argument("--positions", type=int, default=1024)
    g = sub.add_parser("generate")
    g.add_argument("--dir", required=True)
    g.add_argument("--prompts", required=True)
    g.add_argument("--max-tokens", type=int, default=32)
    g.add_argument("--out", required=True)
    g.add_argument("--threads", type=int, default=2)
    s = sub.add_parser("speed")
    s.add_argument("--dir", required=True)
    s.add_argument("--prompt-tokens", type=int, default=32)
    s.add_argument("--max-tokens", type=int, default=128)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    {"make": make, "generate": generate, "speed": speed}[a.cmd](a)


if __name__ == "__main__":
    main()
