#!/usr/bin/env bash
# plan.sh: `make bench-plan`: coli-plan's predictions against measured runs on real routing, and
# the planner's configuration against a grid search over the manual knobs. Needs root: memory
# and blkio cgroups (v1), loop devices, drop_caches.
#
# A route trace (COLI_BENCH_PLAN_TRACE, any route_trace v1 CSV; default the real Qwen3-30B-A3B
# trace, tests/data/traces) and a synthetic model of its shape (qwen3_moe with the trace's
# n_expert and n_expert_used from its header, hidden 2048, expert FFN 768, 32 heads of 128, 4 KV
# heads; COLI_BENCH_PLAN_LAYERS of the trace's n_layer, default 24 or all when fewer, so that the
# model and two loop-device copies fit the disk), every run driven by `coli-run --route-from` with
# the trace: its prompt positions and the first half of its decode teach the usage file; each
# measured run prefills the trace's positions up to the second half and decodes that half (the
# planner gets the first half's usage counts and routing; without usage, nothing: its locality
# model's defaults). Configurations: memory caps
# (COLI_BENCH_PLAN_CAPS GiB at the trace's n_layer, default "3 5 8", scaled to the layers run: the
# fixed part as it is, the rest x layers / n_layer) x one disk (loop device A, throttled) or two (A + a
# mirror on B) x usage learned or none. For each: probe in the cgroups (so it sees the cap and
# the throttles), plan (the cap's default budget), run with --plan under the cap, page cache
# dropped: predicted against measured tokens/s and hit rate, peak RSS against the budget. Then a
# grid over the manual knobs at the same budget (prefetch on and off, each with the default pins
# and none; with prefetch off, 1 thread and queue depths 1 and 16) for the middle cap with usage,
# on each disk setup: the best the grid finds against the plan's run. Every configuration is
# planned first; then COLI_BENCH_REPS rounds, each running every configuration and grid setting
# once (in reverse order every other round), so that a change of the machine's load meets every
# setting alike; the tables give medians. Each plan's prediction is also recomputed at its run's
# own compute rate (the probe's CPU figures scaled by the plan's compute time over the traced
# run's): the error left is the model's, the rest the machine's load.
# Environment: COLI_BENCH_DIR (build/bench), COLI_BENCH_REPS (1), COLI_BENCH_PLAN_MBS (throttles
# of A and B, default "400 200"), COLI_BENCH_PLAN_TOKENS (decode tokens measured, default 64),
# COLI_BENCH_PLAN_GRID (0 skips the grid), COLI_BENCH_PLAN_DISKS (disk setups, default "1 2"),
# COLI_BENCH_PLAN_USE (the usage setups, default "usage none"), COLI_BENCH_PLAN_PROFILE (default 1:
# each plan's run traced, --trace, and coli-profile report's decode attribution put beside the
# plan's breakdown, ms per token; 0: untraced).
# Markdown on stdout, progress on stderr: the predictions with usage and without in two tables, each
# with its median errors; with two disks, a table of each copy's share of the bytes, planned
# (plan.json disks[].share, the store's targets) against read (coli-run --json
# stream.disks[].byte_share).
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
need_root plan.sh "memory and blkio cgroups, loop devices, drop_caches"
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-1}
trace=${COLI_BENCH_PLAN_TRACE:-tests/data/traces/qwen3-30b-a3b.route.csv}
[ -r "$trace" ] || { say "plan.sh: COLI_BENCH_PLAN_TRACE: $trace: not readable"; exit 2; }
# The trace's shape, from its header: MoE layers, experts, top_k.
hdr() { awk -v k="$1" '/^# model=/ {for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2 && kv[1] == k) print kv[2]; exit}' "$trace"; }
t_layers=$(hdr n_layer) t_experts=$(hdr n_expert) t_top_k=$(hdr n_expert_used)
case "$t_layers$t_experts$t_top_k" in
'' | *[!0-9]*) say "plan.sh: $trace: no '# model=... n_layer=L n_expert=E n_expert_used=K' header line (formats/route.md)"; exit 2 ;;
esac
layers=${COLI_BENCH_PLAN_LAYERS:-$((t_layers < 24 ? t_layers : 24))}
[ "$layers" -le "$t_layers" ] || { say "plan.sh: COLI_BENCH_PLAN_LAYERS $layers: the trace has $t_layers layers"; exit 2; }
caps=${COLI_BENCH_PLAN_CAPS:-3 5 8}
uses=${COLI_BENCH_PLAN_USE:-usage none}
profile=${COLI_BENCH_PLAN_PROFILE:-1}
for use in $uses; do
	case $use in usage | none) ;; *) say "plan.sh: COLI_BENCH_PLAN_USE: '$use' is not usage or none"; exit 2 ;; esac
