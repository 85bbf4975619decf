#!/usr/bin/env bash
# stream.sh: `make bench-stream`: coli-run streaming routed experts from disk, each figure a ratio
# measured in one run (medians of COLI_BENCH_REPS repetitions). Needs root: drop_caches, memory
# and blkio cgroups (v1), loop devices.
#  1. cold: for each record size of COLI_BENCH_RECORDS, a synthetic model at least 3x larger than
#     a memory-cgroup cap, page cache dropped before each run: "19", DeepSeek-V3-shaped (19 MiB
#     int4 expert records, 6 layers x 64 experts); "2.4", Qwen3-30B-A3B-shaped (2.4 MiB records,
#     48 layers x 128 experts: bench-llama's cold model, and llama.cpp on its Q4_1 GGUF in the
#     same cgroup right after coli, at read-ahead COLI_BENCH_LLAMA_RA_KB, when node-llama-cpp is
#     installed in NODE_LLAMA_DIR);
#       efficiency = expert bytes read per second of decode / O_DIRECT random whole-record read
#                    bandwidth of the same file at queue depth 8 (coli-diskbench --records),
#                    measured in the same repetition.
#  2. mmap: the same model, cap and prompt with --io mmap (experts used from an mmap of
#     experts.bin through the page cache, as llama.cpp does); ratio = tokens/s coli / mmap.
#  3. mirror: a smaller model copied to two loop devices throttled (blkio) to unequal bandwidths;
#     aggregate expert MB/s of `-m A --mirror B` against the sum of the throttles and against A alone.
#  4. prefetch: --prefetch on, off and auto in turn on the 2.4 MiB-record model at a 4 GiB cap, 1
#     thread, 64 decode tokens, its disk as it is and throttled (blkio) to COLI_BENCH_THROTTLE_MBS:
#     where prediction pays and where it does not, and what auto made of each.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3),
# COLI_BENCH_TOKENS (decode tokens per run, default 32), COLI_BENCH_PARTS (default
# "cold mmap mirror prefetch"), COLI_BENCH_RECORDS (default "19 2.4"), COLI_BENCH_MIRROR_MBS
# (throttles of A and B, default "300 150"), COLI_BENCH_THROTTLE_MBS (part 4, default 500).
# Results (markdown tables) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
need_root stream.sh "drop_caches, memory and blkio cgroups, loop devices"
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
ntok=${COLI_BENCH_TOKENS:-32}
parts=${COLI_BENCH_PARTS:-cold mmap mirror prefetch}
throttle=${COLI_BENCH_THROTTLE_MBS:-500}
llama_ra=${COLI_BENCH_LLAMA_RA_KB:-128}
export NODE_LLAMA_DIR=${NODE_LLAMA_DIR:-$PWD/build/llama}
driver=tests/bench/llama/driver.mjs
read -r bw_a bw_b <<<"${COLI_BENCH_MIRROR_MBS:-300 150}"
base="--family deepseek_v3 --preset bench --mtp 0 --fp8 --measure 0 --seed 5"
big_shape="$base --layers 6 --experts 64"
qwen_shape="${run_q4_shape/--layers 12/--layers 48} --fp8"
records=${COLI_BENCH_RECORDS:-19 2.4}
small_shape="$base --layers 3 --experts 64"
prompt="1 2 3 4"
mkdir -p "$dir"
cmds=()
record() { cmds+=("$*"); }
trap cleanup EXIT
trap 'trap - INT TERM; kill_tree $$; exit 130' INT TERM
# Runs "$@" in the background, its output in $runs.
waited() { "$@" > "$dir/stream-runs.txt" & wait $!; runs=$(cat "$dir/stream-runs.txt"); }

# Bytes read from block devices by the blkio cgroup $1 so far (blkio.reset_stats does not reset them).
blk_read() { awk '$2 == "Read" {s += $3} END {printf "%.0f", s}' "$1/blkio.throttle.io_service_bytes"; }

