# lib.sh: what the benchmark scripts share (sourced; $dir set first): progress, cache drops,
# medians, models made once per shape, and figures of coli-run --json.
say() { echo "$*" >&2; }
# need_root SCRIPT WHY: exits 2 with a message unless running as root.
need_root() { [ "$(id -u)" = 0 ] || { echo "$1: needs root ($2); run it as root" >&2; exit 2; }; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || say "warning: cannot drop caches (not root)"; }
# The median of the numbers on stdin ("-" lines skipped; "-" when none).
median() { grep -v '^-$' | sort -g | awk '{v[NR]=$1} END {if (!NR) print "-"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
commit() { git rev-parse --short HEAD 2>/dev/null || echo unknown; }
# The CPU as every benchmark records it: lscpu's name (the same "AMD EPYC" for Zen 3 and Zen 4
# here), family and model, and the vector extensions the kernels choose from.
cpu_desc() {
	local f isa
	f=$(grep -m1 '^flags' /proc/cpuinfo)
	case "$f" in
	*" amx_tile"*) isa="AVX-512, AMX" ;;
	*" avx512_bf16"*) isa="AVX-512 with BF16, no AMX" ;;
	*" avx512f"*) isa="AVX-512, no AMX" ;;
	*" avx2"*) isa="AVX2, no AVX-512" ;;
	*) isa="no AVX2" ;;
	esac
	lscpu | awk -F': *' -v isa="$isa" '$1 == "Model name" {n = $2} $1 == "CPU family" {f = $2} $1 == "Model" {m = $2}
		END {printf "%s (family %s, model %s; %s)\n", n, f, m, isa}'
}

# kern_isas KERNBENCH: the SIMD kernel variants (avx2, avx512) this CPU runs, as KERNBENCH finds.
kern_isas() {
	local isa
	for isa in avx2 avx512; do
		"$1" $isa q4 16 64 0 1 >/dev/null 2>&1 && echo $isa
	done
}

# model_of NAME SHAPE [CONVERT_ARGS]: the container $dir/NAME.coli of that coli-synth shape,
# converted with the defaults (int4 experts) or CONVERT_ARGS, regenerated only when they change;
# the source is deleted.
model_of() {
	local name=$1 shape=$2 conv=${3:-} model=$dir/$1.coli args=$2${3:+ | coli-convert $3}
	if [ "$(cat "$dir/$name.args" 2>/dev/null)" != "$args" ] || [ ! -e "$model/manifest.coli" ]; then
		say "generating $name: coli-synth $shape, then coli-convert $conv"
		rm -rf "$dir/$name-src" "$model"
		bin/coli-synth $shape --out "$dir/$name-src" -q >&2 &&
			bin/coli-convert -q $conv "$dir/$name-src" "$model" || { say "model_of: $name could not be made"; exit 1; }
		rm -rf "$dir/$name-src"
		echo "$args" >"$dir/$name.args"
	fi
	echo "$model"
}

# The 4 GiB model of bench-run and learn.sh: a qwen3_moe of 12 layers x 128 experts, top-8,
# hidden 2048, expert FFN 768 (2.4 MiB int4 records): the width of the in-RAM llama.cpp figure (docs/benchmarks.md).
run_q4_shape="--family qwen3_moe --layers 12 --experts 128 --top-k 8 --hidden 2048 --expert-ffn 768 --heads 32 --kv-heads 4 --head-dim 128 --measure 64 --seed 11"

