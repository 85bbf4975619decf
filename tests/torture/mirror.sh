# mirror.sh: the mirror kinds of torture.sh (sourced by it, after its helpers and
# tests/fault/fault.sh): coli-plan mirror stage onto a real ext4 over a loop device whose writes a
# blkio cgroup (v1) throttles, so that O_DIRECT writes and fdatasync are real and a stage lasts
# long enough for kills and a filling disk to land anywhere in it.
#   mirror       SIGKILL at random points of full stages, partial ones by --usage within --max, and
#                partial ones by expert id within --max; after each kill the folder is checked
#                (check_mirror); chains of 1-3 kills on one folder are resumed to the bytes of an
#                uninterrupted stage.
#   mirror-full  a full stage while another file takes the disk's free space at different moments,
#                leaving different amounts free: a clean error naming the file and the space still
#                needed, a map that claims only good records, and a resume to identical bytes once
#                the space is freed.

MNT=$W/mnt MD=$W/mnt/m
MIRROR_MIB=512 FULL_MIB=128 # the kills' disk (references and the folder killed), the full disk's
THROTTLE=${COLI_TORTURE_BPS:-40000000} # bytes/s written to either disk
MPROMPT=$(seq 1 16 | tr '\n' ' ')
START=0.008 # s: the start of a stage (the map, experts.bin's header and holes, the manifest) and more
VNAME=(full partial-usage partial-id)
VARGS=("" "--max 0.04 --usage $W/m.coli_usage" "--max 0.025")
CG=

mstage() { coli-plan mirror stage ref.coli "$@"; }
mrun() { coli-run -q -m ref.coli --prompt-ids "$MPROMPT" -n 8 --ignore-eos --print-ids "$@"; }

# mheld DIR: the record numbers DIR/mirror.coli claims, one a line (formats/mirror.md).
mheld() { od -An -t u1 -v -j 64 "$1/mirror.coli" | tr -s ' \n' '\n' | grep . |
	awk '{ for (b = 0; b < 8; b++) if (int($1 / 2 ^ b) % 2) print (NR - 1) * 8 + b }'; }

# throttle DEV: writes to the block device DEV throttled to THROTTLE bytes/s for this shell and
# everything it starts from now on (a blkio cgroup of its own, made at the first call).
throttle() {
	if [ -z "$CG" ]; then
		CG=/sys/fs/cgroup/blkio/coli-torture-$$
		mkdir "$CG" && echo $$ >"$CG/cgroup.procs" || { CG=; return 1; }
	fi
	local mm
	mm=($(stat -Lc '%t %T' "$1")) && echo "$((16#${mm[0]})):$((16#${mm[1]})) $THROTTLE" >"$CG/blkio.throttle.write_bps_device"
}

# unthrottle: this shell back in its parent blkio cgroup, the cgroup removed (at exit too).
unthrottle() {
	[ -n "$CG" ] || return 0
	echo $$ >"$(dirname "$CG")/cgroup.procs" && rmdir "$CG" 2>/dev/null
	CG=
}

# The container (convert's), its usage, its tokens in RAM, the disk, the uninterrupted stages.
mirror_setup() {
	[ "$(id -u)" = 0 ] && command -v losetup >/dev/null && [ -d /sys/fs/cgroup/blkio ] ||
		{ fail "mirror: needs root, losetup and the blkio cgroup (v1)"; return 1; }
	[ -d ref.coli ] || { coli-synth $SYNTH --out ck 2>/dev/null && coli-convert -q ck ref.coli; } ||
		{ fail "mirror: setup"; return 1; }
	[ -s m.coli_usage ] || coli-run -q -m ref.coli --prompt-ids "$PROMPT" -n 64 --ignore-eos \
		--usage m.coli_usage >/dev/null || { fail "mirror: the usage"; return 1; }
	mrun >mram && MDEV=$(loop_fs "$W/mirror.img" "$MNT" "${MIRROR_MIB}M") && throttle "$MDEV" ||
		{ fail "mirror: the loop device or its throttle"; return 1; }
	local v
	for v in 0 1 2; do
		mkdir "$MNT/ref$v" "$MNT/t" && MT[v]=$(seconds mstage "$MNT/t" ${VARGS[v]}) &&
			mstage "$MNT/ref$v" ${VARGS[v]} -q && mheld "$MNT/ref$v" >"held$v" && rm -rf "$MNT/t" ||
			{ fail "mirror: the uninterrupted ${VNAME[v]} stage"; return 1; }
	done
	NREC=$(coli-plan mirror verify "$MNT/ref0" | sed -n 's/.* of \([0-9]*\) expert records.*/\1/p')
}

