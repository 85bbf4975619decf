#!/usr/bin/env bash
# trace.sh: `make bench-trace`: what --trace costs. Decode speed with and without
# `--trace FILE`, alternating in one run (medians of COLI_BENCH_REPS pairs), on the bench-run model
# (qwen3_moe 12 x 128, int4, 4 GiB): every expert in RAM (the most records per second of compute:
# spans and a pin per routed expert), and streamed at 16 cache slots (reads and outcomes too).
# Goal (issue: engine library): tracing costs at most 3% of decode time.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 5).
# Results (a markdown table) on stdout, progress on stderr.
set -eu
cd "$(dirname "$0")/../.."
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-5}
mkdir -p "$dir"
. tests/bench/lib.sh
model=$(model_of run-q4 "$run_q4_shape")
trace=$dir/bench.coli_trace

# decode MODE TRACE?: decode tok/s of 64 tokens after a 4-token prompt; MODE "ram" or "stream".
decode() {
	local opts=() j
	[ "$1" = stream ] && opts=(--stream --cache-slots 16)
	[ "$2" = on ] && opts+=(--trace "$trace")
	j=$(coli_json_run "$dir/trace-ids.txt" bin/coli-run -m "$model" --prompt-ids "1 2 3 4" -n 65 --ignore-eos \
		--print-ids --json "${opts[@]}")
	tok_s "$j"
}

# One repetition: off then on, in RAM then streamed; "ram_off ram_on stream_off stream_on".
one_rep() {
	echo "$(decode ram off) $(decode ram on) $(decode stream off) $(decode stream on)"
}

bin/coli-run -q -m "$model" --prompt-ids "1 2" -n 2 --print-ids >/dev/null # the page cache warmed
runs=$(for i in $(seq "$reps"); do say "repetition $i/$reps"; one_rep; done)
med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
ratio() { echo "$runs" | awk -v a="$1" -v b="$2" '{print $b / $a}' | median; }
bin/coli-run -q -m "$model" --prompt-ids "1 2 3 4" -n 65 --ignore-eos --print-ids --stream --cache-slots 16 \
	--trace "$trace" >/dev/null
stat=$(bin/coli-tracestat "$trace")
echo "| store | decode tok/s, no trace | decode tok/s, --trace | traced / untraced (median of pairs) | cost % |"
echo "|---|---:|---:|---:|---:|"
# row NAME COL_OFF COL_ON: one store's line.
row() {
	local r
	r=$(ratio "$2" "$3")
	printf '| %s | %s | %s | %.3f | %.1f |\n' "$1" "$(med "$2")" "$(med "$3")" "$r" "$(awk -v r="$r" 'BEGIN {print (1 - r) * 100}')"
}
row "RAM" 1 2
row "streamed, 16 slots" 3 4
echo
echo "Medians of $reps alternating pairs, warm page cache; 64 decode tokens after a 4-token prompt; the streamed trace holds $(echo "$stat" | bin/coli-json records) records ($(du -k "$trace" | cut -f1) KiB compressed, worst span-sum error $(echo "$stat" | bin/coli-json worst_sum_error)). $(cpu_desc), commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores. Commands:"
echo
echo '```'
echo "coli-run -m $model --prompt-ids \"1 2 3 4\" -n 65 --ignore-eos --print-ids --json [--stream --cache-slots 16] [--trace $trace]"
echo '```'