# More figures of coli-run --json (lib.sh has the common ones).
read_gbs() { jfmt "$1" stream.read_gb_per_s %.2f; }
# disk_col JSON N COL: copy N's (1: the model's) MiB read (COL 1), busy % (2), MB/s while busy (3).
disk_col() {
	case $3 in
	1) jfmt "$1" "stream.disks.$(($2 - 1)).mib_read" %.1f ;;
	2) jfmt "$1" "stream.disks.$(($2 - 1)).busy" %.0f 100 ;;
	3) jfmt "$1" "stream.disks.$(($2 - 1)).mb_per_s_busy" %.0f ;;
	esac
}

# Runs coli-run --json (in cgroup $1, or "" for none); its ids to $dir/stream-ids.txt, its JSON
# line returned. A failed run stops the benchmark with its messages.
run_coli() {
	local cg=$1 out st=0; shift
	if [ -n "$cg" ]; then
		out=$(coli_json_run "$dir/stream-ids.txt" in_cgroup "$cg" bin/coli-run "$@" --json) || st=$?
	else
		out=$(coli_json_run "$dir/stream-ids.txt" bin/coli-run "$@" --json) || st=$?
	fi
	if [ "$st" != 0 ]; then
		say "stream.sh: coli-run $* failed (exit $st):"
		say "$(cat "$dir/stream-ids.txt.err")"
		exit 1
	fi
	echo "$out"
}

# ---- 1 and 2: cold streaming efficiency, and mmap, under a memory cgroup cap ----

cold_rep() {
	local ref ref2 chunk_mbs err mmap_err cg_mib rs=$1 tok mib ratio mm=- mm_rss=- mm_cg=- mm_mib=- dev_mib lj lt=-
	ref=$(bin/coli-diskbench --records "$big/experts.bin" "$rs" 8 3 | sed 's/read_mbs=\([0-9]*\).*/\1/')
	chunk_mbs=$(bin/coli-diskbench --records "$big/experts.bin" "$rs" 8 3 4096 0 "$chunk" | sed 's/read_mbs=\([0-9]*\).*/\1/')
	drop
	echo 0 > "$memcg/memory.max_usage_in_bytes"
	dev_mib=$(blk_read "$statcg")
	err=$(run_coli "$memcg $statcg" -m "$big" --stream --ram "$ram" --prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids)
	cg_mib=$(( $(cat "$memcg/memory.max_usage_in_bytes") >> 20 ))
	dev_mib=$(( ($(blk_read "$statcg") - dev_mib) >> 20 ))
	ref2=$(bin/coli-diskbench --records "$big/experts.bin" "$rs" 8 3 | sed 's/read_mbs=\([0-9]*\).*/\1/')
	say "  O_DIRECT qd 8: records $ref MB/s before, $ref2 MB/s after, in $((chunk >> 20)) MiB chunks $chunk_mbs MB/s; $dev_mib MiB read from disk, cgroup max $cg_mib MiB"
	ref=$(( (ref + ref2) / 2 ))
	cp "$dir/stream-ids.txt" "$dir/stream-ids-coli.txt"
	say "  coli: $(summary "$err"), disk busy $(disk_col "$err" 1 2)%"
	if [ "$do_mmap" = 1 ]; then
		drop
		echo 0 > "$memcg/memory.max_usage_in_bytes"
		mm_mib=$(blk_read "$statcg")
		mmap_err=$(run_coli "$memcg $statcg" -m "$big" --io mmap --prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids)
		mm_cg=$(( $(cat "$memcg/memory.max_usage_in_bytes") >> 20 ))
		mm=$(tok_s "$mmap_err"); mm_rss=$(rss_of "$mmap_err"); mm_mib=$(( ($(blk_read "$statcg") - mm_mib) >> 20 ))
		cmp -s "$dir/stream-ids.txt" "$dir/stream-ids-coli.txt" || say "stream.sh: warning: --io mmap generated other tokens"
		say "  mmap: decode $(tok_s "$mmap_err") tok/s, RSS $(rss_of "$mmap_err") MiB"
	fi
	if [ -n "$gguf" ]; then
		drop
		echo 0 > "$memcg/memory.max_usage_in_bytes"
		lj=$(with_ra "$llama_ra" in_cgroup "$memcg $statcg" node "$driver" --model "$gguf" --threads "$(jfmt "$err" kernels.threads %.0f)" \
			--prompt-ids "$prompt" -n $((ntok + 1)) 2>"$dir/stream-llama.err" | tail -n 1) || true
		[ -n "$lj" ] && lt=$(jfmt "$lj" decode.tokens_per_s %.3f) || say "  llama.cpp failed: $(tail -n 3 "$dir/stream-llama.err" | tr '\n' ' ')"
		say "  llama.cpp: decode $lt tok/s (read-ahead $llama_ra KiB), cgroup max $(( $(cat "$memcg/memory.max_usage_in_bytes") >> 20 )) MiB"
	fi
	tok=$(tok_s "$err"); mib=$(mib_tok "$err")
	ratio=$(awk -v m="$mib" -v t="$tok" -v r="$ref" 'BEGIN {printf "%.3f", m * 1048576 * t / 1e6 / r}')
	echo "$ref $tok $mib $(read_gbs "$err") $(hit_rate "$err") $(rss_of "$err") $cg_mib $ratio" \
		"$(disk_col "$err" 1 2) $(disk_col "$err" 1 3) $mm $mm_rss $mm_cg" \
		"$(awk -v a="$tok" -v b="$mm" 'BEGIN {print (b + 0 > 0) ? sprintf("%.2f", a / b) : "-"}') $mm_mib $dev_mib $chunk_mbs" \
		"$lt $(awk -v a="$tok" -v b="$lt" 'BEGIN {print (b + 0 > 0) ? sprintf("%.2f", a / b) : "-"}')"
}

