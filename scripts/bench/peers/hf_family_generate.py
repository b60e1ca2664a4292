#!/usr/bin/env python3
"""The peer of `scripts/bench/hf_families.sh`: makes a small random model of a family with a real
tokenizer.json, saved as transformers (5.x) saves a Hub directory, then greedily continues prompts
and scores multiple-choice requests with transformers, for megatron to do the same after
`convert --from hf`.

Families: llama31 (LlamaForCausalLM with Llama 3.1's llama3 rope scaling, its original context
shrunk to 64 positions so that prompts reach the scaled frequencies), qwen2 (Qwen2.5's shape:
q/k/v biases, tied), qwen2-yarn (the same with YaRN scaling by 4 over an original 64 positions), qwen3 (q/k RMS norms, head_dim 24 apart from hidden / heads), mistral
(a 4096 window, untied).

usage: hf_family_generate.py make FAMILY DIR TOKENIZER_DIR  (writes DIR: config, weights, tokenizer)
       hf_family_generate.py generate DIR PROMPTS.jsonl N   (prints {"prompt", "ids", "text"} lines)
       hf_family_generate.py chat DIR PROMPTS.jsonl N       (the same, each prompt a user turn of
           the model's chat template with the generation prompt)
       hf_family_generate.py score DIR TASK.jsonl           (prints {"lls": [...]} per question:
           each choice's log-likelihood as lm-evaluation-harness's loglikelihood requests)
"""
import json
import sys
from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, MistralConfig,
                          PreTrainedTokenizerFast, Qwen2Config, Qwen3Config)

SHAPE = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2)


def config_of(family, vocab):
    if family == "llama31":
        return LlamaConfig(vocab_size=vocab, max_position_embeddings=1024, rms_norm_eps=1e-5,
                           tie_word_embeddings=False,
                           rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                            "factor": 8.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 64},
                           **SHAPE)
    if family == "qwen2":
        return Qwen2Config(vocab_size=vocab, max_position_embeddings=1024, rms_norm_eps=1e-6,
                           rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                           tie_word_embeddings=True, use_sliding_window=False, **SHAPE)
    if family == "qwen2-yarn":  # Qwen2.5's long-context setting, the original context shrunk to 64
        return Qwen2Config(vocab_size=vocab, max_position_embeddings=1024, rms_norm_eps=1e-6,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0,
                                            "factor": 4.0, "original_max_position_embeddings": 64},
                           tie_word_embeddings=True, use_sliding_window=False, **SHAPE)
    if family == "qwen3":
        return Qwen3Config(vocab_size=vocab, max_position_embeddings=1024, rms_norm_eps=1e-6,
                           head_dim=24,
                           rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                           tie_word_embeddings=True, use_sliding_window=False, **SHAPE)
    if family == "mistral":
        return MistralConfig(vocab_size=vocab, max_position_embeddings=4096, sliding_window=4096,
                             rms_norm_eps=1e-5, tie_word_embeddings=False, **SHAPE)
    raise SystemExit(f"unknown family {family}")


def make(family, out, tokenizer_dir):
    torch.manual_seed(0)
    if (Path(tokenizer_dir) / "tokenizer_config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    elif family == "llama31":
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_dir + "/tokenizer.json",
                                            bos_token="<|begin_of_text|>",
                                            eos_token="<|end_of_text|>")
    else:  # Mistral v0.1: <s> starts each text (its TemplateProcessing)
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_dir + "/tokenizer.json",
                                            bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    model = AutoModelForCausalLM.from_config(config_of(family, len(tokenizer)))
    with torch.no_grad():
        for p in model.parameters():  # sharper logits than the default init: clear argmaxes
            p.normal_(0.0, 0.2)
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # norms near 1, but not exactly: q/k norms act
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def load(out):
    # tokenizer.json as it is (transformers 5's TokenizersBackend, the `tokenizers` pipeline):
    # AutoTokenizer picks a class by the model's type, and Qwen2Tokenizer rebuilds Qwen2's
    # pre-tokenizer, which splits "100" into three digits where DeepSeek-R1's tokenizer.json keeps
    # it one token (so a Qwen2 model with DeepSeek-R1's tokenizer, as DeepSeek-R1-Distill-Qwen,
    # would read numbers differently from how its tokenizer was made).
    tokenizer = PreTrainedTokenizerFast.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def generate(out, prompts, n, chat=False):
    tokenizer, model = load(out)
    for line in open(prompts, encoding="utf-8"):
        prompt = json.loads(line)["prompt"]
        if chat:  # the prompt as a user turn, rendered by the model's own chat template
            text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                 tokenize=False, add_generation_prompt=True)
            ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
        else:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            result = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None,
                                    pad_token_id=0, attention_mask=torch.ones_like(ids))
        new = result[0, ids.shape[1]:].tolist()
        print(json.dumps({"prompt": prompt, "prompt_ids": ids[0].tolist(), "ids": new,
                          "text": tokenizer.decode(new)}, ensure_ascii=False))


def encode_pair(tokenizer, context, continuation):
    # lm-evaluation-harness's HFLM._encode_pair, special tokens off (its default for causal LMs).
    spaces = len(context) - len(context.rstrip())
    if spaces > 0:
        continuation = context[-spaces:] + continuation
        context = context[:-spaces]
    whole = tokenizer(context + continuation, add_special_tokens=False).input_ids
    ctx = tokenizer(context, add_special_tokens=False).input_ids
    return ctx, whole[len(ctx):]


def score(out, task):
    tokenizer, model = load(out)
    for line in open(task, encoding="utf-8"):
        q = json.loads(line)
        lls = []
        for choice in q["choices"]:
            ctx, cont = encode_pair(tokenizer, q["context"], " " + choice)
            ids = torch.tensor([ctx + cont])
            with torch.no_grad():
                logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
            lls.append(sum(float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)))
        print(json.dumps({"lls": lls}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] in ("generate", "chat"):
        generate(sys.argv[2], sys.argv[3], int(sys.argv[4]), chat=sys.argv[1] == "chat")
    else:
        score(sys.argv[2], sys.argv[3])
