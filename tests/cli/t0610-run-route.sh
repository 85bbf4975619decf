#!/usr/bin/env bash
# t0610-run-route.sh: coli-run --route-from TRACE on a synthetic model of the real trace's routing
# shape (qwen3_moe, 128 experts, top-6, 4 layers): the trace's experts are the ones routed (the
# routing dump equals the CSV's), RAM and streaming agree, a resumed session goes on at the
# trace's next position, every refusal names the field, and the closing figures name the trace.
. "$(dirname "$0")/lib.sh"

T=$TOP/tests/data/traces/qwen3-30b-a3b.route.csv   # 48 layers x 128 experts, top-6; 156 positions, 28 prompt
P="$(seq 101 128 | tr '\n' ' ')"                     # 28 prompt ids
synth() { # synth DIR LAYERS EXPERTS TOP_K: a tiny qwen3_moe container DIR.coli
	coli-synth -q --family qwen3_moe --out "$SCRATCH/$1.ck" --layers "$2" --experts "$3" --top-k "$4" --hidden 64 \
		--expert-ffn 32 --heads 4 --kv-heads 2 --no-tokenizer --vocab 512 --measure 0 &&
	coli-convert -q "$SCRATCH/$1.ck" "$SCRATCH/$1.coli"
}
M=$SCRATCH/m.coli
run() { coli-run -q -m "$M" --route-from "$T" "$@"; }
# trace_ids LAYERS POSITIONS: the trace's experts [layer][position][slot], one a line
trace_ids() {
	awk -F, -v L="$1" -v N="$2" '$1 == "0" { x[$4 "," $3 "," $5] = $6 }
		END { for (l = 0; l < L; l++) for (p = 0; p < N; p++) for (s = 0; s < 6; s++) print x[l "," p "," s] }' "$T"
}
i32() { od -An -t d4 -v "$1" | tr -s ' \n' '\n' | grep .; }
# counts FILE: a .coli_usage's counts [layer][expert] (after its 128-byte header), one a line
counts() { od -An -t f8 -v -j 128 "$1" | tr -s ' \n' '\n' | grep . | awk '{ printf "%d\n", $1 }'; }
# trace_counts FROM TO: the trace's routings per [layer][expert] of layers 0..3 over positions FROM..TO
trace_counts() {
	awk -F, -v a="$1" -v b="$2" '$1 == "0" && $3 >= a && $3 <= b && $4 < 4 { c[$4 * 128 + $6]++ }
		END { for (i = 0; i < 4 * 128; i++) print c[i] + 0 }' "$T"
}
# cut_trace LAYERS: the trace cut to its first LAYERS layers
cut_trace() {
	awk -F, -v L="$1" 'NR == 2 { sub(/n_layer=48/, "n_layer=" L) }
		/^# layer=/ { split($0, a, /[= ]/); if (a[3] + 0 >= L) next }
		$1 == "0" && $4 + 0 >= L { next } { print }' "$T"
}

test_expect_success "synthetic models: 4 layers x 128 experts top-6, and a top-4 and a 64-expert one" '
	synth m 4 128 6 && synth k4 4 128 4 && synth e64 2 64 6
'
test_expect_success "teacher-forced: every MoE layer routes exactly the trace's experts, in slot order" '
	run --prompt-ids "$P" --teacher-force --dump-routing r.i32 &&
	i32 r.i32 >got && trace_ids 4 28 >want &&
	test "$(wc -l <want)" = $((4 * 28 * 6)) && ! grep -qx "" want &&
	diff want got &&
	coli-run -q -m "$M" --prompt-ids "$P" --teacher-force --dump-routing own.i32 && ! cmp -s r.i32 own.i32
'
test_expect_success "RAM and --stream --cache-slots 6 give the same tokens and logits under --route-from" '
	run --prompt-ids "$P" -n 40 --ignore-eos --print-ids --dump-logits ram.f32 >ram &&
	run --prompt-ids "$P" -n 40 --ignore-eos --print-ids --dump-logits st.f32 --stream --cache-slots 6 >st &&
	test "$(wc -w <ram)" = 40 && cmp ram st && cmp ram.f32 st.f32 &&
	run --prompt-ids "$P" --teacher-force --dump-logits tf.f32 &&
	run --prompt-ids "$P" --teacher-force --dump-logits tfs.f32 --stream --cache-slots 6 --prefetch off &&
	cmp tf.f32 tfs.f32
'
test_expect_success "a resumed session goes on at the trace's next position: split run = one run" '
	run --prompt-ids "$P" -n 30 --ignore-eos --print-ids >one &&
	run --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s.coli_kv >a &&
	run -n 18 --ignore-eos --print-ids --session s.coli_kv >b &&
	test "$(cat a b | tr "\n" " ")" = "$(tr "\n" " " <one)"
