#!/usr/bin/env bash
# v4.sh: `make bench-v4`: a DeepSeek V4 Flash-shaped model (deepseek_v4) on this machine: decode
# and a 512-token prefill with every expert in RAM, decode and the prefill streamed from disk under a RAM cap,
# and decode at a long context against a short one, next to what coli-plan's cost model (the
# compressed attention's, engine/nn/attn_cost.c) predicts for the same two positions.
# The model: coli-synth --preset v4flash (hidden 4096, 64 heads of 512 with rope 64, q_lora 1024,
# o_groups 8 x o_lora 1024, window 128, indexer 64 x 128 top 512, experts of 2048, top-6, vocab
# 129280) with 4 layers (window, window, CSA, HCA; layers 0-2 hash-routed) and 64 experts a layer
# (not 256: a bf16 source of 256 would be 52 GB; the experts' count changes neither a token's
# compute nor its reads), no MTP layer, written in bf16 and converted with the defaults (int4
# experts and dense). A long context's state is made by a prefill of that many tokens (in batches
# of 512, layer by layer: engine/nn/v4.c), so the longest context costs its prefill's time.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3),
# COLI_BENCH_V4_CONTEXTS (short,long; default 1024,32768), COLI_BENCH_THREADS (default 2),
# COLI_BENCH_V4_SHAPE (coli-synth arguments), COLI_BENCH_V4_RAM (the streamed run's --ram GiB,
# default: the dense part + a quarter of the experts).
# Results (a markdown table and the command) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
contexts=${COLI_BENCH_V4_CONTEXTS:-1024,32768}
threads=${COLI_BENCH_THREADS:-2}
shape=${COLI_BENCH_V4_SHAPE:---family deepseek_v4 --preset v4flash --layers 4 --experts 64 --mtp 0 --measure 0 --seed 7}
mkdir -p "$dir"
model=$(model_of v4-flash4 "$shape")
sync
gib=$(bytes_of "$model" | awk '{printf "%.2f", $1 / 2^30}')
exp_gib=$(du -B1 --apparent-size "$model/experts.bin" | awk '{printf "%.2f", $1 / 2^30}')
ram=${COLI_BENCH_V4_RAM:-$(awk -v g="$gib" -v x="$exp_gib" 'BEGIN {printf "%.2f", g - 0.75 * x + 0.5}')}
short=${contexts%,*} long=${contexts#*,}
ids() { seq -s " " 1000 $((1000 + $1 - 1)); }
probe=$dir/v4-probe.json
bin/coli-plan probe -q --force --disk "$dir" -o "$probe" # this run's machine state, as the runs meet it
run() { bin/coli-run -m "$model" --threads "$threads" --ignore-eos --print-ids --json "$@" | tail -n 1; }
# sess N: the session after the prompt ids 1000 .. 999 + N, made once (prefills of 4096 tokens at
# most), remade when the model changes; at N: 16 tokens decoded from a copy of it.
sess() {
	local f=$dir/v4-ctx$1.coli_kv pos=0 n
	if [ "$(cat "$f.args" 2>/dev/null)" != "$(cat "${model%.coli}.args")" ] || [ ! -e "$f" ]; then
		rm -f "$f" "$f.args"
		while [ $pos -lt "$1" ]; do
			n=$(($1 - pos)) && [ $n -le 4096 ] || n=4096
			bin/coli-run -m "$model" --threads "$threads" --prompt-ids "$(seq -s " " $((1000 + pos)) $((999 + pos + n)))" \
				-n 0 --session "$f" --ctx $((n + 64)) >/dev/null
			pos=$((pos + n)) && say "  $f: $pos of $1 positions"
		done
		cp "${model%.coli}.args" "$f.args"
	fi
	echo "$f"
}
at() { cp "$(sess "$1")" "$dir/v4-run.coli_kv" && run --session "$dir/v4-run.coli_kv" --prompt-ids "$((1000 + $1))" -n 17 --ctx 64; }
say "v4.sh: $model ($gib GiB, experts $exp_gib GiB), $reps repetitions, contexts $short and $long, streamed --ram $ram"
load_before=$(cut -d" " -f1 /proc/loadavg)
dec=() pre=() str=() hit=() pst=() ds=() dl=()
for r in $(seq "$reps"); do
	j=$(run --prompt-ids "$(ids 16)" -n 33); dec+=("$(jget "$j" decode.tokens_per_s)")
	j=$(run --prompt-ids "$(ids 512)" -n 1); pre+=("$(jget "$j" prompt.tokens_per_s)")
	j=$(run --ram "$ram" --prompt-ids "$(ids 16)" -n 33); str+=("$(jget "$j" decode.tokens_per_s)")
	hit+=("$(jget "$j" stream.hit_rate)")
	j=$(run --ram "$ram" --prompt-ids "$(ids 512)" -n 1); pst+=("$(jget "$j" prompt.tokens_per_s)")
	j=$(at "$short"); ds+=("$(jget "$j" decode.tokens_per_s)")
	j=$(at "$long"); dl+=("$(jget "$j" decode.tokens_per_s)")
	say "  rep $r: decode ${dec[-1]}, prefill ${pre[-1]}, streamed ${str[-1]} (hit ${hit[-1]}), prefill streamed ${pst[-1]}, at $short ${ds[-1]}, at $long ${dl[-1]} tok/s"
done
m() { printf '%s\n' "$@" | median | awk '{printf ($1 == "-") ? "-" : "%.2f", $1}'; }
# coli-plan predicts at position ctx / 2: --ctx 2P is position P.
pred() { bin/coli-plan -q "$model" --probe "$probe" --ram 20 --ctx $((2 * $1)) -o "$dir/v4-plan.json" --json | tr -d "\n" | bin/coli-json predicted.warm.tok_s; }
ps=$(pred "$short") pl=$(pred "$long")
echo "| run | tok/s (median of $reps) |"
echo "|---|---:|"
echo "| decode, all in RAM (16-token prompt, 32 tokens) | $(m "${dec[@]}") |"
echo "| prefill, 512 tokens, all in RAM | $(m "${pre[@]}") |"
echo "| decode streamed, --ram $ram (hit rate $(m "${hit[@]}" | awk '{printf "%.1f%%", 100 * $1}')) | $(m "${str[@]}") |"
echo "| prefill, 512 tokens, streamed, --ram $ram | $(m "${pst[@]}") |"
echo "| decode at position $short (16 tokens after a session of $short positions) | $(m "${ds[@]}") |"
echo "| decode at position $long | $(m "${dl[@]}") |"
echo
awk -v a="$(m "${ds[@]}")" -v b="$(m "${dl[@]}")" -v pa="$ps" -v pb="$pl" -v s="$short" -v l="$long" 'BEGIN {
	printf "Decode at %d over decode at %d: measured %.3f; coli-plan predicts %.2f and %.2f tok/s there, %.3f.\n", l, s, b / a, pa, pb, pb / pa }'
echo
echo "Commands: \`coli-synth $shape\`, \`coli-convert\` (defaults; $gib GiB), \`coli-run -m MODEL --threads $threads --ignore-eos" \
	"--json\` with the prompts above (\`--ram $ram\` streamed; the contexts: \`--session\` files made by prefills of 4096 tokens, \`-n 17 --ctx 64\` from copies), \`coli-plan MODEL --ram 20" \
	"--ctx 2P\`. Load average $load_before before, $(cut -d" " -f1 /proc/loadavg) after. Commit $(commit), $(date -u +%Y-%m-%d)," \
	"$(nproc) cores, $(cpu_desc)."
