#!/usr/bin/env bash
# t0732-plan-mirror-defects.sh: coli-plan mirror stage never writes into the container it copies
# (its own folder by any name: itself, M/., M/../M, a symlink, a bind mount; refused with or
# without --force, exit 2, no --force suggested; a hard-linked copy restaged with --force leaves
# the container whole); a partial mirror given as a model is named as one; after a full disk and a
# rerun, stage and verify say the same of the folder; the progress bar shows the time left.
# Needs root (a bind mount, a loop-device ext4).
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop

M=$SCRATCH/model.coli
D=$SCRATCH/d
stage() { coli-plan mirror stage "$@"; }
# intact: the container as converted (every file as saved in $SCRATCH/orig) and it verifies.
intact() { diff -r -q "$SCRATCH/orig" "$M" && coli-convert -q --verify "$M"; }

test_expect_success "setup: a synthetic container, a copy of it as converted, a 16 MiB ext4" '
	coli-synth --family qwen3_moe --out "$SCRATCH/ck" --no-tokenizer --vocab 512 --hidden 128 --expert-ffn 128 \
		--layers 4 --experts 32 --top-k 4 --measure 0 >/dev/null 2>&1 &&
	coli-convert -q "$SCRATCH/ck" "$M" && cp -r "$M" "$SCRATCH/orig" &&
	loop_fs "$SCRATCH/d.img" "$D" 16M >/dev/null
'

test_expect_success "the container's own folder, by any name, with or without --force: exit 2, the container intact" '
	ln -s "$M" "$SCRATCH/link" && ln -s model.coli "$SCRATCH/rel" &&
	for dir in "$M" "$M/." "$M/../model.coli" "$SCRATCH/link" "$SCRATCH/link/" "$SCRATCH/rel"; do
		for force in "" --force; do
			expect_exit 2 stage "$M" "$dir" $force &&
			err_has "coli-plan: $dir: the container'"'"'s own folder" "refused whatever the options" &&
			! grep -q -- "--force" err && intact || { echo "DIR $dir $force" >&2; exit 1; }
		done
	done &&
	cd "$SCRATCH" && expect_exit 2 stage model.coli ./model.coli/ --force && intact
'

test_expect_success "a bind mount of the container's folder: refused, the container intact" '
	mkdir bind && mount --bind "$M" bind && fault_note mount "$(pwd)/bind" &&
	expect_exit 2 stage "$M" bind --force && err_has "bind: the container'"'"'s own folder ($M, by another name)" &&
	umount bind && intact
'

test_expect_success "a copy hard-linked to the container (cp -al) restaged with --force: the container intact" '
	cp -al "$M" hl && expect_exit 2 stage "$M" hl && err_has "holds a full copy of this container" &&
	stage "$M" hl --force -q && intact && coli-plan mirror verify -q -m "$M" hl &&
	test "$(stat -c %i hl/experts.bin)" != "$(stat -c %i "$M/experts.bin")"
'

test_expect_success "a partial mirror given as a model: named as one, with the way to use it (coli-run, coli-plan, stage)" '
	mkdir "$D/part" && stage -q "$M" "$D/part" --max 0.002 --reserve 0 &&
	expect_exit 1 coli-run -m "$D/part" --prompt-ids 1 -n 1 &&
	err_has "$D/part: a partial mirror (mirror.coli, no dense.bin), not a container: coli-run reads it as --mirror $D/part beside the container (-m)" &&
	! grep -q "No such file" err &&
	expect_exit 1 coli-plan mirror stage "$D/part" "$SCRATCH" && err_has "$D/part: a partial mirror" &&
	expect_exit 1 coli-convert --verify "$D/part" && err_has "$D/part: a partial mirror" &&
	rm -rf "$D/part"
'

test_expect_success "a full disk while dense.bin is copied, then a rerun with no more room: stage and verify say the same" '
	mkdir "$D/e" && room=$(( $(stat -c %s "$M/experts.bin") + 16384 + 4096 + 65536 )) &&
	fallocate -l $(( $(free_bytes "$D") - room )) "$D/filler" &&
	expect_exit 1 stage "$M" "$D/e" --reserve 0 --assume-free 1 && err_has "dense.bin.tmp: disk full" &&
	stage "$M" "$D/e" --reserve 0 2>err &&
	grep -q "; it holds 128 of 128 expert records (every record, not the other files, 0.00[0-9] GiB)$" err &&
	coli-plan mirror verify "$D/e" >out &&
	test "$(cat out)" = "$D/e: 128 of 128 expert records held (every record, not the other files), every one checks (0.003 GiB)" &&
	rm "$D/filler" && stage "$M" "$D/e" --reserve 0 2>err &&
	grep -q "; it holds 128 of 128 expert records (full: every file, 0.004 GiB)$" err &&
	coli-plan mirror verify "$D/e" >out && test "$(cat out)" = "$D/e: 128 of 128 expert records held (full), every one checks (0.003 GiB)" &&
	rm -rf "$D/e"
'

test_expect_success "on a terminal the progress bar gives the time left" '
	command -v script >/dev/null || { echo "no script(1)" >&2; exit 1; }
	mkdir "$D/bar" &&
	script -qec "coli-plan mirror stage $M $D/bar --reserve 0" /dev/null >tty &&
	tr "\r" "\n" <tty | grep -Eq "^(.\[K)?\[[#.]{30}\] [0-9.]+/[0-9.]+ GiB  [0-9]+ MB/s  [0-9]+:[0-9][0-9] left" &&
	coli-plan mirror verify -q -m "$M" "$D/bar"
'

test_done
