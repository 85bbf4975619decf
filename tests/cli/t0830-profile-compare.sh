#!/usr/bin/env bash
# t0830-profile-compare.sh: coli-profile compare: commands run alternately A B A B, the medians, minima
# and maxima of their tokens/s and of the paired ratio; a real pair of coli-run commands; a command
# that fails or prints no JSON is refused naming it.
. "$(dirname "$0")/lib.sh"

# fake NAME: a command that logs NAME and prints the next of its tokens/s from the file NAME.ts
fake() { echo "echo $1 >>log; ts=\$(head -n 1 $1.ts); sed -i 1d $1.ts; echo \"{\\\"decode\\\":{\\\"tokens_per_s\\\":\$ts}}\""; }

test_expect_success "alternation A B A B, medians, min, max, the paired ratio" '
	printf "10\n30\n20\n" >A.ts && printf "25\n60\n50\n" >B.ts &&
	coli-profile compare -q -r 3 --json "$(fake A)" "$(fake B)" >j &&
	test "$(tr -d "\n" <log)" = ABABAB &&
	test "$(coli-json a.median a.min a.max b.median b.min b.max ratio.median ratio.min ratio.max <j | tr "\n" " ")" = \
		"20.0 10.0 30.0 50.0 25.0 60.0 2.5 2.0 2.5 "
'

test_expect_success "the markdown table" '
	printf "10\n20\n" >A.ts && printf "15\n30\n" >B.ts &&
	coli-profile compare -r 2 "$(fake A)" "$(fake B)" >out 2>err &&
	grep -q "^| A | .* | 2 | 15.000 | 10.000 | 20.000 |" out && grep -q "^B / A: 1.500x" out &&
	test "$(grep -c "run [12]:" err)" = 4
'

test_expect_success "two real coli-run commands" '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" m.coli &&
	coli-profile compare -q -r 1 --json "coli-run -q -m m.coli --prompt-ids \"1 2 3\" -n 4 --ignore-eos --json" \
		"coli-run -q -m m.coli --prompt-ids \"1 2 3\" -n 4 --ignore-eos --json --stream --cache-slots 8" >j &&
	awk "BEGIN { exit !($(coli-json a.median <j) > 0 && $(coli-json ratio.median <j) > 0) }"
'

test_expect_success "a failing command, one without JSON: exit 1 naming it" '
	expect_exit 1 coli-profile compare -q -r 2 "exit 3" "true" && err_has "run 1 of A (" "exited 3" &&
	expect_exit 1 coli-profile compare -q "echo {}" "true" && err_has "no decode.tokens_per_s" &&
	expect_exit 2 coli-profile compare "true" && err_has "give two commands" &&
	expect_exit 2 coli-profile compare -r 0 a b
'

test_done
