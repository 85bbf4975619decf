#!/usr/bin/env bash
# draft.sh: `make bench-draft`: what speculative decoding (coli-run --draft) gains and costs,
# measured with the oracle draft (--draft-oracle: the --draft 0 run's own ids, mixed with wrong
# ones at --draft-oracle-rate), since random synthetic weights give near-zero real acceptance.
#   speedup = decode tokens/s with --draft K (or auto) / decode tokens/s with --draft 0,
# the median of COLI_BENCH_REPS repetitions (each runs every configuration in turn, so drift falls
# on all alike; the speedup is the median of each repetition's ratio), for K = 1..3 and oracle rates 1, 0.7, 0.4, in two settings:
#   warm: every expert in RAM (the page cache warm);
#   cold: streaming (--stream --ram) under a memory cgroup cap of a third of the container, the
#         page cache dropped before each run (needs root).
# The model: a synthetic DeepSeek-V3-shaped model with an MTP layer (coli-synth --preset bench
# --mtp 1, 6 layers x 64 experts, fp8 source, int4 experts). Every run's ids must equal --draft
# 0's (a difference stops the benchmark). Results: markdown tables on stdout (speedup, measured
# acceptance, tokens per forward, extra expert MiB per verify, auto's decision), the break-even
# acceptance per K and setting (speedup 1, interpolated between the measured rates), and
# $dir/draft-speedup.png (gnuplot: speedup against acceptance, break-even marked).
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3),
# COLI_BENCH_TOKENS (decode tokens per run, default 32), COLI_BENCH_DRAFT_PARTS (default
# "warm cold"), COLI_BENCH_DRAFT_KS (default "1 2 3"), COLI_BENCH_DRAFT_RATES (default
# "1 0.7 0.4"), COLI_BENCH_DRAFT_SHAPE (coli-synth arguments of the model, for a quick try).
# Progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
ntok=${COLI_BENCH_TOKENS:-32}
parts=${COLI_BENCH_DRAFT_PARTS:-warm cold}
ks=${COLI_BENCH_DRAFT_KS:-1 2 3}
rates=${COLI_BENCH_DRAFT_RATES:-1 0.7 0.4}
shape=${COLI_BENCH_DRAFT_SHAPE:---family deepseek_v3 --preset bench --mtp 1 --fp8 --measure 0 --seed 5 --layers 6 --experts 64}
prompt="1 2 3 4"
[[ " $parts " != *" cold "* ]] || need_root draft.sh "drop_caches and a memory cgroup (v1) for the cold part"
mkdir -p "$dir"
model=$(model_of draft-q4 "$shape")
memcg=
trap cleanup EXIT
trap 'trap - INT TERM; kill_tree $$; exit 130' INT TERM

# run SETTING ARGS...: one coli-run --json in the setting (cold: page cache dropped, in the
# cgroup, streaming); its JSON line on stdout, its ids in $dir/draft-ids.txt.
run() {
	local setting=$1 out st=0
	shift
	if [ "$setting" = cold ]; then
		drop
		out=$(coli_json_run "$dir/draft-ids.txt" in_cgroup "$memcg" bin/coli-run -m "$model" --stream --ram "$ram" \
			"$@" --json) || st=$?
	else
		out=$(coli_json_run "$dir/draft-ids.txt" bin/coli-run -m "$model" "$@" --json) || st=$?
	fi
	[ "$st" = 0 ] || { say "draft.sh: coli-run $* failed (exit $st): $(cat "$dir/draft-ids.txt.err")"; exit 1; }
	echo "$out"
}
gen=(--prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids)
same_ids() { cmp -s "$dir/draft-ids.txt" "$dir/draft-ref.txt" || { say "draft.sh: --draft $* changed the ids"; exit 1; }; }

# One repetition of every configuration, in turn (A B C .. A B C ..: the machine's drift falls on
# all alike): per configuration a line "index tok/s acceptance tokens/forward extra-MiB why".
configs=("--draft 0")
for rate in $rates; do for k in $ks auto; do configs+=("--draft $k --draft-oracle $dir/draft-ref.txt --draft-oracle-rate $rate"); done; done
repetition() {
	local setting=$1 i j
	for i in "${!configs[@]}"; do
		# shellcheck disable=SC2086 # a configuration is its words
		j=$(run "$setting" "${gen[@]}" ${configs[$i]})
		[ "$i" = 0 ] || same_ids "${configs[$i]}"
		echo "$i $(tok_s "$j") $(jfmt "$j" draft.acceptance %.3f) $(jfmt "$j" draft.tokens_per_forward %.2f)" \
			"$(jfmt "$j" draft.extra_mib_per_verify %.1f) $(jget "$j" draft.why | tr ' ' '_')"
	done
}