# Figures of coli-run --json ($1: its JSON line), formatted; "-" when absent.
jget() { echo "$1" | bin/coli-json "$2" 2>/dev/null || echo -; }
# jfmt JSON PATH FORMAT [SCALE]: the figure at PATH x SCALE in printf FORMAT.
jfmt() { local v; v=$(jget "$1" "$2"); [ "$v" = - ] && echo - || awk -v v="$v" -v s="${4:-1}" -v f="$3" 'BEGIN {printf f "\n", v * s}'; }
tok_s() { jfmt "$1" decode.tokens_per_s %.2f; }
rss_of() { jfmt "$1" peak_rss_mib %.0f; }
hit_rate() { jfmt "$1" stream.hit_rate %.1f 100; }
mib_tok() { jfmt "$1" stream.mib_read_per_token %.1f; }
# One line of a run's figures for the progress output.
summary() { echo "decode $(tok_s "$1") tok/s, hit $(hit_rate "$1")%, $(mib_tok "$1") MiB/token, RSS $(rss_of "$1") MiB"; }
# coli_json_run IDS_FILE CMD...: runs CMD (a coli-run ... --json): its ids into IDS_FILE, its JSON
# line on stdout; stderr kept in IDS_FILE.err. Exit status: CMD's.
coli_json_run() {
	local ids=$1 out st=0
	shift
	out=$("$@" 2>"$ids.err") || st=$?
	echo "$out" | head -n -1 >"$ids"
	echo "$out" | tail -n 1
	return $st
}

# ---- the side by sides with llama.cpp (llama.sh, qwen35.sh) ----

