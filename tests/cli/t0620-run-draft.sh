#!/usr/bin/env bash
# t0620-run-draft.sh: coli-run --draft (speculative decoding with the MTP layer) never changes
# the output: greedy ids and step logits with --draft 1, 2, 3 and auto equal --draft 0's, in RAM,
# streamed through a cache of top_k slots with and without prefetch and a mirror, across a saved
# and resumed session and a stop inside a verified round; sampling with a seed is reproducible; the oracle
# drafts (--draft-oracle) give acceptance 100% or the rate asked and are named in the output;
# every refusal. On the deepseek_v3 and glm4_moe fixtures (MTP layer included) and synthetic
# models of both families (coli-synth --mtp 1).
. "$(dirname "$0")/lib.sh"

P="$(ids_of "$FIX/deepseek_v3-tiny/prompt_ids.i32.bin")"
MODELS="ds glm sds sglm"
run() { coli-run -q -m "$SCRATCH/$1.coli" --prompt-ids "$P" --ignore-eos --print-ids "${@:2}"; }
j() { tail -n 1 out | coli-json "$@"; }

test_expect_success "convert the fixtures and two synthetic models with an MTP layer" '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" "$SCRATCH/ds.coli" &&
	coli-convert -q "$FIX/glm4_moe-tiny/checkpoint" "$SCRATCH/glm.coli" &&
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" "$SCRATCH/qwen.coli" &&
	for f in deepseek_v3 glm4_moe; do
		coli-synth -q --family $f --out "$SCRATCH/$f.ck" --layers 3 --experts 16 --top-k 4 --hidden 64 \
			--expert-ffn 32 --heads 4 --mtp 1 --no-tokenizer --vocab 512 --measure 0 || exit 1
	done &&
	coli-convert -q "$SCRATCH/deepseek_v3.ck" "$SCRATCH/sds.coli" &&
	coli-convert -q "$SCRATCH/glm4_moe.ck" "$SCRATCH/sglm.coli" &&
	for m in $MODELS; do
		run $m -n 24 --dump-logits "$SCRATCH/$m.bin" >"$SCRATCH/$m.ids" &&
		test "$(wc -w <"$SCRATCH/$m.ids")" = 24 || exit 1
	done
'
test_expect_success "greedy: --draft 1, 2, 3 and auto give the ids and step logits of --draft 0" '
	for m in $MODELS; do
		for k in 1 2 3 auto; do
			run $m -n 24 --draft $k --dump-logits a.bin >a &&
			cmp "$SCRATCH/$m.ids" a && cmp "$SCRATCH/$m.bin" a.bin || exit 1
		done
	done
'
test_expect_success "streamed through top_k cache slots, prefetch on and off, 2 threads, io_uring, a mirror: the same ids" '
	for m in $MODELS; do
		for pf in on off; do
			for k in 1 3; do
				run $m -n 24 --draft $k --cache-slots 4 --prefetch $pf >a && cmp "$SCRATCH/$m.ids" a &&
				run $m -n 24 --draft $k --cache-slots 4 --prefetch $pf --draft-oracle "$SCRATCH/$m.ids" >b &&
				cmp "$SCRATCH/$m.ids" b || exit 1
			done
		done
		run $m -n 24 --draft 2 --threads 2 --cache-slots 5 --io uring >a && cmp "$SCRATCH/$m.ids" a || exit 1
	done &&
	cp -r "$SCRATCH/ds.coli" m1.coli && run ds -n 24 --draft 3 --mirror m1.coli --cache-slots 4 >a &&
	cmp "$SCRATCH/ds.ids" a
'
test_expect_success "the verify reads through the store: expert bytes per verify counted when streaming" '
	run ds -n 24 --draft 3 --cache-slots 4 --json >out &&
	awk "BEGIN { exit !($(j draft.verify_mib) > 0 && $(j draft.verifies) > 0) }" &&
	test "$(j draft.mode)" = fixed && test "$(j draft.k)" = 3
'
# A session: 10 tokens, saved; resumed with the next 8 prompt ids, 10 more. Both halves the same
# with --draft 2 as with --draft 0, in RAM and streamed.
test_expect_success "across a saved and resumed session: the ids of --draft 0" '
	Q="$(echo $P | cut -d" " -f1-8)" &&
	for m in ds glm; do
		for k in 0 2 3; do
			rm -f s$k.kv &&
			coli-run -q -m "$SCRATCH/$m.coli" --prompt-ids "$P" -n 10 --ignore-eos --print-ids --session s$k.kv \
				--draft $k >a$k &&
			coli-run -q -m "$SCRATCH/$m.coli" --prompt-ids "$Q" -n 10 --ignore-eos --print-ids --session s$k.kv \
				--draft $k --cache-slots 4 >b$k || exit 1
		done &&
		cmp a0 a2 && cmp b0 b2 && cmp a0 a3 && cmp b0 b3 && cmp s0.kv s2.kv || exit 1
	done
