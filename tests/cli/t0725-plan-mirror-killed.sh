#!/usr/bin/env bash
# t0725-plan-mirror-killed.sh: coli-plan mirror stage rerun on the states a SIGKILL leaves that
# make torture's mirror kind found (docs/robustness.md): killed during a new mirror's first map
# write (only mirror.coli.tmp in the folder), and a full stage killed while dense.bin.tmp was
# written, on a disk with less free space than dense.bin (the temporary is the mirror's space).
# Each rerun must end as an uninterrupted stage, byte for byte. And a disk that fills while a full
# stage copies dense.bin: the error names the space still needed, as for a record. Needs root (a
# loop-device ext4).
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop

M=$SCRATCH/model.coli
D=$SCRATCH/d
stage() { coli-plan mirror stage "$M" "$@"; }
same_dir() { diff -r -q "$1" "$2"; }

test_expect_success "a synthetic container and its full and partial mirrors on a 16 MiB ext4" '
	coli-synth --family qwen3_moe --out "$SCRATCH/ck" --no-tokenizer --vocab 512 --hidden 128 --expert-ffn 128 \
		--layers 4 --experts 32 --top-k 4 --measure 0 >/dev/null 2>&1 &&
	coli-convert -q "$SCRATCH/ck" "$M" && loop_fs "$SCRATCH/d.img" "$D" 16M >/dev/null &&
	mkdir "$D/full" "$D/part" && stage "$D/full" -q && stage "$D/part" --max 0.002 -q &&
	test "$(ls "$D/part" | tr "\n" " ")" = "experts.bin manifest.coli mirror.coli "
'
test_expect_success "killed during the first map write: the rerun stages the mirror (not refused as a stray file)" '
	mkdir "$D/a" && head -c 40 "$D/part/mirror.coli" >"$D/a/mirror.coli.tmp" &&
	stage "$D/a" --max 0.002 -q && same_dir "$D/part" "$D/a" &&
	mkdir "$D/b" && echo x >"$D/b/notes.txt" && cp "$D/a/mirror.coli" "$D/b/mirror.coli.tmp" &&
	expect_exit 2 stage "$D/b" && err_has "is not empty and holds no mirror"
'
test_expect_success "killed while writing dense.bin.tmp, less free than dense.bin: the rerun still finishes the full mirror" '
	cp -r "$D/full" "$D/c" && rm "$D/c/config.json" "$D/c/generation_config.json" "$D/c/mtp.bin" &&
	mv "$D/c/dense.bin" "$D/c/dense.bin.tmp" && dense=$(stat -c %s "$D/c/dense.bin.tmp") &&
	fallocate -l $(( $(free_bytes "$D") - dense / 2 )) "$D/filler" &&
	test "$(free_bytes "$D")" -lt "$dense" &&
	stage "$D/c" --reserve 0 2>err && grep -q "(resumed); it holds 128 of 128 expert records (full: every file" err &&
	same_dir "$D/full" "$D/c" && rm "$D/filler"
'
test_expect_success "disk full after the records, copying dense.bin: the error names the file and the space still needed" '
	rm -rf "$D/a" "$D/c" && mkdir "$D/e" && room=$(( $(stat -c %s "$M/experts.bin") + 16384 + 4096 + 65536 )) &&
	fallocate -l $(( $(free_bytes "$D") - room )) "$D/filler" &&
	expect_exit 1 stage "$D/e" --reserve 0 --assume-free 1 &&
	err_has "$D/e/dense.bin.tmp: disk full writing " ": the stage needs " " KiB more: free space and rerun to resume" &&
	test "$(wc -l <err)" = 1 && coli-plan mirror verify -q -m "$M" "$D/e" &&
	rm "$D/filler" && stage "$D/e" -q && same_dir "$D/full" "$D/e"
'

test_done
