#!/usr/bin/env bash
# t0731-plan-choices.sh: three of coli-plan's choices (issues 23, 24): the queue depth (the smallest of
# at least top_k within 5% of the best measured at such depths, and an explanation that says
# so, even where a shallower depth measured faster), prefetch where its wrong guesses' reads
# bound a token (issue 24: the grid's best turned prediction off), and the cache of layers alike
# (routed by the locality model without usage, the layers after its ramp alike: the same cache
# each, none starved; the first layer, the least local, the smallest top-10% share).
# Budgets are 0.0161 GiB above round ones (0.1161: 0.1): the tables of the models' Qwen3 tokenizer
# (16.5 MiB), which the budget counts.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
j() { tr -d "\n" <"$1" | coli-json "$2"; }

# bps A B C D [PROBE]: probe.json's (or PROBE's) direct_bps at depths 1, 4, 8 and 16 set to A..D
# GB/s, to stdout.
bps() {
	awk -v v="$1 $2 $3 $4" 'BEGIN { split(v, x, " ") }
		n > 0 { sub(/[0-9.e+-]+/, x[5 - n] * 1e9); n-- }
		/"direct_bps": \[/ { n = 4 } { print }' "${5:-$SCRATCH/probe.json}"
}

test_expect_success "setup: a qwen3_moe model of 4 x 64 experts (top_k 4), its usage, a probe at depths 1, 4, 8, 16" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 4 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-run -q -m "$M" --prompt-ids "1 2 3 4 5 6 7 8" -n 48 --ignore-eos --stream --usage "$SCRATCH/u" >/dev/null &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4,8,16 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck8" --layers 8 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck8" "$SCRATCH/m8.coli"
'

test_expect_success "depth 1 fastest: the plan takes 4 (top_k, the best of the depths of at least top_k) and says why" '
	bps 2.15 1.44 0.91 0.70 >p.json &&
	coli-plan "$M" --probe p.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --explain -o plan.json >out &&
	test "$(j plan.json knobs.queue-depth)" = 4 &&
	grep -q "^queue-depth 4: the smallest queue depth of at least top_k (4: a layer.s misses are read together) within 5% of the best O_DIRECT bandwidth measured at such depths, 1.44 GB/s (GB/s at each depth probed on [^:]*: 1: 2.15, 4: 1.44, 8: 0.91, 16: 0.70); fewer reads in flight measured faster here (2.15 GB/s) but would leave a layer.s misses waiting for a thread$" out &&
	grep -q "^io threads: 4 pread threads per disk" out
'

test_expect_success "the deepest best: the smallest depth within 5% of it (8 at 1.90 against 2.00 GB/s)" '
	bps 0.50 1.00 1.90 2.00 >p.json &&
	coli-plan "$M" --probe p.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --explain -o plan.json >out &&
	test "$(j plan.json knobs.queue-depth)" = 8 && grep -q "^queue-depth 8: .*measured at such depths, 2.00 GB/s (" out &&
	! grep -q "measured faster here" out
'

# slow GBS: the probe with every disk depth at GBS GB/s, the CPU's rates fixed (kernels and memory
# at 10 GB/s, the attention core at 1e10 multiply-adds/s), no bursts: the same plan on any machine.
slow() {
	bps "$1" "$1" "$1" "$1" | sed -E "s/\"(mem_bps_1|mem_bps_all|int4_bps_1|int4_bps_all|int8_bps_1|int8_bps_all)\": [0-9.e+-]+/\"\1\": 1e10/
		s/\"attn_fma_per_s\": [0-9.e+-]+/\"attn_fma_per_s\": 1e10/; s/\"burst_bps\": [0-9.e+-]+/\"burst_bps\": 0/
		s/\"latency_s\": [0-9.e+-]+/\"latency_s\": 1e-4/"
}

test_expect_success "prefetch: its wrong guesses read at the sustained rate like misses (off at recall 0.7 on an 8 MB/s disk, on at 0.95)" '
	slow 0.008 >p.json &&
	coli-plan "$M" --probe p.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --recall 0.7 --explain -o plan.json >out &&
	test "$(j plan.json knobs.prefetch)" = off &&
	grep -q "^prefetch off: predicted [0-9.]* tok/s with next-layer prediction, [0-9.]* without" out &&
	coli-plan "$M" --probe p.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --recall 0.95 -o plan.json -q &&
	test "$(j plan.json knobs.prefetch)" = on
'

test_expect_success "without usage the layers after the ramp are alike: the same cache each (one step apart at most), none starved; layer 0 the least skewed" '
	for ram in 0.1161 0.1191 0.1221; do
		coli-plan "$SCRATCH/m8.coli" --probe "$SCRATCH/probe.json" --ram $ram --ctx 512 --explain -o plan.json >out &&
		c=$(j plan.json knobs.cache-slots) &&
		after=$(echo "$c" | tr , "\n" | tail -n 3 | sort -n) &&
		lo=$(echo "$after" | head -1) && hi=$(echo "$after" | tail -1) &&
		test $((hi - lo)) -le 2 || { echo "--ram $ram: cache-slots $c" >&2; exit 1; }
		! grep "^warning: layer [0-9]* keeps only" out || exit 1
		s0=$(j plan.json layers.0.top10_share) &&
		for l in 5 6 7; do
			s=$(j plan.json layers.$l.top10_share) && test "$s" = "$(j plan.json layers.5.top10_share)" &&
			awk "BEGIN { exit !($s0 < $s && $s < 1) }" || { echo "--ram $ram: layer $l top-10% share $s, layer 0 $s0" >&2; exit 1; }
		done
	done
'

test_expect_success "layers alike at one cache say so; a cache too small for all says every layer" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 0.1161 --ctx 512 --explain -o plan.json >out &&
	c=$(j plan.json knobs.cache-slots) &&
	if echo "$c" | grep -q ,; then grep -q "^cache-slots [0-9]*\.\.[0-9]*: .*; layer [0-9]* keeps" out
	else grep -q "^cache-slots $c: .*; every layer keeps $c records (layer 0: top-10% share [0-9.]*, hit" out; fi &&
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 0.1051 --ctx 512 -o plan.json >out &&
	c=$(j plan.json knobs.cache-slots) &&
	if echo "$c" | grep -q ,; then grep -q "^warning: layer [0-9]* keeps only" out
	else grep -q "^warning: every layer keeps only $c records" out; fi
'

test_expect_success "with usage the layers differ: the cache still follows each layer's skew" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 -o plan.json >out &&
	for l in 0 1 2 3; do
		s=$(j plan.json layers.$l.top10_share) && awk "BEGIN { exit !($s > 0.1 && $s < 1) }" || exit 1
	done
'

# A layer's wait averaged over its number of misses: with reads as good as free and a 10 ms
# latency, a token waits for layer l only when one of its top_k = 4 picks misses, so stall_s is
# 10 ms x P(m > 0) = 10 ms x (1 - hit^4) (less the hits' products, 23 us here); taken at the mean
# miss count (4 x (1 - hit) > 0), as the model did before, every layer with a miss would wait
# the whole 10 ms.
test_expect_success "the wait for a layer's misses is averaged over their number (binomial): 10 ms x P(a miss) with a 10 ms latency" '
	slow 1000 | sed "s/\"latency_s\": 1e-4/\"latency_s\": 0.01/" >p.json && grep -q "\"latency_s\": 0.01" p.json &&
	coli-plan -q "$M" --probe p.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --recall 0.01 -o plan.json &&
	test "$(j plan.json knobs.prefetch)" = off &&
	below=0 &&
	for l in 0 1 2 3; do
		h=$(j plan.json layers.$l.hit_rate) && s=$(j plan.json layers.$l.stall_s) &&
		awk -v h="$h" -v s="$s" "BEGIN { w = 0.01 * (1 - h ^ 4); exit !(s <= w + 1e-6 && s >= w - 1e-4) }" ||
			{ echo "layer $l: hit $h, stall_s $s" >&2; exit 1; }
		awk -v h="$h" -v s="$s" "BEGIN { exit !(h < 1 && s < 0.005) }" && below=$((below + 1))
	done &&
	test "$below" -ge 1
'

# A throttle's allowance: shallow queue depths probed faster (1.6 MB/s at depths 1 and 4) than the
# deeper ones (0.8 MB/s at 8 and 16), no bursts: a disk-bound token's reads go at what the deeper
# queues sustained, so the plan predicts about what a probe of 0.8 MB/s at every depth gives (there
# the compute, 1 ms, adds to the reads, 30 ms), not twice it.
test_expect_success "a token's reads at most what deeper queues sustained: shallow depths probed 2x faster do not double a disk-bound plan" '
	slow 0.0008 >p8.json && bps 0.0016 0.0016 0.0008 0.0008 p8.json >p16.json && ! cmp -s p8.json p16.json &&
	coli-plan -q "$M" --probe p8.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --recall 0.01 -o plan8.json &&
	coli-plan -q "$M" --probe p16.json --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 --recall 0.01 -o plan16.json &&
	a=$(j plan8.json predicted.warm.tok_s) && b=$(j plan16.json predicted.warm.tok_s) &&
	awk -v a="$a" -v b="$b" "BEGIN { exit !(b >= a && b <= 1.1 * a) }" || { echo "0.8 MB/s: $a tok/s, 1.6 at depths 1 and 4: $b" >&2; exit 1; }
'

# The plan's per-layer lists, run by coli-run --plan: its report gives each list's range, not the
# largest layer's figure as if every layer had it.
test_expect_success "coli-run --plan with per-layer lists reports the range of pins and of slots per layer" '
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 512 -o plan.json &&
	pins=$(j plan.json knobs.pins) && cache=$(j plan.json knobs.cache-slots) &&
	echo "$pins" | grep -q , && echo "$cache" | grep -q , &&
	cp "$SCRATCH/u" u0 && coli-run -m "$M" --plan plan.json --prompt-ids "1 2 3" -n 4 --ignore-eos >/dev/null 2>err &&
	cp u0 "$SCRATCH/u" &&
	slots=$(paste -d- <(echo "$cache" | tr , "\n") <(echo "$pins" | tr , "\n") | bc | sort -n) &&
	lo=$(echo "$slots" | head -1) && hi=$(echo "$slots" | tail -1) &&
	if [ "$lo" = "$hi" ]; then want="$lo/layer"; else want="$lo..$hi/layer"; fi &&
	grep -q "^coli-run: ram budget 0.12 GiB: .*, slots [0-9.]* ($want)$" err &&
	plo=$(echo "$pins" | tr , "\n" | sort -n | head -1) && phi=$(echo "$pins" | tr , "\n" | sort -n | tail -1) &&
	got=$(sed -n "s/^coli-run: stream: pins \([0-9.]*\)\/layer, .*/\1/p" err) &&
	if [ "$plo" = "$phi" ]; then test "$got" = "$phi"; else
		a=${got%%..*} && b=${got##*..} && test "$a" -lt "$b" && test "$a" -le "$plo" && test "$b" -le "$phi"; fi
'

test_done