# check_mirror V: the folder MD after a kill during a stage of variant V; sets STATE to
#   empty     nothing there, or only mirror.coli.tmp (killed before the first map);
#   started   the empty map and no manifest.coli yet (verify refuses the folder);
#   partial   the manifest and a map: verify passes (every record claimed is there and checks),
#             the map claims only records the reference holds, coli-convert --verify refuses the
#             folder (never taken for a finished container), coli-run with it as --mirror gives the
#             RAM tokens without reading a record the map does not claim (no crc32 failover);
#   ready     the same with no record claimed yet;
#   records   the same with every record claimed, a full stage's other files still to copy;
#   finished  byte-identical to the uninterrupted stage;
# or to bad after a failure (reported).
check_mirror() {
	local v=$1 ref=$MNT/ref$1 n
	STATE=bad
	if [ ! -e "$MD/mirror.coli" ]; then
		[ ! -e "$MD/manifest.coli" ] || { fail "mirror: kill $i: manifest.coli without mirror.coli (a full copy)"; return; }
		[ -z "$(ls -A "$MD" | grep -vx mirror.coli.tmp)" ] || { fail "mirror: kill $i: files before the map: $(ls "$MD")"; return; }
		STATE=empty
	elif [ ! -e "$MD/manifest.coli" ]; then
		! coli-plan mirror verify -q "$MD" 2>/dev/null || { fail "mirror: kill $i: verify passes without manifest.coli"; return; }
		STATE=started
	elif ! coli-plan mirror verify -q -m ref.coli "$MD" 2>verify.err; then
		fail "mirror: kill $i (${VNAME[v]}): verify fails: $(cat verify.err)"
	elif mheld "$MD" | grep -vxF -f "held$v" | grep -q .; then
		fail "mirror: kill $i (${VNAME[v]}): the map claims a record the uninterrupted stage does not hold"
	elif same_dir "$ref" "$MD"; then
		STATE=finished
	elif coli-convert -q --verify "$MD" 2>/dev/null; then
		fail "mirror: kill $i (${VNAME[v]}): an unfinished mirror passes coli-convert --verify"
	elif ! mrun --mirror "$MD" --cache-slots 2 >ids 2>run.err || ! cmp -s mram ids || grep -q crc32 run.err; then
		fail "mirror: kill $i (${VNAME[v]}): coli-run with the interrupted mirror: $(head -c 300 run.err)"
	else
		n_runs=$((n_runs + 1))
		n=$(mheld "$MD" | wc -l)
		case $n in "$NREC") STATE=records ;; 0) STATE=ready ;; *) STATE=partial ;; esac
		n_held=$((n_held + n))
	fi
}

torture_mirror() {
	local i=0 chain=0 chains=0 v=0 len=1 rc d hi n_done=0 resumes=0 n_runs=0 n_held=0
	local -A seen=()
	mirror_setup || return
	echo "mirror: a $(du -sh ref.coli | cut -f1) container ($NREC expert records) staged onto ext4 on a loop device," \
		"writes throttled to $((THROTTLE / 1000000)) MB/s; uninterrupted: ${VNAME[0]} ${MT[0]} s," \
		"${VNAME[1]} (${VARGS[1]%% --usage*}) ${MT[1]} s, ${VNAME[2]} (${VARGS[2]}) ${MT[2]} s; kills after 0..1.1 x that," \
		"every fifth after 0..$START s"
	while [ $i -lt "$KILLS" ]; do
		if [ $chain = 0 ]; then
			v=$((chains % 3)) len=$((1 + chains / 3 % 3))
			rm -rf "$MD" && mkdir "$MD"
		fi
		i=$((i + 1))
		hi=$(awk "BEGIN { print ${MT[v]} * 1.1 }")
		[ $((i % 5)) != 0 ] || hi=$START # every fifth kill in the first milliseconds
		d=$(delay "$i" 0 "$hi")
		rc=$(killed "$d" coli-plan mirror stage ref.coli "$MD" ${VARGS[v]} -q)
		[ "$rc" = 137 ] || [ "$rc" = 0 ] || fail "mirror: kill $i: exit $rc"
		[ "$rc" = 0 ] && n_done=$((n_done + 1))
		check_mirror "$v"
		seen[$STATE]=$((${seen[$STATE]:-0} + 1))
		seen[${VNAME[v]}]=$((${seen[${VNAME[v]}]:-0} + 1))
		say "kill $i (${VNAME[v]}, chain $chains) after $d s: exit $rc, $STATE"
		chain=$((chain + 1))
		if [ "$STATE" = finished ] || [ "$STATE" = bad ] || [ $chain -ge $len ]; then
			if [ "$STATE" != finished ]; then
				resumes=$((resumes + 1))
				mstage "$MD" ${VARGS[v]} -q 2>resume.err || fail "mirror: resume after kill $i: $(cat resume.err)"
				same_dir "$MNT/ref$v" "$MD" || fail "mirror: resumed after kill $i (${VNAME[v]}): not identical to the uninterrupted stage"
			fi
			chain=0 chains=$((chains + 1))
		fi
	done
	echo "mirror: $KILLS kills (${seen[full]:-0} of full stages, ${seen[partial-usage]:-0} partial by usage," \
		"${seen[partial-id]:-0} partial by id) in $chains chains: ${seen[empty]:-0} left nothing (or mirror.coli.tmp)," \
		"${seen[started]:-0} the empty map without manifest.coli, ${seen[ready]:-0} the empty map and manifest.coli," \
		"${seen[partial]:-0} a map claiming some records," \
		"${seen[records]:-0} every record claimed with files still to copy, ${seen[finished]:-0} finished" \
		"($n_done had exited before the kill); ${seen[bad]:-0} bad"
	echo "mirror: $n_runs coli-run with an interrupted mirror ($n_held claimed records in all): the RAM tokens, no" \
		"record read that the map does not claim; $resumes chains resumed, each identical to the uninterrupted stage"
	rm -rf "$MD"
}

