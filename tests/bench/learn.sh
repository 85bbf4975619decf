#!/usr/bin/env bash
# learn.sh: part of `make bench-stream`: the learned expert cache and the next-layer prefetch, on
# real streaming runs of coli-run, page cache dropped before each run (needs root).
#  1. learning: RUNS consecutive runs over a rotating prompt set (prompt i in run i) with
#     `--stream --usage FILE --cache-slots T` (coli-run's default split: half pins, half LRU
#     slots), FILE started empty and learned across the runs, against an LRU cache of the same
#     size (`--stream --pins 0 --cache-slots T`) on the same prompts; per run: hit rate, decode
#     tokens/s, MiB read per token.
#  2. prefetch: `--prefetch on` against `off` (LRU, T slots, prompt 1): tokens/s, hit rate,
#     the prediction's recall and the MiB per token read for wrong predictions.
#  3. the routing of the learning runs (prompt + generated tokens, teacher-forced) through
#     coli-profile replay: the collapse check (distinct experts per layer, overlap with the previous
#     token) and the hit rates the trace replay predicts for the same runs (docs/cache-policy.md).
# The model: build/bench/run-q4.coli, a synthetic qwen3_moe of 12 layers x 128 experts, top-8,
# hidden 2048, expert FFN 768, int4 (4.0 GiB, 2.4 MiB expert records), made as tests/bench/run.sh
# makes it (regenerated only when the arguments change).
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3),
# COLI_BENCH_TOKENS (decode tokens per run, default 64), COLI_BENCH_RUNS (default 5),
# COLI_BENCH_SLOTS (T, default 32 = top_k x 4, coli-run's default cache), COLI_BENCH_PINS (pins
# of the learned cache, default coli-run's: T/2 once the usage file has seen enough experts).
# Results (markdown tables) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
need_root learn.sh "drop_caches before each run"
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
ntok=${COLI_BENCH_TOKENS:-64}
nruns=${COLI_BENCH_RUNS:-5}
total=${COLI_BENCH_SLOTS:-32}
pinopt=${COLI_BENCH_PINS:+--pins $COLI_BENCH_PINS}
pins=${COLI_BENCH_PINS:-default}
mkdir -p "$dir"
model=$(model_of run-q4 "$run_q4_shape")
k=$(grep -o '"num_experts_per_tok": *[0-9]*' "$model/config.json" | sed 's/.*: *//')
usage=$dir/learn.coli_usage

# The rotating prompt set: prompt i is 8 token ids drawn with seed i.
prompt() { awk -v s="$1" 'BEGIN {srand(s); for (i = 0; i < 8; i++) printf "%s%d", i ? " " : "", 1000 + int(rand() * 60000)}'; }

# More figures of coli-run --json (lib.sh has the common ones).
pin_rate() { jfmt "$1" stream.pin_hit_rate %.1f 100; }
recall() { jfmt "$1" stream.prefetch.recall %.1f 100; }
wasted() { jfmt "$1" stream.prefetch.wasted_mib_per_token %.1f; }

# A cold coli-run (page cache dropped) of prompt $1 with the remaining options; its generated
# ids go to $dir/learn-ids-$1.txt, its JSON line is returned. A failed run stops the benchmark.
run_coli() {
	local p=$1 out st=0
	shift
	drop
	out=$(coli_json_run "$dir/learn-ids-$p.txt" bin/coli-run -m "$model" --prompt-ids "$(prompt "$p")" \
		-n $((ntok + 1)) --ignore-eos --print-ids "$@" --json) || st=$?
	if [ "$st" != 0 ]; then
		say "learn.sh: coli-run -m $model --prompt-ids \"$(prompt "$p")\" $* failed (exit $st):"
		say "$(cat "$dir/learn-ids-$p.txt.err")"
		exit 1
	fi
	say "  $(summary "$out")"
	echo "$out"
}

# One repetition of the learning part: the usage file started empty; run i of both caches on
# prompt i (interleaved, so drift on the shared machine hits both alike). One line per run:
# "run tok/s hit% pin% MiB/token RSS" learned, then the same five for LRU.
learn_rep() {
	local i a b
	rm -f "$usage"
	for i in $(seq "$nruns"); do
		say " run $i: learned ($total slots, pins $pins), then LRU ($total slots)"
		a=$(run_coli "$i" --stream --usage "$usage" $pinopt --cache-slots "$total")
		b=$(run_coli "$i" --stream --pins 0 --cache-slots "$total")
		echo "$i $(tok_s "$a") $(hit_rate "$a") $(pin_rate "$a") $(mib_tok "$a") $(rss_of "$a")" \
			"$(tok_s "$b") $(hit_rate "$b") $(mib_tok "$b") $(rss_of "$b")"
	done
}

# One repetition of the prefetch part: "tok/s hit% MiB/token RSS" off, then the same, recall and
# wasted MiB/token on.
prefetch_rep() {
	local a b
	say " prefetch off, then on ($total slots)"
	a=$(run_coli 1 --stream --pins 0 --cache-slots "$total" --prefetch off)
	b=$(run_coli 1 --stream --pins 0 --cache-slots "$total" --prefetch on)
	echo "$(tok_s "$a") $(hit_rate "$a") $(mib_tok "$a") $(rss_of "$a")" \
		"$(tok_s "$b") $(hit_rate "$b") $(mib_tok "$b") $(rss_of "$b") $(recall "$b") $(wasted "$b")"
}

say "learn.sh: $model, $nruns runs x $reps repetitions, $ntok decode tokens per run, $total slots (pins $pins) against $total LRU slots"
learn=$(for r in $(seq "$reps"); do say "learning: repetition $r/$reps"; learn_rep; done)
pref=$(for r in $(seq "$reps"); do say "prefetch: repetition $r/$reps"; prefetch_rep; done)