'
# The 11th id made the end-of-sequence id: generation stops there, inside a round of verified
# drafts (the oracle: all accepted); the session then goes on as --draft 0s.
test_expect_success "a stop inside a verified round: the caches rolled back, the session goes on the same" '
	cp -r "$FIX/deepseek_v3-tiny/checkpoint" eos.ck && chmod -R u+w eos.ck &&
	eos=$(cut -d" " -f11 "$SCRATCH/ds.ids") &&
	printf "{\"eos_token_id\": %s}\n" "$eos" >eos.ck/generation_config.json &&
	coli-convert -q eos.ck eos.coli &&
	o0="--draft 0" && o3="--draft 3 --draft-oracle $SCRATCH/ds.ids" &&
	for k in 0 3; do
		eval o=\$o$k && rm -f s$k.kv &&
		coli-run -q -m eos.coli --prompt-ids "$P" -n 24 --print-ids --session s$k.kv $o >a$k &&
		coli-run -q -m eos.coli --prompt-ids "1 2 3" -n 12 --ignore-eos --print-ids --session s$k.kv \
			--draft $k >b$k || exit 1
	done &&
	test "$(wc -w <a3)" -le 11 && cmp a0 a3 && cmp b0 b3 && cmp s0.kv s3.kv
'
test_expect_success "sampling with a seed: --draft 2 reproducible, some drafts accepted by the acceptance rule" '
	for m in ds glm; do
		run $m -n 24 --temp 1.5 --seed 7 --draft 2 --json >out && head -n 1 out >a &&
		test "$(j draft.verifies)" -gt 0 && test "$(j draft.accepted)" -gt 0 && test "$(wc -w <a)" = 24 &&
		run $m -n 24 --temp 1.5 --seed 7 --draft 2 --cache-slots 4 >b && cmp a b &&
		run $m -n 24 --temp 1.5 --seed 8 --draft 2 >c && ! cmp -s a c || exit 1
	done
'
test_expect_success "the oracle: acceptance 100%, tokens per forward k + 1, named in the text and JSON" '
	for k in 1 2 3; do
		run sds -n 24 --draft $k --draft-oracle "$SCRATCH/sds.ids" --json >out && head -n 1 out | cmp - "$SCRATCH/sds.ids" &&
		test "$(j draft.acceptance)" = 1.0 && test "$(j draft.oracle)" = "$SCRATCH/sds.ids" &&
		awk "BEGIN { exit !($(j draft.tokens_per_forward) > $k) }" || exit 1
	done &&
	coli-run -m "$SCRATCH/sds.coli" --prompt-ids "$P" --ignore-eos --print-ids -n 24 --draft 2 \
		--draft-oracle "$SCRATCH/sds.ids" >a 2>err &&
	grep -q "^coli-run: prompt .*drafts from the oracle .*sds.ids (not the model.s)" err &&
	grep -q "^coli-run: draft: .*acceptance 100.0%" err
'
test_expect_success "the oracle at rate 0 and 0.5: acceptance 0 and in between, reproducible, the same ids" '
	run sds -n 24 --draft 2 --draft-oracle "$SCRATCH/sds.ids" --draft-oracle-rate 0 --json >out &&
	head -n 1 out | cmp - "$SCRATCH/sds.ids" && test "$(j draft.accepted)" = 0 &&
	run sds -n 24 --draft 2 --draft-oracle "$SCRATCH/sds.ids" --draft-oracle-rate 0.5 --json >out &&
	head -n 1 out | cmp - "$SCRATCH/sds.ids" && a=$(j draft.acceptance) &&
	awk "BEGIN { exit !($a > 0.1 && $a < 0.9) }" &&
	run sds -n 24 --draft 2 --draft-oracle "$SCRATCH/sds.ids" --draft-oracle-rate 0.5 --json >out &&
	test "$(j draft.acceptance)" = "$a"
'
test_expect_success "auto: a decision and why in the JSON; does nothing without MTP layers" '
	run ds -n 24 --draft auto --json >out && test "$(j draft.mode)" = auto && j draft.why | grep -q "^auto: " &&
	run qwen -n 8 --draft auto --json >out && j draft.why | grep -q "qwen.coli has no MTP layers" &&
	test "$(j draft.verifies)" = 0 &&
	run qwen -n 8 --draft auto >a && run qwen -n 8 >b && cmp a b
'
test_expect_success "refused: K beyond 4, a bad K, --draft K without MTP layers (naming the container)" '
	expect_exit 2 run ds -n 4 --draft 5 && err_has "--draft: 5 exceeds the maximum of 4 draft tokens per verify" &&
	expect_exit 2 run ds -n 4 --draft two && err_has "--draft: '"'"'two'"'"' is not auto or a count of draft tokens" &&
	expect_exit 2 run ds -n 4 --draft -1 &&
	expect_exit 2 run qwen -n 4 --draft 2 && err_has "--draft 2: $SCRATCH/qwen.coli has no MTP layers to draft with"
'
test_expect_success "refused: the oracle outside greedy decoding, without --draft, a bad or missing file" '
	expect_exit 2 run ds -n 4 --draft 2 --draft-oracle "$SCRATCH/ds.ids" --temp 0.7 &&
	err_has "--draft-oracle is for greedy decoding only" &&
	expect_exit 2 run ds -n 4 --draft-oracle "$SCRATCH/ds.ids" && err_has "--draft-oracle needs --draft K or auto" &&
	expect_exit 2 run ds -n 4 --draft 2 --draft-oracle-rate 0.5 && err_has "--draft-oracle-rate needs --draft-oracle FILE" &&
	expect_exit 2 run ds -n 4 --draft 2 --draft-oracle-rate 1.5 &&
	printf "1 2 99999" >bad.ids && expect_exit 2 run ds -n 4 --draft 2 --draft-oracle bad.ids &&
	err_has "bad.ids: '"'"'99999'"'"' is not a token id in [0, 512)" &&
	expect_exit 1 run ds -n 4 --draft 2 --draft-oracle missing.ids && err_has "missing.ids"
'
test_done
