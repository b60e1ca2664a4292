#!/usr/bin/env bash
# `megatron serve` driven by lm-evaluation-harness's `local-completions` model (the OpenAI
# completions API), against `megatron eval` on the same checkpoint and tasks: gpt-tiny trained on
# the bundled corpus (or --checkpoint, whose recipe names its tokenizer files), exported with its
# tokenizer (`convert --to hf`, which lm-eval's tokenizer reads), the corpus tasks of
# eval_lm_eval.sh (cloze and multiple choice: lm-eval's loglikelihood requests). Rolling
# perplexity is left out: lm-eval's API models cut each window's context to fit max_length
# (and ask for one generated token beyond it), so their windows are not the hf model's and the
# totals differ by ~1e-4 for reasons of windowing, not scoring. Every metric and every request's
# log-likelihood and is_greedy must agree within --rtol; the whole-process times of both are
# printed. Then `local-chat-completions` (the OpenAI chat API, lm-eval applying no template of its
# own: the server's chatml renders the messages) runs a greedy generate_until task of corpus
# openings, and each of its answers must equal `megatron generate --chat-template chatml`'s for the
# same prompt.
#
#   scripts/bench/serve_lm_eval.sh [--checkpoint CKPT] [--iters N] [--threads T] [--rtol R]
#
# Builds nothing: expects build/default/bin/megatron (or build/cpu/bin/megatron). Makes (or
# reuses) build/lm-eval-venv with PyPI's torch, transformers and lm-eval[api]; runs offline.
set -euo pipefail
cd "$(dirname "$0")/../.."

checkpoint=""
iters=100
threads=2
rtol=1e-4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --checkpoint) checkpoint="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rtol) rtol="$2"; shift 2 ;;
    *) echo "usage: $0 [--checkpoint CKPT] [--iters N] [--threads T] [--rtol R]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import lm_eval, transformers, torch, tenacity' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers "lm-eval[api]" accelerate
fi
python="$venv/bin/python"
peer=scripts/bench/peers/lm_eval_tasks.py
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
work=$(mktemp -d)
server=""
trap '[[ -n "$server" ]] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

if [[ -z "$checkpoint" ]]; then
  vocab=data/tokenizers/gpt2/vocab.json
  merges=data/tokenizers/gpt2/merges.txt
  {
    "$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen" \
      --tokenizer gpt2-bpe --vocab-file "$vocab" --merge-file "$merges" --append-eod &&
    "$megatron" run recipes/gpt-tiny.yaml data.mock=false "data.prefixes=[$work/austen_text_document]" \
      data.vocab_file="$PWD/$vocab" data.merge_file="$PWD/$merges" training.train_iters="$iters" \
      eval.interval=null checkpoint.save="$work/ckpt" --threads "$threads" --run-dir "$work/run"
  } >"$work/train.log" 2>&1 || { tail -30 "$work/train.log" >&2; exit 1; }
  checkpoint="$work/ckpt"
fi
"$megatron" convert --to hf --load "$checkpoint" --save "$work/hf" >/dev/null 2>"$work/convert.log" \
  || { cat "$work/convert.log" >&2; exit 1; }
[[ -f "$work/hf/tokenizer_config.json" ]] || { echo "the checkpoint's recipe names no tokenizer files" >&2; exit 1; }
"$python" "$peer" make --corpus data/corpora/austen.jsonl --out "$work/tasks" --docs 4 --questions 40 \
  --fewshot 3 >/dev/null

"$megatron" serve "$checkpoint" --threads "$threads" --host 127.0.0.1 --port 0 --port-file "$work/port" \
  --chat-template chatml >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 600); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { cat "$work/serve.log" >&2; exit 1; }
url="http://127.0.0.1:$(cat "$work/port")/v1/completions"
# lm-eval's windows must fit the model's positions (the server refuses longer prompts).
positions=$("$python" -c "import json; c = json.load(open('$work/hf/config.json')); print(c.get('n_positions') or c['max_position_embeddings'])")

