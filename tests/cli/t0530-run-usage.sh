#!/usr/bin/env bash
# t0530-run-usage.sh: coli-run --usage FILE: routing statistics written, folded, refused when
# foreign or corrupt.
. "$(dirname "$0")/lib.sh"

size_of() { wc -c <"$1" | tr -d ' '; }

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/qwen3_moe.coli
G=$SCRATCH/glm4_moe.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
# layers (main + MTP) and experts of the fixture's config
shape() { python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print((c["num_hidden_layers"]+c.get("num_nextn_predict_layers",0))*(c.get("num_experts") or c.get("n_routed_experts")))' "$1/checkpoint/config.json"; }

test_expect_success "convert qwen3_moe-tiny and glm4_moe-tiny" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-convert -q "$FIX/glm4_moe-tiny/checkpoint" "$G"
'
test_expect_success "one teacher-forced run writes 128 + 8 x layers x experts bytes" '
	test "$(echo "$P" | wc -w)" = 24 &&
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage &&
	test "$(size_of u.coli_usage)" = "$((128 + 8 * $(shape "$F")))" &&
	test ! -e u.coli_usage.tmp
'
test_expect_success "a second run changes the file and it stays readable" '
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage &&
	cp u.coli_usage first &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 4 --ignore-eos --print-ids --usage u.coli_usage >/dev/null &&
	! cmp -s first u.coli_usage &&
	test "$(size_of u.coli_usage)" = "$(size_of first)" &&
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage
'
test_expect_success "a usage file of another model is refused before the run, naming the identity" '
	coli-run -q -m "$G" --prompt-ids "1 2 3" --teacher-force --usage g.coli_usage &&
	cp g.coli_usage before &&
	expect_exit 1 coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage g.coli_usage &&
	err_has "g.coli_usage" "identity" &&
	cmp before g.coli_usage
'
test_expect_success "a corrupt usage file is refused, naming the crc" '
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage &&
	printf "\377" | dd of=u.coli_usage bs=1 seek=140 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage &&
	err_has "u.coli_usage" "crc"
'
test_expect_success "a file that is not a usage file is refused" '
	echo hello >u.coli_usage &&
	expect_exit 1 coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --usage u.coli_usage &&
	err_has "not a coli usage file"
'

test_done
