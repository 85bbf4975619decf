#!/usr/bin/env bash
# t0150-convert-exit-status.sh: docs/coli-convert.md's exit-status table is true: the table lists
# 0, 1, 2, 130 and 143, and a case of each status, and of each meaning it lists, exits with it.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
Q=qwen3_moe-tiny
S1=model-00001-of-00002.safetensors
C=$SCRATCH/c.coli
. "$(dirname "$0")/safetensors.sh"
. "$TOP/tests/fault/fault.sh" # mounts made here are undone at exit

src() { rm -rf src && cp -R "$FIX/$1/checkpoint" src && chmod -R u+w src; }
# status N CMD...: CMD exits N, says why on stderr (one line starting with the tool's name, unless
# it is 0) and leaves no manifest in out.coli.
status() {
	local want=$1
	shift
	expect_exit "$want" "$@" &&
	if [ "$want" != 0 ]; then grep -q "^coli-convert: " err; fi &&
	no_manifest out.coli
}

test_expect_success 'the table lists exactly the statuses 0, 1, 2, 130 and 143' '
	sed -n "/^## Exit status/,/^## /p" "$TOP/docs/coli-convert.md" | grep -o "^| [0-9]* |" | tr -d "| " |
		tr "\n" " " >codes &&
	test "$(cat codes)" = "0 1 2 130 143 "
'
test_expect_success '0: a conversion, --verify, --info, --help' '
	expect_exit 0 coli-convert -q "$FIX/$Q/checkpoint" "$C" &&
	expect_exit 0 coli-convert -q --verify "$C" &&
	expect_exit 0 coli-convert --info "$C" &&
	expect_exit 0 coli-convert --help
'

# ---- 1: bad data or I/O ----------------------------------------------------------------------
test_expect_success '1: invalid checkpoint: a tensor missing from the index, a wrong shape, a wrong dtype, a non-finite value' '
	src $Q && sed -i "s/\"model.layers.0.mlp.gate.weight\": \"[^\"]*\",//" src/model.safetensors.index.json &&
	status 1 coli-convert src out.coli &&
	src $Q && sed "s/\"hidden_size\": 64/\"hidden_size\": 128/" "$FIX/$Q/checkpoint/config.json" >src/config.json &&
	status 1 coli-convert src out.coli &&
	src $Q && T=model.layers.0.mlp.experts.0.gate_proj.weight &&
	poke src/$S1 $(st_elem src/$S1 $T 5 2) "\xc0\x7f" &&
	status 1 coli-convert src out.coli && err_has "is not finite" &&
	src $Q && sed -i "0,/\"dtype\":\"BF16\"/s//\"dtype\":\"BOOL\"/" src/$S1 &&
	status 1 coli-convert src out.coli && err_has "BOOL"
'
test_expect_success '1: a corrupt container, a changed carried file, a FIFO in its place' '
	rm -rf m.coli && cp -R "$C" m.coli &&
	printf "\x55" | dd of=m.coli/experts.bin bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	status 1 coli-convert --verify m.coli && err_has "crc32" &&
	rm -rf m.coli && cp -R "$C" m.coli && echo " " >>m.coli/config.json &&
	status 1 coli-convert --info m.coli && err_has "m.coli/config.json" &&
	rm -rf m.coli && cp -R "$C" m.coli && rm m.coli/dense.bin && mkfifo m.coli/dense.bin &&
	status 1 timeout 10 coli-convert --info m.coli && err_has "is a FIFO"
'
test_expect_success '1: not a container (--verify, --info): a checkpoint, an unfinished conversion, no such folder, a file' '
	status 1 coli-convert --verify "$FIX/$Q/checkpoint" && err_has "a Hugging Face checkpoint, not a coli container" &&
	expect_exit 137 env COLI_TEST_KILL_AT_JOB=10 coli-convert -q "$FIX/$Q/checkpoint" u.coli &&
	status 1 coli-convert --info u.coli && err_has "an unfinished conversion" &&
	status 1 coli-convert --info nothing.coli && err_has "coli-convert: nothing.coli: no such folder" &&
	: >afile && status 1 coli-convert --verify afile && err_has "coli-convert: afile: not a folder"
