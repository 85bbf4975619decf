#!/usr/bin/env bash
# t0130-convert-defects.sh: what a new user meets with coli-convert and a container: carried
# files checked at open, FIFOs refused instead of hanging, plain messages for a container given
# as a checkpoint (and the reverse) and for an unfinished conversion, exit statuses as
# documented, and resuming a conversion stopped by a non-finite value.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
SQ="'"
Q=qwen3_moe-tiny
S1=model-00001-of-00002.safetensors

. "$(dirname "$0")/safetensors.sh"

# src NAME: a writable copy of fixture NAME's checkpoint in ./src.
src() {
	cp -R "$FIX/$1/checkpoint" src && chmod -R u+w src
}

C=$SCRATCH/q.coli
test_expect_success 'setup: a converted container' '
	coli-convert -q "$FIX/$Q/checkpoint" "$C"
'

# ---- carried files ----------------------------------------------------------------------------

test_expect_success 'a carried file changed after conversion is refused at open, naming both CRCs' '
	cp -R "$C" m.coli &&
	want=$(printf "0x%08x" $(gzip -c m.coli/generation_config.json | tail -c 8 | od -An -tu4 -N4)) &&
	sed "s/\"eos_token_id\": 2/\"eos_token_id\": 7/" m.coli/generation_config.json >g &&
	! cmp -s g m.coli/generation_config.json &&
	mv g m.coli/generation_config.json &&
	expect_exit 1 coli-convert --info m.coli &&
	err_has "m.coli/generation_config.json: crc32 0x" "manifest says $want" &&
	expect_exit 1 coli-run -q -m m.coli --prompt-ids "5 6" -n 2 &&
	err_has "m.coli/generation_config.json: crc32 0x" "manifest says $want"
'

# ---- FIFOs in place of files ------------------------------------------------------------------

for f in dense.bin experts.bin manifest.coli generation_config.json; do
	test_expect_success "a FIFO as $f is refused at open, not waited on" '
		cp -R "$C" m.coli && rm m.coli/'$f' && mkfifo m.coli/'$f' &&
		expect_exit 1 timeout 10 coli-convert --info m.coli &&
		err_has "m.coli/'$f': is a FIFO, not a regular file" &&
		expect_exit 1 timeout 10 coli-convert --verify m.coli &&
		err_has "m.coli/'$f': is a FIFO, not a regular file" &&
		expect_exit 1 timeout 10 coli-run -q -m m.coli --prompt-ids "5 6" -n 2 &&
		err_has "m.coli/'$f': is a FIFO, not a regular file"
	'
done

test_expect_success 'a FIFO as a checkpoint shard is refused, not waited on' '
	src $Q && rm src/$S1 && mkfifo src/$S1 &&
	expect_exit 1 timeout 10 coli-convert src out.coli &&
	err_has "src/$S1: is a FIFO, not a regular file"
'

# ---- a container where a checkpoint goes, and the reverse ---------------------------------------

test_expect_success 'a container given as SRC_DIR is named as such (exit 2)' '
	expect_exit 2 coli-convert "$C" out.coli &&
	err_has "$C: a coli container (manifest.coli), not a Hugging Face checkpoint" &&
	test ! -e out.coli
'

test_expect_success '--info and --verify of a checkpoint say it is one, and how to convert it' '
	src $Q &&
	expect_exit 1 coli-convert --info src &&
	err_has "src: a Hugging Face checkpoint, not a coli container (no manifest.coli)" "coli-convert src OUT.coli" &&
	expect_exit 1 coli-convert --verify src &&
	err_has "src: a Hugging Face checkpoint, not a coli container"
'

test_expect_success '--info of an unfinished conversion says so' '
	expect_exit 137 env COLI_TEST_CHECKPOINT_JOBS=5 COLI_TEST_KILL_AT_JOB=30 \
		coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	expect_exit 1 coli-convert --info out.coli &&
	err_has "out.coli: an unfinished conversion (convert.journal, no manifest.coli)" "rerun the coli-convert command"
'

# ---- options and exit statuses ----------------------------------------------------------------

test_expect_success '--verify with --info is refused (exit 2), naming both' '
	expect_exit 2 coli-convert --verify --info "$C" &&
	err_has "--verify and --info cannot be combined" &&
	expect_exit 2 coli-convert --info --verify "$C" &&
	err_has "--verify and --info cannot be combined" &&
	test ! -s out
'

test_expect_success 'a journal of another conversion exits 1 (bad data), as documented' '
	expect_exit 137 env COLI_TEST_CHECKPOINT_JOBS=5 COLI_TEST_KILL_AT_JOB=30 \
		coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	expect_exit 1 coli-convert -q --expert-bits 8 "$FIX/$Q/checkpoint" out.coli &&
	err_has "out.coli: an unfinished conversion of another model or other options" &&
	no_manifest out.coli