# timed OUT CMD...: runs CMD, its stdout into OUT, stderr into OUT.err; prints "STATUS SECONDS".
timed() {
	local out=$1 t0 st=0
	shift
	t0=$(date +%s.%N)
	"$@" >"$out" 2>"$out.err" || st=$?
	echo "$st $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')"
}
# The JSON line of a run's output (coli-run --json and tests/bench/llama/driver.mjs print it last).
last_json() { tail -n 1 "$1"; }
# fig OUT PATH FORMAT: the figure at PATH of OUT's JSON line; "-" when absent.
fig() { local j; j=$(last_json "$1"); [ -n "$j" ] && jfmt "$j" "$2" "$3" || echo -; }
# mmm COL: "median (min-max)" of column COL of $runs (one line per repetition); "-" when none.
mmm() {
	local v
	v=$(echo "$runs" | awk -v c="$1" '{print $c}' | grep -v '^-$' || true)
	[ -n "$v" ] || { echo -; return; }
	echo "$(echo "$v" | median) ($(echo "$v" | sort -g | head -1)-$(echo "$v" | sort -g | tail -1))"
}
# ratio A B: median over the repetitions of $runs of column A / column B.
ratio() { echo "$runs" | awk -v a="$1" -v b="$2" '$a != "-" && $b != "-" && $b > 0 {printf "%.2f\n", $a / $b}' | median; }
# The llama.cpp a driver.mjs output (its JSON line) ran: release, build, CPU variant, features.
engine_line() {
	local j
	j=$(last_json "$1")
	echo "llama.cpp: $(jget "$j" llama_cpp) ($(jget "$j" build), node-llama-cpp $(jget "$j" node_llama_cpp)), CPU variant loaded: libggml-cpu-$(jget "$j" cpu_variant).so; $(jget "$j" system_info)"
}
# warm_pair MODEL GGUF TAG: one repetition of a warm side by side (every weight in RAM), coli
# and llama.cpp alternating: the memory read bandwidth (coli-membench), coli's (exact), llama.cpp's
# and coli's with --precision q8 decode of $ntok tokens after the prompt $short, the same three
# prefills of the prompt $long, $threads threads; outputs in $dir/TAG-{c,l,q,cp,lp,qp}.out
# (driver: $driver). Prints "membw coli_decode llama_decode coli_prefill llama_prefill coli_rss
# llama_rss coli_weight_gbs coli_weight_mib_per_token coli_prefill_rss q8_decode q8_prefill
# q8_weight_gbs".
warm_pair() {
	local model=$1 gguf=$2 c=$dir/$3-c.out l=$dir/$3-l.out q=$dir/$3-q.out cp=$dir/$3-cp.out lp=$dir/$3-lp.out
	local qp=$dir/$3-qp.out bw f
	bw=$(bin/coli-membench 2048 "$threads" | tail -1 | sed 's/.*read_gbs=//')
	timed "$c" bin/coli-run -m "$model" --threads "$threads" --prompt-ids "$short" -n $((ntok + 1)) --ignore-eos --print-ids --json >/dev/null
	timed "$l" node "$driver" --model "$gguf" --threads "$threads" --prompt-ids "$short" -n $((ntok + 1)) >/dev/null
	timed "$q" bin/coli-run -m "$model" --threads "$threads" --precision q8 --prompt-ids "$short" -n $((ntok + 1)) --ignore-eos --print-ids --json >/dev/null
	timed "$cp" bin/coli-run -m "$model" --threads "$threads" --prompt-ids "$long" -n 1 --print-ids --json >/dev/null
	timed "$lp" node "$driver" --model "$gguf" --threads "$threads" --prompt-ids "$long" -n 1 >/dev/null
	timed "$qp" bin/coli-run -m "$model" --threads "$threads" --precision q8 --prompt-ids "$long" -n 1 --print-ids --json >/dev/null
	for f in "$c" "$l" "$q" "$cp" "$lp" "$qp"; do [ -n "$(last_json "$f")" ] || { say "warm_pair: a run failed: $(cat "$f.err")"; exit 1; }; done
	say "  coli decode $(fig "$c" decode.tokens_per_s %.2f) tok/s (q8 $(fig "$q" decode.tokens_per_s %.2f)), prefill $(fig "$cp" prompt.tokens_per_s %.1f) (q8 $(fig "$qp" prompt.tokens_per_s %.1f)); llama.cpp decode $(fig "$l" decode.tokens_per_s %.2f), prefill $(fig "$lp" prompt.tokens_per_s %.1f)"
	echo "$bw $(fig "$c" decode.tokens_per_s %.2f) $(fig "$l" decode.tokens_per_s %.2f) $(fig "$cp" prompt.tokens_per_s %.1f)" \
		"$(fig "$lp" prompt.tokens_per_s %.1f) $(fig "$c" peak_rss_mib %.0f) $(fig "$l" peak_rss_mib %.0f) $(fig "$c" decode.weights_gb_per_s %.2f)" \
		"$(fig "$c" decode.weights_mib_per_token %.1f) $(fig "$cp" peak_rss_mib %.0f) $(fig "$q" decode.tokens_per_s %.2f)" \
		"$(fig "$qp" prompt.tokens_per_s %.1f) $(fig "$q" decode.weights_gb_per_s %.2f)"
}
# agreement GGUF IDS_FILE THREADS: llama.cpp teacher-forced over $short and the ids coli
# generated after it (IDS_FILE: coli-run --print-ids --json's output); prints how often its
# greedy choice is coli's next id, and records the command.
agreement() {
	local ids j
	ids="$short $(head -n -1 "$2" | tr '\n' ' ')"
	node "$driver" --model "$1" --threads "$3" --prompt-ids "$short" -n 1 --agree "$ids" --agree-from 4 >"$dir/agree.out"
	j=$(cat "$dir/agree.out")
	echo "llama.cpp teacher-forced over the same ids: its greedy choice equals coli's at $(jget "$j" agree.same) of $(jget "$j" agree.positions) positions."
	record "node $driver --model $1 --threads $3 --prompt-ids \"$short\" -n 1 --agree \"$short + GENERATED\" --agree-from 4"
}
# need_llama SCRIPT: exits 1 unless node-llama-cpp is installed in $NODE_LLAMA_DIR.
need_llama() {
	[ -e "$NODE_LLAMA_DIR/node_modules/node-llama-cpp/package.json" ] ||
		{ say "$1: node-llama-cpp is not installed in $NODE_LLAMA_DIR (make llama-deps installs it)"; exit 1; }
}

# ---- for the benchmarks that set up cgroups, loop devices and mounts (stream.sh, plan.sh) ----