done
read -r bw_a bw_b <<<"${COLI_BENCH_PLAN_MBS:-400 200}"
ntok=${COLI_BENCH_PLAN_TOKENS:-64}
grid=${COLI_BENCH_PLAN_GRID:-1}
disk_setups=${COLI_BENCH_PLAN_DISKS:-1 2}
mkdir -p "$dir"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
cmds=()
record() { cmds+=("$*"); }
trap cleanup EXIT
trap 'trap - INT TERM; kill_tree $$; exit 130' INT TERM

# The trace: prompt positions, all positions; the measured run decodes the last ntok of them.
n_pos=$(awk -F, '$1 == "0" && $2 != "" { if ($3 + 1 > n) n = $3 + 1 } END { print n }' "$trace")
n_prompt=$(awk -F, '$1 == "0" && $2 == "0" { if ($3 + 1 > n) n = $3 + 1 } END { print n }' "$trace")
half=$(( n_prompt + (n_pos - n_prompt) / 2 ))
[ $((n_pos - ntok)) -ge "$half" ] || { say "plan.sh: $ntok tokens reach into the first half (positions < $half)"; exit 2; }
ids() { seq 1 "$1" | paste -sd' '; }

shape="--family qwen3_moe --layers $layers --experts $t_experts --top-k $t_top_k --hidden 2048 --expert-ffn 768 --heads 32 --kv-heads 4 --head-dim 128 --fp8 --measure 0 --seed 13"
model=$(model_of plan-q4 "$shape")
gb=$(( ($(bytes_of "$model") >> 30) + 3 )) # the copy, the probe's 512 MiB scratch file, ext4's own share

memcg=$(cgroup_new memory cap); cgroups+=("$memcg")
blkcg=$(cgroup_new blkio throttle); cgroups+=("$blkcg")
loop_disk plan-a "$gb"; loop_a=$loop_dev
loop_disk plan-b "$gb"; loop_b=$loop_dev
copy_to "$model" "$dir/mnt-plan-a" "$dir/plan-q4.args"
copy_to "$model" "$dir/mnt-plan-b" "$dir/plan-q4.args"
A=$dir/mnt-plan-a/model.coli B=$dir/mnt-plan-b/model.coli
echo "$(cat "/sys/block/$(basename "$loop_a")/dev") $((bw_a * 1000000))" > "$blkcg/blkio.throttle.read_bps_device"
echo "$(cat "/sys/block/$(basename "$loop_b")/dev") $((bw_b * 1000000))" > "$blkcg/blkio.throttle.read_bps_device"
record "coli-synth $shape; coli-convert; copies on two ext4 loop devices (losetup --direct-io=on) throttled by blkio to $bw_a and $bw_b MB/s"

# The usage of the first half: the prompt positions and the first half of the decode.
usage0=$dir/plan-half.coli_usage
rm -f "$usage0"
say "learning the usage of positions 0..$((half - 1))"
learn=$(coli_json_run "$dir/plan-ids.txt" bin/coli-run -m "$model" --stream --route-from "$trace" --prompt-ids "$(ids "$n_prompt")" \
	-n $((half - n_prompt + 1)) --ignore-eos --print-ids --usage "$usage0" --json)
