#!/usr/bin/env bash
# llama.sh: `make bench-llama`: coli against llama.cpp (node-llama-cpp 3.21.1, its prebuilt CPU
# binaries, the model mmap'd) on the same synthetic qwen3_moe weights, run alternately (coli,
# llama.cpp, coli, llama.cpp, ...), medians with min and max over COLI_BENCH_REPS repetitions.
#  warm: the 12-layer 4 GiB model of bench-run all in RAM, COLI_BENCH_THREADS threads: decode
#        of 64 tokens after a 4-token prompt, prefill of a 512-token prompt, peak RSS, coli exact
#        and with --precision q8; the memory read bandwidth (coli-membench) in each repetition.
#  cold: a 48-layer model (16 GiB) in a memory cgroup of each cap, page cache dropped before
#        every run, COLI_BENCH_COLD_THREADS threads: decode speed and time to the first token;
#        llama.cpp's GGUF has Q4_1 experts (used in place from the mmap; its Q4_0 is repacked
#        into anonymous memory and killed under a cap), run at the device's read-ahead set to
#        COLI_BENCH_LLAMA_RA_KB (its best setting: a page-cache fault reads that much; the
#        device's own value is restored after each run). The disk's own limit in the same
#        repetition: fio O_DIRECT random reads of experts.bin at the record size, queue depth 8
#        (and coli-diskbench --records for comparison); coli's bytes per second while its reads
#        are in flight against it, and its prediction's wasted bytes.
# Both engines run the same weights: coli-synth writes the checkpoint (converted to a coli
# container) and the GGUF from the same seed (coli-synth --gguf); the cold model's source is
# fp8 (half the bytes on disk while converting), the GGUF holding the same fp8-decoded values.
# Routing: coli's, teacher-forced over the prompt and its continuation (coli-profile replay:
# distinct experts per layer, overlap with the previous token); llama.cpp's greedy choices
# teacher-forced over coli's continuation (the share equal to coli's: both compute the same
# function).
# Environment: COLI_BENCH_DIR (build/bench), COLI_BENCH_REPS (3), COLI_BENCH_PARTS ("warm cold"),
# COLI_BENCH_THREADS (2), COLI_BENCH_COLD_THREADS (1), COLI_BENCH_TOKENS (64),
# COLI_BENCH_COLD_TOKENS (32), COLI_BENCH_PROMPT (512), COLI_BENCH_LAYERS (12),
# COLI_BENCH_COLD_LAYERS (48), COLI_BENCH_CAPS_MIB ("4096 8192"), COLI_BENCH_LLAMA_RA_KB (128),
# NODE_LLAMA_DIR (build/llama).
# Results (markdown) on stdout, progress on stderr. Cold runs need root (drop_caches, cgroups).
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
parts=${COLI_BENCH_PARTS:-warm cold}
threads=${COLI_BENCH_THREADS:-2}
cthreads=${COLI_BENCH_COLD_THREADS:-1}
ntok=${COLI_BENCH_TOKENS:-64}
ctok=${COLI_BENCH_COLD_TOKENS:-32}
plen=${COLI_BENCH_PROMPT:-512}
layers=${COLI_BENCH_LAYERS:-12}
clayers=${COLI_BENCH_COLD_LAYERS:-48}
caps=${COLI_BENCH_CAPS_MIB:-4096 8192}
llama_ra=${COLI_BENCH_LLAMA_RA_KB:-128}
export NODE_LLAMA_DIR=${NODE_LLAMA_DIR:-$PWD/build/llama}
need_llama llama.sh
driver=tests/bench/llama/driver.mjs
short="1 2 3 4"
long=$(seq 1000 $((999 + plen)) | tr '\n' ' ')
mkdir -p "$dir"
cmds=()
record() { cmds+=("$*"); }
trap cleanup EXIT
trap 'trap - INT TERM; kill_tree $$; exit 130' INT TERM
[[ " $parts " != *" cold "* ]] || need_root llama.sh "drop_caches and memory cgroups for the cold runs"

# ---- warm: everything in RAM ----

