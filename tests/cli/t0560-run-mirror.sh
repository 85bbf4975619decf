#!/usr/bin/env bash
# t0560-run-mirror.sh: --mirror copies read alongside the model's, failover on a bad copy,
# --crc, --io mmap, and the io_uring fallback: never a different token.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/model.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
run() { coli-run -q --prompt-ids "$P" -n 16 --ignore-eos --print-ids "$@"; }

# The record read first in a prefill: the lowest expert of layer 0's union over the prompt
# (qwen3_moe-tiny: 4 MoE layers x 32 experts, top-8, records of equal size after a 4096-byte
# header). Prints "expert offset".
first_record() {
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --dump-routing r.bin &&
	n=$(echo "$P" | wc -w) &&
	x=$(od -An -t d4 -v -N $((n * 8 * 4)) r.bin | tr -s ' \n' '\n' | grep . | sort -n | head -1) &&
	rs=$((($(wc -c <"$M/experts.bin") - 4096) / (4 * 32))) &&
	echo "$x $((4096 + x * rs))"
}
flip() { printf "\377" | dd of="$1/experts.bin" bs=1 seek=$(($2 + 100)) conv=notrunc 2>/dev/null; }

test_expect_success "convert the fixture and copy it twice" '
	coli-convert -q "$F/checkpoint" "$M" &&
	cp -r "$M" "$SCRATCH/m1.coli" && cp -r "$M" "$SCRATCH/m2.coli" &&
	run -m "$M" --dump-logits "$SCRATCH/ram.bin" >"$SCRATCH/ram" &&
	test "$(wc -w <"$SCRATCH/ram")" = 16
'
test_expect_success "one and two mirrors give the RAM tokens and step logits, threads and io_uring, 1, 2, 8 slots" '
	for io in threads uring; do
		for n in 1 2 8; do
			run -m "$M" --mirror "$SCRATCH/m1.coli" --cache-slots $n --io $io --dump-logits a.bin >a &&
			cmp "$SCRATCH/ram" a && cmp "$SCRATCH/ram.bin" a.bin &&
			run -m "$M" --mirror "$SCRATCH/m1.coli" --mirror "$SCRATCH/m2.coli" --cache-slots $n --io $io \
				--dump-logits b.bin >b &&
			cmp "$SCRATCH/ram" b && cmp "$SCRATCH/ram.bin" b.bin || exit 1
		done
	done
'
# COLI_TEST_CHUNK=4096 splits each 8 KiB record into two chunks, read from different copies.
test_expect_success "records in two chunks over two copies: the RAM tokens and step logits, threads and io_uring" '
	for io in threads uring; do
		COLI_TEST_CHUNK=4096 run -m "$M" --mirror "$SCRATCH/m1.coli" --cache-slots 2 --io $io --dump-logits a.bin >a &&
		cmp "$SCRATCH/ram" a && cmp "$SCRATCH/ram.bin" a.bin &&
		COLI_TEST_CHUNK=4096 run -m "$M" --cache-slots 2 --io $io --dump-logits b.bin >b &&
		cmp "$SCRATCH/ram" b && cmp "$SCRATCH/ram.bin" b.bin || exit 1
	done
'
test_expect_success "records in two chunks, a bad copy: found and reported, the right tokens" '
	set -- $(first_record) &&
	rm -rf bad.coli && cp -r "$M" bad.coli && flip bad.coli $2 &&
	COLI_TEST_CHUNK=4096 coli-run -m bad.coli --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 16 --ignore-eos \
		--print-ids --cache-slots 1 >out 2>err &&
	cmp "$SCRATCH/ram" out &&
	grep -q "bad.coli/experts.bin: expert record \[layer 0\]\[expert $1\] at offset $2: crc32 .*instead" err