# Distinct experts per MoE layer and the mean overlap of consecutive tokens' experts, from the
# routing of the prompt + generated ids (synthetic weights can collapse routing: docs/benchmarks.md, Measuring).
routing_check() {
	local ids k layers n
	ids="$prompt $(cat "$dir/stream-ids-coli.txt")"
	k=$(grep -o '"num_experts_per_tok": *[0-9]*' "$big/config.json" | sed 's/.*: *//')
	bin/coli-run -m "$big" --stream --prompt-ids "$ids" --teacher-force --dump-routing "$dir/stream-routing.bin" -q >/dev/null
	n=$(echo "$ids" | wc -w)
	od -An -v -t d4 -w$((4 * k)) "$dir/stream-routing.bin" | awk -v n="$n" -v k="$k" '
		{ l = int((NR - 1) / n); t = (NR - 1) % n
		  for (i = 1; i <= k; i++) { seen[l, $i] = 1; cur[t, i] = $i }
		  if (t > 0) { o = 0; for (i = 1; i <= k; i++) for (j = 1; j <= k; j++) if (cur[t, i] == cur[t - 1, j]) o++; ov += o; pairs++ }
		  if (t == n - 1) { d = 0; for (key in seen) { split(key, p, SUBSEP); if (p[1] == l) d++ } ; dist = dist (dist == "" ? "" : ", ") d }
		  L = l + 1 }
		END { printf "%d MoE layers, %d tokens, top-%d: distinct experts per layer %s; mean overlap with the previous token %.2f of %d\n", L, n, k, dist, ov / pairs, k }'
}