echo "# $("$megatron" --version 2>/dev/null | head -1); $("$python" -c 'import lm_eval, torch; print("lm-eval", lm_eval.__version__, "torch", torch.__version__)'); $threads threads"
seconds() { date +%s.%N; }
printf "%-18s %16s %22s\n" task "megatron eval s" "lm-eval over serve s"
mkdir -p "$work/ours" "$work/theirs"
run_pair() {  # name lm-eval-task megatron-args...
  local name=$1 their=$2
  shift 2
  local t0 t1 t2
  t0=$(seconds)
  "$megatron" eval "$checkpoint" "$@" --threads "$threads" --json "$work/ours/$name.json" \
    --log-samples "$work/ours/$name.samples.jsonl" >"$work/ours-$name.log" 2>&1 || { cat "$work/ours-$name.log" >&2; return 1; }
  t1=$(seconds)
  "$python" -m lm_eval --model local-completions \
    --model_args "model=megatron,base_url=$url,tokenizer_backend=huggingface,tokenizer=$work/hf,num_concurrent=1,max_retries=1,tokenized_requests=True,max_length=$positions" \
    --include_path "$work/tasks/tasks" --tasks "$their" --output_path "$work/theirs/$name" --log_samples \
    >"$work/theirs-$name.log" 2>&1 || { tail -30 "$work/theirs-$name.log" >&2; return 1; }
  t2=$(seconds)
  awk -v n="$name" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "%-18s %16.1f %22.1f\n", n, b - a, c - b }'
}
run_pair cloze mt_cloze --task cloze --data "$work/tasks/cloze.jsonl"
run_pair multiple_choice mt_choice --task multiple-choice --data "$work/tasks/choice.jsonl"
echo
status=0
"$python" "$peer" compare --megatron-dir "$work/ours" --lm-eval-dir "$work/theirs" --rtol "$rtol" || status=1

# Chat: lm-eval's local-chat-completions against megatron generate with the same template.
"$python" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
words = " ".join(json.loads(l)["text"] for l in open("data/corpora/austen.jsonl")).split()
with open(f"{w}/chat.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"prompt": "Continue: " + " ".join(words[i * 50:i * 50 + 12]), "target": ""}) + "\n")
open(f"{w}/tasks/tasks/mt_chat.yaml", "w").write(f"""task: mt_chat
dataset_path: json
dataset_kwargs:
  data_files:
    test: {w}/chat.jsonl
test_split: test
output_type: generate_until
doc_to_text: prompt
doc_to_target: target
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 16
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
""")
PY
chat_url="http://127.0.0.1:$(cat "$work/port")/v1/chat/completions"
"$python" -m lm_eval --model local-chat-completions --apply_chat_template \
  --model_args "model=megatron,base_url=$chat_url,num_concurrent=4,max_retries=1" \
  --include_path "$work/tasks/tasks" --tasks mt_chat --output_path "$work/theirs/chat" --log_samples \
  >"$work/theirs-chat.log" 2>&1 || { tail -30 "$work/theirs-chat.log" >&2; exit 1; }
"$megatron" generate "$checkpoint" --threads "$threads" --prompts "$work/chat.jsonl" --chat-template chatml \
  --greedy --max-tokens 16 --stop $'\n\n' --output "$work/ours-chat.jsonl" 2>/dev/null
"$python" - "$work" <<'PY' || status=1
import glob, json, sys
w = sys.argv[1]
ours = [json.loads(l)["text"] for l in open(f"{w}/ours-chat.jsonl")]
theirs = {}
for l in open(glob.glob(f"{w}/theirs/chat/**/samples_mt_chat*.jsonl", recursive=True)[0]):
    d = json.loads(l)
    theirs[d["doc_id"]] = d["resps"][0][0]
equal = sum(ours[i] == theirs[i] for i in range(len(ours)))
print(f"local-chat-completions: {equal}/{len(ours)} answers equal megatron generate --chat-template chatml's")
sys.exit(0 if equal == len(ours) else 1)
PY
exit $status
