#!/usr/bin/env bash
# t0110-convert-resume.sh: crash safety of coli-convert. A run killed at any job leaves no
# manifest.coli, and the rerun finishes a container byte-identical to an uninterrupted one.
# Kill points come from the test hooks of convert/pipeline.c: COLI_TEST_CHECKPOINT_JOBS=N
# checkpoints every N jobs, COLI_TEST_KILL_AT_JOB=K sends SIGKILL right after job K is written.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
REF=$SCRATCH/ref
FP8=deepseek_v3-fp8-tiny
BF16=glm4_moe-tiny

# ---- helpers --------------------------------------------------------------------------------

# same_dir A B: the same file names, each file byte-identical.
same_dir() {
	local f
	(cd "$1" && ls -A) >same_a && (cd "$2" && ls -A) >same_b &&
	if ! cmp -s same_a same_b; then
		echo "same_dir: $1 and $2 hold different files:" >&2
		diff same_a same_b >&2
		return 1
	fi &&
	while read -r f; do
		cmp "$1/$f" "$2/$f" || return 1
	done <same_a
}

# journal_field DIR FIELD: an integer field of DIR/convert.journal.
journal_field() {
	sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p" "$1/convert.journal"
}

# killed K SRC OUT [OPTIONS...]: a run with checkpoints every ${EVERY:-5} jobs killed after job
# K: exit 137, no manifest, a journal whose next_job is the last checkpoint before K.
killed() {
	local k=$1 s=$2 o=$3 next
	shift 3
	expect_exit 137 env COLI_TEST_CHECKPOINT_JOBS=${EVERY:-5} COLI_TEST_KILL_AT_JOB=$k \
		coli-convert -q "$@" "$s" "$o" &&
	no_manifest "$o" &&
	test -f "$o/convert.journal" &&
	next=$(journal_field "$o" next_job) &&
	if [ "$next" -ne $((k / ${EVERY:-5} * ${EVERY:-5})) ]; then
		echo "killed: next_job $next after a kill at job $k" >&2
		return 1
	fi
}

# resumed SRC OUT REF [OPTIONS...]: the rerun finishes OUT identical to REF; "(resumed)" in the
# summary exactly when the journal had progress.
resumed() {
	local s=$1 o=$2 r=$3 next
	shift 3
	next=$(journal_field "$o" next_job) &&
	coli-convert "$@" "$s" "$o" >out 2>err &&
	cat out &&
	if [ "$next" -gt 0 ]; then grep -F " (resumed)" out; else ! grep -F "(resumed)" out; fi &&
	same_dir "$r" "$o"
}

. "$(dirname "$0")/safetensors.sh"

# synth CKPT OUT AWK [SED]: OUT/model.safetensors holding CKPT's tensors (names, dtypes) with
# shapes rewritten by the awk program AWK (over lines "name dtype d0 [d1]") and random finite
# values (every byte in 0x00-0x3f or 0x80-0xbf); OUT/config.json is CKPT's, edited by SED.
synth() {
	mkdir -p "$2" &&
	sed -e "${4:-}" "$1/config.json" >"$2/config.json" &&
	for s in "$1"/*.safetensors; do
		st_header "$s" | grep -o '"[^"]*":{[^}]*}' | grep -v '^"__metadata__"' || return 1
	done |
		sed -E 's/^"([^"]*)":\{"dtype":"([A-Z0-9_]+)","shape":\[([0-9,]*)\].*/\1 \2 \3/; s/,/ /g' |
		awk "$3" |
		awk 'BEGIN { sz["BF16"] = 2; sz["F16"] = 2; sz["F32"] = 4; sz["F8_E4M3"] = 1; o = 0; printf "{" }
		{
			n = sz[$2]; shape = ""
			for (i = 3; i <= NF; i++) { n *= $i; shape = shape (i > 3 ? "," : "") $i }
			printf "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%d,%d]}", (NR > 1 ? "," : ""), $1, $2, shape, o, o + n
			o += n
		}
		END { printf "}"; print o >"/dev/stderr" }' >"$2/header" 2>"$2/nbytes" &&
	{
		le64 $(stat -c %s "$2/header") && cat "$2/header" &&
		head -c $(cat "$2/nbytes") /dev/urandom | tr '\100-\177\300-\377' '\000-\077\200-\277'
	} >"$2/model.safetensors" &&
	rm "$2/header" "$2/nbytes"
}

# tensor_job CONTAINER NAME: NAME's position in the manifest's tensor list (its first job when
# every tensor before it is one job).
tensor_job() {
	tail -c +65 "$1/manifest.coli" | sed -n '/"tensors": \[/,/"experts": \[/p' |
		grep '"name":' | grep -n -F "\"$2\"" | cut -d: -f1 | awk '{ print $1 - 1 }'
}

