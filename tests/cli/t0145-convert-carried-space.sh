#!/usr/bin/env bash
# t0145-convert-carried-space.sh: coli-convert on a small ext4 over a loop device, for a checkpoint
# whose carried files (an 11 MiB tokenizer.json) are as large as its section files. Room for the
# sections but not for the sections and the tokenizer: refused before any weight is converted,
# naming the file and the space the container needs, and nothing kept (the old converter reserved
# the sections, then failed on tokenizer.json, and left 10 MiB of empty reserved sections and no
# journal). Room for nothing: the tokenizer's write fails, the space needed and free are said,
# nothing kept. With the file system grown, the conversion is identical to one elsewhere.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop
[ -x "$BIN/coli-synth" ] || fault_skip "bin/coli-synth missing"

IMG=$SCRATCH/disk.img
MNT=$SCRATCH/mnt
OUT=$MNT/out.coli
REF=$SCRATCH/ref.coli
CK=$SCRATCH/ck
sections() { cat "$1/dense.bin" "$1/mtp.bin" "$1/experts.bin" | wc -c; }

test_expect_success "setup: a checkpoint with Qwen3's tokenizer, its conversion, a 16 MiB ext4" '
	coli-synth --family qwen3_moe --layers 2 --experts 8 --hidden 64 --expert-ffn 64 --measure 0 -q \
		--out "$CK" 2>/dev/null &&
	coli-convert -q "$CK" "$REF" &&
	tok=$(stat -c %s "$CK/tokenizer.json") && sec=$(sections "$REF") &&
	echo "sections $sec bytes, tokenizer.json $tok bytes" &&
	loop_fs "$IMG" "$MNT" 16M >/dev/null &&
	free=$(free_bytes "$MNT") && echo "free $free bytes" &&
	test "$free" -gt $((sec + 65536)) && test "$free" -gt $((tok + 65536)) && test "$free" -lt $((sec + tok))
'
test_expect_success "room for the sections, not with the tokenizer: exit 1 naming the space, nothing kept" '
	free=$(free_bytes "$MNT") &&
	expect_exit 1 coli-convert "$CK" "$OUT" &&
	test "$(wc -l <err)" = 1 &&
	grep -q "^coli-convert: $OUT/[a-z]*\.bin: disk full reserving [0-9.]* GiB (the container needs 0.020 GiB); nothing kept\$" err &&
	test -z "$(ls -A "$OUT")" &&
	test "$(free_bytes "$MNT")" -ge $((free - 65536))
'
test_expect_success "room for nothing (8 MiB): the tokenizer fails, the space needed and free said, nothing kept" '
	fault_umount "$MNT" && rm -f "$IMG" &&
	loop_fs "$IMG" "$MNT" 8M >/dev/null &&
	expect_exit 1 coli-convert "$CK" "$OUT" &&
	test "$(wc -l <err)" = 1 &&
	grep -q "^coli-convert: $OUT/tokenizer.json.tmp: disk full writing [0-9]* bytes at offset [0-9]* (the container needs 0.020 GiB with its carried files, 0.00[0-9] GiB is free); nothing kept\$" err &&
	test -z "$(ls -A "$OUT")"
'
test_expect_success "grown to 32 MiB: the conversion is identical to the reference" '
	loop_grow "$IMG" "$MNT" 32M &&
	coli-convert -q "$CK" "$OUT" &&
	diff -r -q "$REF" "$OUT" && coli-convert -q --verify "$OUT"
'
test_done