# ---- mirror-full ------------------------------------------------------------------------------

FULL_AT=${COLI_TORTURE_FULL_AT:-0.1 0.3 0.5 0.7 0.8 0.84 0.86 0.88 0.89 0.9 0.91 0.92 0.94} # when the filler lands, x the stage's duration
FULL_LEFT=${COLI_TORTURE_FULL_LEFT:-0 4096 65536 1048576 0 0 262144 0 0 4096 0 65536 0} # bytes it leaves free

# fill_to LEFT: FD's free space taken down to LEFT bytes or less: fallocate up to 1 MiB short of
# it (ext4 needs room for the extent tree too), then 4 KiB blocks written.
fill_to() {
	local free=$(($(free_bytes "$FD") - $1))
	[ $free -le 1048576 ] || fallocate -l $((free - 1048576)) "$FD/filler" 2>/dev/null
	free=$(($(free_bytes "$FD") - $1))
	[ $free -le 0 ] || dd if=/dev/zero of="$FD/filler2" bs=4096 count=$(((free + 4095) / 4096)) 2>/dev/null
}

# full_stage K AT LEFT: a full stage onto FD/m, its free space taken (fallocate) AT x its
# duration in, all but LEFT bytes; then the checks, the space freed, the resume.
full_stage() {
	local k=$1 at=$2 left=$3 pid rc=0 free
	rm -rf "$FD/m" && mkdir "$FD/m"
	mstage "$FD/m" >/dev/null 2>full.err &
	pid=$!
	sleep "$(awk "BEGIN { print ${MT[0]} * $at }")"
	fill_to "$left"
	free=$(free_bytes "$FD")
	wait "$pid" || rc=$?
	if [ $rc = 0 ]; then
		n_late=$((n_late + 1))
		say "disk full $k at $at, $left left: finished before the filler"
	elif [ $rc != 1 ] || [ "$(wc -l <full.err)" != 1 ] || ! grep -Eq "^coli-plan: $FD/m/[a-z_.]*: disk full .*needs [0-9.]+ (MiB|KiB) more" full.err; then
		fail "mirror-full $k: exit $rc, not one line naming the file and the space needed: $(cat full.err)"
	else
		n_err=$((n_err + 1))
		echo "  at $at x, $left bytes left: $(sed "s|$FD/m/||" full.err)" >>full.log
		say "disk full $k at $at, $left left: $(cat full.err)"
		[ ! -e "$FD/m/manifest.coli" ] || coli-plan mirror verify -q -m ref.coli "$FD/m" ||
			fail "mirror-full $k: verify fails after the full disk"
	fi
	rm -f "$FD/filler" "$FD/filler2"
	mstage "$FD/m" -q 2>resume.err || fail "mirror-full $k: the resume: $(cat resume.err)"
	same_dir "$MNT/ref0" "$FD/m" || fail "mirror-full $k: resumed, not identical to the uninterrupted stage"
}

torture_mirror_full() {
	local k=0 at left n_err=0 n_late=0
	[ -d "$MNT/ref0" ] || mirror_setup || return
	FD=$W/full
	FDEV=$(loop_fs "$W/full.img" "$FD" "${FULL_MIB}M") && throttle "$FDEV" || { fail "mirror-full: the loop device"; return; }
	: >full.log
	set -- $FULL_LEFT
	for at in $FULL_AT; do
		k=$((k + 1)) left=$1
		shift
		full_stage "$k" "$at" "$left"
	done
	echo "mirror-full: $k full stages onto a ${FULL_MIB} MiB ext4 whose free space another file took mid-stage:" \
		"$n_err stopped with one line naming the file and the space needed, $n_late finished first; each resumed" \
		"identical to the uninterrupted stage once the space was freed"
	cat full.log
}