# ---- references -----------------------------------------------------------------------------

test_expect_success 'setup: uninterrupted reference conversions' '
	mkdir -p "$REF" &&
	coli-convert -q "$FIX/$FP8/checkpoint" "$REF/fp8" &&
	coli-convert -q "$FIX/$BF16/checkpoint" "$REF/bf16" &&
	coli-convert -q --expert-bits 8 "$FIX/$BF16/checkpoint" "$REF/bf16-e8" &&
	coli-convert -q "$FIX/olmoe-tiny/checkpoint" "$REF/olmoe" &&
	coli-convert -q --verify "$REF/fp8" &&
	coli-convert -q --verify "$REF/bf16"
'

# ---- kill points on the fixtures ------------------------------------------------------------

for f in $FP8 $BF16; do
	r=$REF/fp8
	[ $f = $BF16 ] && r=$REF/bf16
	test_expect_success "$f: killed at jobs 0, 1, 4, 5, 17, middle, last-1, last; each rerun identical" '
		killed 0 "$FIX/$f/checkpoint" out.coli &&
		n=$(journal_field out.coli jobs) &&
		test "$n" -gt 40 &&
		resumed "$FIX/$f/checkpoint" out.coli "$r" &&
		for k in 1 4 5 17 $((n / 2)) $((n - 2)) $((n - 1)); do
			rm -rf out.coli &&
			killed $k "$FIX/$f/checkpoint" out.coli &&
			resumed "$FIX/$f/checkpoint" out.coli "$r" || return 1
		done
	'

	test_expect_success "$f: killed twice, then finished" '
		killed 17 "$FIX/$f/checkpoint" out.coli &&
		n=$(journal_field out.coli jobs) &&
		killed $((n / 2 + 3)) "$FIX/$f/checkpoint" out.coli &&
		resumed "$FIX/$f/checkpoint" out.coli "$r"
	'
done

test_expect_success 'a kill with 2 threads, resumed with 1 thread' '
	killed 23 "$FIX/$FP8/checkpoint" out.coli --threads 2 &&
	resumed "$FIX/$FP8/checkpoint" out.coli "$REF/fp8" --threads 1
'

test_expect_success 'checkpoint after every job: killed at each of the first 12 jobs' '
	for k in 0 1 2 3 4 5 6 7 8 9 10 11; do
		rm -rf out.coli &&
		EVERY=1 killed $k "$FIX/$BF16/checkpoint" out.coli &&
		resumed "$FIX/$BF16/checkpoint" out.coli "$REF/bf16" || return 1
	done
'

# ---- what a rerun may not mix into an unfinished folder ----------------------------------------

test_expect_success 'rerun with another --expert-bits is refused, unless --force' '
	killed 30 "$FIX/$BF16/checkpoint" out.coli &&
	cp out.coli/convert.journal journal.before &&
	test_must_fail coli-convert -q --expert-bits 8 "$FIX/$BF16/checkpoint" out.coli 2>err &&
	cat err &&
	err_has "out.coli: an unfinished conversion of another model or other options" "use --force" &&
	no_manifest out.coli &&
	cmp journal.before out.coli/convert.journal &&
	coli-convert -q --force --expert-bits 8 "$FIX/$BF16/checkpoint" out.coli &&
	same_dir "$REF/bf16-e8" out.coli
'

test_expect_success 'a refused rerun leaves the folder resumable with the first options' '
	killed 30 "$FIX/$BF16/checkpoint" out.coli &&
	test_must_fail coli-convert -q --mtp-bits 16 "$FIX/$BF16/checkpoint" out.coli &&
	test_must_fail coli-convert -q --dense-bits 8 "$FIX/$BF16/checkpoint" out.coli &&
	resumed "$FIX/$BF16/checkpoint" out.coli "$REF/bf16"
'

test_expect_success 'rerun with another model is refused, unless --force' '
	killed 12 "$FIX/$BF16/checkpoint" out.coli &&
	test_must_fail coli-convert -q "$FIX/olmoe-tiny/checkpoint" out.coli 2>err &&
	cat err &&
	err_has "an unfinished conversion of another model or other options" &&
	no_manifest out.coli &&
	coli-convert -q --force "$FIX/olmoe-tiny/checkpoint" out.coli &&
	same_dir "$REF/olmoe" out.coli
'

test_expect_success '--force on an unfinished folder starts over' '
	killed 40 "$FIX/$BF16/checkpoint" out.coli &&
	coli-convert --force "$FIX/$BF16/checkpoint" out.coli >out &&
	! grep -F "(resumed)" out &&
	same_dir "$REF/bf16" out.coli