# The prefetch recall of that run: with replayed routing the model's own router predicts the next
# layer, so it mostly misses; the planner is told what this workload measured, as a user would.
recall=$(jget "$learn" stream.prefetch.recall)
say "  $(summary "$learn"), prefetch recall $recall"
record "coli-run -m MODEL --stream --route-from $trace --prompt-ids '1..$n_prompt' -n $((half - n_prompt + 1)) --ignore-eos --usage $usage0 --json   # its stream.prefetch.recall ($recall) goes to coli-plan --recall"

# The first half's routing, for coli-plan --routing: the trace cut before position $half.
routing0=$dir/plan-half.route.csv
awk -F, -v h="$half" '/^#/ || $1 == "turn" || $3 + 0 < h' "$trace" >"$routing0"
record "awk -F, -v h=$half '/^#/ || \$1 == \"turn\" || \$3 + 0 < h' $trace > $routing0   # the first half's routing"
prompt=$(ids $((n_pos - ntok)))
# The cap of caps GiB at the trace's layers for this model: the fixed part (from a plan), the rest scaled.
cap_mib() {
	local fixed
	fixed=$(bin/coli-plan -q "$A" --probe "$dir/plan-probe.json" --ram 64 -o "$dir/plan-fixed.json" &&
		tr -d '\n' <"$dir/plan-fixed.json" | bin/coli-json budget)
	awk -v c="$1" -v l="$layers" -v d="$(echo "$fixed" | bin/coli-json dense)" -v k="$(echo "$fixed" | bin/coli-json kv)" \
		-v b="$(echo "$fixed" | bin/coli-json buffers)" -v n="$t_layers" 'BEGIN {f = d + k + b; printf "%d", (f + (c * 2^30 - f) * l / n) / 2^20}'
}
probe() { in_cgroup "$memcg $blkcg" bin/coli-plan probe -q --disk "$dir/mnt-plan-a" --disk "$dir/mnt-plan-b" -o "$dir/plan-probe.json"; }

# One measured run under a cap of $1 MiB: page cache dropped, under the cap and the throttles; its
# JSON line.
measure() {
	local mib=$1 out st=0
	shift
	drop
	echo $((mib << 20)) > "$memcg/memory.limit_in_bytes"
	echo 0 > "$memcg/memory.max_usage_in_bytes"
	out=$(coli_json_run "$dir/plan-ids.txt" in_cgroup "$memcg $blkcg" bin/coli-run -m "$A" --route-from "$trace" \
		--prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids --json "$@") || st=$?
	[ "$st" = 0 ] || { say "plan.sh: coli-run $* failed (exit $st): $(cat "$dir/plan-ids.txt.err")"; exit 1; }
	echo "$out"
}
cg_max() { echo $(( $(cat "$memcg/memory.max_usage_in_bytes") >> 20 )); }

say "probing $dir/mnt-plan-a and $dir/mnt-plan-b (in the blkio cgroup: the throttled bandwidths)"
probe
record "coli-plan probe --disk $dir/mnt-plan-a --disk $dir/mnt-plan-b -o $dir/plan-probe.json   # in the blkio (and for each cap the memory) cgroup; the later probes reuse the CPU's and disks' figures"

# The configurations, planned first (probe in the cgroups, coli-plan), then measured in rounds.
# Per configuration key (cap-disks-use): its cap in MiB, the plan's arguments; per use, its keys.
declare -A cap_of mib_of args_of
keys=() grid_keys=()
plan_config() {
	local cap=$1 disks=$2 use=$3 key=$1-$2-$3 mib args=()
	mib=$(cap_mib "$cap")
	echo $((mib << 20)) > "$memcg/memory.limit_in_bytes"
	probe
	[ "$use" = usage ] && args+=(--usage "$dir/plan-u.coli_usage" --routing "$routing0")
	[ "$disks" = 2 ] && args+=(--mirror "$B")
	cp "$usage0" "$dir/plan-u.coli_usage"
	bin/coli-plan -q "$A" --probe "$dir/plan-probe.json" --ctx 256 --recall "$recall" -o "$dir/plan-$key.json" "${args[@]}"
	cap_of[$key]=$cap mib_of[$key]=$mib args_of[$key]="${args[*]}"
	keys+=("$key")
}
# The grid at one cap with usage: the knobs by hand at the plan's budget.
grid_knobs=("--prefetch on" "--prefetch on --pins 0" "--prefetch off" "--prefetch off --pins 0"
	"--prefetch off --threads 1" "--prefetch off --queue-depth 1" "--prefetch off --queue-depth 16")