# Teardown of whatever this run set up (trap: also on failure or interrupt).
mounts=() loops=() cgroups=()
cleanup() {
	local m l c i
	for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	for c in "${cgroups[@]}"; do
		for i in 1 2 3 4 5; do rmdir "$c" 2>/dev/null && break; sleep 0.2; done
	done
}
# On a signal: stop this script's processes (children first), then exit (and clean up). Long
# loops run in the background under `wait`, which a signal interrupts at once.
kill_tree() { local c; for c in $(ps -o pid= --ppid "$1"); do kill_tree "$c"; kill "$c" 2>/dev/null || true; done; }
bytes_of() { cat "$1"/*.bin | wc -c; }
record_size() { grep -a -o '"record_size": *[0-9]*' "$1/manifest.coli" | head -1 | sed 's/.*: *//'; }

# A child cgroup NAME of this shell's own cgroup in v1 controller CTL; prints its folder.
cgroup_new() {
	local ctl=$1 name=$2 own cg
	own=$(awk -F: -v c="$ctl" '{n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3}' /proc/self/cgroup)
	cg=/sys/fs/cgroup/$ctl${own%/}/coli-bench-$$-$name
	[ -d "/sys/fs/cgroup/$ctl" ] || { say "no cgroup v1 '$ctl' controller at /sys/fs/cgroup/$ctl"; exit 1; }
	mkdir -p "$cg"
	echo "$cg"
}
# Runs a command with the subshell's PID in cgroup folders $1 (space-separated; this shell
# stays outside).
in_cgroup() {
	local cgs=$1; shift
	(for c in $cgs; do echo "$BASHPID" > "$c/cgroup.procs"; done && exec "$@")
}
# loop_disk NAME GIB: a file-backed ext4 loop device ($dir/NAME.img, kept between runs unless its
# size changes) mounted at $dir/mnt-NAME; the device in $loop_dev (not run in a subshell: the
# teardown lists must see it).
loop_disk() {
	local name=$1 gb=$2 img=$dir/$1.img mnt=$dir/mnt-$1
	if [ ! -e "$img" ] || [ "$(stat -c %s "$img")" != $((gb << 30)) ]; then
		say "creating $img ($gb GiB, ext4)"
		rm -f "$img"
		truncate -s "${gb}G" "$img"
		mkfs.ext4 -q -F "$img"
	fi
	loop_dev=$(losetup --direct-io=on -f --show "$img" 2>/dev/null || losetup -f --show "$img")
	loops+=("$loop_dev")
	mkdir -p "$mnt"
	mount "$loop_dev" "$mnt"
	mounts+=("$mnt")
}
# copy_to MODEL DIR ARGS_FILE: DIR/model.coli a copy of MODEL, redone when ARGS_FILE (the model's
# coli-synth arguments) changed.
copy_to() {
	if [ "$(cat "$2/model.args" 2>/dev/null)" != "$(cat "$3")" ]; then
		say "copying $1 to $2"
		rm -rf "$2/model.coli" "$2/model.args"
		cp -r "$1" "$2/model.coli"
		sync
		cp "$3" "$2/model.args"
	fi
}

# gguf_of NAME SHAPE EXPERTS [DENSE]: $dir/NAME.gguf of that coli-synth shape, experts q4_0, q4_1
# or f32, the other matrices q4_0 or DENSE (f32), regenerated only when they change.
gguf_of() {
	local f=$dir/$1.gguf args="$2 --gguf-experts $3${4:+ --gguf-dense $4}"
	if [ "$(cat "$f.args" 2>/dev/null)" != "$args" ] || [ ! -e "$f" ]; then
		say "generating $f: coli-synth $args --gguf"
		rm -f "$f"
		bin/coli-synth $args --measure 0 --gguf "$f" -q >&2 || { say "gguf_of: $f could not be made"; exit 1; }
		echo "$args" >"$f.args"
	fi
	echo "$f"
}
# The read-ahead file of block device $devname (a partition's is its disk's).
ra_file() {
	local d
	d=$(readlink -f "/sys/class/block/$devname")
	[ -e "$d/partition" ] && d=$(dirname "$d")
	echo "$d/queue/read_ahead_kb"
}
# Sets $rafile to $devname's read-ahead file, and the exit trap to restore its value (and clean up).
ra_prepare() {
	rafile=$(ra_file)
	[ -w "$rafile" ] || { say "cannot set the read-ahead of $devname ($rafile)"; exit 1; }
	ra_was=$(cat "$rafile")
	trap 'echo "$ra_was" >"$rafile"; cleanup' EXIT
}
# with_ra KB CMD...: CMD with the read-ahead of $rafile at KB KiB, restored after.
with_ra() {
	local kb=$1 was rc=0
	shift
	was=$(cat "$rafile")
	echo "$kb" >"$rafile"
	"$@" || rc=$?
	echo "$was" >"$rafile"
	return $rc
}
