#!/usr/bin/env bash
# t0735-plan-signals.sh: coli-plan probe and coli-plan mirror stage end cleanly on real SIGINT and
# SIGTERM sent mid-work: exit 130 or 143, one line saying what was kept, no temporary left;
# probe.json as it was; the mirror's claimed records on disk and checking, the rerun resuming to
# the bytes of an uninterrupted stage. The moment is chosen by a file, not a delay: the probe is
# signalled once its scratch file is being written (the measurements after it last at least
# 3 x --seconds), the stage once its map claims a batch, its writes throttled (a blkio cgroup) to
# 512 KB/s so that seconds of copying remain. Needs root (a loop-device ext4, a blkio cgroup).
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop
[ -w /sys/fs/cgroup/blkio ] || fault_skip "no blkio cgroup (v1) to throttle the stage's writes"
CG=/sys/fs/cgroup/blkio/coli-t0735-$$
# The cgroup removed at exit: a process that just ended may hold it a moment longer (EBUSY).
uncgroup() {
	local i
	for i in $(seq 50); do
		[ -d "$CG" ] && ! rmdir "$CG" 2>/dev/null || return 0
		sleep 0.1
	done
}
trap 'uncgroup; fault_cleanup' EXIT

M=$SCRATCH/model.coli
D=$SCRATCH/d

# wait_for CMD...: runs CMD every 20 ms until it succeeds (60 s at most: then fails).
wait_for() {
	local i
	for i in $(seq 3000); do
		"$@" 2>/dev/null && return 0
		sleep 0.02
	done
	echo "wait_for: '$*' never held" >&2
	return 1
}
# ended PID STATUS: waits for PID, which must end with STATUS.
ended() {
	local rc=0
	wait "$1" || rc=$?
	[ "$rc" = "$2" ] || { echo "ended: exit $rc, expected $2" >&2; return 1; }
}
# big_scratch DIR: DIR holds a probe scratch file past its first 4 KiB (being written for the
# measurements, not the 4 KiB check before them).
big_scratch() { test "$(stat -c %s "$1"/.coli-probe.* 2>/dev/null | sort -n | tail -1)" -gt 65536; }
# held DIR: the records DIR/mirror.coli claims (its held field).
held() { od -An -t u4 -j 52 -N 4 "$1/mirror.coli" | tr -d " "; }
claims() { [ -e "$2/mirror.coli" ] && [ "$(held "$2")" -ge "$1" ]; }

test_expect_success "setup: a container, a 32 MiB ext4 on a loop device, a blkio cgroup throttling its writes, a probe of the CPU" '
	coli-synth --family qwen3_moe --out "$SCRATCH/ck" --no-tokenizer --vocab 512 --hidden 128 --expert-ffn 128 \
		--layers 4 --experts 32 --top-k 4 --measure 0 >/dev/null 2>&1 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	dev=$(loop_fs "$SCRATCH/d.img" "$D" 32M) && mkdir "$CG" &&
	mm=($(stat -Lc "%t %T" "$dev")) && echo "$((16#${mm[0]})):$((16#${mm[1]})) 524288" >"$CG/blkio.throttle.write_bps_device" &&
	mkdir "$D/ref" && coli-plan mirror stage -q "$M" "$D/ref" --reserve 0 &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 -o "$SCRATCH/probe.json"
'

for sig in INT TERM; do
	rc=$((128 + $(kill -l $sig)))
	what=$([ $sig = INT ] && echo "interrupted (SIGINT)" || echo "terminated (SIGTERM)")
	test_expect_success "probe: SIG$sig while a disk is measured: exit $rc, one line, the scratch file removed, probe.json as it was" '
		cp "$SCRATCH/probe.json" p.json && cp p.json before.json
		coli-plan probe -q --disk "$D" --disk-mib 16 --qd 1 --seconds 3 -o p.json >out 2>err &
		pid=$! &&
		wait_for big_scratch "$D" && kill -'$sig' $pid && ended $pid '$rc' &&
		test "$(cat err)" = "coli-plan probe: '"$what"' before the end: nothing written, p.json left as it was; the scratch file of the disk being measured removed" &&
		test ! -s out && cmp p.json before.json && ! ls -a "$D" | grep -q coli-probe && ! ls | grep -q "\.tmp$"
	'
	test_expect_success "mirror stage: SIG$sig mid-copy: exit $rc, one line, what it claims on disk, the rerun identical to an uninterrupted stage" '
		rm -rf "$D/m" && mkdir "$D/m"
		(echo $BASHPID >"$CG/cgroup.procs" && exec coli-plan mirror stage "$M" "$D/m" --reserve 0) >out 2>err &
		pid=$! &&
		wait_for claims 16 "$D/m" && kill -'$sig' $pid && ended $pid '$rc' &&
		n=$(held "$D/m") && test "$n" -ge 16 && test "$n" -lt 128 &&
		test "$(cat err)" = "coli-plan: mirror $D/m: '"$what"': $n records copied by this run; it holds $n of 128 expert records (partial), each one claimed synced to disk, no temporary left: rerun the same command to resume" &&
		test ! -s out && ! ls "$D/m" | grep -q "\.tmp$" &&
		coli-plan mirror verify -m "$M" "$D/m" >v && grep -q ": $n of 128 expert records held (partial), every one checks" v &&
		coli-plan mirror stage "$M" "$D/m" --reserve 0 2>err && grep -q "(resumed); it holds 128 of 128 expert records (full: every file" err &&
		diff -r -q "$D/ref" "$D/m"
	'
done

test_done
