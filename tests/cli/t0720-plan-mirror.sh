#!/usr/bin/env bash
# t0720-plan-mirror.sh: coli-plan mirror stage and verify on real loop-device disks (ext4), full
# and partial mirrors, coli-run reading a partial one, resume after SIGKILL and after a full
# disk, verify finding a flipped byte, refusals. Needs root (losetup, mount).
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/model.coli
P="1 2 3 4 5 6 7 8 9 10 11 12"
RS=28672 # the synthetic container's record size: 4 layers x 32 experts after a 4096-byte header
run() { coli-run -q --prompt-ids "$P" -n 16 --ignore-eos --print-ids "$@"; }
stage() { coli-plan mirror stage "$@"; }

# Every loop device and mount of the test, undone at exit (newest first).
cleanup() {
	if [ -f "$SCRATCH/mounts" ]; then
		tac "$SCRATCH/mounts" | while read -r dev mnt; do
			umount "$mnt" 2>/dev/null
			losetup -d "$dev" 2>/dev/null
		done
	fi
	[ -n "${COLI_TEST_KEEP:-}" ] || rm -rf "$SCRATCH"
}
trap cleanup EXIT

# disk NAME MIB: an ext4 filesystem of MIB MiB (no blocks reserved for root) on a loop device,
# mounted at $SCRATCH/NAME.
disk() {
	truncate -s "$2M" "$SCRATCH/$1.img" && mkfs.ext4 -q -F -m 0 "$SCRATCH/$1.img" &&
	mkdir -p "$SCRATCH/$1" && dev=$(losetup -f --show "$SCRATCH/$1.img") &&
	echo "$dev $SCRATCH/$1" >>"$SCRATCH/mounts" && mount "$dev" "$SCRATCH/$1"
}
D1=$SCRATCH/d1
D2=$SCRATCH/d2

# held DIR: the record numbers DIR/mirror.coli claims, one a line.
held() { od -An -t u1 -v -j 64 "$1/mirror.coli" | tr -s ' \n' '\n' | grep . |
	awk '{ for (b = 0; b < 8; b++) if (int($1 / 2 ^ b) % 2) print (NR - 1) * 8 + b }'; }
