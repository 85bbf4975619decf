#!/usr/bin/env bash
# t0670-run-memcg.sh: coli-run inside a memory cgroup (v1) limited to its --ram budget plus a
# margin of 16 MiB, streaming a model whose experts are 3.1 times the budget over a prompt longer
# than a batch and a generation: never OOM-killed, the cgroup's peak usage under the limit, the
# RAM tokens. A cgroup far too small does kill it (the check can fail). The in-RAM store under a
# limit of its own size: the page cache of experts.bin it reads through is reclaimed, not
# OOM-killed. The wider sweep: tests/torture/memcg.sh (make torture), docs/robustness.md.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_memcg
[ -x "$BIN/coli-synth" ] || fault_skip "bin/coli-synth missing"

M=$SCRATCH/m.coli
MARGIN=$((16 << 20))
P=$(seq 1 600 | tr '\n' ' ')
# The container's pages dropped from the page cache, so that reading them charges the cgroup.
uncache() { for f in "$M"/*; do dd if="$f" iflag=nocache count=0 2>/dev/null || return 1; done; }
gib() { awk "BEGIN { printf \"%d\", $1 * 1073741824 }"; }
stat_of() { sed -n "s/^$1 //p" stats; }

# qwen3_moe, 4 MoE layers x 64 experts, bf16 records of 1.5 MiB: experts.bin 384 MiB.
test_expect_success "setup: a model whose experts are 3.1 times a 0.12 GiB budget, its RAM tokens" '
	coli-synth --family qwen3_moe --layers 4 --experts 64 --hidden 512 --expert-ffn 512 --vocab 8192 \
		--no-tokenizer --measure 0 -q --shard-size 256M --out ck 2>/dev/null &&
	coli-convert -q --expert-bits 16 ck "$M" && rm -rf ck &&
	test "$(stat -c %s "$M/experts.bin")" -gt $(($(gib 0.12) * 3)) &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 32 --ignore-eos --print-ids >"$SCRATCH/ram"
'

test_expect_success "--ram 0.12 streaming in a cgroup of 0.12 GiB + 16 MiB: not OOM-killed, under the limit, the RAM tokens" '
	lim=$(($(gib 0.12) + MARGIN)) && uncache &&
	memcg_run $lim stats coli-run -q -m "$M" --ram 0.12 --prompt-ids "$P" -n 32 --ignore-eos --print-ids --json >out &&
	cat stats &&
	head -n 1 out >ids && cmp "$SCRATCH/ram" ids &&
	test "$(stat_of oom_kill)" = 0 && test "$(stat_of max_usage)" -le $lim &&
	rss=$(coli-json peak_rss_mib <out) && echo "peak RSS $rss MiB" &&
	awk "BEGIN { exit !($rss * 1048576 <= $(gib 0.12)) }"
'

test_expect_success "the same in a cgroup of 40 MiB: OOM-killed (the cgroup holds the run)" '
	uncache && rc=0 &&
	memcg_run $((40 << 20)) stats coli-run -q -m "$M" --ram 0.12 --prompt-ids "$P" -n 32 --ignore-eos --print-ids \
		>out 2>/dev/null || rc=$? &&
	cat stats && test $rc = 137 && test "$(stat_of oom_kill)" -ge 1
'

# The in-RAM store holds experts.bin in anonymous memory (384 MiB) after reading it through the
# page cache: unlimited, the cgroup is charged both (about twice experts.bin); limited, the clean
# cache is reclaimed at the limit.
test_expect_success "the in-RAM store in a cgroup of its size + 16 MiB: the page cache reclaimed, not OOM-killed" '
	coli-run -q -m "$M" --ram 0.12 --prompt-ids "$P" -n 1 --json >plan &&
	fixed=$(awk -v d=$(coli-json ram_budget.dense_gib <plan) -v k=$(coli-json ram_budget.kv_gib <plan) \
		-v b=$(coli-json ram_budget.buffers_gib <plan) "BEGIN { printf \"%d\", (d + k + b) * 1073741824 }") &&
	lim=$(($(stat -c %s "$M/experts.bin") + fixed + MARGIN)) && uncache &&
	memcg_run $((8 << 30)) stats coli-run -q -m "$M" --prompt-ids "$P" -n 1 >/dev/null &&
	cat stats && free=$(stat_of max_usage) && test "$free" -gt $lim &&
	uncache &&
	memcg_run $lim stats coli-run -q -m "$M" --prompt-ids "$P" -n 32 --ignore-eos --print-ids >ids &&
	cat stats && cmp "$SCRATCH/ram" ids &&
	test "$(stat_of oom_kill)" = 0 && test "$(stat_of max_usage)" -le $lim
'

test_done