# cold_part NAME SHAPE [llama]: parts 1 and 2 on the model $dir/NAME.coli of that coli-synth
# shape; with llama, llama.cpp on the shape's Q4_1 GGUF in place of part 2 (--io mmap).
cold_part() {
	big=$(model_of "$1" "$2")
	mbytes=$(bytes_of "$big")
	rs=$(record_size "$big")
	# The store reads a record in chunks of STORE_CHUNK bytes: the disk is also measured at that size.
	chunk=$(( $(sed -n 's/^#define STORE_CHUNK (\([0-9]*\)u << 20).*/\1/p' engine/store.h 2>/dev/null | grep . || echo 4) << 20 ))
	# The cap: a third of the model (whole container) rounded down to 64 MiB; --ram 256 MiB below it.
	cap_mib=$(( mbytes / 3 >> 26 << 6 ))
	ram=$(awk -v c="$cap_mib" 'BEGIN {printf "%.2f", (c - 256) / 1024}')
	do_mmap=0 gguf=
	[[ " $parts " == *" mmap "* ]] && [ "${3:-}" != llama ] && do_mmap=1
	if [ "${3:-}" = llama ] && [ -e "$NODE_LLAMA_DIR/node_modules/node-llama-cpp/package.json" ]; then
		gguf=$(gguf_of "$1" "$2" q4_1)
		devname=$(basename "$(readlink -f "$(df --output=source "$big" | tail -1)")")
		ra_prepare
	fi
	memcg=$(cgroup_new memory cap)
	cgroups+=("$memcg")
	statcg=$(cgroup_new blkio count)
	cgroups+=("$statcg")
	# blk-throttle counts a cgroup's bytes only on devices with a rule: an unreachable one per disk.
	for d in /sys/block/*; do
		case ${d##*/} in loop* | ram* | zram*) continue ;; esac
		echo "$(cat "$d/dev") 1000000000000" > "$statcg/blkio.throttle.read_bps_device"
	done
	echo $((cap_mib << 20)) > "$memcg/memory.limit_in_bytes"
	dev=$(df --output=source "$big" | tail -1)
	ra_kb=$(cat "/sys/class/block/$(basename "$(readlink -f "$dev")")/queue/read_ahead_kb" 2>/dev/null ||
		cat "/sys/dev/block/$(mountpoint -d "$(df --output=target "$big" | tail -1)")/queue/read_ahead_kb" 2>/dev/null || echo "?")
	ra_sect=$(blockdev --getra "$dev" 2>/dev/null || echo "cannot open $dev")
	say "cold: $big ($(awk -v b="$mbytes" 'BEGIN {printf "%.2f", b / 2^30}') GiB, records of $rs bytes), cap $cap_mib MiB, --ram $ram"
	record "coli-diskbench --records $big/experts.bin $rs 8 3   # before and after the coli-run, the mean"
	record "coli-diskbench --records $big/experts.bin $rs 8 3 4096 0 $chunk   # records read in chunks as the store does (engine/store.h STORE_CHUNK), before the run"
	record "echo 3 > /proc/sys/vm/drop_caches; (echo \$BASHPID > $memcg/cgroup.procs; exec coli-run -m $big --stream --ram $ram --prompt-ids \"$prompt\" -n $((ntok + 1)) --ignore-eos --print-ids)   # memory.limit_in_bytes = $cap_mib MiB"
	[ "$do_mmap" = 1 ] && record "the same with --io mmap instead of --stream --ram $ram"
	[ -n "$gguf" ] && record "echo $llama_ra > $rafile; echo 3 > /proc/sys/vm/drop_caches; (in the same cgroups) node $driver --model $gguf --threads (coli's) --prompt-ids \"$prompt\" -n $((ntok + 1))   # read-ahead restored after"
	record "(the runs are also in blkio cgroup $statcg, no effective throttle: its blkio.throttle.io_service_bytes counts the bytes read from disk)"
	cold_reps() { for i in $(seq "$reps"); do say "cold: repetition $i/$reps"; cold_rep "$rs"; done; }
	waited cold_reps
	med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
	maxc() { echo "$runs" | awk -v c="$1" '{print $c}' | grep -v '^-$' | sort -n | tail -1; }
	say "cold: routing check"
	rcheck=$(routing_check)
	record "coli-run -m $big --stream --prompt-ids \"PROMPT + GENERATED\" --teacher-force --dump-routing $dir/stream-routing.bin"
	echo "### Cold streaming efficiency, $(awk -v r="$rs" 'BEGIN {printf "%.1f", r / 2^20}') MiB records (model $(awk -v b="$mbytes" -v c="$cap_mib" 'BEGIN {printf "%.2f GiB = %.1fx the %d MiB cap", b / 2^30, b / 2^20 / c, c}'))"
	echo
	echo "| decode tok/s | MiB read/token | expert MB/s (decode) | read GB/s (in flight) | disk busy % | disk MB/s while busy | O_DIRECT MB/s (qd 8, $(awk -v r="$rs" 'BEGIN {printf "%.1f", r / 2^20}') MiB records) | efficiency | O_DIRECT MB/s (qd 8, records in $((chunk >> 20)) MiB chunks) | hit rate % | peak RSS MiB (--ram $ram) | cgroup max MiB (cap $cap_mib) | llama.cpp tok/s (read-ahead $llama_ra KiB) | coli / llama.cpp |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	printf '| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(med 2)" "$(med 3)" \
		"$(echo "$runs" | awk '{print $3 * 1048576 * $2 / 1e6}' | median)" "$(med 4)" "$(med 9)" "$(med 10)" \
		"$(med 1)" "$(med 8)" "$(med 17)" "$(med 5)" "$(maxc 6)" "$(maxc 7)" "$(med 18)" "$(med 19)"
	echo
	echo "Routing: $rcheck. Peak RSS under --ram $ram GiB in every run: $(echo "$runs" | awk -v r="$ram" '$6 > r * 1024 {bad = 1} END {print bad ? "NO" : "yes"}')."
	echo
	if [ "$do_mmap" = 1 ]; then
		echo "### Against page-cache mmap, $(awk -v r="$rs" 'BEGIN {printf "%.1f", r / 2^20}') MiB records (same model, cap, prompt; readahead of $dev: read_ahead_kb ${ra_kb} KiB, blockdev --getra: $ra_sect)"
		echo
		echo "| coli tok/s | mmap tok/s | ratio coli/mmap | coli MiB read from disk | mmap MiB read from disk | mmap peak RSS MiB | mmap cgroup max MiB |"
		echo "|---:|---:|---:|---:|---:|---:|---:|"
		printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$(med 2)" "$(med 11)" "$(med 14)" "$(med 16)" "$(med 15)" "$(maxc 12)" "$(maxc 13)"
		echo
	fi
}