# Column c of the learning lines of run i (or of every line with i = 0): median, largest.
lmed() { echo "$learn" | awk -v i="$1" -v c="$2" 'i == 0 || $1 == i {print $c}' | median; }
lmax() { echo "$learn" | awk -v c="$1" '{print $c}' | grep -v '^-$' | sort -n | tail -1; }
pmed() { echo "$pref" | awk -v c="$1" '{print $c}' | median; }
pmax() { echo "$pref" | awk -v c="$1" '{print $c}' | grep -v '^-$' | sort -n | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print (b + 0 > 0 && a != "-") ? sprintf("%.2f", a / b) : "-"}'; }

echo "### Learning: --usage --cache-slots $total (pins $pins) against LRU --cache-slots $total --pins 0 ($nruns runs, rotating prompts)"
echo
echo "| run | learned: hit % (pin %) | learned tok/s | learned MiB read/token | LRU: hit % | LRU tok/s | LRU MiB read/token | tok/s learned / LRU |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq "$nruns"); do
	printf '| %s | %s (%s) | %s | %s | %s | %s | %s | %s |\n' "$i" "$(lmed "$i" 3)" "$(lmed "$i" 4)" "$(lmed "$i" 2)" \
		"$(lmed "$i" 5)" "$(lmed "$i" 8)" "$(lmed "$i" 7)" "$(lmed "$i" 9)" "$(ratio "$(lmed "$i" 2)" "$(lmed "$i" 7)")"
done
# Column c of the runs after the first, median rounded to d decimals.
later=$(echo "$learn" | awk '$1 > 1')
lat() { echo "$later" | awk -v c="$1" '{print $c}' | median | awk -v d="$2" '$1 == "-" {print; next} {printf "%.*f\n", d, $1}'; }
printf '| 2..%s | %s (%s) | %s | %s | %s | %s | %s | %s |\n' "$nruns" "$(lat 3 1)" "$(lat 4 1)" "$(lat 2 2)" "$(lat 5 1)" \
	"$(lat 8 1)" "$(lat 7 2)" "$(lat 9 1)" \
	"$(echo "$later" | awk '$7 + 0 > 0 {print $2 / $7}' | median | awk '$1 == "-" {print; next} {printf "%.2f\n", $1}')"
echo
echo "Peak RSS: learned $(lmax 6) MiB, LRU $(lmax 10) MiB (largest of all runs). Run 1 starts from an empty usage file: it pins nothing (with the default pins all $total slots are LRU)."
echo

echo "### Prefetch: --prefetch on against off (LRU, --cache-slots $total, prompt 1)"
echo
echo "| off tok/s | on tok/s | on / off | off hit % | on hit % | recall % | off MiB read/token | on MiB read/token | wasted MiB/token | peak RSS MiB off, on |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s, %s |\n' "$(pmed 1)" "$(pmed 5)" \
	"$(echo "$pref" | awk '$1 + 0 > 0 {print $5 / $1}' | median | awk '$1 == "-" {print; next} {printf "%.2f\n", $1}')" "$(pmed 2)" "$(pmed 6)" "$(pmed 9)" \
	"$(pmed 3)" "$(pmed 7)" "$(pmed 10)" "$(pmax 4)" "$(pmax 8)"
echo

# The routing of the learning runs (the tokens are the same whatever the cache), replayed.
say "routing: teacher-forcing the $nruns runs' prompt + generated tokens, then coli-profile replay"
traces=()
for i in $(seq "$nruns"); do
	ids="$(prompt "$i") $(cut -d' ' -f1-"$ntok" "$dir/learn-ids-$i.txt")"
	bin/coli-run -m "$model" --stream --prompt-ids "$ids" --teacher-force --dump-routing "$dir/learn-routing-$i.i32" -q >/dev/null
	traces+=("$dir/learn-routing-$i.i32")
done
echo "### Routing of the runs and the trace replay at $total slots (coli-profile replay; docs/cache-policy.md)"
echo
bin/coli-profile replay --layers 12 --experts 128 --top-k "$k" --slots "$total" --from 1 --per-run "${traces[@]}" |
	sed -n '/^| run | trace/,$p'
echo
echo "Medians of $reps repetitions, page cache dropped before each coli-run; $ntok decode tokens after an 8-token prompt (prompt i: 8 ids drawn with awk srand(i)); hit rates and MiB/token over the decoded tokens (the replay counts every position as a decode step). Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc). Commands:"
echo
echo '```'
echo "rm -f $usage; for i in 1..$nruns: echo 3 > /proc/sys/vm/drop_caches; coli-run -m $model --prompt-ids \"PROMPT i\" -n $((ntok + 1)) --ignore-eos --print-ids --stream --usage $usage $pinopt --cache-slots $total"
echo "for i in 1..$nruns: echo 3 > /proc/sys/vm/drop_caches; coli-run -m $model --prompt-ids \"PROMPT i\" -n $((ntok + 1)) --ignore-eos --print-ids --stream --pins 0 --cache-slots $total"
echo "echo 3 > /proc/sys/vm/drop_caches; coli-run -m $model --prompt-ids \"PROMPT 1\" -n $((ntok + 1)) --ignore-eos --print-ids --stream --pins 0 --cache-slots $total --prefetch off|on"
echo "coli-run -m $model --stream --prompt-ids \"PROMPT i + GENERATED i\" --teacher-force --dump-routing $dir/learn-routing-i.i32"
echo "coli-profile replay --layers 12 --experts 128 --top-k $k --slots $total --from 1 --per-run $dir/learn-routing-{1..$nruns}.i32"
echo '```'