'
test_expect_success '1: a journal of another conversion (other options), SRC_DIR that does not exist' '
	expect_exit 137 env COLI_TEST_KILL_AT_JOB=10 coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	status 1 coli-convert -q --expert-bits 8 "$FIX/$Q/checkpoint" out.coli &&
	err_has "an unfinished conversion of another model or other options" && rm -rf out.coli &&
	status 1 coli-convert nothing out.coli && err_has "coli-convert: nothing: SRC_DIR: no such folder" &&
	test ! -e out.coli
'
test_expect_success '1: a write error (a read-only file system), out of memory (threads that cannot start)' '
	mkdir ro &&
	if [ "$(id -u)" = 0 ]; then mount -t tmpfs -o ro,size=64k tmpfs ro && fault_note mount "$PWD/ro"; else chmod 555 ro; fi &&
	status 1 coli-convert "$FIX/$Q/checkpoint" ro/out.coli && err_has "ro/out.coli: Read-only file system" &&
	{ asan_build || { # under ASan the cap limits allocations, not thread stacks: threads still start
		( limit_vm 200000 && status 1 coli-convert --threads 64 "$FIX/$Q/checkpoint" out.coli ) &&
		err_has "cannot start worker thread"; }; }
'
# disk full: tests/cli/t0660-convert-disk-full.sh and t0145-convert-carried-space.sh (loop devices)

# ---- 2: usage ----------------------------------------------------------------------------------
test_expect_success '2: unknown option, bad option value, wrong number of operands, --verify with --info' '
	status 2 coli-convert --frobnicate "$FIX/$Q/checkpoint" out.coli &&
	status 2 coli-convert --expert-bits 5 "$FIX/$Q/checkpoint" out.coli &&
	status 2 coli-convert "$FIX/$Q/checkpoint" &&
	status 2 coli-convert --info a b &&
	status 2 coli-convert --verify --info "$C"
'
test_expect_success '2: a container as SRC_DIR, SRC_DIR not a folder, OUT.coli not a folder' '
	status 2 coli-convert "$C" out.coli && err_has "a coli container (manifest.coli), not a Hugging Face checkpoint" &&
	: >afile && status 2 coli-convert afile out.coli && err_has "coli-convert: afile: SRC_DIR: not a folder" &&
	status 2 coli-convert "$FIX/$Q/checkpoint" afile && err_has "exists and is not a folder"
'
test_expect_success '2: a folder with foreign files, a finished container without --force' '
	mkdir f.coli && : >f.coli/notes.txt &&
	status 2 coli-convert "$FIX/$Q/checkpoint" f.coli && err_has "which is not part of a coli container" &&
	expect_exit 2 coli-convert "$FIX/$Q/checkpoint" "$C" && err_has "use --force to overwrite it"
'

# ---- 130, 143: signals (tests/cli/t0140-convert-signals.sh has the rest) -------------------------
for sig in INT:130 TERM:143; do
	test_expect_success "${sig#*:}: SIG${sig%:*} while converting, the folder left resumable" '
		rm -rf out.coli &&
		{ COLI_TEST_PAUSE_AT_JOB=20 coli-convert -q "$FIX/$Q/checkpoint" out.coli 2>err & } &&
		pid=$! &&
		until grep -q "paused after job 20" err 2>/dev/null; do
			kill -0 $pid 2>/dev/null || exit 1
			sleep 0.01
		done &&
		kill -'${sig%:*}' $pid && rc=0 && { wait $pid || rc=$?; } &&
		test $rc = '${sig#*:}' && grep -q "keeps the unfinished conversion" err && no_manifest out.coli &&
		coli-convert -q "$FIX/$Q/checkpoint" out.coli && diff -r -q "$C" out.coli
	'
done
test_done