# coli's routing over the prompt and its continuation (coli-profile replay's collapse table), and
# llama.cpp's greedy choices over the same ids.
routing() {
	local m=$1 g=$2 ids_file=$3 th=$4 ids k e L
	ids="$short $(head -n -1 "$ids_file" | tr '\n' ' ')"
	k=$(grep -o '"num_experts_per_tok": *[0-9]*' "$m/config.json" | sed 's/.*: *//')
	e=$(grep -o '"num_experts": *[0-9]*' "$m/config.json" | sed 's/.*: *//')
	L=$(grep -o '"num_hidden_layers": *[0-9]*' "$m/config.json" | sed 's/.*: *//')
	bin/coli-run -m "$m" --stream --prompt-ids "$ids" --teacher-force --dump-routing "$dir/llama-routing.i32" -q >/dev/null
	bin/coli-profile replay --layers "$L" --experts "$e" --top-k "$k" --slots "$k" --from 1 "$dir/llama-routing.i32" | sed -n '/^| run | trace/,/^$/p'
	echo "Expected overlap with the previous token for independent uniform routing: k/E = $(awk -v k="$k" -v e="$e" 'BEGIN {printf "%.3f", k / e}')."
	agreement "$g" "$ids_file" "$th"
	record "coli-run -m $m --stream --prompt-ids \"$short + GENERATED\" --teacher-force --dump-routing $dir/llama-routing.i32; coli-profile replay --layers $L --experts $e --top-k $k --slots $k --from 1 $dir/llama-routing.i32"
}

if [[ " $parts " == *" warm "* ]]; then
	if [ "$layers" = 12 ]; then shape=$run_q4_shape; name=run-q4; else shape=${run_q4_shape/--layers 12/--layers $layers}; name=llama-warm; fi
	model=$(model_of "$name" "$shape")
	gguf=$(gguf_of "$name" "$shape" q4_0)
	say "warm: $model, $gguf, $threads threads"
	record "coli-membench 2048 $threads"
	record "coli-run -m $model --threads $threads [--precision q8] --prompt-ids \"$short\" -n $((ntok + 1)) --ignore-eos --print-ids --json"
	record "NODE_LLAMA_DIR=$NODE_LLAMA_DIR node $driver --model $gguf --threads $threads --prompt-ids \"$short\" -n $((ntok + 1))"
	record "coli-run -m $model --threads $threads [--precision q8] --prompt-ids \"\$(seq 1000 $((999 + plen)))\" -n 1 --print-ids --json"
	record "NODE_LLAMA_DIR=$NODE_LLAMA_DIR node $driver --model $gguf --threads $threads --prompt-ids \"\$(seq 1000 $((999 + plen)))\" -n 1"
	runs=$(for i in $(seq "$reps"); do say "warm: repetition $i/$reps"; warm_pair "$model" "$gguf" llama; done)
	gib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 2^30}'; }
	echo "### Warm, all in RAM: qwen3_moe $layers layers x 128 experts (coli $(gib "$(bytes_of "$model")") GiB, GGUF Q4_0 $(gib "$(stat -c %s "$gguf")") GiB), $threads threads"
	echo
	echo "| measure | coli | llama.cpp | coli / llama.cpp | coli --precision q8 | q8 / llama.cpp |"
	echo "|---|---:|---:|---:|---:|---:|"
	echo "| decode tok/s ($ntok tokens after 4) | $(mmm 2) | $(mmm 3) | $(ratio 2 3) | $(mmm 11) | $(ratio 11 3) |"
	echo "| prefill tok/s ($plen tokens) | $(mmm 4) | $(mmm 5) | $(ratio 4 5) | $(mmm 12) | $(ratio 12 5) |"
	echo "| peak RSS MiB (decode run) | $(mmm 6) | $(mmm 7) | $(ratio 6 7) | | |"
	echo
	echo "Memory read bandwidth (coli-membench, $threads threads): $(mmm 1) GB/s; coli's weight bytes per decode token at its speed: $(mmm 8) GB/s ($(ratio 8 1) of it), with --precision q8 $(mmm 13) GB/s ($(ratio 13 1) of it)."
	echo "$(engine_line "$dir/llama-l.out")"
	echo
	echo "Routing (coli, teacher-forced over the prompt and coli's $ntok decoded tokens):"
	echo
	routing "$model" "$gguf" "$dir/llama-c.out" "$threads"
	echo