'

# ---- a stop at a non-finite value, and its resumption -------------------------------------------

T=model.layers.0.mlp.experts.0.gate_proj.weight
test_expect_success 'a non-finite stop says what it left on disk and how to resume' '
	src $Q &&
	poke src/$S1 $(st_elem src/$S1 $T $((3 * 64 + 5)) 2) "\xc0\x7f" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "value nan is not finite" \
		"; out.coli keeps the unfinished conversion (" "GiB of section files, allocated at full size, and convert.journal: " \
		"rerun the same command with --allow-nonfinite to resume, or delete out.coli" &&
	test -f out.coli/convert.journal && test -f out.coli/experts.bin && no_manifest out.coli
'

test_expect_success 'resuming a non-finite stop with --allow-nonfinite finishes it, byte for byte' '
	src $Q &&
	poke src/$S1 $(st_elem src/$S1 $T $((3 * 64 + 5)) 2) "\xc0\x7f" &&
	coli-convert -q --allow-nonfinite src ref.coli &&
	expect_exit 1 coli-convert -q src out.coli &&
	next=$(sed -n "s/.*\"next_job\": *\([0-9]*\).*/\1/p" out.coli/convert.journal) &&
	test "$next" -gt 0 &&
	coli-convert --allow-nonfinite src out.coli >out &&
	grep -F "(resumed)" out &&
	for f in $(cd ref.coli && ls); do cmp ref.coli/$f out.coli/$f || return 1; done &&
	coli-convert --info out.coli | grep -F "\"allow_nonfinite\":true"
'

# ---- docs/coli-convert.md shows what the tool prints ----------------------------------------------

D=$TOP/docs/coli-convert.md
test_expect_success 'the summary, --verify and --info lines are the documented ones' '
	coli-convert "$FIX/deepseek_v3-tiny/checkpoint" x.coli >out &&
	grep -Ex "x.coli: 77 tensors, 64 expert records, [0-9.]+ GiB in, [0-9.]+ GiB out, 6.88 bits/weight, [0-9.]+ s, [0-9.]+ GiB/s, peak RSS [0-9]+ MiB" out &&
	grep -E "^OUT.coli: 77 tensors, 64 expert records, .* GiB/s, peak RSS [0-9]+ MiB$" "$D" &&
	coli-convert --verify x.coli >out &&
	grep -Fx "x.coli: ok: 77 tensors, 64 expert records, 2 carried files, 960.00 KiB verified" out &&
	grep -Fx "/tmp/x.coli: ok: 77 tensors, 64 expert records, 2 carried files, 960.00 KiB verified" "$D" &&
	coli-convert --verify -q x.coli >out && test ! -s out &&
	grep -Fx "coli-convert --verify [-q] OUT.coli" "$D" &&
	coli-convert --help | grep -F "coli-convert --verify [-q] OUT.coli" &&
	coli-convert --info x.coli | sed "s|^container   x.coli|container   /tmp/x.coli|" >info &&
	while IFS= read -r line; do grep -qFx -- "$line" "$D" || { echo "not in docs: $line" >&2; exit 1; }; done <info &&
	grep -F "disk full reserving S GiB (the container needs G GiB)" "$D"
'

# Found by the config fuzz target: a small config.json within every bound that describes 200
# million tensors made coli-convert list them all (48 GB) before comparing with the checkpoint.
test_expect_success 'a config.json describing far more tensors than the checkpoint holds is refused at once' '
	src mixtral-tiny &&
	sed -i "s/\"num_hidden_layers\": 4/\"num_hidden_layers\": 1024/; s/\"num_local_experts\": 8/\"num_local_experts\": 65536/" src/config.json &&
	grep -q "\"num_local_experts\": 65536" src/config.json &&
	(limit_vm 2000000; timeout 20 coli-convert -q src out.coli >out 2>err; echo $? >rc) &&
	cat err >&2 && test "$(cat rc)" = 1 &&
	err_has "config.json describes" "the checkpoint holds" && no_manifest out.coli
'

test_expect_success 'a tokenizer.json with an id beyond vocab_size: converted, with a warning naming the token' '
	coli-synth -q --family qwen3_moe --out tk --layers 2 --experts 8 --top-k 2 --hidden 64 --expert-ffn 64 \
		--measure 0 &&
	sed -i "s/\"added_tokens\": *\[/\"added_tokens\": [{\"id\": 200000, \"content\": \"<|far|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true},/" tk/tokenizer.json &&
	grep -q "<|far|>" tk/tokenizer.json &&
	coli-convert -q tk tk.coli 2>err &&
	err_has "warning" "tk/tokenizer.json" "\"<|far|>\" has id 200000" "vocab_size 151680" &&
	test -e tk.coli/manifest.coli &&
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" plain.coli 2>err2 && ! grep -q warning err2
'

test_done
