#!/usr/bin/env bash
# torture.sh: SIGKILL at random points (make torture; docs/robustness.md). Real processes killed
# with kill -9 after a random delay calibrated from their uninterrupted duration, then the files
# they were writing checked:
#   convert  coli-convert of a coli-synth checkpoint, killed with SIGKILL, SIGINT or SIGTERM in
#            turn: after each the output folder is unfinished (no manifest.coli: --info says so) or
#            finished (--verify passes, every file identical to an uninterrupted conversion), and
#            after SIGINT or SIGTERM (exit 130, 143) holds no temporary; each chain of 1-3 kills
#            on one folder is resumed to a container identical to the uninterrupted one.
#   usage    coli-run --usage FILE: FILE is afterwards the old table or the new one, byte for byte.
#   session  coli-run --session FILE: the same for the saved conversation.
#   mirror, mirror-full  coli-plan mirror stage killed, and on a disk that fills (mirror.sh).
# Usage: tests/torture/torture.sh [--kills N] [--seed S] [-v] [KIND...]   (default: 100 kills,
# seed 1, every kind). Prints one line per kill with -v, a summary per kind, exit 1 on any
# failure. Needs root (loop devices and cgroups for the mirror kinds).
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PATH=$TOP/bin:$PATH
KILLS=100 SEED=1 VERBOSE= KINDS=
while [ $# -gt 0 ]; do
	case $1 in
	--kills) KILLS=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	-v) VERBOSE=1; shift ;;
	convert | usage | session | mirror | mirror-full) KINDS="$KINDS $1"; shift ;;
	*) echo "usage: torture.sh [--kills N] [--seed S] [-v] [convert|usage|session|mirror|mirror-full]..." >&2; exit 2 ;;
	esac
done
KINDS=${KINDS:-convert usage session mirror mirror-full}
W=$(mktemp -d "${TMPDIR:-/tmp}/coli-torture.XXXXXX")
SCRATCH=$W
. "$TOP/tests/fault/fault.sh" # loop_fs, free_bytes; its exit trap unmounts, detaches, removes W
. "$TOP/tests/torture/mirror.sh"
trap 'unthrottle; fault_cleanup' EXIT
cd "$W" || exit 1
failed=0

fail() { echo "FAIL $*"; failed=1; }
say() { [ -z "$VERBOSE" ] || echo "  $*"; }

# delay I LO HI: the I-th random delay in seconds, uniform in [LO, HI) (awk's generator, seeded).
delay() { awk -v s="$SEED" -v i="$1" -v lo="$2" -v hi="$3" 'BEGIN { srand(s * 100003 + i); printf "%.4f", lo + rand() * (hi - lo) }'; }

# seconds CMD...: runs CMD (its output discarded), prints its wall time.
seconds() {
	local t0 t1
	t0=$(date +%s%N) && "$@" >/dev/null 2>&1 && t1=$(date +%s%N) && awk "BEGIN { print ($t1 - $t0) / 1e9 }"
}

# killed DELAY CMD...: runs CMD in the background, SIGKILLs it (KILL_SIG: another signal) after
# DELAY seconds (unless it ended); prints its exit status (137: killed).
killed() {
	local d=$1 pid rc=0
	shift
	"$@" >/dev/null 2>&1 &
	pid=$!
	sleep "$d"
	kill -"${KILL_SIG:-9}" "$pid" 2>/dev/null
	wait "$pid" || rc=$?
	echo "$rc"
}

# same_dir A B: the same file names, each file byte-identical.
same_dir() {
	[ "$(cd "$1" && ls -A)" = "$(cd "$2" && ls -A)" ] || return 1
	for f in $(cd "$1" && ls -A); do cmp -s "$1/$f" "$2/$f" || return 1; done
}

# ---- convert ----------------------------------------------------------------------------------

SYNTH="--family qwen3_moe --layers 4 --experts 64 --hidden 512 --expert-ffn 384 --vocab 8192
	--shard-size 64M --no-tokenizer --measure 0 -q"

# check_folder: out.coli after a kill: unfinished (no manifest, --info refuses it as unfinished)
# or finished (--verify passes, identical to ref.coli). Sets state to unfinished, finished or bad
# (not printed: a failure inside $(...) would be lost with its subshell).
check_folder() {
	if [ ! -e out.coli/manifest.coli ]; then
		if [ -d out.coli ] && coli-convert --info out.coli >/dev/null 2>info.err; then
			fail "convert: a folder without manifest.coli passes --info"
		fi
		state=unfinished
	elif coli-convert -q --verify out.coli && same_dir ref.coli out.coli; then
		state=finished
	else
		fail "convert: a finished folder fails --verify or differs from the reference"
		state=bad
	fi
}