fi

# ---- cold: larger than a memory cgroup cap ----

# Sectors read from the disk holding $dir so far, in MiB (device-wide).
disk_mib() { awk -v d="$devname" '$3 == d {printf "%.0f", $6 / 2048}' /proc/diskstats; }
fio_mbs() {
	local size=$(( $(stat -c %s "$1") - 4096 ))
	fio --name=records --filename="$1" --readonly --direct=1 --rw=randread --bs="$2" --iodepth=8 \
		--ioengine=libaio --offset=4096 --size="$size" --runtime=3 --time_based --output-format=json 2>/dev/null |
		node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log((JSON.parse(s).jobs[0].read.bw_bytes/1e6).toFixed(0)))'
}
# cold_one CAP ENGINE: one cold run in the cgroup at CAP MiB; prints "tok/s first_token_s
# mib_disk cg_max status mib_per_token busy_mbs wasted_mib_per_token" (the last three coli's).
cold_one() {
	local cap=$1 out=$dir/llama-cold-$2.out st s d0 cg t
	drop
	echo 0 > "$memcg/memory.max_usage_in_bytes"
	echo $((cap << 20)) > "$memcg/memory.limit_in_bytes"
	d0=$(disk_mib)
	if [ "$2" = coli ]; then
		read -r st s < <(timed "$out" in_cgroup "$memcg" bin/coli-run -m "$big" --stream --ram "$(awk -v c="$cap" 'BEGIN {printf "%.2f", (c - 256) / 1024}')" \
			--threads "$cthreads" --prompt-ids "$short" -n $((ctok + 1)) --ignore-eos --print-ids --json)
	else
		read -r st s < <(with_ra "$llama_ra" timed "$out" in_cgroup "$memcg" node "$driver" --model "$bigg" --threads "$cthreads" --prompt-ids "$short" -n $((ctok + 1)))
	fi
	cg=$(( $(cat "$memcg/memory.max_usage_in_bytes") >> 20 ))
	t=$(fig "$out" decode.tokens_per_s %.3f)
	[ "$st" = 0 ] || { say "  $2 at $cap MiB: exit $st$( [ "$st" = 137 ] && echo ' (killed)'): $(tail -n 3 "$out.err" | tr '\n' ' ')"; t=-; }
	echo "$t $(awk -v s="$s" -v d="$(fig "$out" decode.seconds %.3f)" 'BEGIN {print (d == "-") ? "-" : sprintf("%.2f", s - d)}') $(( $(disk_mib) - d0 )) $cg $st $(fig "$out" stream.mib_read_per_token %.1f) $(fig "$out" stream.disks.0.mb_per_s_busy %.0f) $(fig "$out" stream.prefetch.wasted_mib_per_token %.1f)"
}
cold_rep() {
	local cap fio_r dbr c l
	fio_r=$(fio_mbs "$big/experts.bin" "$fbs")
	dbr=$(bin/coli-diskbench --records "$big/experts.bin" "$rs" 8 3 | sed 's/read_mbs=\([0-9]*\).*/\1/')
	for cap in $caps; do
		c=$(cold_one "$cap" coli)
		l=$(cold_one "$cap" llama)
		say "  cap $cap MiB: coli $c; llama.cpp $l (tok/s, first token s, MiB from disk, cgroup max MiB, exit, coli: MiB/token, MB/s busy, wasted MiB/token)"
		echo "$cap $fio_r $dbr $c $l"
	done
}

