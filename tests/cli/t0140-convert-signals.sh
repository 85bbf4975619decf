#!/usr/bin/env bash
# t0140-convert-signals.sh: coli-convert ends cleanly on a real SIGINT or SIGTERM, sent once the
# conversion has reached a chosen job (the test hook COLI_TEST_PAUSE_AT_JOB=K makes it wait there
# after saying so on stderr; the test waits for that line, then kills): exit 130 or 143, one line
# saying what the folder keeps, the journal at the job after K (checkpoints are otherwise every
# 1000 jobs), no temporary left, no summary; the same command then resumes to the bytes of an
# uninterrupted conversion, also after two stops in a row and after a stop at the last job.
. "$(dirname "$0")/lib.sh"
F=$FIX/glm4_moe-tiny/checkpoint
REF=$SCRATCH/ref.coli

same_dir() { diff -r -q "$1" "$2"; }
journal_field() { sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p" "$1/convert.journal"; }

# stop SIG K: a conversion into out.coli paused after job K, then sent SIG: its exit status is
# 128 + SIG, stderr the hook's line and one line naming the signal and what is kept.
stop() {
	local sig=$1 k=$2 pid rc=0 want name n
	COLI_TEST_CHECKPOINT_JOBS=1000 COLI_TEST_PAUSE_AT_JOB=$k coli-convert "$F" out.coli >out 2>err &
	pid=$!
	until grep -q "^coli-convert: test hook: paused after job $k\$" err 2>/dev/null; do
		kill -0 $pid 2>/dev/null || { echo "stop: coli-convert ended before job $k" >&2; cat err >&2; return 1; }
		sleep 0.01
	done
	kill -$sig $pid
	wait $pid || rc=$?
	cat err >&2
	case $sig in INT) want=130 name="interrupted (SIGINT)" ;; TERM) want=143 name="terminated (SIGTERM)" ;; esac
	n=$(journal_field out.coli jobs)
	test "$rc" = "$want" &&
	test "$(wc -l <err)" = 2 && test ! -s out &&
	test "$(tail -n 1 err)" = "coli-convert: $name: out.coli keeps the unfinished conversion (0.001 GiB of section files, allocated at full size, and convert.journal: $((k + 1)) of $n jobs done): rerun the same command to resume, or delete out.coli" &&
	test "$(journal_field out.coli next_job)" = $((k + 1)) &&
	no_manifest out.coli &&
	! ls out.coli | grep -q '\.tmp$'
}

# resume: the same command finishes out.coli, resumed, identical to the reference.
resume() {
	coli-convert "$F" out.coli >out &&
	grep -q " (resumed)\$" out &&
	same_dir "$REF" out.coli &&
	coli-convert -q --verify out.coli
}

test_expect_success 'setup: an uninterrupted conversion' '
	coli-convert -q "$F" "$REF"
'
test_expect_success 'SIGINT after job 40: exit 130, the journal at 41, resumed identical' '
	stop INT 40 && resume
'
test_expect_success 'SIGTERM after job 0: exit 143, the journal at 1, resumed identical' '
	stop TERM 0 && resume
'
test_expect_success 'two stops in a row (SIGINT, then SIGTERM further on), resumed identical' '
	stop INT 10 && stop TERM 90 && resume
'
test_expect_success 'SIGTERM after the last job: every job done, the rerun only writes the manifest' '
	stop TERM 0 && n=$(journal_field out.coli jobs) && rm -rf out.coli &&
	stop TERM $((n - 1)) && test "$(journal_field out.coli next_job)" = "$n" && resume
'
test_done