'

test_expect_success 'an unreadable journal is reported, --force recovers' '
	killed 12 "$FIX/$BF16/checkpoint" out.coli &&
	echo "{not json" >out.coli/convert.journal &&
	expect_exit 1 coli-convert -q "$FIX/$BF16/checkpoint" out.coli &&
	err_has "out.coli/convert.journal: unreadable journal" &&
	no_manifest out.coli &&
	coli-convert -q --force "$FIX/$BF16/checkpoint" out.coli &&
	same_dir "$REF/bf16" out.coli
'

# The identity hashes the config and the layout, not the weights: a rerun from another
# checkpoint of the same shape must not finish a container that mixes the two.
test_expect_success 'rerun from a changed checkpoint of the same shape does not mix the two' '
	cp -R "$FIX/qwen3_moe-tiny/checkpoint" src && chmod -R u+w src &&
	killed 100 src out.coli &&
	T=model.embed_tokens.weight &&
	poke src/model-00001-of-00002.safetensors $(st_elem src/model-00001-of-00002.safetensors $T 0 2) "\x80\x3f" &&
	coli-convert -q src new.coli &&
	rc=0 &&
	coli-convert -q src out.coli 2>err || rc=$? &&
	cat err &&
	case $rc in
	0) same_dir new.coli out.coli ;;
	1 | 2) no_manifest out.coli ;;
	*) false ;;
	esac
'

# A run with --allow-nonfinite wrote a NaN and was killed; the rerun without it must not finish
# a container holding that NaN whose provenance says allow_nonfinite false.
test_expect_success 'rerun without --allow-nonfinite does not keep a NaN the killed run allowed' '
	cp -R "$FIX/qwen3_moe-tiny/checkpoint" src && chmod -R u+w src &&
	T=model.layers.0.mlp.experts.0.gate_proj.weight &&
	poke src/model-00001-of-00002.safetensors $(st_elem src/model-00001-of-00002.safetensors $T 5 2) "\xc0\x7f" &&
	test_must_fail coli-convert -q src plain.coli &&
	killed 150 src out.coli --allow-nonfinite &&
	rc=0 &&
	coli-convert -q src out.coli 2>err || rc=$? &&
	cat err &&
	if [ $rc -eq 0 ]; then
		echo "the rerun finished a container:" >&2
		coli-convert --info out.coli | grep -o "\"allow_nonfinite\":[a-z]*" >&2
		return 1
	fi &&
	test $rc -eq 1 -o $rc -eq 2 &&
	no_manifest out.coli
'

# ---- tensors of several chunks (a shell-built checkpoint) -------------------------------------

# qwen3_moe with a 300000-token vocabulary: embed_tokens and lm_head are 3 row chunks each
# (jobs 0-2 and 4-6); fp8 deepseek_v3 with intermediate_size 100000: layer 0 gate/up are 2
# chunks each, down_proj [192, 100000] 2 chunks of whole 128-row scale blocks (128 + 64 rows).
# A kill between chunks resumes with the journal's running CRCs.
test_expect_success 'setup: shell-built checkpoints with multi-chunk tensors' '
	synth "$FIX/qwen3_moe-tiny/checkpoint" "$REF/bigvocab" \
		"\$1 ~ /^(model\\.embed_tokens|lm_head)\\.weight\$/ { \$3 = 300000 } 1" \
		"s/\"vocab_size\": 512/\"vocab_size\": 300000/" &&
	synth "$FIX/$FP8/checkpoint" "$REF/bigffn" \
		"\$1 ~ /^model\\.layers\\.0\\.mlp\\.(gate|up)_proj\\.weight\$/ { \$3 = 100000 }
		 \$1 ~ /^model\\.layers\\.0\\.mlp\\.(gate|up)_proj\\.weight_scale_inv\$/ { \$3 = 782 }
		 \$1 == \"model.layers.0.mlp.down_proj.weight\" { \$4 = 100000 }
		 \$1 == \"model.layers.0.mlp.down_proj.weight_scale_inv\" { \$4 = 782 } 1" \
		"s/\"intermediate_size\": 320/\"intermediate_size\": 100000/" &&
	for b in 4 8 16; do
		coli-convert -q --dense-bits $b "$REF/bigvocab" "$REF/bigvocab-d$b" &&
		coli-convert -q --verify "$REF/bigvocab-d$b" &&
		coli-convert -q --dense-bits $b "$REF/bigffn" "$REF/bigffn-d$b" &&
		coli-convert -q --verify "$REF/bigffn-d$b" || return 1
	done
'

