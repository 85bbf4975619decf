#!/usr/bin/env bash
# t0520-run-stream.sh: --stream reads experts from disk and multiplies the same bytes as RAM.
. "$(dirname "$0")/lib.sh"

for fam in qwen3_moe deepseek_v3 mixtral; do
	F=$FIX/$fam-tiny
	M=$SCRATCH/$fam.coli
	test_expect_success "$fam: convert the fixture" '
		coli-convert -q "$F/checkpoint" "$M"
	'
	test_expect_success "$fam: greedy tokens in RAM equal --stream at 1, 2 and 1000 slots" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids >ram &&
		test "$(wc -w <ram)" = 16 &&
		for n in 1 2 1000; do
			coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --stream --cache-slots $n >s$n &&
			cmp ram s$n || exit 1
		done &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --stream >sdef &&
		cmp ram sdef
	'
	test_expect_success "$fam: --teacher-force logits are bit-identical in RAM and at 1 slot" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" --teacher-force --dump-logits ram.bin &&
		coli-run -q -m "$M" --prompt-ids "$p" --teacher-force --dump-logits s1.bin --cache-slots 1 &&
		cmp ram.bin s1.bin
	'
	test_expect_success "$fam: greedy step logits are bit-identical in RAM and at 1 slot" '
		coli-run -q -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids --dump-logits ram.bin >/dev/null &&
		coli-run -q -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids --dump-logits s1.bin --cache-slots 1 >/dev/null &&
		cmp ram.bin s1.bin
	'
done

# deepseek_v3-tiny has 16 experts: 8 slots evict while prefetching, 64 hold them all.
test_expect_success "deepseek_v3: tokens and logits in RAM equal --stream at 8 and 64 slots (prefetched)" '
	M=$SCRATCH/deepseek_v3.coli &&
	p="$(ids_of "$FIX/deepseek_v3-tiny/prompt_ids.i32.bin")" &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
	for n in 8 64; do
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits s$n.bin --cache-slots $n >s$n &&
		cmp ram s$n && cmp ram.bin s$n.bin || exit 1
	done
'

# Next-layer prediction only warms the cache: at 8 slots it reads (and wastes) some experts,
# never changing a token or a logit.
for fam in qwen3_moe deepseek_v3; do
	test_expect_success "$fam: --prefetch on and off give the same tokens and step logits at 8 slots" '
		M=$SCRATCH/$fam.coli &&
		p="$(ids_of "$FIX/$fam-tiny/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits on.bin --cache-slots 8 --prefetch on >on &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits off.bin --cache-slots 8 --prefetch off >off &&
		test "$(wc -w <on)" = 16 && cmp on off && cmp on.bin off.bin &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 40 --ignore-eos --print-ids --dump-logits a.bin --cache-slots 8 --prefetch auto --json >a &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 40 --ignore-eos --print-ids --dump-logits on40.bin --cache-slots 8 --prefetch on >on40 &&
		head -n 1 a >a.ids && cmp on40 a.ids && cmp on40.bin a.bin
	'
done

# --prefetch auto (the default when streaming) alternates prediction on and off while probing:
# 40 tokens are one probe of 8 + 8 (the last token is not a decode step of its own), then the
# winner held; every decode token counted in one mode; the JSON and the text say so.
test_expect_success "qwen3_moe: --prefetch auto is the default, counts its tokens in each mode, and says so" '
	M=$SCRATCH/qwen3_moe.coli &&
	p="$(ids_of "$FIX/qwen3_moe-tiny/prompt_ids.i32.bin")" &&
	coli-run -m "$M" --prompt-ids "$p" -n 40 --ignore-eos --print-ids --cache-slots 8 --json >j 2>err &&
	tail -n 1 j >jl &&
	test "$(coli-json stream.prefetch.mode <jl)" = auto &&
	on=$(coli-json stream.prefetch.auto.on_tokens <jl) && off=$(coli-json stream.prefetch.auto.off_tokens <jl) &&
	test $((on + off)) = "$(coli-json decode.tokens <jl)" &&
	test "$(coli-json stream.prefetch.auto.probes <jl)" = 1 && test "$off" -ge 8 && test "$on" -ge 8 &&
	coli-run -m "$M" --prompt-ids "$p" -n 4 --ignore-eos --print-ids --cache-slots 8 >/dev/null 2>err &&
	grep -q "^coli-run: prefetch auto: on for [0-9]* of 3 decode tokens, no probe ended yet\$" err &&
	coli-run -m "$M" --prompt-ids "$p" -n 4 --ignore-eos --print-ids --cache-slots 8 --prefetch on --json >j2 2>/dev/null &&
	test "$(tail -n 1 j2 | coli-json stream.prefetch.mode)" = on
'
test_expect_success "usage: --io mmap refuses --prefetch auto as it refuses on" '
	expect_exit 2 coli-run -m "$SCRATCH/qwen3_moe.coli" --prompt-ids "1" --io mmap --prefetch auto &&
	err_has "--prefetch on or auto"
'

