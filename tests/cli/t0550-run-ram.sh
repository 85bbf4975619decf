#!/usr/bin/env bash
# t0550-run-ram.sh: --ram GiB budgets the whole run: refused (exit 2) when the dense weights, KV
# cache, buffers and minimum expert cache do not fit; else the rest sizes the cache slots, and
# the tokens stay those of the in-RAM run.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/qwen3_moe.coli

test_expect_success "convert the fixture" '
	coli-convert -q "$F/checkpoint" "$M"
'

test_expect_success "--ram 0.001 is refused with exit 2, giving what it needs" '
	p="$(ids_of "$F/prompt_ids.i32.bin")" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --ram 0.001 &&
	err_has "--ram 0.001" "needs at least" "minimum expert cache" && test ! -s out
'

test_expect_success "a budget that fits gives the RAM tokens and names the chosen slots" '
	p="$(ids_of "$F/prompt_ids.i32.bin")" &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids >ram &&
	test "$(wc -w <ram)" = 16 &&
	coli-run -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --ram 0.5 >b 2>err &&
	cmp ram b &&
	grep -q "stream: hit rate" err &&
	grep -q "ram budget 0.50 GiB: dense [0-9.]*, KV [0-9.]*, buffers [0-9.]*, pins [0-9.]*, slots [0-9.]* ([0-9]*/layer)" err &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 16 --ignore-eos --print-ids --ram 0.5 --cache-slots 4 >c &&
	cmp ram c
'

test_expect_success "-q leaves the budget line out" '
	p="$(ids_of "$F/prompt_ids.i32.bin")" &&
	coli-run -q -m "$M" --prompt-ids "$p" -n 2 --ignore-eos --print-ids --ram 0.5 >/dev/null 2>err &&
	! grep -q "ram budget" err
'

test_expect_success "usage: --ram x and --ram -1 exit 2 naming the option" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --ram x && err_has "--ram" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --ram -1 && err_has "--ram" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1" --ram 0 && err_has "--ram"
'

test_done