declare -A grid_ram
for cap in $caps; do
	for disks in $disk_setups; do
		for use in $uses; do
			say "planning: cap $cap GiB, $disks disk(s), usage: $use"
			plan_config "$cap" "$disks" "$use"
			mid=$(echo "$caps" | awk '{print $(int((NF + 1) / 2))}')
			if [ "$grid" = 1 ] && [ "$cap" = "$mid" ] && [ "$use" = usage ]; then
				grid_ram[$cap-$disks]=$(tr -d '\n' <"$dir/plan-$cap-$disks-$use.json" | bin/coli-json knobs.ram)
				for i in "${!grid_knobs[@]}"; do grid_keys+=("$cap-$disks-usage-g$i"); keys+=("$cap-$disks-usage-g$i"); done
			fi
		done
	done
done

# One run of configuration key (a plan's, or a grid setting's: key-gI): its figures appended to
# runs[key]; the last run's JSON in last[key].
declare -A runs last
run_key() {
	local key=$1 base=${1%-g*} out args=() mirror=()
	cp "$usage0" "$dir/plan-u.coli_usage"
	if [ "$base" != "$key" ]; then
		local cap=${base%%-*} rest=${base#*-} knobs=${grid_knobs[${key##*-g}]}
		[ "${rest%%-*}" = 2 ] && mirror=(--mirror "$B")
		# shellcheck disable=SC2206 # the knobs are words
		args=(--ram "${grid_ram[$cap-${rest%%-*}]}" --usage "$dir/plan-u.coli_usage" "${mirror[@]}" $knobs)
	else
		args=(--plan "$dir/plan-$key.json")
		[ "$profile" = 1 ] && args+=(--trace "$dir/plan-run-$key-r$round.coli_trace")
	fi
	out=$(measure "${mib_of[$base]}" "${args[@]}")
	runs[$key]+="$(tok_s "$out") $(hit_rate "$out") $(rss_of "$out") $(cg_max)"$'\n'
	last[$key]=$out
	say "  $key (${args[*]//$dir\//}): $(summary "$out")"
}
# COLI_BENCH_REPS rounds, each running every configuration and grid setting once (in reverse order
# every other round): a change of the machine's load meets every setting alike; medians below.
for r in $(seq "$reps"); do
	say "round $r of $reps"
	order=("${keys[@]}")
	if [ $((r % 2)) = 0 ]; then
		order=(); for ((i = ${#keys[@]} - 1; i >= 0; i--)); do order+=("${keys[$i]}"); done
	fi
	round=$r
	for key in "${order[@]}"; do run_key "$key"; done
done

# The plan's prediction recomputed at a run's own compute rate: the probe's CPU figures (kernels,
# memory, attention core) scaled by the plan's compute time over the traced run's (its products,
# attention, router and the rest), the same plan's inputs and budget (the probe file holds the
# last cap's memory limit, not this one's): what is left of the error against that
# run's tokens/s is the model's, not the machine's load. The table gives the medians over the
# rounds of the factor, the prediction and its error.
scaled_tok() {
	local key=$1 j=$2 r=$3 pc mc f
	pc=$(awk -v a="$(echo "$j" | bin/coli-json predicted.warm.experts_s)" -v b="$(echo "$j" | bin/coli-json predicted.warm.attention_s)" \
		-v c="$(echo "$j" | bin/coli-json predicted.warm.other_s)" 'BEGIN {print a + b + c}')
	mc=0
	for k in experts attention linear_attention router other; do
		mc=$(awk -v s="$mc" -v v="$(jget "$r" "phases.decode.parts_s.$k")" -v n="$(jget "$r" phases.decode.calls)" 'BEGIN {print s + v / n}')
	done
	f=$(awk -v p="$pc" -v m="$mc" 'BEGIN {printf "%.6f", p / m}')
	sed -E 's/("[a-z0-9_]*_bps_(1|all)"|"attn_fma_per_s"): ([0-9.e+-]+)/\1: \3 FACTOR/' "$dir/plan-probe.json" |
		awk -v f="$f" '/ FACTOR/ {match($0, /: [0-9.e+-]+ FACTOR/); v = substr($0, RSTART + 2, RLENGTH - 9);
			$0 = substr($0, 1, RSTART + 1) sprintf("%.6e", v * f) substr($0, RSTART + RLENGTH)} {print}' >"$dir/plan-probe-scaled.json"
	cp "$usage0" "$dir/plan-u.coli_usage" # the first half's, as planned (a run adds its own routing to it)
	# shellcheck disable=SC2086
	bin/coli-plan -q "$A" --probe "$dir/plan-probe-scaled.json" --ctx 256 --recall "$recall" -o "$dir/plan-scaled.json" \
		--ram "$(echo "$j" | bin/coli-json knobs.ram)" ${args_of[$key]}
	echo "$f $(tr -d '\n' <"$dir/plan-scaled.json" | bin/coli-json predicted.warm.tok_s)"
}

# A configuration's last run's decode attribution ($6: coli-profile report --json of its trace)
# beside the plan's breakdown ($5), ms per token: a row of the attribution table.
attribution() {
	local r=$6 calls p=() m=() k
	calls=$(jget "$r" phases.decode.calls)
	for k in disk_s experts_s attention_s other_s; do p+=("$(jfmt "$5" "predicted.warm.$k" %.1f 1000)"); done
	for k in io_wait experts attention linear_attention router other between_calls untraced; do
		m+=("$(awk -v v="$(jget "$r" "phases.decode.parts_s.$k")" -v n="$calls" 'BEGIN {printf "%.1f", v / n * 1000}')")
	done
	parts[$4]+="$(printf '| %s | %d | %d | %s / %s | %s / %s | %s / %s | %s / %.1f | %s | %.1f | %s |' "$1" "$2" "$3" \
		"${p[0]}" "${m[0]}" "${p[1]}" "${m[1]}" "${p[2]}" "$(awk -v a="${m[2]}" -v b="${m[3]}" 'BEGIN {print a + b}')" \
		"${p[3]}" "$(awk -v a="${m[4]}" -v b="${m[5]}" 'BEGIN {print a + b}')" "${m[6]}" \
		"$(awk -v p="${p[0]} ${p[1]} ${p[2]} ${p[3]}" 'BEGIN {split(p, x, " "); print x[1] + x[2] + x[3] + x[4]}')" \
		"$(awk -v v="$(jget "$r" phases.decode.wall_s)" -v n="$calls" 'BEGIN {printf "%.1f", v / n * 1000}')")"$'\n'
}

# Per usage setup (usage, none): the table's rows, the tokens/s and hit-rate errors.
declare -A rows errs herrs serrs parts plan_tok
share_rows=()
for key in "${keys[@]}"; do
	case $key in *-g*) continue ;; esac
	cap=${cap_of[$key]} mib=${mib_of[$key]} rest=${key#*-} disks=${rest%%-*} use=${key##*-}
	j=$(tr -d '\n' <"$dir/plan-$key.json")
	ptok=$(echo "$j" | bin/coli-json predicted.warm.tok_s) phit=$(echo "$j" | bin/coli-json predicted.hit_rate)
	btok=$(echo "$j" | bin/coli-json budget.budget)
	mtok=$(echo "${runs[$key]}" | awk 'NF {print $1}' | median) mhit=$(echo "${runs[$key]}" | awk 'NF {print $2}' | median)
	plan_tok[$cap-$disks-$use]=$mtok
	err=$(awk -v p="$ptok" -v m="$mtok" 'BEGIN {printf "%.1f", (p - m) / m * 100}')
	herr=$(awk -v p="$phit" -v m="$mhit" 'BEGIN {printf "%.1f", p * 100 - m}')
	errs[$use]+="$err"$'\n' herrs[$use]+="$herr"$'\n'
	scaled="- - -"
	if [ "$profile" = 1 ]; then # each round's run at its own compute rate, against its own tok/s; the medians
		sc=""
		for r in $(seq "$reps"); do
			rep=$(bin/coli-profile report "$dir/plan-run-$key-r$r.coli_trace" --plan "$dir/plan-$key.json" \
				--probe "$dir/plan-probe.json" -o "$dir/plan-report-$key" --json -q)
			read -r f stok <<<"$(scaled_tok "$key" "$j" "$rep")"
			t=$(echo "${runs[$key]}" | awk -v r="$r" 'NF && ++n == r {print $1}')
			sc+="$f $stok $(awk -v p="$stok" -v m="$t" 'BEGIN {printf "%.1f", (p - m) / m * 100}')"$'\n'
		done
		attribution "$cap" "$mib" "$disks" "$use" "$j" "$rep"
		serr=$(echo "$sc" | awk 'NF {print $3}' | median)
		serrs[$use]+="$serr"$'\n'
		scaled="$(printf '%.2f %.2f' "$(echo "$sc" | awk 'NF {print $1}' | median)" "$(echo "$sc" | awk 'NF {print $2}' | median)") $serr"
	fi
	read -r f stok serr <<<"$scaled"
	rows[$use]+="$(printf '| %s | %d | %d | %.2f | %s | %s%% | %s | %s | %s%% | %.1f | %s | %s pts | %s | %.0f | %s |' "$cap" "$mib" "$disks" \
		"$ptok" "$mtok" "$err" "$f" "$stok" "$serr" "$(awk -v h="$phit" 'BEGIN {print h * 100}')" "$mhit" "$herr" \
		"$(echo "${runs[$key]}" | awk 'NF {print $3}' | sort -n | tail -1)" "$(awk -v b="$btok" 'BEGIN {print b / 2^20}')" \
		"$(echo "${runs[$key]}" | awk 'NF {print $4}' | sort -n | tail -1)")"$'\n'
	[ "$disks" = 2 ] && share_rows+=("$(printf '| %s | %s | %.3f | %.3f | %.0f | %.0f |' "$cap" "$use" \
		"$(echo "$j" | bin/coli-json disks.1.share)" "$(jget "${last[$key]}" stream.disks.1.byte_share)" \
		"$(jget "${last[$key]}" stream.disks.0.sustained_mb_per_s)" "$(jget "${last[$key]}" stream.disks.1.sustained_mb_per_s)")")
done
# The grid: each setting's median against the median of the plan's own runs at that cap.
grid_rows=()
for cap in $caps; do
	for disks in $disk_setups; do
		[ -n "${grid_ram[$cap-$disks]:-}" ] || continue
		best=0 best_knobs=""
		for i in "${!grid_knobs[@]}"; do
			t=$(echo "${runs[$cap-$disks-usage-g$i]}" | awk 'NF {print $1}' | median)
			awk -v a="$t" -v b="$best" 'BEGIN {exit !(a > b)}' && best=$t best_knobs="--ram ${grid_ram[$cap-$disks]} ${grid_knobs[$i]}"
		done
		pt=${plan_tok[$cap-$disks-usage]}
		grid_rows+=("| $cap | $disks | $pt | $best | $(awk -v p="$pt" -v b="$best" 'BEGIN {printf "%.2f", p / b}') | \`$best_knobs\` |")
	done
done
record "per configuration: coli-plan probe (in the memory and blkio cgroups) --disk $dir/mnt-plan-a --disk $dir/mnt-plan-b; coli-plan $A --probe P --ctx 256 --recall $recall [--usage U --routing $routing0] [--mirror $B] -o plan.json; then $reps round(s), each every configuration and grid setting once (reversed every other round): echo 3 > /proc/sys/vm/drop_caches; (in the cgroups) coli-run -m $A --plan plan.json --route-from $trace --prompt-ids '1..$((n_pos - ntok))' -n $((ntok + 1)) --ignore-eos --print-ids --json"
record "at the run's compute rate: plan-probe.json's *_bps_1, *_bps_all and attn_fma_per_s x (the plan's compute ms per token / the traced run's: products, attention, router, other), coli-plan again with the same inputs"

echo "### coli-plan: predicted against measured ($layers of $t_layers layers x $t_experts experts, top-$t_top_k, $(awk -v b="$(bytes_of "$model")" 'BEGIN {printf "%.2f", b / 2^30}') GiB; disks A $bw_a MB/s, B $bw_b MB/s; routing of $trace)"
for use in $uses; do
	echo
	if [ "$use" = usage ]; then
		echo "With usage (the first half's usage counts and --routing): goals tokens/s within 10% at every cap, hit rate within 2 points."
	else
		echo "Without usage (the planner's locality model, its defaults): goals tokens/s within 25%, hit rate within 10 points."
	fi
	echo
	echo "| cap GiB ($t_layers layers) | cap MiB (this model) | disks | predicted tok/s | measured tok/s | error | compute rate x | predicted at the run's compute rate | error | predicted hit % | measured hit % | error | peak RSS MiB | budget MiB | cgroup max MiB |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	printf '%s' "${rows[$use]}"
	echo
	if [ "$profile" = 1 ]; then
		echo
		echo "Where a decode token's time went, $use: the plan's breakdown (warm) / the last round's run's attribution (coli-profile report of its trace), ms per token; \"attention\" measured includes linear attention, \"other\" the router."
		echo
		echo "| cap GiB | cap MiB | disks | disk / I/O wait | expert products | attention | other | between calls (not modelled) | total predicted | wall measured |"
		echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		printf '%s' "${parts[$use]}"
		echo
	fi
	echo "$use: absolute error of tokens/s median $(printf '%s' "${errs[$use]}" | tr -d - | median)%, largest $(printf '%s' "${errs[$use]}" | tr -d - | sort -g | tail -1)%; of the hit rate median $(printf '%s' "${herrs[$use]}" | tr -d - | median) points, largest $(printf '%s' "${herrs[$use]}" | tr -d - | sort -g | tail -1).$([ "$profile" = 1 ] && echo " At the run's compute rate: tokens/s median $(printf '%s' "${serrs[$use]}" | tr -d - | median)%, largest $(printf '%s' "${serrs[$use]}" | tr -d - | sort -g | tail -1)%.")"
done
if [ ${#share_rows[@]} -gt 0 ]; then
	echo
	echo "B's share of the bytes, planned (the store's target) against read (the last run), and the sustained rates the store counted A and B at by the run's end:"
	echo
	echo "| cap GiB | usage | B planned | B read | A MB/s | B MB/s |"
	echo "|---:|---|---:|---:|---:|---:|"
	printf '%s\n' "${share_rows[@]}"
fi
if [ ${#grid_rows[@]} -gt 0 ]; then
	echo
	echo "| cap GiB | disks | plan's run tok/s | best of the grid tok/s | plan / best (goal >= 0.97) | best knobs |"
	echo "|---:|---:|---:|---:|---:|---|"
	printf '%s\n' "${grid_rows[@]}"
fi
echo
echo "Medians of $reps round(s), $ntok decode tokens (trace positions $((n_pos - ntok))..$((n_pos - 1))), page cache dropped before each run. $(cpu_desc), $(nproc) cores; load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; commit $(commit), $(date -u +%Y-%m-%d). Commands:"
echo
echo '```'
printf '%s\n' "${cmds[@]}"
echo '```'