# The io_uring backend reads the same records in the same queue order as the pread threads
# (or falls back to them where the kernel refuses io_uring): same tokens, same step logits.
for fam in qwen3_moe deepseek_v3; do
	test_expect_success "$fam: --io uring and --io threads give the same tokens and step logits at 2 and 8 slots" '
		M=$SCRATCH/$fam.coli &&
		p="$(ids_of "$FIX/$fam-tiny/prompt_ids.i32.bin")" &&
		for n in 2 8; do
			coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits t$n.bin --cache-slots $n --io threads >t$n &&
			coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits u$n.bin --cache-slots $n --io uring >u$n &&
			test "$(wc -w <u$n)" = 16 && cmp t$n u$n && cmp t$n.bin u$n.bin || exit 1
		done &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --cache-slots 8 --prefetch on --io uring >up &&
		cmp t8 up
	'
done

M=$SCRATCH/qwen3_moe.coli
test_expect_success "stream: the closing line reports the cache, and the prediction unless --prefetch off" '
	coli-run -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids --cache-slots 2 --prefetch on >out 2>err &&
	grep -q "stream: hit rate [0-9.]*%, [0-9]* misses, [0-9.]* MiB read per token, read [0-9.]* GB/s, prefetch recall [0-9.]*%, [0-9.]* MiB wasted per token$" err &&
	coli-run -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids --cache-slots 2 >out 2>err &&
	grep -q "stream: hit rate .*, prefetch recall [0-9.]*%, [0-9.]* MiB wasted per token$" err &&
	coli-run -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids --cache-slots 2 --prefetch off >out 2>err &&
	grep -q "stream: hit rate [0-9.]*%, [0-9]* misses, [0-9.]* MiB read per token, read [0-9.]* GB/s$" err &&
	coli-run -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids >out 2>err &&
	! grep -q "stream:" err
'
# The byte flipped is inside the record of the first expert token 0 routes to at layer 0
# (qwen3_moe-tiny: 4 MoE layers x 32 experts, records of equal size).
test_expect_success "stream: a flipped byte in an expert record is reported, naming it" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" --teacher-force --dump-routing r.bin &&
	x=$(od -An -t d4 -N 4 r.bin | tr -d " ") &&
	rs=$((($(wc -c <"$M/experts.bin") - 4096) / (4 * 32))) &&
	off=$((4096 + x * rs)) &&
	cp -r "$M" m.coli &&
	printf "\377" | dd of=m.coli/experts.bin bs=1 seek=$((off + 100)) conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m m.coli --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids --stream &&
	err_has "m.coli/experts.bin" "[layer 0][expert $x]" "offset $off" "crc32" &&
	expect_exit 1 coli-run -q -m m.coli --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids &&
	err_has "[layer 0][expert $x]" "crc32"
'
test_expect_success "stream: --io uring reports a flipped byte the same way" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" --teacher-force --dump-routing r.bin &&
	x=$(od -An -t d4 -N 4 r.bin | tr -d " ") &&
	rs=$((($(wc -c <"$M/experts.bin") - 4096) / (4 * 32))) &&
	off=$((4096 + x * rs)) &&
	rm -rf mu.coli && cp -r "$M" mu.coli &&
	printf "\377" | dd of=mu.coli/experts.bin bs=1 seek=$((off + 100)) conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m mu.coli --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids --stream --io uring &&
	err_has "mu.coli/experts.bin" "[layer 0][expert $x]" "offset $off" "crc32"
'
# At 8 slots each decoded token misses some of its 8 experts of 32; neighbours on disk
# (8 KiB records, one chunk each) are read together; split into two chunks they never are.
for io in threads uring; do
	test_expect_success "qwen3_moe, --io $io: neighbours on disk read together, tokens and logits as in RAM" '
		M=$SCRATCH/qwen3_moe.coli &&
		p="$(ids_of "$FIX/qwen3_moe-tiny/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 8 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 8 --ignore-eos --print-ids --dump-logits g.bin --stream --io $io \
			--cache-slots 8 --json >g &&
		head -n 1 g >g.ids && cmp ram g.ids && cmp ram.bin g.bin &&
		n=$(tail -n 1 g | coli-json stream.records_coalesced) && test "$n" -gt 0 &&
		COLI_TEST_CHUNK=4096 coli-run -q -m "$M" --prompt-ids "$p" -n 8 --ignore-eos --print-ids --dump-logits c.bin \
			--stream --io $io --cache-slots 8 --json >c &&
		head -n 1 c >c.ids && cmp ram c.ids && cmp ram.bin c.bin &&
		test "$(tail -n 1 c | coli-json stream.records_coalesced)" = 0
	'
done

test_expect_success "usage: --cache-slots must be a positive count" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --cache-slots 0 && err_has "--cache-slots" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --cache-slots x && err_has "--cache-slots" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --cache-slots -3 && err_has "--cache-slots"
'
test_expect_success "usage: --io takes uring or threads" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --stream --io bogus && err_has "--io" "bogus" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --stream --io && err_has "--io"
'
test_expect_success "usage: --prefetch takes on or off" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --stream --prefetch maybe && err_has "--prefetch" "maybe" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --stream --prefetch && err_has "--prefetch"
'

test_done
