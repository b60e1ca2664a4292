"""The client and peer sides of scripts/bench/serve_load.sh.

  serve_load.py load --url URL --prompts FILE --clients C --requests R --max-tokens N --out FILE
      C concurrent clients (threads of the official `openai` client, non-streaming) send R greedy
      completions in all, one prompt each from FILE in turn; writes throughput (completion tokens
      per second of wall time), request latency p50/p99 and every answer's text;
  serve_load.py stream --url URL
      one streamed completion and one streamed chat completion with the `openai` client: their
      pieces must join into the non-streamed answers;
  serve_load.py peer --dir DIR --prompts FILE --batch B --requests R --max-tokens N --threads T
      transformers' generate on the same prompts, in static batches of B (left-padded), greedy:
      completion tokens per second and each batch's latency.
"""
import argparse
import json
import statistics
import threading
import time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def load(a):
    from openai import OpenAI

    prompts = [json.loads(l)["prompt"] for l in open(a.prompts)]
    lock = threading.Lock()
    next_request = [0]
    latencies, texts, tokens = [], {}, [0]

    def client():
        c = OpenAI(base_url=a.url, api_key="none", timeout=600, max_retries=0)
        while True:
            with lock:
                i = next_request[0]
                if i >= a.requests:
                    return
                next_request[0] += 1
            begin = time.perf_counter()
            r = c.completions.create(model="m", prompt=prompts[i % len(prompts)], max_tokens=a.max_tokens,
                                     temperature=0)
            elapsed = time.perf_counter() - begin
            with lock:
                latencies.append(elapsed)
                texts[i] = r.choices[0].text
                tokens[0] += r.usage.completion_tokens

    begin = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - begin
    json.dump({"tokens_per_s": tokens[0] / wall, "p50": percentile(latencies, 50),
               "p99": percentile(latencies, 99), "wall_s": wall, "tokens": tokens[0],
               "texts": [texts[i] for i in range(a.requests)]}, open(a.out, "w"))


def stream(a):
    from openai import OpenAI

    c = OpenAI(base_url=a.url, api_key="none", max_retries=0)
    whole = c.completions.create(model="m", prompt="It is a truth", max_tokens=16, temperature=0).choices[0].text
    pieces = "".join(ch.choices[0].text for ch in c.completions.create(
        model="m", prompt="It is a truth", max_tokens=16, temperature=0, stream=True) if ch.choices)
    messages = [{"role": "user", "content": "Who is Emma?"}]
    chat = c.chat.completions.create(model="m", messages=messages, max_tokens=16, temperature=0)
    chat_pieces = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="m", messages=messages, max_tokens=16, temperature=0, stream=True) if ch.choices)
    ok = pieces == whole and chat_pieces == chat.choices[0].message.content
    print(f"openai client: streamed completion equals the whole one: {pieces == whole}; "
          f"streamed chat equals the whole one: {chat_pieces == chat.choices[0].message.content}")
    raise SystemExit(0 if ok else 1)


def peer(a):
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(a.dir)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = transformers.AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32).eval()
    prompts = [json.loads(l)["prompt"] for l in open(a.prompts)]
    requests = [prompts[i % len(prompts)] for i in range(a.requests)]
    latencies, tokens = [], 0
    begin = time.perf_counter()
    for i in range(0, len(requests), a.batch):
        batch = tokenizer(requests[i:i + a.batch], return_tensors="pt", padding=True)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=a.max_tokens, min_new_tokens=a.max_tokens,
                                 do_sample=False, num_beams=1, pad_token_id=tokenizer.eos_token_id)
        latencies += [time.perf_counter() - start] * len(requests[i:i + a.batch])
        tokens += (out.shape[1] - batch["input_ids"].shape[1]) * out.shape[0]
    wall = time.perf_counter() - begin
    print(json.dumps({"tokens_per_s": tokens / wall, "p50": percentile(latencies, 50),
                      "p99": percentile(latencies, 99)}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    l = sub.add_parser("load")
    l.add_argument("--url", required=True)
    l.add_argument("--prompts", required=True)
    l.add_argument("--clients", type=int, required=True)
    l.add_argument("--requests", type=int, required=True)
    l.add_argument("--max-tokens", type=int, required=True)
    l.add_argument("--out", required=True)
    s = sub.add_parser("stream")
    s.add_argument("--url", required=True)
    q = sub.add_parser("peer")
    q.add_argument("--dir", required=True)
    q.add_argument("--prompts", required=True)
    q.add_argument("--batch", type=int, required=True)
    q.add_argument("--requests", type=int, required=True)
    q.add_argument("--max-tokens", type=int, required=True)
    q.add_argument("--threads", type=int, required=True)
    a = p.parse_args()
    {"load": load, "stream": stream, "peer": peer}[a.command](a)


if __name__ == "__main__":
    main()
