#!/usr/bin/env bash
# t0660-convert-disk-full.sh: coli-convert on a small ext4 over a loop device that is full. Too
# small for the container: the reservation fails at once naming the file and the space needed,
# nothing left that looks finished; grown, the rerun converts. Filled after the reservation (a
# killed run resumed on a full disk): a clean error naming the file, no manifest, the journal
# untouched; with the space freed, the rerun resumes to a container identical to an
# uninterrupted one. Also with 0 to 8 blocks left at the resume.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop
[ -x "$BIN/coli-synth" ] || fault_skip "bin/coli-synth missing"

IMG=$SCRATCH/disk.img
MNT=$SCRATCH/mnt
OUT=$MNT/out.coli
REF=$SCRATCH/ref.coli
CK=$SCRATCH/ck
same_dir() { diff -r -q "$1" "$2"; }
# killed_at K: a conversion into OUT killed right after job K (a journal every 4 jobs).
killed_at() {
	expect_exit 137 env COLI_TEST_CHECKPOINT_JOBS=4 COLI_TEST_KILL_AT_JOB=$1 coli-convert -q "$CK" "$OUT" &&
	no_manifest "$OUT" && test -f "$OUT/convert.journal"
}

# qwen3_moe, 3 MoE layers x 16 experts: a 5.8 MiB container (experts.bin 4.9 MiB) from 21 MB of bf16.
test_expect_success "setup: a synthetic checkpoint, its uninterrupted conversion, a 4 MiB ext4" '
	coli-synth --family qwen3_moe --layers 3 --experts 16 --hidden 256 --expert-ffn 256 --vocab 2048 \
		--no-tokenizer --measure 0 -q --out "$CK" 2>/dev/null &&
	coli-convert -q "$CK" "$REF" &&
	test "$(stat -c %s "$REF/experts.bin")" = 5115904 &&
	loop_fs "$IMG" "$MNT" 4M >/dev/null &&
	test "$(free_bytes "$MNT")" -lt 5115904
'

test_expect_success "too small: exit 1 naming the file and the space needed, no section file left, no manifest" '
	expect_exit 1 coli-convert -q "$CK" "$OUT" &&
	err_has "coli-convert: $OUT/experts.bin: disk full reserving 0.005 GiB (the container needs 0.006 GiB)" &&
	test "$(wc -l <err)" = 1 &&
	no_manifest "$OUT" &&
	! ls "$OUT" | grep -q "\.bin" &&
	expect_exit 1 coli-convert --info "$OUT" && err_has "not a coli container" &&
	test "$(free_bytes "$MNT")" -gt 3000000
'

test_expect_success "the file system grown (resize2fs on a larger backing file): the rerun converts, identical" '
	loop_grow "$IMG" "$MNT" 16M &&
	test "$(free_bytes "$MNT")" -gt 12000000 &&
	coli-convert -q "$CK" "$OUT" &&
	same_dir "$REF" "$OUT" && coli-convert -q --verify "$OUT" &&
	rm -rf "$OUT"
'

test_expect_success "full after the reservation: the resume stops naming the file, then resumes identical once freed" '
	killed_at 20 &&
	cp "$OUT/convert.journal" journal.before &&
	fill_fs "$MNT" "$MNT/filler" &&
	expect_exit 1 coli-convert "$CK" "$OUT" &&
	grep -q "^coli-convert: $OUT/[a-z_.]*: disk full writing [0-9]* bytes at offset [0-9]*\$" err &&
	test "$(wc -l <err)" = 1 &&
	no_manifest "$OUT" && cmp journal.before "$OUT/convert.journal" &&
	rm "$MNT"/filler* &&
	coli-convert "$CK" "$OUT" >out &&
	grep -q " (resumed)\$" out &&
	same_dir "$REF" "$OUT" &&
	rm -rf "$OUT"
'

# Each k leaves k blocks: the disk fills at a different write of the resume (a carried file, the
# journal, the manifest) or not at all.
test_expect_success "0 to 8 blocks left at the resume: exit 0 identical, or exit 1 with no manifest then resumed identical" '
	for k in 0 1 2 3 4 5 6 7 8; do
		{ killed_at 20 || { echo "k=$k: the killed run did not end as expected: $(cat err)"; exit 1; }; } &&
		fill_fs "$MNT" "$MNT/filler" &&
		truncate -s -$((k * 4096)) "$MNT/filler" && sync &&
		{ rc=0; coli-convert -q "$CK" "$OUT" 2>err || rc=$?; } &&
		echo "k=$k: exit $rc $(cat err)" &&
		if [ $rc = 1 ]; then
			grep -q "^coli-convert: $OUT/[a-z_.]*: disk full " err && no_manifest "$OUT" &&
			rm "$MNT"/filler* && coli-convert -q "$CK" "$OUT" || exit 1
		else
			test $rc = 0 && rm "$MNT"/filler* || exit 1
		fi &&
		same_dir "$REF" "$OUT" && rm -rf "$OUT" || exit 1
	done
'

test_done
