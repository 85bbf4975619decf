#!/usr/bin/env bash
# t0540-run-pins.sh: --pins N keeps the most used experts of each MoE layer (by --usage FILE)
# resident for the whole run; tokens and step logits stay bit-identical to RAM.
. "$(dirname "$0")/lib.sh"

for fam in qwen3_moe deepseek_v3; do
	F=$FIX/$fam-tiny
	M=$SCRATCH/$fam.coli
	test_expect_success "$fam: convert the fixture" '
		coli-convert -q "$F/checkpoint" "$M"
	'
	test_expect_success "$fam: a first streamed run writes the usage file" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --usage u.coli_usage --stream >/dev/null &&
		test -s u.coli_usage && cp u.coli_usage "$SCRATCH/$fam.coli_usage"
	'
	test_expect_success "$fam: --pins 4 and --pins 0 at 4 slots give the RAM tokens and step logits; the stream line shows pin hits with pins only" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
		test "$(wc -w <ram)" = 16 &&
		for n in 4 0; do
			cp "$SCRATCH/$fam.coli_usage" u.coli_usage &&
			coli-run -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits p$n.bin \
				--usage u.coli_usage --pins $n --cache-slots 4 >p$n 2>err$n &&
			cmp ram p$n && cmp ram.bin p$n.bin || exit 1
		done &&
		grep -q "stream: pins \(0\.\.\)\{0,1\}4/layer, hit rate [0-9.]*% (pin [0-9.]*%, slot [0-9.]*%), [0-9]* misses" err4 &&
		! grep -q "(pin 0.0%" err4 &&
		grep -q "stream: hit rate [0-9.]*%, [0-9]* misses" err0 &&
		! grep -q "pins" err0
	'
	test_expect_success "$fam: --pins implies --stream; with --usage the default is half the cache, none from a fresh file" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		cp "$SCRATCH/$fam.coli_usage" u.coli_usage &&
		pins() { coli-run -q -m "$M" --prompt-ids "$p" -n 4 --ignore-eos --print-ids --json "$@" | coli-json stream.pins_per_layer; } &&
		test "$(pins --usage u.coli_usage --stream)" = 8 &&
		half=12 && if [ $fam = deepseek_v3 ]; then half=8; fi && # 24 slots, capped at its 16 experts
		test "$(pins --usage u.coli_usage --cache-slots 24)" = $half &&
		test "$(pins --usage fresh.coli_usage --stream)" = 0
	'
	test_expect_success "$fam: --cache-slots and --pins lists (one count per MoE layer, as plans give them) give the RAM tokens and step logits" '
		p="$(ids_of "$F/prompt_ids.i32.bin")" &&
		expect_exit 2 coli-run -q -m "$M" --prompt-ids "$p" -n 2 --cache-slots 4,4 &&
		n=$(sed -n "s/.*--cache-slots: 2 counts, the container has \([0-9]*\) MoE layers (MTP included)/\1/p" err) &&
		test "$n" -gt 2 &&
		slots=$(seq 1 $n | awk "{print (NR % 2 ? 4 : 12)}" | paste -sd,) &&
		pins=$(seq 1 $n | awk "{print (NR % 2 ? 0 : 6)}" | paste -sd,) &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
		cp "$SCRATCH/$fam.coli_usage" u.coli_usage &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --dump-logits l.bin \
			--usage u.coli_usage --cache-slots "$slots" --pins "$pins" --json >l &&
		head -1 l >ids && cmp ram ids && cmp ram.bin l.bin &&
		test "$(tail -1 l | coli-json stream.pins_per_layer)" = 6 &&
		expect_exit 2 coli-run -q -m "$M" --prompt-ids "$p" -n 2 --usage u.coli_usage --cache-slots "$slots" --pins "$slots" &&
		err_has "MoE layer 0: 4 pins leave fewer than top_k" &&
		expect_exit 2 coli-run -q -m "$M" --prompt-ids "$p" -n 2 --cache-slots 4,,4 && err_has "empty item"
	'
done

test_expect_success "--cache-policy lru and lfu (the default) give the RAM tokens; a bad policy exits 2" '
	M=$SCRATCH/qwen3_moe.coli && p="$(ids_of "$FIX/qwen3_moe-tiny/prompt_ids.i32.bin")" &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids >ram &&
	for pol in lru lfu; do
		cp "$SCRATCH/qwen3_moe.coli_usage" u.coli_usage &&
		coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --usage u.coli_usage --pins 0 --prefetch off \
			--cache-slots 5 --cache-policy $pol --json >$pol &&
		head -1 $pol >ids && cmp ram ids || exit 1
	done &&
	cp "$SCRATCH/qwen3_moe.coli_usage" u.coli_usage &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --usage u.coli_usage --pins 0 --prefetch off \
		--cache-slots 5 --json >dflt &&
	test "$(tail -1 dflt | coli-json stream.hits)" = "$(tail -1 lfu | coli-json stream.hits)" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --cache-policy fifo && err_has "--cache-policy"
'

test_expect_success "usage: --pins x exits 2 naming the option" '
	expect_exit 2 coli-run -m "$SCRATCH/qwen3_moe.coli" --prompt-ids "1" --pins x && err_has "--pins" &&
	expect_exit 2 coli-run -m "$SCRATCH/qwen3_moe.coli" --prompt-ids "1" --pins -1 && err_has "--pins"
'

test_done
