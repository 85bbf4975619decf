#!/usr/bin/env bash
# t0730-plan-exit.sh: docs/coli-plan.md's exit-status tables are true: a case of every status of
# coli-plan MODEL.coli, coli-plan probe and coli-plan mirror, each with the words its message must
# carry (130 and 143, the signals, are t0735's; a full disk's 1 is t0720's, it needs a loop device).
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
PR=$SCRATCH/probe.json
plan() { coli-plan "$M" --probe "$PR" "$@"; }

test_expect_success "setup: a container, another one, its usage, a partial mirror, this machine's probe" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --no-tokenizer --vocab 512 --hidden 128 --expert-ffn 128 \
		--layers 4 --experts 32 --top-k 4 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" && coli-convert -q --expert-bits 8 "$SCRATCH/ck" "$SCRATCH/other.coli" &&
	coli-run -q -m "$M" --prompt-ids "1 2 3 4" -n 16 --ignore-eos --stream --usage "$SCRATCH/u" >/dev/null &&
	mkdir "$SCRATCH/part" && coli-plan mirror stage -q "$M" "$SCRATCH/part" --max 0.002 --reserve 0 &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$PR"
'

# ---- coli-plan MODEL.coli ----
test_expect_success "plan 0: the plan written" '
	expect_exit 0 plan --ram 0.1 -o p.json && test -s p.json
'
test_expect_success "plan 1: the container missing, damaged, or a partial mirror" '
	expect_exit 1 coli-plan "$SCRATCH/nothere.coli" --probe "$PR" && err_has "nothere.coli/manifest.coli" &&
	cp -r "$M" bad.coli && truncate -s 4096 bad.coli/dense.bin &&
	expect_exit 1 coli-plan bad.coli --probe "$PR" && err_has "bad.coli/dense.bin: size 4096" &&
	expect_exit 1 coli-plan "$SCRATCH/part" --probe "$PR" &&
	err_has "$SCRATCH/part: a partial mirror (mirror.coli, no dense.bin), not a container: coli-run reads it as --mirror"
'
test_expect_success "plan 1: the probe missing, damaged, or another machine's" '
	expect_exit 1 plan --probe nothere.json && err_has "nothere.json: No such file or directory" &&
	echo "{" >bad.json && expect_exit 1 plan --probe bad.json && err_has "bad.json" &&
	sed "s/\"cpu_model\": \"[^\"]*\"/\"cpu_model\": \"Other CPU 9000\"/" "$PR" >other.json &&
	expect_exit 1 plan --probe other.json && err_has "other.json: cpu_model '"'"'Other CPU 9000'"'"' is not this machine"
'
test_expect_success "plan 1: the usage of another container" '
	coli-run -q -m "$SCRATCH/other.coli" --prompt-ids "1 2" -n 2 --stream --usage u2 >/dev/null &&
	expect_exit 1 plan --usage u2 && err_has "u2: identity"
'
test_expect_success "plan 1: a --mirror of another container (its manifest named), or with a damaged map" '
	cp -r "$SCRATCH/other.coli" o.coli &&
	expect_exit 1 plan --mirror o.coli && err_has "--mirror o.coli/manifest.coli: manifest.coli differs from $M/manifest.coli at byte " &&
	cp -r "$SCRATCH/part" dmg && printf "\001" | dd of=dmg/mirror.coli bs=1 seek=70 conv=notrunc 2>/dev/null &&
	expect_exit 1 plan --mirror dmg && err_has "--mirror dmg/mirror.coli: bitmap crc32"
'
test_expect_success "plan 1: a folder on a disk the probe did not measure" '
	shm=/dev/shm/coli-t0730-$$ && mkdir -p "$shm" && cp -r "$M" "$shm/" &&
	expect_exit 1 plan --mirror "$shm/m.coli"; rc=$?; rm -rf "$shm"; test $rc = 0 &&
	err_has "which $PR has not measured"
'
test_expect_success "plan 1: writing the plan failed" '
	expect_exit 1 plan --ram 0.1 -o nodir/p.json && err_has "nodir/p.json"