same_files() { for f in "$M"/*; do cmp "$f" "$1/$(basename "$f")" || return 1; done; }
flip() { printf "\377" | dd of="$1/experts.bin" bs=1 seek="$2" conv=notrunc 2>/dev/null; }

test_expect_success "a synthetic container, its usage and two loop-device disks" '
	coli-synth --family qwen3_moe --out "$SCRATCH/ck" --no-tokenizer --vocab 512 --hidden 128 --expert-ffn 128 \
		--layers 4 --experts 32 --top-k 4 --measure 64 --threads 2 >/dev/null 2>&1 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	test $(( ($(wc -c <"$M/experts.bin") - 4096) / 128 )) = $RS &&
	run -m "$M" >"$SCRATCH/ram" && test "$(wc -w <"$SCRATCH/ram")" = 16 &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 48 --ignore-eos --usage "$SCRATCH/u.coli_usage" >/dev/null &&
	disk d1 64 && disk d2 16
'
test_expect_success "full stage: every file copied, the map holds every record, verify and coli-run agree" '
	mkdir "$D1/full" && stage "$M" "$D1/full" 2>err &&
	grep -q "^coli-plan: mirror $D1/full: 128 records copied (0.004 GiB) in .* s, [0-9]* MB/s; it holds 128 of 128 expert records (full: every file, 0.004 GiB)$" err &&
	same_files "$D1/full" && test "$(held "$D1/full" | wc -l)" = 128 &&
	coli-plan mirror verify "$D1/full" -m "$M" >out &&
	test "$(cat out)" = "$D1/full: 128 of 128 expert records held (full), every one checks (0.003 GiB)" &&
	coli-convert -q --verify "$D1/full" &&
	run -m "$D1/full" >a && cmp "$SCRATCH/ram" a &&
	run -m "$M" --mirror "$D1/full" --cache-slots 2 >b && cmp "$SCRATCH/ram" b
'
test_expect_success "a cp -r copy (no map) verifies as a full mirror" '
	cp -r "$M" "$D1/copy" && coli-plan mirror verify "$D1/copy" >out && grep -q "128 of 128 .* (full)" out
'
# --max 0.002 GiB = 2147483 bytes: manifest (16 KiB), map and experts.bin header (4 KiB each), then
# 74 records of 28 KiB.
test_expect_success "partial stage: the hottest records per usage within --max, a sparse experts.bin" '
	mkdir "$D1/part" && stage "$M" "$D1/part" --max 0.002 --usage "$SCRATCH/u.coli_usage" -q 2>err &&
	test ! -s err && ls "$D1/part" | sort | tr "\n" " " >files && test "$(cat files)" = "experts.bin manifest.coli mirror.coli " &&
	cmp "$M/manifest.coli" "$D1/part/manifest.coli" &&
	test "$(wc -c <"$D1/part/experts.bin")" = "$(wc -c <"$M/experts.bin")" &&
	test "$(du -B1 "$D1/part/experts.bin" | cut -f1)" -lt $((4096 + 75 * RS)) &&
	test "$(held "$D1/part" | wc -l)" = 74 &&
	coli-plan mirror verify "$D1/part" -m "$M" >out &&
	test "$(cat out)" = "$D1/part: 74 of 128 expert records held (partial), every one checks (0.002 GiB)" &&
	held "$D1/part" >h && od -An -t f8 -v -j 128 "$SCRATCH/u.coli_usage" | tr -s " \n" "\n" | grep . >c &&
	awk "NR == FNR { held[\$1] = 1; next }
	     { r = FNR - 1; l = int(r / 32); c[r] = \$1 + 0; tot[l] += c[r] }
	     END { for (i = 0; i < 128; i++) for (j = 0; j < 128; j++) {
			if (!(i in held) || (j in held)) continue
			li = int(i / 32); lj = int(j / 32)
			if (li == lj && (c[i] < c[j] || (c[i] == c[j] && i > j))) { print \"layer order: \" i \" held, \" j \" not\"; bad = 1 }
			if (c[i] / tot[li] < c[j] / tot[lj]) { print \"share order: \" i \" held, \" j \" not\"; bad = 1 } }
		   for (l = 0; l < 4; l++) { n = 0; for (x = 0; x < 32; x++) n += (l * 32 + x) in held; if (n == 0) bad = 1 }
		   exit bad }" h c
'
test_expect_success "coli-run with the partial mirror: the RAM tokens, reads on both disks, never a record it lacks" '
	for io in threads uring; do
		for n in 1 4 16; do
			run -m "$M" --mirror "$D1/part" --cache-slots $n --io $io 2>err >a && cmp "$SCRATCH/ram" a &&
			! grep -q crc32 err &&
			COLI_TEST_CHUNK=4096 run -m "$M" --mirror "$D1/part" --cache-slots $n --io $io --prefetch on 2>err >b &&
			cmp "$SCRATCH/ram" b && ! grep -q crc32 err || exit 1
		done
	done &&
	coli-run -m "$M" --mirror "$D1/part" --prompt-ids "$P" -n 16 --ignore-eos --print-ids --cache-slots 1 >a 2>err &&
	cmp "$SCRATCH/ram" a &&
	grep -q "^coli-run: disk $M ([^)]*): [0-9.]* MiB read" err &&
	grep -q "^coli-run: disk $D1/part (loop[0-9]*): [0-9.]* MiB read" err &&
	! grep -q "^coli-run: disk .*: 0.0 MiB read" err
'
# A wrong prediction dropped after all its claimed chunks had landed (its other chunks still
# queued) once stayed "draining" for ever, and the next get waited on it: about 1 run in 6 of
# this one hung, at 1 and 4 slots. 30 runs of each, each given 10 s.
test_expect_success "a prediction dropped with its claimed chunks landed frees its slot (60 runs, none hangs)" '
	for n in 1 4; do
		for i in $(seq 30); do
			COLI_TEST_CHUNK=4096 timeout 10 coli-run -q -m "$M" --mirror "$D1/part" --prompt-ids "$P" -n 16 \
				--ignore-eos --print-ids --cache-slots $n --io uring --prefetch on >b && cmp "$SCRATCH/ram" b || exit 1
		done
	done
'
test_expect_success "stage killed by SIGKILL mid-way: the map claims what is there; the rerun ends with the same bytes" '
	mkdir "$D1/kill" && expect_exit 137 stage "$M" "$D1/kill" --max 0.002 --usage "$SCRATCH/u.coli_usage" --kill-after 20 &&
	test "$(held "$D1/kill" | wc -l)" = 16 &&
	coli-plan mirror verify "$D1/kill" -m "$M" >out && grep -q "16 of 128 expert records held (partial)" out &&
	expect_exit 137 stage "$M" "$D1/kill" --max 0.002 --usage "$SCRATCH/u.coli_usage" --kill-after 40 &&
	stage "$M" "$D1/kill" --max 0.002 --usage "$SCRATCH/u.coli_usage" 2>err &&
	grep -q "^coli-plan: mirror $D1/kill: 26 records copied .* (resumed); it holds 74 of 128" err &&
	cmp "$D1/part/experts.bin" "$D1/kill/experts.bin" && cmp "$D1/part/mirror.coli" "$D1/kill/mirror.coli" &&
	mkdir "$D1/killfull" && expect_exit 137 stage "$M" "$D1/killfull" --kill-after 100 &&
	stage "$M" "$D1/killfull" -q && same_files "$D1/killfull" && cmp "$D1/full/mirror.coli" "$D1/killfull/mirror.coli"
'
test_expect_success "resuming with a larger --max adds the next hottest records, as a stage with it from scratch" '
	cp -r "$D1/part" "$D1/grow" && stage "$M" "$D1/grow" --max 0.003 --usage "$SCRATCH/u.coli_usage" -q &&
	mkdir "$D1/big" && stage "$M" "$D1/big" --max 0.003 --usage "$SCRATCH/u.coli_usage" -q &&
	cmp "$D1/grow/experts.bin" "$D1/big/experts.bin" && cmp "$D1/grow/mirror.coli" "$D1/big/mirror.coli" &&
	test "$(held "$D1/big" | wc -l)" = 111
'
test_expect_success "disk full mid-stage: a clean error, the map consistent, resumed once space is freed" '
	avail=$(df -B1 --output=avail "$D2" | tail -1) &&
	fallocate -l $((avail - 2 * 1048576)) "$D2/filler" && mkdir "$D2/m" &&
	expect_exit 1 stage "$M" "$D2/m" --reserve 0 --assume-free 1 &&
	err_has "$D2/m/experts.bin: disk full writing expert record [layer " "MiB more; the records written before it are claimed" \
		"free space and rerun to resume" &&
	coli-plan mirror verify "$D2/m" -m "$M" >out && grep -q "of 128 expert records held (partial)" out &&
	rm "$D2/filler" && stage "$M" "$D2/m" --reserve 0 --assume-free 1 2>err && grep -q "(resumed)" err &&
	same_files "$D2/m" && cmp "$D1/full/mirror.coli" "$D2/m/mirror.coli"
'
test_expect_success "without --max on a small disk: what fits, less the reserve" '
	rm -rf "$D2/m" && mkdir "$D2/m" && avail=$(df -B1 --output=avail "$D2" | tail -1) &&
	stage "$M" "$D2/m" --reserve $(awk "BEGIN { print ($avail - 1048576) / 2^30 }") -q &&
	n=$(held "$D2/m" | wc -l) && test "$n" -gt 20 && test "$n" -lt 40 &&
	expect_exit 1 stage "$M" "$D2/m" --reserve 1 && err_has "free" "reserve of 1024.0 MiB kept (--reserve)"
'
test_expect_success "verify finds a flipped byte in a held record (exit 1, naming it) and ignores the holes" '
	cp -r "$D1/part" "$D1/flip" && r=$(held "$D1/flip" | head -1) && off=$((4096 + r * RS)) &&
	u=$(seq 0 127 | grep -vxF -f <(held "$D1/flip") | head -1) && flip "$D1/flip" $((4096 + u * RS + 50)) &&
	coli-plan mirror verify -q "$D1/flip" && flip "$D1/flip" $((off + 100)) &&
	expect_exit 1 coli-plan mirror verify "$D1/flip" &&
	err_has "$D1/flip/experts.bin: expert record [layer $((r / 32))][expert $((r % 32))] at offset $off: crc32 0x" \
		"$D1/flip: 1 of the 74 records it claims are bad" &&
	run -m "$M" --mirror "$D1/flip" --cache-slots 1 >a 2>/dev/null && cmp "$SCRATCH/ram" a
'
test_expect_success "coli-run refuses a damaged map or one of another container, naming the file and field" '
	cp -r "$D1/part" "$D1/dmg" && printf "\001" | dd of="$D1/dmg/mirror.coli" bs=1 seek=70 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m "$M" --mirror "$D1/dmg" --prompt-ids 1 -n 1 &&
	err_has "--mirror $D1/dmg/mirror.coli: bitmap crc32" &&
	coli-convert -q --expert-bits 8 "$SCRATCH/ck" "$SCRATCH/other.coli" && mkdir "$D1/other" &&
	stage "$SCRATCH/other.coli" "$D1/other" --max 0.002 -q &&
	cp "$D1/other/mirror.coli" "$D1/dmg/mirror.coli" &&
	expect_exit 1 coli-run -q -m "$M" --mirror "$D1/dmg" --prompt-ids 1 -n 1 &&
	err_has "--mirror $D1/dmg/mirror.coli: identity: the map of a mirror of another container" &&
	expect_exit 1 coli-plan mirror verify "$D1/dmg" && err_has "$D1/dmg/mirror.coli: identity"
'
test_expect_success "refusals: missing DIR, a mirror of another container or other files without --force, bad --max" '
	expect_exit 1 stage "$M" "$D1/nowhere" && err_has "$D1/nowhere: No such file or directory" &&
	expect_exit 2 stage "$M" "$D1/other" && err_has "$D1/other: holds a mirror of another container" "--force" &&
	stage "$M" "$D1/other" --force --max 0.002 --usage "$SCRATCH/u.coli_usage" -q &&
	cmp "$D1/part/experts.bin" "$D1/other/experts.bin" && coli-plan mirror verify -q "$D1/other" -m "$M" &&
	expect_exit 1 coli-plan mirror verify "$D1/other" -m "$SCRATCH/other.coli" && err_has "differs from" &&
	mkdir "$D1/stray" && echo x >"$D1/stray/notes.txt" &&
	expect_exit 2 stage "$M" "$D1/stray" && err_has "is not empty and holds no mirror" &&
	expect_exit 2 stage "$M" "$D1/copy" && err_has "holds a full copy of this container not staged by coli-plan" &&
	for v in 0 -1 abc; do expect_exit 2 stage "$M" "$D1/part" --max $v && err_has "--max" || exit 1; done &&
	expect_exit 2 stage "$M" "$D1/part" --max 0.00001 && err_has "--max 0.000: 0.0 MiB, a mirror of" &&
	expect_exit 2 stage "$M" && err_has "expected MODEL.coli and DIR" &&
	expect_exit 2 coli-plan mirror && err_has "expected stage or verify" &&
	expect_exit 2 coli-plan mirror verify && err_has "expected one mirror folder" &&
	expect_exit 1 coli-plan mirror verify "$D1/nowhere" && err_has "$D1/nowhere/manifest.coli" &&
	expect_exit 1 stage "$M" "$D1/full/manifest.coli" && err_has "not a folder" &&
	coli-plan mirror stage --help >out && grep -q "^usage: coli-plan mirror stage MODEL.coli DIR" out &&
	coli-plan mirror verify --help >out && grep -q "^usage: coli-plan mirror verify DIR" out
'

test_done