if [[ " $parts " == *" cold "* ]]; then
	command -v fio >/dev/null || { say "llama.sh: fio is missing (make bench-llama installs it)"; exit 1; }
	cshape="${run_q4_shape/--layers 12/--layers $clayers} --fp8"
	big=$(model_of llama-cold "$cshape")
	bigg=$(gguf_of llama-cold "$cshape" q4_1)
	rs=$(record_size "$big")
	fbs=$(( (rs + 4095) / 4096 * 4096 ))
	devname=$(basename "$(readlink -f "$(df --output=source "$big" | tail -1)")")
	ra_prepare
	memcg=$(cgroup_new memory cap)
	cgroups+=("$memcg")
	say "cold: $big, $bigg, caps $caps MiB, $cthreads thread(s); records $rs bytes (fio blocks $fbs)"
	record "fio --name=records --filename=$big/experts.bin --readonly --direct=1 --rw=randread --bs=$fbs --iodepth=8 --ioengine=libaio --offset=4096 --size=(experts.bin - 4096) --runtime=3 --time_based --output-format=json   # before each repetition"
	record "coli-diskbench --records $big/experts.bin $rs 8 3"
	record "echo 3 > /proc/sys/vm/drop_caches; (echo \$BASHPID > $memcg/cgroup.procs; exec coli-run -m $big --stream --ram (CAP - 256 MiB) --threads $cthreads --prompt-ids \"$short\" -n $((ctok + 1)) --ignore-eos --print-ids --json)   # memory.limit_in_bytes = CAP"
	record "echo $llama_ra > $rafile   # was $(cat "$rafile"), restored after each llama.cpp run"
	record "echo 3 > /proc/sys/vm/drop_caches; (echo \$BASHPID > $memcg/cgroup.procs; exec node $driver --model $bigg --threads $cthreads --prompt-ids \"$short\" -n $((ctok + 1)))"
	all=$(for i in $(seq "$reps"); do say "cold: repetition $i/$reps"; cold_rep; done)
	echo "### Cold, larger than the cap: qwen3_moe $clayers layers x 128 experts (coli $(awk -v b="$(bytes_of "$big")" 'BEGIN {printf "%.2f", b / 2^30}') GiB, GGUF Q4_1 experts $(awk -v b="$(stat -c %s "$bigg")" 'BEGIN {printf "%.2f", b / 2^30}') GiB), $cthreads thread(s), page cache dropped before each run"
	echo
	echo "| cap MiB | coli tok/s | llama.cpp tok/s | coli / llama.cpp | coli first token s | llama.cpp first token s | llama.cpp / coli | coli MiB/token | coli MB/s busy | busy / fio | coli wasted MiB/token | MiB from disk coli, llama.cpp | cgroup max MiB coli, llama.cpp | fio MB/s (qd 8, records) | coli-diskbench MB/s |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for cap in $caps; do
		runs=$(echo "$all" | awk -v c="$cap" '$1 == c')
		echo "| $cap | $(mmm 4) | $(mmm 12) | $(ratio 4 12) | $(mmm 5) | $(mmm 13) | $(ratio 13 5) | $(mmm 9) | $(mmm 10) | $(ratio 10 2) | $(mmm 11) | $(mmm 6), $(mmm 14) | $(mmm 7), $(mmm 15) | $(mmm 2) | $(mmm 3) |"
	done
	echo
	echo "Runs that failed (exit status other than 0; 137: killed under the cap): coli $(echo "$all" | awk '$8 != 0' | wc -l), llama.cpp $(echo "$all" | awk '$16 != 0' | wc -l) of $(echo "$all" | wc -l). First token: the command's wall time less its decode time (open, load and prefill). MiB from disk: /proc/diskstats of $devname over the run. llama.cpp ran at read-ahead $llama_ra KiB. coli MB/s busy: its bytes read over the time a read was in flight (\`--json\` stream.disks.0.mb_per_s_busy); wasted: predicted records read and never used, per token."
	echo "$(engine_line "$dir/llama-cold-llama.out")"
	echo
	echo "Routing (coli, teacher-forced over the prompt and coli's $ctok decoded tokens):"
	echo
	routing "$big" "$bigg" "$dir/llama-cold-coli.out" "$cthreads"
	echo
fi

echo "Medians over $reps repetitions (min-max), coli and llama.cpp alternating; ratios are medians of the per-repetition ratios. CPU: $(cpu_desc), $(nproc) cores. Commit $(commit), $(date -u +%Y-%m-%d). Commands:"
echo
echo '```'
printf '%s\n' "${cmds[@]}"
echo '```'
