#!/usr/bin/env bash
# t0850-profile-signals.sh: coli-profile datapoint ended by a real SIGINT or SIGTERM (kill) while a
# coli-run child runs: the child is ended too, the staging folder removed, nothing under the
# bundle's name (an older bundle there left as it was, no .tmp), exit 130 or 143, one line saying
# what was kept. The moment is chosen by a file: a run's trace being written in the staging folder.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/m.coli

test_expect_success "setup: the fixture converted" '
	coli-convert -q "$F/checkpoint" "$M"
'

# start OUT: a datapoint of long runs (thousands of tokens each) in the background; its pid in $pid.
start() {
	coli-profile datapoint "$M" -n 4000 --prompt-len 4 --no-drop-caches -o "$1" >row 2>err &
	pid=$!
}

# in_run OUT: waits until a coli-run child writes its trace in OUT's staging folder (the file
# tells, polled); its folder in $staging. 1 when the datapoint ended first.
in_run() {
	local t
	while kill -0 "$pid" 2>/dev/null; do
		for t in "$1".staging.*/traces/*.coli_trace.tmp; do
			[ -e "$t" ] && staging=${t%/traces/*} && return 0
		done
		sleep 0.01
	done
	return 1
}

# alive TEXT: a process's command line holds TEXT (read by the shell itself: no process of this
# test carries TEXT in its own arguments).
alive() {
	local p a
	for p in /proc/[0-9]*; do
		mapfile -d "" -t a <"$p/cmdline" 2>/dev/null || continue
		[[ "${a[*]}" == *"$1"* ]] && return 0
	done
	return 1
}

# ends SIG CODE OUT: the datapoint, signalled during a run, exits CODE and leaves nothing behind.
ends() {
	local rc=0
	in_run "$3" || { echo "the datapoint ended before a run was seen" >&2; return 1; }
	alive "$staging" || { echo "no coli-run child seen" >&2; return 1; }
	kill -"$1" "$pid"
	wait "$pid" || rc=$?
	cat err >&2
	test "$rc" = "$2" || { echo "exit $rc, expected $2" >&2; return 1; }
	test ! -e "$staging" && test -z "$(ls -d "$3".staging.* 2>/dev/null)" && test ! -e "$3.tmp" &&
	test "$(grep -c "interrupted" err)" = 1 &&
	tail -n 1 err | grep -q "^coli-profile: interrupted (SIG$1) during the .* run: nothing kept" &&
	test ! -s row && ! alive "$staging"
}

test_expect_success "SIGINT during a run: exit 130, the child ended, no staging folder, no bundle" '
	start int.tar.gz && ends INT 130 int.tar.gz && test ! -e int.tar.gz && err_has "int.tar.gz not created"
'

test_expect_success "SIGTERM during a run: exit 143, an older bundle under the name left as it was" '
	echo "an older bundle" >term.tar.gz && cp term.tar.gz before &&
	start term.tar.gz && ends TERM 143 term.tar.gz && cmp before term.tar.gz && err_has "term.tar.gz left as it was"
'

test_done