if [[ " $parts " == *" cold "* ]] || [[ " $parts " == *" mmap "* ]]; then
	for r in $records; do
		case $r in
		19) cold_part stream-q4 "$big_shape" ;;
		2.4) cold_part llama-cold "$qwen_shape" llama ;;
		*) say "stream.sh: COLI_BENCH_RECORDS: '$r' is not 19 or 2.4"; exit 2 ;;
		esac
	done
fi

# ---- 3: mirrors on two throttled loop devices ----

# A loop device holding a copy of the model at $dir/mnt-NAME/model.coli; its device in $mirror_loop.
mirror_disk() {
	loop_disk "mirror-$1" $(( ($(bytes_of "$2") >> 30) + 2 ))
	mirror_loop=$loop_dev
	copy_to "$2" "$dir/mnt-mirror-$1" "$dir/mirror-q4.args"
}

mirror_rep() {
	local ra rb one two rs=$1 t1 t2
	ra=$(in_cgroup "$blkcg" bin/coli-diskbench --records "$dir/mnt-mirror-a/model.coli/experts.bin" "$rs" 8 3 | sed 's/read_mbs=\([0-9]*\).*/\1/')
	rb=$(in_cgroup "$blkcg" bin/coli-diskbench --records "$dir/mnt-mirror-b/model.coli/experts.bin" "$rs" 8 3 | sed 's/read_mbs=\([0-9]*\).*/\1/')
	drop
	one=$(run_coli "$blkcg" -m "$dir/mnt-mirror-a/model.coli" --stream --cache-slots "$k" --prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids)
	say "  A alone: $(summary "$one")"
	drop
	two=$(run_coli "$blkcg" -m "$dir/mnt-mirror-a/model.coli" --mirror "$dir/mnt-mirror-b/model.coli" --stream --cache-slots "$k" --prompt-ids "$prompt" -n $((ntok + 1)) --ignore-eos --print-ids)
	say "  A + B:   $(summary "$two")"
	t1=$(awk -v m="$(mib_tok "$one")" -v t="$(tok_s "$one")" 'BEGIN {printf "%.0f", m * 1048576 * t / 1e6}')
	t2=$(awk -v m="$(mib_tok "$two")" -v t="$(tok_s "$two")" 'BEGIN {printf "%.0f", m * 1048576 * t / 1e6}')
	echo "$ra $rb $(tok_s "$one") $t1 $(tok_s "$two") $t2" \
		"$(awk -v a="$t2" -v s=$((bw_a + bw_b)) 'BEGIN {printf "%.2f", a / s}')" \
		"$(awk -v a="$t2" -v b="$t1" 'BEGIN {printf "%.2f", a / b}')" \
		"$(disk_col "$two" 1 1) $(disk_col "$two" 1 3) $(disk_col "$two" 2 1) $(disk_col "$two" 2 3)" \
		"$(awk -v a="$t2" -v s="$ra" -v t="$rb" 'BEGIN {printf "%.2f", a / (s + t)}')"
}