torture_convert() {
	local i=0 t chain=0 rc state hook sig want n_unf=0 n_fin=0 n_done=0 resumes=0
	coli-synth $SYNTH --out ck 2>/dev/null || { fail "convert: coli-synth"; return; }
	coli-convert -q ck ref.coli || { fail "convert: the reference conversion"; return; }
	t=$(seconds coli-convert -q --force ck t.coli) && rm -rf t.coli
	echo "convert: $(du -sh ck | cut -f1) checkpoint, $(du -sh ref.coli | cut -f1) container, uninterrupted $t s; kills after 0..$(awk "BEGIN { print $t * 1.1 }") s"
	while [ $i -lt "$KILLS" ]; do
		i=$((i + 1))
		hook=$(( (i / 4) % 2 )) # cycles with and without a journal every 4 jobs
		d=$(delay "$i" 0 "$(awk "BEGIN { print $t * 1.1 }")")
		sig=$(echo KILL INT TERM | cut -d' ' -f$((i % 3 + 1)))
		want=$(case $sig in KILL) echo 137 ;; INT) echo 130 ;; TERM) echo 143 ;; esac)
		if [ $hook = 1 ]; then
			rc=$(KILL_SIG=$sig killed "$d" env COLI_TEST_CHECKPOINT_JOBS=4 coli-convert -q ck out.coli)
		else
			rc=$(KILL_SIG=$sig killed "$d" coli-convert -q ck out.coli)
		fi
		[ "$rc" = "$want" ] || [ "$rc" = 0 ] || fail "convert: kill $i (SIG$sig): exit $rc"
		[ "$sig" = KILL ] || ! ls out.coli 2>/dev/null | grep -q '\.tmp$' || fail "convert: kill $i (SIG$sig): a temporary left"
		check_folder
		case $state in unfinished) n_unf=$((n_unf + 1)) ;; finished) n_fin=$((n_fin + 1)) ;; esac
		[ "$rc" = 0 ] && n_done=$((n_done + 1))
		say "kill $i (SIG$sig) after $d s (journal hook $hook): exit $rc, $state"
		chain=$((chain + 1))
		if [ "$state" = finished ] || [ $chain -ge $((1 + i % 3)) ]; then
			if [ "$state" != finished ]; then
				resumes=$((resumes + 1))
				coli-convert -q ck out.coli 2>resume.err || fail "convert: resume after kill $i: $(cat resume.err)"
				same_dir ref.coli out.coli || fail "convert: resumed after kill $i, not identical to the reference"
			fi
			rm -rf out.coli
			chain=0
		fi
	done
	echo "convert: $KILLS kills: $n_unf left unfinished, $n_fin finished ($n_done had exited before the kill); $resumes chains resumed, each identical to the reference"
}

# ---- usage and session ------------------------------------------------------------------------

PROMPT=$(seq 1 200 | tr '\n' ' ')
RUN=(coli-run -q -m ref.coli --prompt-ids "$PROMPT" -n 64 --ignore-eos --print-ids)
run() { "${RUN[@]}" "$@"; }

# torture_file KIND OPTION: kills during runs that save FILE through OPTION (--usage or
# --session), each from the same old state; FILE must be the old state or the new one. The first
# fifth of the kills land uniformly in [0.5, 1.5] x the uninterrupted time; the others within 0.1 x
# of the moment the state changes (midway between the latest kill that left the old state and
# the earliest that left the new one), where the save is.
torture_file() {
	local kind=$1 opt=$2 i=0 t rc n_old=0 n_new=0 n_torn=0 n_tmp=0 n_late=0 lo hi b max_old= min_new=
	[ -d ref.coli ] || { coli-synth $SYNTH --out ck 2>/dev/null && coli-convert -q ck ref.coli; } || { fail "$kind: setup"; return; }
	mkdir "$kind" && cd "$kind" && ln -s ../ref.coli ref.coli || { fail "$kind: setup"; return; }
	run "$opt" old >/dev/null && cp old new && run "$opt" new >/dev/null && cp old again &&
		run "$opt" again >/dev/null && cmp -s new again || { fail "$kind: the save is not deterministic"; return; }
	cp old f && t=$(seconds run "$opt" f)
	lo=$(awk "BEGIN { print $t * 0.5 }") hi=$(awk "BEGIN { print $t * 1.5 }")
	echo "$kind: $(stat -c %s new)-byte file, run uninterrupted $t s; kills after $lo..$hi s"
	while [ $i -lt "$KILLS" ]; do
		i=$((i + 1))
		cp old f && rm -f f.tmp
		if [ $i -gt $((KILLS / 5)) ] && [ -n "$max_old" ] && [ -n "$min_new" ]; then
			b=$(awk "BEGIN { print ($max_old + $min_new) / 2 }")
			d=$(delay "$i" "$(awk "BEGIN { print $b - $t * 0.1 }")" "$(awk "BEGIN { print $b + $t * 0.1 }")")
		else
			d=$(delay "$i" "$lo" "$hi")
		fi
		rc=$(killed "$d" "${RUN[@]}" "$opt" f) # coli-run itself, not a shell around it
		[ "$rc" = 137 ] || [ "$rc" = 0 ] || fail "$kind: kill $i: exit $rc"
		[ -e f.tmp ] && n_tmp=$((n_tmp + 1))
		if cmp -s f old; then
			n_old=$((n_old + 1)); say "kill $i after $d s: exit $rc, old"
			max_old=$(awk "BEGIN { m = \"${max_old:-0}\" + 0; print ($d > m ? $d : m) }")
		elif cmp -s f new; then
			n_new=$((n_new + 1)); say "kill $i after $d s: exit $rc, new"
			[ "$rc" = 137 ] && n_late=$((n_late + 1))
			min_new=$(awk "BEGIN { m = \"${min_new:-1e9}\" + 0; print ($d < m ? $d : m) }")
		else n_torn=$((n_torn + 1)); fail "$kind: kill $i after $d s: the file is neither the old state nor the new one"; fi
	done
	cp old f && echo partial >f.tmp && run "$opt" f >/dev/null && cmp -s f new && [ ! -e f.tmp ] ||
		fail "$kind: a run after a kill that left f.tmp does not save the new state"
	echo "$kind: $KILLS kills: $n_old left the old state, $n_new the new one ($n_late of them killed after the rename), $n_torn torn; $n_tmp left f.tmp (the next save replaces it)"
	cd ..
}

for k in $KINDS; do
	case $k in
	convert) torture_convert ;;
	usage) torture_file usage --usage ;;
	session) torture_file session --session ;;
	mirror) torture_mirror ;;
	mirror-full) torture_mirror_full ;;
	esac
done
[ $failed = 0 ] && echo "torture: passed" || echo "torture: FAILED"
exit $failed