'
test_expect_success "usage counts are the trace's experts of the positions run, a resumed session's from its position on" '
	run --prompt-ids "$P" -n 20 --ignore-eos --print-ids --usage u.coli_usage >/dev/null &&
	counts u.coli_usage >got && trace_counts 0 46 >want && diff want got &&
	run --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	run -n 18 --ignore-eos --print-ids --session s.coli_kv --usage v.coli_usage >/dev/null &&
	counts v.coli_usage >got && trace_counts 39 56 >want && diff want got
'
test_expect_success "the last position the trace has is allowed, one more is refused (exit 2) saying how many it has" '
	run --prompt-ids "$P" -n 129 --ignore-eos --print-ids >/dev/null &&
	expect_exit 2 run --prompt-ids "$P" -n 130 --ignore-eos &&
	err_has "--route-from $T: positions: this run reaches 157 positions (28 in the context, then -n 130), the trace has 156" &&
	expect_exit 2 run --prompt-ids "$(seq 1 157 | tr "\n" " ")" --teacher-force &&
	err_has "positions: this run reaches 157 positions" "the trace has 156"
'
test_expect_success "a resumed session's tokens count: refused beyond the trace (exit 2), the session kept" '
	run --prompt-ids "$P" -n 100 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	cp s.coli_kv keep.coli_kv &&
	expect_exit 2 run -n 30 --ignore-eos --session s.coli_kv &&
	err_has "this run reaches 157 positions (128 in the context, 128 of them the resumed session'"'"'s, then -n 30), the trace has 156" &&
	cmp s.coli_kv keep.coli_kv &&
	run -n 29 --ignore-eos --print-ids --session s.coli_kv >/dev/null
'
test_expect_success "a model of another top_k or expert count: exit 2 naming the field" '
	expect_exit 2 coli-run -q -m "$SCRATCH/k4.coli" --route-from "$T" --prompt-ids "$P" -n 2 &&
	err_has "route trace $T: n_expert_used 6, but $SCRATCH/k4.coli routes each token to top_k 4 experts" &&
	expect_exit 2 coli-run -q -m "$SCRATCH/e64.coli" --route-from "$T" --prompt-ids "$P" -n 2 &&
	err_has "route trace $T: n_expert 128, but $SCRATCH/e64.coli has 64 routed experts per MoE layer"
'
test_expect_success "a model with more MoE layers than the trace: exit 2; as many: its layers used" '
	cut_trace 3 >t3.csv && cut_trace 4 >t4.csv &&
	expect_exit 2 coli-run -q -m "$M" --route-from t3.csv --prompt-ids "$P" -n 2 &&
	err_has "route trace t3.csv: n_layer 3, but $M has 4 MoE layers" &&
	coli-run -q -m "$M" --route-from t4.csv --prompt-ids "$P" --teacher-force --dump-routing r4.i32 &&
	run --prompt-ids "$P" --teacher-force --dump-routing r48.i32 && cmp r4.i32 r48.i32
'
test_expect_success "a malformed or missing trace: exit 1 naming the file, the line and the field" '
	awk -F, -v OFS=, "NR == 60 { \$6 = 999 } { print }" "$T" >bad.csv &&
	expect_exit 1 coli-run -q -m "$M" --route-from bad.csv --prompt-ids "$P" -n 2 &&
	err_has "coli-run: bad.csv: line 60: expert: 999 out of range 0..127 (n_expert 128)" &&
	sed "1s/v1/v2/" "$T" >v2.csv &&
	expect_exit 1 coli-run -q -m "$M" --route-from v2.csv --prompt-ids "$P" -n 2 &&
	err_has "v2.csv: line 1: version: " &&
	expect_exit 1 coli-run -q -m "$M" --route-from nowhere.csv --prompt-ids "$P" -n 2 &&
	err_has "nowhere.csv"
'
test_expect_success "the closing line, the JSON and the trace metadata name the trace" '
	coli-run -m "$M" --route-from "$T" --prompt-ids "$P" -n 4 --print-ids >/dev/null 2>err &&
	err_has ", routing from $T (not the model'"'"'s)" &&
	coli-run -m "$M" --prompt-ids "$P" -n 4 --print-ids >/dev/null 2>err && ! grep -q "routing from" err &&
	run --prompt-ids "$P" -n 4 --print-ids --json >out && test "$(coli-json route_from <out)" = "$T" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 4 --print-ids --json >own && ! coli-json route_from <own 2>/dev/null &&
	run --prompt-ids "$P" -n 4 --print-ids --trace t.coli_trace >/dev/null && coli-tracestat t.coli_trace >/dev/null &&
	grep -aq "\"route_from\":\"$T\"" t.coli_trace
'

test_done