'
test_expect_success "with prefetch on and a mirror: the RAM tokens, also with records in two chunks" '
	run -m "$M" --mirror "$SCRATCH/m1.coli" --cache-slots 8 --prefetch on >a &&
	cmp "$SCRATCH/ram" a &&
	for io in threads uring; do
		for n in 8 12; do
			COLI_TEST_CHUNK=4096 run -m "$M" --mirror "$SCRATCH/m1.coli" --cache-slots $n --prefetch on --io $io >b &&
			cmp "$SCRATCH/ram" b || exit 1
		done
	done
'
test_expect_success "the closing lines give each copy its disk line" '
	coli-run -m "$M" --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --cache-slots 2 >out 2>err &&
	test "$(grep -c "^coli-run: disk " err)" = 2 &&
	grep -q "^coli-run: disk $M ([^)]*): [0-9.]* MiB read, busy [0-9]*%, [0-9]* MB/s while busy, [0-9]*% of the bytes (target [0-9]*%)$" err &&
	grep -q "^coli-run: disk $SCRATCH/m1.coli ([^)]*): [0-9.]* MiB read, busy [0-9]*%, [0-9]* MB/s while busy, [0-9]*% of the bytes (target [0-9]*%)$" err
'
test_expect_success "a bad copy of the first record read: the right tokens from the mirror, reported" '
	set -- $(first_record) &&
	rm -rf bad.coli && cp -r "$M" bad.coli && flip bad.coli $2 &&
	coli-run -m bad.coli --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 16 --ignore-eos --print-ids \
		--cache-slots 1 >out 2>err &&
	cmp "$SCRATCH/ram" out &&
	grep -q "bad.coli/experts.bin: expert record \[layer 0\]\[expert $1\] at offset $2: crc32 0x[0-9a-f]*, expected 0x[0-9a-f]*; read from the copy in $SCRATCH/m1.coli instead" err &&
	grep -q "^coli-run: disk bad.coli .*, [0-9]* failed reads* in the run$" err
'
test_expect_success "a mirror with a corrupted record: the right tokens whichever copy is read" '
	set -- $(first_record) &&
	rm -rf badm.coli && cp -r "$M" badm.coli && flip badm.coli $2 &&
	coli-run -m "$M" --mirror badm.coli --prompt-ids "$P" -n 16 --ignore-eos --print-ids --cache-slots 1 >out 2>err &&
	cmp "$SCRATCH/ram" out &&
	{ ! grep -q crc32 err || grep -q "badm.coli/experts.bin: expert record \[layer 0\]\[expert $1\].*instead" err; }
'
# Every record of the mirror corrupted: of the hundreds of reads over 16 tokens at 1 slot, the
# ones sent to the mirror fail their CRC and are served by the model's copy.
test_expect_success "a mirror whose every record is corrupted: the right tokens, failovers reported" '
	rm -rf allbad.coli && cp -r "$M" allbad.coli &&
	rs=$((($(wc -c <"$M/experts.bin") - 4096) / (4 * 32))) &&
	for k in $(seq 0 127); do flip allbad.coli $((4096 + k * rs)) || exit 1; done &&
	coli-run -m "$M" --mirror allbad.coli --prompt-ids "$P" -n 16 --ignore-eos --print-ids --cache-slots 1 >out 2>err &&
	cmp "$SCRATCH/ram" out &&
	grep -q "allbad.coli/experts.bin: expert record \[layer [0-3]\]\[expert [0-9]*\] at offset [0-9]*: crc32 0x[0-9a-f]*, expected 0x[0-9a-f]*; read from the copy in $M instead" err &&
	grep -q "^coli-run: disk allbad.coli .*, [0-9]* failed reads* in the run$" err
'
test_expect_success "every copy bad: exit 1 naming the record" '
	set -- $(first_record) &&
	rm -rf b1.coli b2.coli && cp -r "$M" b1.coli && cp -r "$M" b2.coli && flip b1.coli $2 && flip b2.coli $2 &&
	expect_exit 1 coli-run -q -m b1.coli --mirror b2.coli --prompt-ids "$P" -n 4 --ignore-eos --print-ids &&
	err_has "[layer 0][expert $1]" "none of its 2 copies" &&
	err_has "b1.coli/experts.bin" "b2.coli/experts.bin"
