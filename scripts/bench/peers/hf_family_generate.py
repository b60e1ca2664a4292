#!/usr/bin/env python3
"""The peer of `scripts/bench/hf_families.sh`: makes a small random model of a family (qwen2:
Qwen2ForCausalLM; mistral: MistralForCausalLM with a 4096 window) with a real tokenizer.json as
transformers saves them, and greedily continues prompts with transformers, for megatron to do
the same after `convert --from hf`.

usage: hf_family_generate.py make FAMILY DIR TOKENIZER_DIR  (writes DIR: config, weights, tokenizer)
       hf_family_generate.py generate DIR PROMPTS.jsonl N   (prints {"prompt", "ids", "text"} lines)
"""
import json
import shutil
import sys

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, MistralConfig, MistralForCausalLM,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM)


def make(family, out, tokenizer_dir):
    torch.manual_seed(0)
    if family == "qwen2":
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=176,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=512, rope_theta=1000000.0,
                             tie_word_embeddings=True, rms_norm_eps=1e-6, use_sliding_window=False)
        model = Qwen2ForCausalLM(config)
    else:
        # Mistral v0.1's tokenizer as transformers' LlamaConverter writes it: <s> starts each text.
        # The tokenizers that transformers 4.38 pins reads merges only as "left right" strings.
        path = tokenizer_dir + "/tokenizer.json"
        spec = json.load(open(path, encoding="utf-8"))
        spec["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
        spec["model"].pop("ignore_merges", None)
        json.dump(spec, open(path, "w", encoding="utf-8"), ensure_ascii=False)
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=path,
                                            bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        config = MistralConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=176,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                               max_position_embeddings=4096, sliding_window=4096,
                               tie_word_embeddings=False, rms_norm_eps=1e-5)
        model = MistralForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():  # sharper logits than the default init: clear argmaxes
            p.normal_(0.0, 0.2)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # transformers 4.38 writes the slow files too; a Hub directory of today holds tokenizer.json.
    for name in ("vocab.json", "merges.txt"):
        try:
            (__import__("pathlib").Path(out) / name).unlink()
        except FileNotFoundError:
            pass


def generate(out, prompts, n):
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    model.eval()
    for line in open(prompts, encoding="utf-8"):
        prompt = json.loads(line)["prompt"]
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            result = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None,
                                    pad_token_id=0)
        new = result[0, ids.shape[1]:].tolist()
        print(json.dumps({"prompt": prompt, "prompt_ids": ids[0].tolist(), "ids": new,
                          "text": tokenizer.decode(new)}, ensure_ascii=False))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        generate(sys.argv[2], sys.argv[3], int(sys.argv[4]))