if [[ " $parts " == *" mirror "* ]]; then
	small=$(model_of mirror-q4 "$small_shape")
	rs=$(record_size "$small")
	k=$(grep -o '"num_experts_per_tok": *[0-9]*' "$small/config.json" | sed 's/.*: *//')
	blkcg=$(cgroup_new blkio throttle)
	cgroups+=("$blkcg")
	mirror_disk a "$small"
	loop_a=$mirror_loop
	mirror_disk b "$small"
	loop_b=$mirror_loop
	echo "$(cat "/sys/block/$(basename "$loop_a")/dev") $((bw_a * 1000000))" > "$blkcg/blkio.throttle.read_bps_device"
	echo "$(cat "/sys/block/$(basename "$loop_b")/dev") $((bw_b * 1000000))" > "$blkcg/blkio.throttle.read_bps_device"
	say "mirror: $loop_a throttled to $bw_a MB/s, $loop_b to $bw_b MB/s ($(cat "$blkcg/blkio.throttle.read_bps_device" | tr '\n' ' '))"
	record "losetup --direct-io=on -f --show $dir/mirror-{a,b}.img; mount on $dir/mnt-mirror-{a,b}; echo 'MAJ:MIN BYTES' > $blkcg/blkio.throttle.read_bps_device  # A $bw_a MB/s, B $bw_b MB/s"
	record "(echo \$BASHPID > $blkcg/cgroup.procs; exec coli-diskbench --records $dir/mnt-mirror-{a,b}/model.coli/experts.bin $rs 8 3)"
	record "echo 3 > /proc/sys/vm/drop_caches; (in the blkio cgroup) coli-run -m $dir/mnt-mirror-a/model.coli [--mirror $dir/mnt-mirror-b/model.coli] --stream --cache-slots $k --prompt-ids \"$prompt\" -n $((ntok + 1)) --ignore-eos --print-ids"
	mirror_reps() { for i in $(seq "$reps"); do say "mirror: repetition $i/$reps"; mirror_rep "$rs"; done; }
	waited mirror_reps
	med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
	echo "### Mirrors: two loop devices throttled to $bw_a and $bw_b MB/s ($(awk -v b="$(bytes_of "$small")" 'BEGIN {printf "%.2f", b / 2^30}') GiB model, $((rs >> 20)) MiB records, --cache-slots $k)"
	echo
	echo "| A measured MB/s | B measured MB/s | A alone tok/s | A alone MB/s | A+B tok/s | A+B MB/s | A+B / ($bw_a+$bw_b) | A+B / A alone | A+B / measured A+B | A MiB, MB/s busy | B MiB, MB/s busy |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s, %s | %s, %s |\n' "$(med 1)" "$(med 2)" "$(med 3)" "$(med 4)" \
		"$(med 5)" "$(med 6)" "$(med 7)" "$(med 8)" "$(med 13)" "$(med 9)" "$(med 10)" "$(med 11)" "$(med 12)"
	echo
fi

# ---- 4: prediction on, off and auto, on the disk as it is and throttled ----