if [[ " $parts " == *" cold "* ]]; then
	mbytes=$(cat "$model"/*.bin | wc -c)
	cap_mib=$((mbytes / 3 >> 26 << 6))
	# at least the dense part and the MTP head in RAM with 2 GiB beside them (coli-run's minimum
	# expert cache, its buffers): a third of the container is less for MTP models
	floor_mib=$(( ($(cat "$model/dense.bin" "$model/mtp.bin" 2>/dev/null | wc -c) >> 20) + 2048 ))
	[ "$cap_mib" -ge "$floor_mib" ] || cap_mib=$floor_mib
	ram=$(awk -v c="$cap_mib" 'BEGIN {printf "%.2f", (c - 256) / 1024}')
	memcg=$(cgroup_new memory draft)
	cgroups+=("$memcg")
	echo $((cap_mib << 20)) >"$memcg/memory.limit_in_bytes"
	say "cold: cap $cap_mib MiB of a $((mbytes >> 20)) MiB container, --ram $ram"
fi
table=$dir/draft-results.txt
: >"$table"
# med I C: the median of column C of configuration I's lines in $raw.
med() { awk -v i="$1" -v c="$2" '$1 == i {print $c}' "$raw" | median; }
for setting in $parts; do
	say "$setting: --draft 0 (the reference ids), then $reps repetitions of the ${#configs[@]} configurations in turn"
	run "$setting" "${gen[@]}" >/dev/null && cp "$dir/draft-ids.txt" "$dir/draft-ref.txt"
	raw=$dir/draft-raw-$setting.txt
	: >"$raw"
	for r in $(seq "$reps"); do
		repetition "$setting" >>"$raw"
		say "  repetition $r: $(awk '{printf "%s ", $2}' <(tail -n ${#configs[@]} "$raw"))tok/s"
	done
	base=$(awk '$1 == 0 {print $2}' "$raw" | median)
	for i in "${!configs[@]}"; do
		[ "$i" = 0 ] && continue
		read -r _ k _ _ _ rate <<<"${configs[$i]}"
		# the speedup: the median of each repetition's ratio to that repetition's --draft 0
		sp=$(printf %.2f "$(awk -v i="$i" '$1 == 0 {b = $2} $1 == i {printf "%.4f\n", $2 / b}' "$raw" | median)")
		why=$(awk -v i="$i" '$1 == i {w = $6} END {print w}' "$raw")
		say "  k $k, rate $rate: $(med "$i" 2) tok/s (${sp}x), acceptance $(med "$i" 3), $(med "$i" 4) tokens per forward"
		echo "$setting $k $rate $(med "$i" 3) $(med "$i" 4) $(med "$i" 2) $sp $(med "$i" 5) $base $why" >>"$table"
	done
done

echo "| cache | --draft | oracle rate | acceptance | tokens per forward | tok/s | speedup over --draft 0 | extra expert MiB per verify |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
awk '{printf "| %s | %s | %s | %s | %s | %s | %sx | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$table"
echo
echo "| cache | oracle rate | auto's last decision |"
echo "|---|---:|---|"
awk '$2 == "auto" {gsub("_", " ", $10); printf "| %s | %s | %s |\n", $1, $3, $10}' "$table"
echo
# Break-even: the acceptance where the speedup crosses 1, linear between measured points.
breakeven() {
	awk -v s="$1" -v k="$2" '$1 == s && $2 == k {n++; a[n] = $4; p[n] = $7}
		END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t; t = p[i]; p[i] = p[j]; p[j] = t}
		      for (i = 1; i < n; i++) if ((p[i] - 1) * (p[i + 1] - 1) <= 0 && p[i + 1] != p[i]) { printf "%.2f", a[i] + (1 - p[i]) * (a[i + 1] - a[i]) / (p[i + 1] - p[i]); exit }
		      if (n && p[1] >= 1) printf "below %.2f", a[1]; else if (n) printf "above %.2f", a[n]; else printf "-" }' "$table"
}
echo "| cache | --draft | break-even acceptance |"
echo "|---|---|---:|"
plot=""
for setting in $parts; do
	for k in $ks; do
		be=$(breakeven "$setting" "$k")
		echo "| $setting | $k | $be |"
		awk -v s="$setting" -v k="$k" '$1 == s && $2 == k {print $4, $7}' "$table" | sort -g >"$dir/draft-$setting-$k.dat"
		plot="$plot${plot:+, }'$dir/draft-$setting-$k.dat' using 1:2 with linespoints title '$setting, --draft $k'"
		case $be in [0-9]*) echo "set arrow from $be, graph 0 to $be, graph 1 nohead dashtype 2" \
			"lc rgb '$([ "$setting" = cold ] && echo blue || echo red)'" >>"$dir/draft-arrows.gp" ;; esac
	done
done
touch "$dir/draft-arrows.gp"
gnuplot <<EOF
set terminal pngcairo size 900,600
set output '$dir/draft-speedup.png'
set title "coli-run --draft: speedup over --draft 0 against acceptance (oracle drafts)\\nvertical dashes: break-even acceptance (red warm, blue cold)"
set xlabel 'acceptance (accepted / drafted)'
set ylabel 'decode tokens/s relative to --draft 0'
set key top left
set grid
set xrange [0:1]
set yrange [0:*]
load '$dir/draft-arrows.gp'
plot 1 with lines dashtype 3 lc rgb 'gray' title 'break-even', $plot
EOF
rm -f "$dir/draft-arrows.gp"
echo
echo "Medians of $reps runs of $ntok decode tokens after a 4-token prompt; oracle drafts (--draft-oracle, the --draft 0 run's ids,"
echo "each right with the rate's probability); model: coli-synth $shape; cold: --stream --ram $([ -n "${ram:-}" ] && echo "$ram" || echo -) under a memory cgroup"
echo "of a third of the container, page cache dropped before each run. Plot: $dir/draft-speedup.png. Commit $(commit), $(date -u +%Y-%m-%d),"
echo "$(nproc) cores, $(cpu_desc)."