'
test_expect_success "plan 2: a bad command line, a RAM budget below the minimum, the container as its own --mirror" '
	expect_exit 2 plan --ctx 0 && err_has "--ctx" &&
	expect_exit 2 coli-plan && err_has "give MODEL.coli" &&
	expect_exit 2 plan --ram 0.01 && err_has "--ram 0.01: needs at least" &&
	ln -s "$M" link.coli && expect_exit 2 plan --mirror link.coli &&
	err_has "--mirror link.coli: the same experts.bin as $M, not another copy"
'

# ---- coli-plan probe ----
test_expect_success "probe 0: probe.json written (the CPU part reused)" '
	cp "$PR" p.json && expect_exit 0 coli-plan probe -q -o p.json && test -s p.json
'
test_expect_success "probe 1: a --disk folder missing or on tmpfs, the probe file damaged or another machine's" '
	cp "$PR" p.json &&
	expect_exit 1 coli-plan probe -q --disk nothere -o p.json && err_has "--disk: nothere: No such file or directory" &&
	expect_exit 1 coli-plan probe -q --disk /dev/shm -o p.json && err_has "on tmpfs, which is memory" &&
	echo "{" >bad.json && expect_exit 1 coli-plan probe -q -o bad.json && err_has "bad.json" "--force measures anew" &&
	sed "s/\"cpu_model\": \"[^\"]*\"/\"cpu_model\": \"Other CPU 9000\"/" "$PR" >other.json &&
	expect_exit 1 coli-plan probe -q -o other.json && err_has "a probe of another machine"
'
test_expect_success "probe 2: a bad command line" '
	expect_exit 2 coli-plan probe --qd 4,1 && err_has "--qd: '"'"'4,1'"'"' is not ascending" &&
	expect_exit 2 coli-plan probe x && err_has "takes no operands" &&
	expect_exit 2 coli-plan probe --disk "$SCRATCH" --disk "$SCRATCH/" && err_has "given twice"
'

# ---- coli-plan mirror ----
test_expect_success "mirror 0: stage, verify, mirror --help" '
	mkdir d && expect_exit 0 coli-plan mirror stage -q "$M" d --max 0.002 --reserve 0 &&
	expect_exit 0 coli-plan mirror verify d && grep -q "of 128 expert records held (partial), every one checks" out &&
	expect_exit 0 coli-plan mirror --help && grep -q "^usage: coli-plan mirror stage MODEL.coli DIR" out &&
	grep -q "^       coli-plan mirror verify DIR" out &&
	while IFS= read -r line; do
		grep -qxF -- "$line" "$TOP/docs/coli-plan.md" || { echo "not in docs: $line" >&2; exit 1; }
	done <out
'
test_expect_success "mirror 1: a missing DIR, a damaged map, a bad record, a model that is a partial mirror" '
	expect_exit 1 coli-plan mirror stage "$M" nothere && err_has "nothere: No such file or directory" &&
	cp -r "$SCRATCH/part" dmg && printf "\001" | dd of=dmg/mirror.coli bs=1 seek=70 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-plan mirror verify dmg && err_has "dmg/mirror.coli: bitmap crc32" &&
	cp -r "$SCRATCH/part" flip && printf "\377" | dd of=flip/experts.bin bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-plan mirror verify flip && err_has "flip/experts.bin: expert record [layer " &&
	mkdir e && expect_exit 1 coli-plan mirror stage "$SCRATCH/part" e &&
	err_has "$SCRATCH/part: a partial mirror (mirror.coli, no dense.bin)"
'
test_expect_success "mirror 2: bad options, no subcommand, a folder refused without --force, the container own folder" '
	expect_exit 2 coli-plan mirror stage "$M" "$SCRATCH/part" --max 0 && err_has "--max" &&
	expect_exit 2 coli-plan mirror stage "$M" "$SCRATCH/part" --max 0.00001 && err_has "a mirror of" &&
	expect_exit 2 coli-plan mirror && err_has "expected stage or verify" &&
	expect_exit 2 coli-plan mirror copy && err_has "expected stage or verify, not '"'"'copy'"'"'" &&
	mkdir stray && echo x >stray/notes.txt && expect_exit 2 coli-plan mirror stage "$M" stray && err_has "use --force" &&
	expect_exit 2 coli-plan mirror stage "$M" "$M/." --force && err_has "the container'"'"'s own folder"
'

test_done