# pf_run CGROUPS MODE: one cold run of the 2.4 MiB-record model; "tok/s MiB/token on_tokens off_tokens".
pf_run() {
	local j
	drop
	j=$(run_coli "$1" -m "$qm" --stream --ram 3.75 --threads 1 --prompt-ids "$prompt" -n 65 --ignore-eos --print-ids --prefetch "$2")
	echo "$(tok_s "$j") $(mib_tok "$j") $(jfmt "$j" stream.prefetch.auto.on_tokens %.0f) $(jfmt "$j" stream.prefetch.auto.off_tokens %.0f)"
}
pf_rep() {
	local cg m
	for cg in "$pfmem" "$pfmem $pfblk"; do
		for m in on off auto; do
			echo "$([ "$cg" = "$pfmem" ] && echo disk || echo throttled) $m $(pf_run "$cg" "$m")"
		done
	done
}

if [[ " $parts " == *" prefetch "* ]]; then
	qm=$(model_of llama-cold "$qwen_shape")
	pfmem=$(cgroup_new memory pfcap)
	cgroups+=("$pfmem")
	pfblk=$(cgroup_new blkio pfthrottle)
	cgroups+=("$pfblk")
	echo $((4096 << 20)) > "$pfmem/memory.limit_in_bytes"
	pfdev=$(cat "/sys/class/block/$(basename "$(readlink -f "$(df --output=source "$qm" | tail -1)")")/dev")
	echo "$pfdev $((throttle * 1000000))" > "$pfblk/blkio.throttle.read_bps_device"
	say "prefetch: $qm at a 4096 MiB cap; throttled: $pfdev at $throttle MB/s"
	record "echo 3 > /proc/sys/vm/drop_caches; (echo \$BASHPID > $pfmem/cgroup.procs; [echo \$BASHPID > $pfblk/cgroup.procs;] exec coli-run -m $qm --stream --ram 3.75 --threads 1 --prompt-ids \"$prompt\" -n 65 --ignore-eos --print-ids --prefetch on|off|auto)   # memory.limit_in_bytes 4096 MiB; blkio.throttle.read_bps_device $pfdev $((throttle * 1000000))"
	pf_reps() { for i in $(seq "$reps"); do say "prefetch: repetition $i/$reps"; pf_rep; done; }
	waited pf_reps
	echo "### Prediction on, off and auto: 2.4 MiB records, 4 GiB cap, 1 thread, 64 decode tokens"
	echo
	echo "| disk | --prefetch | decode tok/s | / off | MiB read/token | auto: tokens on, off |"
	echo "|---|---|---:|---:|---:|---:|"
	for d in disk throttled; do
		off=$(echo "$runs" | awk -v d="$d" '$1 == d && $2 == "off" {print $3}' | median)
		for m in on off auto; do
			v=$(echo "$runs" | awk -v d="$d" -v m="$m" '$1 == d && $2 == m')
			t=$(echo "$v" | awk '{print $3}' | median)
			printf '| %s | %s | %s (%s-%s) | %.2f | %s | %s |\n' "$([ "$d" = disk ] && echo "as it is" || echo "$throttle MB/s")" "$m" "$t" \
				"$(echo "$v" | awk '{print $3}' | sort -g | head -1)" "$(echo "$v" | awk '{print $3}' | sort -g | tail -1)" \
				"$(awk -v a="$t" -v b="$off" 'BEGIN {print a / b}')" "$(echo "$v" | awk '{print $4}' | median)" \
				"$([ "$m" = auto ] && echo "$v" | awk '{printf "%s%s, %s", (NR > 1 ? "; " : ""), $5, $6}' || echo -)"
		done
	done
	echo
fi

echo "Medians of $reps runs (peak RSS and cgroup maxima: the largest), $ntok decode tokens after a ${prompt// /,} prompt, page cache dropped before each coli-run. Efficiency = MiB read per token x decode tok/s / O_DIRECT random whole-record read bandwidth at queue depth 8 in the same repetition (the mean of 3 s before and 3 s after the run). Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc). Commands:"
echo
echo '```'
printf '%s\n' "${cmds[@]}"
echo '```'