'
test_expect_success "a mirror of another container is refused, naming the differing byte; the same file twice too" '
	coli-convert -q --expert-bits 8 "$F/checkpoint" other.coli &&
	expect_exit 1 coli-run -q -m "$M" --mirror other.coli --prompt-ids "1" -n 1 &&
	err_has "--mirror other.coli/manifest.coli" "differs from $M/manifest.coli at byte" &&
	rm -rf short.coli && cp -r "$M" short.coli && truncate -s -4096 short.coli/experts.bin &&
	expect_exit 1 coli-run -q -m "$M" --mirror short.coli --prompt-ids "1" -n 1 &&
	err_has "--mirror short.coli/experts.bin" "size" &&
	expect_exit 1 coli-run -q -m "$M" --mirror nowhere.coli --prompt-ids "1" -n 1 &&
	err_has "nowhere.coli/manifest.coli" &&
	expect_exit 2 coli-run -q -m "$M" --mirror "$M" --prompt-ids "1" -n 1 &&
	err_has "--mirror $M/experts.bin: the same file as $M/experts.bin" &&
	ln -s "$SCRATCH/m1.coli" link.coli &&
	expect_exit 2 coli-run -q -m "$M" --mirror "$SCRATCH/m1.coli" --mirror link.coli --prompt-ids "1" -n 1 &&
	err_has "--mirror link.coli/experts.bin: the same file as $SCRATCH/m1.coli/experts.bin"
'
test_expect_success "--crc off: a flipped byte is not checked (the run goes on)" '
	set -- $(first_record) &&
	rm -rf c.coli && cp -r "$M" c.coli && flip c.coli $2 &&
	expect_exit 1 coli-run -q -m c.coli --stream --prompt-ids "$P" -n 4 --ignore-eos --print-ids &&
	err_has crc32 &&
	coli-run -q -m c.coli --stream --crc off --prompt-ids "$P" -n 4 --ignore-eos --print-ids >out 2>err &&
	test "$(wc -w <out)" = 4 && ! grep -q crc32 err
'
test_expect_success "--crc off on a good copy: the RAM tokens" '
	run -m "$M" --cache-slots 2 --crc off >a && cmp "$SCRATCH/ram" a
'
test_expect_success "--io mmap: the RAM tokens and step logits, no stream lines" '
	coli-run -m "$M" --io mmap --prompt-ids "$P" -n 16 --ignore-eos --print-ids --dump-logits m.bin >a 2>err &&
	cmp "$SCRATCH/ram" a && cmp "$SCRATCH/ram.bin" m.bin && ! grep -q "stream:" err
'
test_expect_success "--io uring where the kernel refuses it: a note, then the threads, same tokens" '
	COLI_TEST_NO_URING=1 coli-run -m "$M" --io uring --cache-slots 2 --prompt-ids "$P" -n 16 --ignore-eos --print-ids >a 2>err &&
	cmp "$SCRATCH/ram" a && grep -q "^coli-run: --io uring: io_uring_queue_init: .*; using --io threads$" err
'
test_expect_success "usage: --crc, --io mmap with a streaming option, too many mirrors" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --crc maybe && err_has "--crc" "maybe" &&
	for o in --stream "--cache-slots 2" "--pins 1" "--ram 1" "--mirror $SCRATCH/m1.coli" "--prefetch on" "--crc off"; do
		expect_exit 2 coli-run -m "$M" --prompt-ids "1" --io mmap $o && err_has "--io mmap" || exit 1
	done &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --mirror a --mirror a --mirror a --mirror a --mirror a \
		--mirror a --mirror a --mirror a && err_has "--mirror: " "is one too many (at most 7)"
'

test_done
