# fault.sh: helpers of the fault tests, sourced after tests/cli/lib.sh: eiofs mounts and loop
# devices made by a test, unmounted and detached when it exits (even when it fails).
FAULT_LIST=$SCRATCH/.fault-undo
: >"$FAULT_LIST"

# Undoes what fault_note recorded, last first, then removes the scratch folder as lib.sh does.
fault_cleanup() {
	tac "$FAULT_LIST" 2>/dev/null | while read -r kind what; do
		case $kind in
		mount) umount "$what" 2>/dev/null || umount -l "$what" 2>/dev/null ;;
		loop) losetup -d "$what" 2>/dev/null ;;
		esac
	done
	[ -n "${COLI_TEST_KEEP:-}" ] || rm -rf "$SCRATCH"
}
trap fault_cleanup EXIT

# fault_note KIND WHAT: undo WHAT (mount: a mount point, loop: a loop device) at exit.
fault_note() { echo "$1 $2" >>"$FAULT_LIST"; }

# fault_skip REASON: the test cannot run here (not root, no FUSE or loop devices): one SKIP line.
fault_skip() {
	echo "SKIP $(basename "$0"): $1"
	exit 0
}

# eiofs_mount SRC MNT [--eio FILE:OFFSET:LEN[:AFTER]]... [--log LOG]: SRC mirrored read-only at
# MNT by tests/fault/eiofs.c (bin/fault/eiofs), reads of the chosen ranges failing with EIO.
eiofs_mount() {
	local src=$1 mnt=$2
	shift 2
	mkdir -p "$mnt" && "$BIN/fault/eiofs" "$@" "$src" "$mnt" && fault_note mount "$mnt"
}

# fault_umount MNT: unmounts MNT now.
fault_umount() { umount "$1"; }

# fault_need_fuse: skips the test unless eiofs is built, /dev/fuse exists and we are root.
fault_need_fuse() {
	[ -x "$BIN/fault/eiofs" ] || fault_skip "bin/fault/eiofs not built (make; needs libfuse3-dev)"
	[ -c /dev/fuse ] || fault_skip "no /dev/fuse"
	[ "$(id -u)" = 0 ] || fault_skip "not root (mounts a FUSE file system)"
}

# fault_need_loop: skips the test unless we are root and can set up a loop device.
fault_need_loop() {
	[ "$(id -u)" = 0 ] || fault_skip "not root (sets up loop devices)"
	command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || fault_skip "no losetup or mkfs.ext4"
	[ -e /dev/loop-control ] || fault_skip "no /dev/loop-control"
}

# loop_fs IMG MNT SIZE: an ext4 file system on a loop device over the file IMG of SIZE (truncate's
# units), mounted at MNT; prints the loop device. Extra losetup options: LOOP_OPTS.
loop_fs() {
	local img=$1 mnt=$2 size=$3 dev
	truncate -s "$size" "$img" && mkfs.ext4 -q -F -b 4096 -m 0 -O ^has_journal "$img" >/dev/null 2>&1 &&
	dev=$(losetup -f --show ${LOOP_OPTS:-} "$img") && fault_note loop "$dev" &&
	mkdir -p "$mnt" && mount "$dev" "$mnt" && fault_note mount "$mnt" && echo "$dev"
}

# phys_offset FILE OFFSET: where byte OFFSET of FILE (on an ext4 of 4096-byte blocks) lies in the
# file system's image, from filefrag's extent list.
phys_offset() {
	filefrag -v -b4096 "$1" | awk -v o="$2" '
		$1 ~ /^[0-9]+:$/ { split($2 $3, l, /[.:]+/); split($4 $5, p, /[.:]+/)
			if (int(o / 4096) >= l[1] && int(o / 4096) <= l[2]) { print (p[1] + int(o / 4096) - l[1]) * 4096 + o % 4096; f = 1; exit } }
		END { if (!f) exit 1 }'
}

# loop_grow IMG MNT SIZE: the file system of loop_fs grown to SIZE offline (this kernel refuses
# online resizing here): unmounted, the backing file extended, the device told (losetup -c),
# checked, resize2fs, mounted again.
loop_grow() {
	local dev
	dev=$(findmnt -n -o SOURCE "$2") && umount "$2" && truncate -s "$3" "$1" && losetup -c "$dev" &&
	{ e2fsck -fy "$dev" >/dev/null 2>&1; [ $? -le 1 ]; } && resize2fs -f "$dev" >/dev/null 2>&1 && mount "$dev" "$2"
}

# free_bytes MNT: the bytes free on the file system at MNT.
free_bytes() { df --output=avail -B1 "$1" | tail -n 1 | tr -d ' '; }

# fill_fs MNT FILE: FILE grown until the file system at MNT has no byte free. ext4 gives back
# blocks freed by a recent delete only when its journal commits, and the last free block may be
# one FILE cannot take (its extent tree would need another): synced, and the rest filled by files
# FILE.1, FILE.2, ... (a small file's extents fit in its inode), until none is free (10 tries).
fill_fs() {
	local i
	sync
	dd if=/dev/zero of="$2" bs=4096 2>/dev/null
	for i in 1 2 3 4 5 6 7 8 9 10; do
		sync
		[ "$(free_bytes "$1")" = 0 ] && return 0
		dd if=/dev/zero of="$2.$i" bs=4096 2>/dev/null
	done
	echo "fill_fs: $1 still has $(free_bytes "$1") bytes free after 10 tries" >&2
	return 1
}

# memcg_run LIMIT STATS CMD...: runs CMD in a new memory cgroup (v1, a child of this process's
# own) limited to LIMIT bytes (memory and memory+swap); writes to STATS the lines
# "max_usage N", "failcnt N", "oom_kill N" after it ends; CMD's exit status.
memcg_run() {
	local limit=$1 stats=$2 cg rc=0
	shift 2
	cg=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)/coli-test-$$-$RANDOM &&
	mkdir "$cg" || return 125
	echo "$limit" >"$cg/memory.limit_in_bytes" && { echo "$limit" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null || :; } &&
	(echo "$BASHPID" >"$cg/cgroup.procs" && exec "$@") || rc=$?
	{
		echo "max_usage $(cat "$cg/memory.max_usage_in_bytes")"
		echo "failcnt $(cat "$cg/memory.failcnt")"
		echo "oom_kill $(sed -n 's/^oom_kill //p' "$cg/memory.oom_control")"
	} >"$stats"
	rmdir "$cg" 2>/dev/null || { sleep 0.2; rmdir "$cg"; }
	return $rc
}

# fault_need_memcg: skips the test unless a v1 memory cgroup can be made (root, mounted), and
# not under AddressSanitizer (its shadow and quarantine are not the program's memory).
fault_need_memcg() {
	[ "$(id -u)" = 0 ] || fault_skip "not root (makes a memory cgroup)"
	[ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] || fault_skip "no cgroup v1 memory controller"
	! ldd "$BIN/coli-run" 2>/dev/null | grep -q libasan || fault_skip "coli-run built with AddressSanitizer"
}
