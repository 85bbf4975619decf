#!/usr/bin/env bash
# t0500-run.sh: coli-run's scripting contract, sessions and usage errors, on the fixtures.
. "$(dirname "$0")/lib.sh"

size_of() { wc -c <"$1" | tr -d ' '; }

for fam in qwen3_moe deepseek_v3 glm4_moe; do
	F=$FIX/$fam-tiny
	test_expect_success "$fam: convert the fixture at 4-bit experts" '
		coli-convert -q --dense-bits 16 "$F/checkpoint" "$SCRATCH/$fam.coli"
	'
	test_expect_success "$fam: --teacher-force --dump-logits writes [positions][vocab] float32" '
		coli-run -q -m "$SCRATCH/$fam.coli" --prompt-ids "$(ids_of "$F/prompt_ids.i32.bin")" \
			--teacher-force --dump-logits logits.bin --dump-routing routing.bin &&
		test "$(size_of logits.bin)" = "$(size_of "$F/logits_q4.f32.bin")" &&
		test "$(size_of routing.bin)" = "$(size_of "$F/routing_indices_q4.i32.bin")" &&
		test ! -e logits.bin.tmp
	'
	test_expect_success "$fam: -n 16 --greedy --print-ids prints the reference greedy tokens" '
		coli-run -q -m "$SCRATCH/$fam.coli" --prompt-ids "$(ids_of "$F/prompt_ids.i32.bin")" \
			-n 16 --greedy --print-ids --ignore-eos >out &&
		test "$(cat out)" = "$(ids_of "$F/greedy_tokens_q4.i32.bin")"
	'
	test_expect_success "$fam: a session of 10 + 10 tokens equals one run of 20" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		coli-run -q -m "$SCRATCH/$fam.coli" --prompt-ids "$p" -n 20 --print-ids --ignore-eos >one &&
		coli-run -q -m "$SCRATCH/$fam.coli" --prompt-ids "$p" -n 10 --print-ids --ignore-eos --session s.coli_kv >a &&
		coli-run -q -m "$SCRATCH/$fam.coli" -n 10 --print-ids --ignore-eos --session s.coli_kv >b &&
		test "$(cat one)" = "$(cat a) $(cat b)"
	'
done

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/qwen3_moe.coli
test_expect_success "session: a corrupt session file is refused, naming the CRC" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	printf "\377" | dd of=s.coli_kv bs=1 seek=200 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m "$M" -n 2 --session s.coli_kv &&
	err_has "s.coli_kv" "crc32"
'
test_expect_success "session: a truncated session file is refused" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	truncate -s -8 s.coli_kv &&
	expect_exit 1 coli-run -q -m "$M" -n 2 --session s.coli_kv &&
	err_has "s.coli_kv" "payload length"
'
test_expect_success "session: a session of another model is refused, naming the identity" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	expect_exit 1 coli-run -q -m "$SCRATCH/glm4_moe.coli" -n 2 --session s.coli_kv &&
	err_has "s.coli_kv" "identity"
'
test_expect_success "session: a file that is not a session is refused" '
	echo hello >s.coli_kv &&
	expect_exit 1 coli-run -q -m "$M" -n 2 --session s.coli_kv &&
	err_has "not a coli KV session"
'
test_expect_success "sampling: the same seed gives the same tokens" '
	coli-run -q -m "$M" --prompt-ids "5 6" --temp 0.9 --top-k 50 --top-p 0.95 --seed 7 -n 12 --ignore-eos --print-ids >a &&
	coli-run -q -m "$M" --prompt-ids "5 6" --temp 0.9 --top-k 50 --top-p 0.95 --seed 7 -n 12 --ignore-eos --print-ids >b &&
	test "$(cat a)" = "$(cat b)" && test "$(wc -w <a)" = 12
'
# A container converted (with the options of $M) from a copy of the checkpoint whose
# generation_config.json names the third greedy token as EOS: generation must stop right after
# it. (Editing a container'"'"'s carried file instead is refused at open: its CRC is checked.)
test_expect_success "generation stops at an EOS id of generation_config.json" '
	coli-run -q -m "$M" --prompt-ids "5 6" -n 8 --print-ids --ignore-eos >all &&
	eos=$(awk "{print \$3}" all) && cp -R "$F/checkpoint" src && chmod -R u+w src &&
	printf "{\"eos_token_id\": [%s]}" "$eos" >src/generation_config.json &&
	coli-convert -q --dense-bits 16 src m.coli &&
	coli-run -q -m m.coli --prompt-ids "5 6" -n 8 --print-ids >out &&
	test "$(cat out)" = "$(awk "{print \$1, \$2, \$3}" all)"
'
test_expect_success "usage: bad options exit 2 naming the option" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" -n x && err_has "-n" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --top-p 2 && err_has "--top-p" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --dump-routing r.bin && err_has "--teacher-force" &&
	expect_exit 2 coli-run --prompt-ids "1" && err_has "-m" &&
	expect_exit 2 coli-run -m "$M" && err_has "--prompt"
'
test_expect_success "usage: a token id outside the vocabulary is refused" '
	expect_exit 2 coli-run -q -m "$M" --prompt-ids "1 99999" -n 1 && err_has "--prompt-ids" "99999"
'
test_expect_success "COLI_ISA=scalar gives the greedy tokens of the best kernels; an unknown one exits 2" '
	coli-run -q -m "$M" --prompt-ids "$(ids_of "$F/prompt_ids.i32.bin")" -n 8 --print-ids --ignore-eos >best &&
	COLI_ISA=scalar coli-run -q -m "$M" --prompt-ids "$(ids_of "$F/prompt_ids.i32.bin")" -n 8 --print-ids \
		--ignore-eos >scalar &&
	test "$(cat best)" = "$(cat scalar)" &&
	COLI_ISA=bogus expect_exit 2 coli-run -q -m "$M" --prompt-ids "1" -n 1 && err_has "COLI_ISA=bogus"
'
test_expect_success "a missing or corrupt container is refused" '
	expect_exit 1 coli-run -q -m nowhere.coli --prompt-ids "1" && err_has "nowhere.coli" &&
	cp -r "$M" bad.coli && printf "\377" | dd of=bad.coli/dense.bin bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m bad.coli --prompt-ids "1" && err_has "crc32"
'

test_done
