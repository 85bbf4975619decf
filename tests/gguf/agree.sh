#!/usr/bin/env bash
# agree.sh: llama.cpp reads a GGUF as the same model as a coli container: greedy decoding of N
# tokens after a prompt gives the same ids in both (coli-run, and llama.cpp through
# tests/bench/llama/driver.mjs), and llama.cpp teacher-forced over the prompt and that
# continuation in one batch (its prefill path) chooses the next id at every position.
#
#   tests/gguf/agree.sh MODEL.coli FILE.gguf "IDS" N [THREADS]
#
# Meant for weights both engines hold exactly (coli-synth --gguf-dense f32 --gguf-experts f32,
# coli-convert --dense-bits 16 --expert-bits 16): two quantizers would give two models; and for
# a vocabulary the tokenizer fills (coli-synth --vocab N, N its token count): coli-run never
# chooses an id without a token, llama.cpp's greedy sampler does.
# NODE_LLAMA_DIR: where node-llama-cpp is installed (default build/llama, make llama-deps).
# Prints one line; exit status 0 when they agree, 1 when not (the first differing position
# said), 2 on a usage error or a failed run.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 4 ] || { echo "usage: agree.sh MODEL.coli FILE.gguf \"IDS\" N [THREADS]" >&2; exit 2; }
model=$1 gguf=$2 prompt=$3 n=$4 threads=${5:-2}
export NODE_LLAMA_DIR=${NODE_LLAMA_DIR:-$top/build/llama}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/coli-agree.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=${BIN:-$top/bin}

"$bin/coli-run" -m "$model" --threads "$threads" --prompt-ids "$prompt" -n "$n" --ignore-eos --print-ids -q \
	>"$tmp/coli" 2>"$tmp/coli.err" || { echo "agree.sh: coli-run failed: $(cat "$tmp/coli.err")" >&2; exit 2; }
coli=$(tr -s ' \n' ' ' <"$tmp/coli" | sed 's/^ //; s/ $//')
plen=$(echo "$prompt" | wc -w)
node "$top/tests/bench/llama/driver.mjs" --model "$gguf" --threads "$threads" --prompt-ids "$prompt" -n "$n" \
	--agree "$prompt $coli" --agree-from "$plen" >"$tmp/llama" 2>"$tmp/llama.err" ||
	{ echo "agree.sh: llama.cpp failed: $(cat "$tmp/llama.err")" >&2; exit 2; }
# The driver's JSON: its greedy ids, and the teacher-forced agreement.
read -r llama same positions < <(node -e '
	const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop());
	console.log(j.ids.join(","), j.agree.same, j.agree.positions);' "$tmp/llama")
llama=${llama//,/ }
if [ "$coli" != "$llama" ]; then
	first=$(paste -d' ' <(echo "$coli" | tr ' ' '\n') <(echo "$llama" | tr ' ' '\n') | awk '$1 != $2 {print NR; exit}')
	echo "agree.sh: greedy ids differ from generated token $first on: coli $coli; llama.cpp $llama"
	exit 1
fi
if [ "$same" != "$positions" ]; then
	echo "agree.sh: teacher-forced, llama.cpp chose coli's next id at $same of $positions positions only"
	exit 1
fi
echo "agree.sh: the same $n greedy ids, and llama.cpp teacher-forced chose the next id at all $positions positions"
