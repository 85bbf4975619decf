#!/usr/bin/env bash
# t0655-run-loop.sh: faults beneath a real file system. A container on ext4 over a loop device:
# a byte flipped in the device's backing file (the disk, below the file system) is caught by the
# record's CRC and named (--crc off trusts it); the backing file cut short under the mounted file
# system makes reads past the cut fail, each failure named (file, record, offset), exit 1.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop
command -v filefrag >/dev/null || fault_skip "no filefrag (e2fsprogs)"

F=$FIX/qwen3_moe-tiny
GOOD=$SCRATCH/good.coli
IMG=$SCRATCH/disk.img
MNT=$SCRATCH/mnt
C=$MNT/model.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
RS=8192
L0=$((32 * RS))
run() { coli-run -q --prompt-ids "$P" -n 16 --ignore-eos --print-ids "$@"; }
first_expert() {
	coli-run -q -m "$GOOD" --prompt-ids "$P" --teacher-force --dump-routing r.bin &&
	od -An -t d4 -v -N $(($(echo "$P" | wc -w) * 8 * 4)) r.bin | tr -s ' \n' '\n' | grep . | sort -n | head -1
}
# remount: the file system mounted again, so its page cache holds nothing read before.
remount() { umount "$MNT" && mount "$(cat "$SCRATCH/dev")" "$MNT"; }
# flip_disk OFFSET: inverts the byte of experts.bin at OFFSET in the image, beneath the file system.
flip_disk() {
	local at b
	at=$(phys_offset "$C/experts.bin" "$1") &&
	b=$(od -An -t u1 -j "$at" -N 1 "$IMG" | tr -d ' ') &&
	printf "$(printf '\\%03o' $((255 - b)))" | dd of="$IMG" bs=1 seek="$at" conv=notrunc,fsync 2>/dev/null
}

test_expect_success "setup: a container on ext4 over a loop device, experts.bin written last" '
	coli-convert -q "$F/checkpoint" "$GOOD" &&
	run -m "$GOOD" >"$SCRATCH/ram" &&
	loop_fs "$IMG" "$MNT" 16M >"$SCRATCH/dev" &&
	mkdir "$C" && for f in $(ls "$GOOD" | grep -v experts.bin); do cp "$GOOD/$f" "$C/" || exit 1; done &&
	sync && cp "$GOOD/experts.bin" "$C/" && sync &&
	test "$(filefrag "$C/experts.bin")" = "$C/experts.bin: 1 extent found" &&
	remount && run -m "$C" >a && cmp "$SCRATCH/ram" a && run -m "$C" --stream --cache-slots 1 >b && cmp "$SCRATCH/ram" b
'

test_expect_success "a byte flipped on the disk: the CRC names the record, streaming, in RAM and in --verify" '
	x=$(first_expert) && off=$((4096 + x * RS)) &&
	flip_disk $((off + 100)) && remount &&
	expect_exit 1 coli-run -q -m "$C" --stream --prompt-ids "$P" -n 4 &&
	err_has "coli-run: $C/experts.bin: expert record [layer 0][expert $x] at offset $off: crc32 0x" ", expected 0x" &&
	expect_exit 1 coli-run -q -m "$C" --prompt-ids "$P" -n 4 &&
	err_has "coli-run: $C/experts.bin: expert record [layer 0][expert $x] at offset $off: crc32 0x" ", expected 0x" &&
	expect_exit 1 coli-convert --verify "$C" &&
	err_has "coli-convert: $C/experts.bin: expert record [layer 0][expert $x] at offset $off ($RS bytes): crc32 0x"
'

test_expect_success "a byte flipped on the disk with --crc off: trusted, the run goes on" '
	coli-run -q -m "$C" --stream --crc off --prompt-ids "$P" -n 4 --ignore-eos --print-ids >out 2>err &&
	test "$(wc -w <out)" = 4 && ! grep -q crc32 err
'

test_expect_success "the byte flipped back on the disk: the RAM tokens again" '
	x=$(first_expert) && flip_disk $((4096 + x * RS + 100)) && remount &&
	run -m "$C" --stream --cache-slots 1 >a && cmp "$SCRATCH/ram" a &&
	coli-convert -q --verify "$C"
'

# The backing file cut at layer 2's first record: the loop device keeps its size, the file
# system mounts, reads of the blocks past the cut fail (EIO). Read-ahead is turned off on the
# device, so that the first buffered read to fail is the first past the cut (with it, a read
# just before the cut fails too: its read-ahead reaches past it).
test_expect_success "the backing file cut short at layer 2: every read past the cut named, exit 1" '
	cut=$(phys_offset "$C/experts.bin" $((4096 + 2 * L0))) &&
	blockdev --setra 0 "$(cat "$SCRATCH/dev")" &&
	for f in $(ls "$C" | grep -v experts.bin); do
		e=$(phys_offset "$C/$f" $(($(stat -c %s "$C/$f") - 1))) && test "$e" -lt "$cut" || exit 1
	done &&
	truncate -s "$cut" "$IMG" && remount &&
	expect_exit 1 coli-run -q -m "$C" --prompt-ids "$P" -n 4 &&
	err_has "coli-run: $C/experts.bin: expert record [layer 2][expert 0] at offset $((4096 + 2 * L0)): read at offset $((4096 + 2 * L0)): Input/output error" &&
	expect_exit 1 coli-run -q -m "$C" --stream --prompt-ids "$P" -n 4 &&
	grep -q "^coli-run: $C/experts.bin: expert record \[layer 2\]\[expert [0-9]*\] at offset [0-9]*: read at offset [0-9]*: Input/output error\$" err &&
	expect_exit 1 coli-convert --verify "$C" &&
	err_has "coli-convert: $C/experts.bin" "Input/output error"
'

test_expect_success "the cut copy beside a good mirror: the RAM tokens, the failovers reported" '
	run -m "$C" --mirror "$GOOD" --cache-slots 1 >a 2>err &&
	cmp "$SCRATCH/ram" a &&
	grep -q "^coli-run: $C/experts.bin: expert record \[layer [23]\]\[expert [0-9]*\] at offset [0-9]*: read at offset [0-9]*: Input/output error; reading it from the copy in $GOOD\$" err
'

test_done
