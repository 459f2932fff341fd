"""A tiny causal LM built locally, with no download, for tests and offline runs.

The model has random weights: it exercises the whole loop (chat template, sampling,
logprobs, LoRA loading, GRPO updates) in seconds on a CPU, but it will not solve tasks.

The tokenizer is a byte-level BPE (GPT-2 style, so it can encode any byte string) trained
on the fly with the ``tokenizers`` library on a small built-in corpus of English, shell
commands, JSON and Python, and wrapped as a ``PreTrainedTokenizerFast`` with a ChatML chat
template in the style of Qwen2.5 (``<|im_start|>``/``<|im_end|>``, tools announced in the
system turn, tool calls as ``<tool_call>{json}</tool_call>``, tool results as
``<tool_response>`` blocks in a user turn).

torch, transformers and tokenizers are imported inside the functions, so importing this
module is cheap.
"""

from __future__ import annotations

import json
from pathlib import Path

from mindforge.policy.engines.build_once import build_once

#: bump when the builder's output changes, so cached copies are rebuilt
TINY_MODEL_VERSION = 1
_STAMP_FILE = "mindforge_tiny.json"

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: ordinary (non-special) added tokens, as in Qwen2.5: they survive ``skip_special_tokens``
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

#: ChatML with Qwen2.5-style tools; ``arguments`` may be a dict or a JSON string
CHAT_TEMPLATE = (
    "{%- macro text(content) -%}"
    "{%- if content is none -%}{%- elif content is string -%}{{- content -}}"
    "{%- else -%}{%- for part in content -%}{%- if part.text is defined -%}{{- part.text -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}{{- text(messages[0].content) -}}"
    "{%- else -%}{{- 'You are a helpful assistant.' -}}{%- endif -%}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' -}}"
    "{{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' -}}{{- tool | tojson -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and '"
    " 'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n'"
    " '{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' -}}"
    "{%- elif messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' and loop.first -%}"
    "{%- elif message.role in ['system', 'user'] -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + text(message.content) + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' + text(message.content) -}}"
    "{%- for tc in message.tool_calls or [] -%}"
    "{%- set call = tc.function if tc.function is defined else tc -%}"
    "{%- if text(message.content) or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' -}}"
    "{%- if call.arguments is string -%}{{- call.arguments -}}{%- else -%}{{- call.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + text(message.content) + '\\n</tool_response>' -}}"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_CORPUS = r"""
The quick brown fox jumps over the lazy dog. A terminal agent reads the task, runs
commands, looks at the output and decides what to do next. When the tests pass, the
task is solved. Write the answer to the file, then check that it is correct.
You are operating a Linux terminal. Think step by step, and keep your replies short.
Error: No such file or directory. Permission denied. Command not found. Done.
The verifier runs the tests and writes a reward between 0 and 1 into reward.json.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 16 32 64 100 128 256 512 1024 2048 4096 3.14 -1 1e-3.
ls -la /app && cd /app && cat README.md | head -n 20
grep -rn "def main" src/ | sort | uniq -c | wc -l
find . -name "*.py" -type f -exec wc -l {} +
python3 -c "import json, sys; print(json.load(sys.stdin)['name'])" < data.json
echo 'hello world' > /app/output.txt; chmod +x run.sh; ./run.sh --verbose 2>&1
sed -i 's/foo/bar/g' config.ini && awk '{print $1}' access.log | sort -n | tail -5
tar -xzf archive.tar.gz -C /tmp; curl -sS http://localhost:8080/health; git status
pip install -r requirements.txt; pytest -q tests/; export PATH="$HOME/bin:$PATH"
mkdir -p /app/out; cp -r src/ dst/; mv a.txt b.txt; rm -f *.tmp; touch done; pwd; whoami
{"name": "bash", "arguments": {"command": "ls -la /app"}}
{"action": "write_file", "path": "/app/solution.py", "content": "print(42)\n"}
{"action": "finish", "reason": "the tests pass"} [1, 2, 3] {"ok": true, "value": null}
{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object",
"properties": {"path": {"type": "string", "description": "Absolute path"}}, "required": ["path"]}}}
<tool_call>
{"name": "bash", "arguments": {"command": "cat /app/task.txt"}}
</tool_call>
<tool_response>
exit code 0
</tool_response>
def solve(values: list[int]) -> int:
    total = 0
    for value in values:
        if value % 2 == 0:
            total += value
    return total

class Config:
    def __init__(self, path):
        self.path = path
        with open(path, "r", encoding="utf-8") as fh:
            self.data = json.load(fh)

import os, sys, re, subprocess
if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
SELECT name, count(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;
#!/usr/bin/env bash
set -euo pipefail
for f in *.csv; do echo "$f"; done
<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Fix the failing test in /app.<|im_end|>
<|im_start|>assistant
Let me look at the files first.<|im_end|>
Every task has an instruction, an environment, tests and a reference solution. The
agent never sees the tests. It works in a sandbox container with a time limit, and the
harness decides which tools it may use: bash, read_file, write_file and finish.
Please read the instruction carefully before you start. If a command fails, read the error
message, fix the problem and try again. Do not repeat the same command over and over.
Summarise what you changed, explain why it works, and stop when the work is complete.
The server returned a status code of 404 because the requested resource was not found.
We measured the latency of each request in seconds and the memory of each process in bytes.
Install the package, configure the service, start the daemon and verify that it listens.
The function should return an empty list when the input is empty, and raise a ValueError
when the argument is negative. Sort the records by date, then by name, in ascending order.
Parse the log file, count the errors per hour, and write the result as CSV with a header.
Create a user named alice with a home directory, add her to the group, and set a password.
Compress the directory, copy the archive to the backup server, and delete files older than
seven days. Schedule the job to run every night at two o'clock using cron.
Compile the program with optimisation enabled, run the benchmark, and report the median.
What is the capital of France? Paris is the capital and largest city of France.
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May
June July August September October November December morning afternoon evening night
first second third last next previous before after above below inside outside between
small large short long fast slow simple complex correct wrong true false yes no maybe
apt-get update && apt-get install -y --no-install-recommends build-essential ca-certificates
docker build -t app:latest . && docker run --rm -p 8000:8000 app:latest
gcc -O2 -Wall -o main main.c && ./main input.txt > output.txt; make clean && make -j4 all
du -sh /var/log/* | sort -h; df -h /; ps aux | grep python; kill -9 1234; top -b -n 1
ssh user@host 'uptime'; scp file.txt user@host:/tmp/; rsync -av --delete src/ backup/
nc -zv localhost 5432; ss -tlnp; ip addr show; ping -c 3 example.com; dig +short example.org
openssl sha256 file.bin; sha256sum *.tar.gz; base64 -d secret.b64 > key.pem; xxd -l 64 data
jq '.items[] | select(.status == "active") | .id' response.json | head
sqlite3 app.db "CREATE TABLE logs (id INTEGER PRIMARY KEY, message TEXT, created_at TEXT);"
cat <<'EOT' > /app/config.yaml
server:
  host: 0.0.0.0
  port: 8080
  workers: 4
EOT
while read -r line; do printf '%s\n' "${line^^}"; done < input.txt
for i in $(seq 1 10); do curl -s -o /dev/null -w "%{http_code}\n" http://localhost/; done
if [ -f /app/done ]; then echo "finished"; else echo "missing" >&2; exit 1; fi
{"id": 17, "user": {"name": "Bob", "email": "bob@example.com", "roles": ["admin", "dev"]}}
{"status": "ok", "results": [{"score": 0.93, "label": "cat"}, {"score": 0.07, "label": "dog"}]}
{"error": {"message": "invalid input", "type": "BadRequestError", "code": 400}}
{"command": "python3 solve.py --input data.csv --output result.json", "timeout_sec": 60}
{"tool": "write_file", "path": "/app/main.py", "content": "import sys\nprint(sys.argv)\n"}
from pathlib import Path
from dataclasses import dataclass, field
import argparse, collections, itertools, functools, hashlib, logging, math, random
@dataclass
class Item:
    name: str
    price: float = 0.0
    tags: list[str] = field(default_factory=list)

def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        logging.error("cannot read %s: %s", path, exc)
        raise

async def fetch(session, url):
    async with session.get(url, timeout=10) as response:
        return await response.json()

result = [x * x for x in range(10) if x % 3 != 0]
counts = collections.Counter(word.lower() for word in text.split())
print(f"{name}: {value:.2f} ({len(items)} items)")
assert total == 42, "unexpected total"
Punctuation and symbols: ( ) [ ] { } < > = + - * / % & | ^ ~ ! ? @ # $ _ ` ' " : ; , . \ \n \t
""".strip()


def _train_tokenizer(vocab_size: int):
    """A byte-level BPE trained on :data:`_CORPUS`, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # a few copies so that frequent pairs are clearly ranked above singletons
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=8192,
    )
    wrapped.add_tokens(ADDED_TOKENS)
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_tiny_model(out_dir: Path, seed: int = 0, vocab_size: int = 2048) -> Path:
    """Build the tiny model and its tokenizer into ``out_dir`` (no download).

    The result loads with ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
    ``AutoTokenizer.from_pretrained(out_dir)``. The same seed gives byte-identical weights.

    Args:
        out_dir: directory to write (created; existing files are overwritten).
        seed: seed of the weight initialisation.
        vocab_size: target BPE vocabulary size in tokens (the corpus may yield fewer).

    Returns:
        ``out_dir``.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()  # type: ignore[arg-type]  # transformers' @wraps(Module.to) types the method unbound
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id, do_sample=True
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    stamp = {"version": TINY_MODEL_VERSION, "seed": seed, "vocab_size": len(tokenizer)}
    (out_dir / _STAMP_FILE).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    return out_dir


def _is_current(path: Path, seed: int) -> bool:
    try:
        stamp = json.loads((path / _STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp.get("version") == TINY_MODEL_VERSION and stamp.get("seed") == seed


def ensure_tiny_model(cache_dir: Path | None = None, seed: int = 0) -> Path:
    """Build the tiny model once and return its directory.

    Safe to call from several processes at once: each builds into a private temporary
    directory and renames it into place; the first rename wins.

    Args:
        cache_dir: where the model lives; default ``settings.data_dir/models/tiny``
            (``tiny-seed{seed}`` for a seed other than 0).
        seed: seed of the weight initialisation.

    Returns:
        the model directory (loadable with ``from_pretrained``).
    """
    if cache_dir is None:
        from mindforge.settings import get_settings

        name = "tiny" if seed == 0 else f"tiny-seed{seed}"
        cache_dir = get_settings().data_dir / "models" / name
    return build_once(
        Path(cache_dir), lambda path: _is_current(path, seed), lambda tmp: build_tiny_model(tmp, seed=seed)
    )
