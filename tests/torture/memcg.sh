#!/usr/bin/env bash
# memcg.sh: coli-run in a memory cgroup (v1) limited to its --ram budget + MARGIN over a sweep of
# budgets, prompt lengths, generation lengths and I/O backends, streaming a model whose experts
# are 3 to 13 times the budget; and the in-RAM store limited to its size + MARGIN. Every run must
# end with exit 0 (never OOM-killed: oom_kill 0), the cgroup's peak under the limit and the tokens
# of the in-RAM store. Prints a markdown table (docs/robustness.md). Needs root; minutes.
# Usage: tests/torture/memcg.sh [MARGIN_MIB]   (default 16)
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$TOP/bin
PATH=$BIN:$PATH
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/coli-memcg.XXXXXX")
. "$TOP/tests/fault/fault.sh" # its exit trap removes SCRATCH
fault_skip() { echo "memcg.sh: cannot run: $1"; exit 1; }
fault_need_memcg
cd "$SCRATCH" || exit 1
MARGIN=$((${1:-16} << 20))
M=$SCRATCH/m.coli
failed=0

coli-synth --family qwen3_moe --layers 4 --experts 64 --hidden 512 --expert-ffn 512 --vocab 8192 \
	--no-tokenizer --measure 0 -q --shard-size 256M --out ck 2>/dev/null &&
	coli-convert -q --expert-bits 16 ck "$M" && rm -rf ck || { echo "memcg.sh: setup failed"; exit 1; }
EXPERTS=$(stat -c %s "$M/experts.bin")

uncache() { for f in "$M"/*; do dd if="$f" iflag=nocache count=0 2>/dev/null; done; }
prompt() { seq 1 "$1" | awk '{ printf "%s%d", (NR > 1 ? " " : ""), ($1 * 7919) % 8000 + 1 }'; }
mib() { awk "BEGIN { printf \"%.1f\", $1 / 1048576 }"; }

# one LIMIT PROMPT N LABEL OPTIONS...: a run in a cgroup of LIMIT bytes, its table row.
one() {
	local lim=$1 np=$2 n=$3 label=$4 rc=0 ok=yes
	shift 4
	uncache
	memcg_run "$lim" stats coli-run -q -m "$M" --prompt-ids "$(prompt "$np")" -n "$n" --ignore-eos --print-ids \
		--json "$@" >out 2>err || rc=$?
	head -n 1 out >ids
	cmp -s ids "ref-$np-$n" || ok=no
	local use oom rss
	use=$(sed -n 's/^max_usage //p' stats) oom=$(sed -n 's/^oom_kill //p' stats)
	rss=$(coli-json peak_rss_mib <out 2>/dev/null | awk "{ printf \"%.1f\", \$1 }")
	echo "| $label | $np | $n | $(mib "$lim") | $(mib "$use") | $rss | $oom | $rc | $ok |"
	if [ $rc != 0 ] || [ "$oom" != 0 ] || [ "$use" -gt "$lim" ] || [ $ok = no ]; then
		failed=1
		sed 's/^/    /' err
	fi
}

echo "experts.bin $(mib "$EXPERTS") MiB; margin $(mib "$MARGIN") MiB"
echo
echo "| store | prompt | -n | limit MiB | cgroup peak MiB | peak RSS MiB | oom_kill | exit | RAM tokens |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for np in 1 600 2000; do
	for n in 16 256; do
		coli-run -q -m "$M" --prompt-ids "$(prompt "$np")" -n "$n" --ignore-eos --print-ids >"ref-$np-$n" ||
			{ echo "memcg.sh: reference run failed"; exit 1; }
		for ram in 0.12 0.25 0.5; do
			lim=$(awk "BEGIN { printf \"%d\", $ram * 1073741824 + $MARGIN }")
			one "$lim" "$np" "$n" "--ram $ram" --ram "$ram"
		done
		one "$(awk "BEGIN { printf \"%d\", 0.12 * 1073741824 + $MARGIN }")" "$np" "$n" "--ram 0.12 --io uring" \
			--ram 0.12 --io uring
		one "$(awk "BEGIN { printf \"%d\", 0.25 * 1073741824 + $MARGIN }")" "$np" "$n" "--ram 0.25, pins" \
			--ram 0.25 --usage usage
		coli-run -q -m "$M" --ram 0.12 --prompt-ids "$(prompt "$np")" -n "$n" --json >plan
		fixed=$(awk -v d="$(coli-json ram_budget.dense_gib <plan)" -v k="$(coli-json ram_budget.kv_gib <plan)" \
			-v b="$(coli-json ram_budget.buffers_gib <plan)" 'BEGIN { printf "%d", (d + k + b) * 1073741824 }')
		one $((EXPERTS + fixed + MARGIN)) "$np" "$n" "in RAM"
	done
done
echo
[ $failed = 0 ] && echo "memcg: passed" || echo "memcg: FAILED"
exit $failed