test_expect_success 'bf16 embed/lm_head in 3 chunks: killed between chunks, at 4, 8 and 16 bits' '
	for b in 4 8 16; do
		for k in 1 2 5 6; do
			rm -rf out.coli &&
			EVERY=1 killed $k "$REF/bigvocab" out.coli --dense-bits $b &&
			test $(journal_field out.coli jobs) -eq $((39 + 4 + 128)) &&
			resumed "$REF/bigvocab" out.coli "$REF/bigvocab-d$b" --dense-bits $b &&
			coli-convert -q --verify out.coli || return 1
		done
	done &&
	rm -rf out.coli "$REF"/bigvocab*
'

test_expect_success 'fp8 gate/up in 2 chunks: killed between chunks, quantized and kept as fp8' '
	for b in 4 16; do
		g=$(tensor_job "$REF/bigffn-d$b" model.layers.0.mlp.gate_proj.weight) &&
		u=$(tensor_job "$REF/bigffn-d$b" model.layers.0.mlp.up_proj.weight) &&
		test "$u" -eq $((g + 1)) &&
		for k in $((g + 1)) $((g + 2)) $((g + 3)) $((g + 5)); do
			rm -rf out.coli &&
			EVERY=1 killed $k "$REF/bigffn" out.coli --dense-bits $b &&
			test $(journal_field out.coli jobs) -eq $((77 + 3 + 64)) &&
			resumed "$REF/bigffn" out.coli "$REF/bigffn-d$b" --dense-bits $b &&
			coli-convert -q --verify out.coli || return 1
		done
	done &&
	rm -rf out.coli "$REF"/bigffn*
'

# ---- an asynchronous kill -9 ----------------------------------------------------------------

# async_kill SRC REF: converts SRC in the background (checkpoints every 3 jobs), kills it with
# SIGKILL after a fraction of the uninterrupted time SECS once it has checkpointed, reruns,
# and compares with REF.
async_kill() {
	local s=$1 r=$2 secs=$3 landed= frac pid rc
	for frac in 0.5 0.7 0.3 0.85 0.15 0.6 0.4; do
		rm -rf out.coli
		COLI_TEST_CHECKPOINT_JOBS=3 coli-convert -q "$s" out.coli &
		pid=$!
		sleep $(awk "BEGIN { print $secs * $frac }")
		kill -9 $pid 2>/dev/null
		rc=0
		wait $pid || rc=$?
		echo "kill -9 after $frac of $secs s: exit $rc"
		if [ $rc -eq 137 ] && [ -f out.coli/convert.journal ] && [ "$(journal_field out.coli next_job)" -gt 0 ]; then
			landed=1
			break
		fi
	done
	[ -n "$landed" ] || { echo "async_kill: no kill landed after a checkpoint" >&2; return 1; }
	no_manifest out.coli &&
	coli-convert "$s" out.coli >out &&
	cat out &&
	grep -F " (resumed)" out &&
	same_dir "$r" out.coli
}

# time_convert SRC OUT: converts, prints the wall time in seconds.
time_convert() {
	local t0 t1
	t0=$(date +%s%N) &&
	coli-convert -q "$1" "$2" &&
	t1=$(date +%s%N) &&
	awk "BEGIN { print ($t1 - $t0) / 1e9 }"
}

# qwen3_moe, 3 layers x 64 experts of 512 x 384, about 250 MB of bf16 in 64 MiB shards.
SYNTH_ARGS="--family qwen3_moe --layers 3 --experts 64 --hidden 512 --expert-ffn 384 --vocab 8192
	--shard-size 64M --no-tokenizer --measure 0 -q"
if [ -x "$BIN/coli-synth" ]; then
	test_expect_success 'kill -9 during a conversion of a coli-synth checkpoint, then resume' '
		coli-synth $SYNTH_ARGS --out ckpt &&
		ls ckpt/*.safetensors | wc -l >shards &&
		test $(cat shards) -gt 1 &&
		secs=$(time_convert ckpt ref.coli) &&
		echo "uninterrupted: $secs s" &&
		async_kill ckpt ref.coli $secs &&
		rm -rf ckpt ref.coli out.coli
	'
else
	echo "SKIP kill -9 on a coli-synth checkpoint (bin/coli-synth missing)"
fi

test_expect_success 'kill -9 during a conversion of a 250 MB shell-built checkpoint, then resume' '
	synth "$FIX/qwen3_moe-tiny/checkpoint" big \
		"\$1 ~ /^(model\\.embed_tokens|lm_head)\\.weight\$/ { \$3 = 1000000 } 1" \
		"s/\"vocab_size\": 512/\"vocab_size\": 1000000/" &&
	secs=$(time_convert big ref.coli) &&
	echo "uninterrupted: $secs s" &&
	async_kill big ref.coli $secs &&
	rm -rf big ref.coli out.coli
'

test_done
