#!/usr/bin/env bash
# t0700-plan-probe.sh: coli-plan probe on a folder of the real disk and on a small loop device:
# the JSON fields against what the system says, the per-device cache (reused, --force, another
# record size, another device after a loop device is set up again), refusals (another machine's probe, a missing
# folder, tmpfs, ramfs without O_DIRECT, too little free space, bad options), the memory cgroup
# limit of a real v1 cgroup. Measurements are shrunk (16 MiB scratch file, 0.02 s each).
. "$(dirname "$0")/lib.sh"

Q="--weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4"
probe() { coli-plan probe $Q "$@"; }
j() { coli-json "$@" <out; }

LOOP= LOOP2= CG=
cleanup() {
	for m in "$SCRATCH"/mnt/*; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
	[ -z "$LOOP" ] || losetup -d "$LOOP" 2>/dev/null
	[ -z "$LOOP2" ] || losetup -d "$LOOP2" 2>/dev/null
	[ -z "$CG" ] || { rmdir "$CG/child" "$CG" 2>/dev/null; }
	[ -n "${COLI_TEST_KEEP:-}" ] || rm -rf "$SCRATCH"
}
trap cleanup EXIT
mkdir -p "$SCRATCH/real" "$SCRATCH/mnt/loop" "$SCRATCH/mnt/tmpfs" "$SCRATCH/mnt/ramfs"
REAL=$(cd "$SCRATCH/real" && pwd -P)

test_expect_success "a folder on the real disk: device, filesystem and the measurements in probe.json" '
	probe -q --disk "$REAL" -o p.json --json >out &&
	test "$(j format)" = coli-probe && test "$(j version)" = 1 &&
	test "$(j disks.0.dir)" = "$REAL" &&
	test "$(j disks.0.major):$(j disks.0.minor)" = "$(stat -c "%Hd:%Ld" "$REAL")" -o "$(j disks.0.dev)" != none &&
	test "$(j disks.0.fs)" = "$(findmnt -n -o FSTYPE --target "$REAL")" &&
	test "$(j disks.0.record_bytes)" = 2510848.0 && test "$(j disks.0.file_bytes)" = 16777216.0 &&
	test "$(j disks.0.qd)" = "[1,4]" &&
	awk -v a="$(j disks.0.direct_bps.0)" -v b="$(j disks.0.direct_bps.1)" -v c="$(j disks.0.buffered_bps)" \
		-v l="$(j disks.0.latency_s)" -v u="$(j disks.0.burst_bps)" \
		"BEGIN { exit !(a > 0 && b > 0 && c > 0 && u > 0 && l > 0 && l < 1) }" &&
	test -z "$(ls -A "$REAL")" && test ! -e p.json.tmp
'
test_expect_success "the CPU and memory facts are the system's" '
	probe -q -o p.json --json >out &&
	test "$(j cpu_model)" = "$(grep -m1 "^model name" /proc/cpuinfo | sed "s/^[^:]*: *//")" &&
	test "$(j ram_total)" = "$(awk "/^MemTotal:/ { printf \"%.0f.0\", \$2 * 1024 }" /proc/meminfo)" &&
	test "$(j logical_cpus)" = "$(nproc)" &&
	case "$(j kernels)" in scalar|avx2|avx512|amx) ;; *) exit 1 ;; esac &&
	for f in mem_bps_1 mem_bps_all int4_bps_1 int4_bps_all int8_bps_1 int8_bps_all int4_prefill_bps_all attn_fma_per_s; do
		awk -v v="$(j $f)" "BEGIN { exit !(v > 1e6) }" || { echo "$f: $(j $f)" >&2; exit 1; }
	done &&
	if ls /dev/nvidia[0-9]* /dev/dri/renderD* /dev/kfd >/dev/null 2>&1; then test "$(j gpus)" != "none found";
	else test "$(j gpus)" = "none found"; fi &&
	test "$(j disks)" = "[]"
'
test_expect_success "the summary on stdout, one line per part" '
	probe --disk "$REAL" -o p.json --force >out 2>err &&
	grep -q "^cpu      .*: [0-9]* physical cores, [0-9]* logical CPUs$" out &&
	grep -q "^kernels  .*: decode int4 [0-9.]* / [0-9.]* GB/s" out &&
	grep -q "^attention core: [0-9.]* G multiply-adds/s (1 thread)$" out &&
	grep -q "^ram      .* total, .* available; memory cgroup limit " out &&
	grep -q "^gpus     " out &&
	grep -q "^disk     $REAL: .* qd 1 [0-9]* MB/s, qd 4 [0-9]* MB/s; bursts of 4 after idle time [0-9]* MB/s; buffered [0-9]* MB/s; 4 KiB read [0-9]* us$" out &&
	test ! -s err
'

if ! command -v losetup >/dev/null || ! truncate -s 64M "$SCRATCH/a.img" || ! mkfs.ext4 -q -F "$SCRATCH/a.img" ||
	! LOOP=$(losetup -f --show "$SCRATCH/a.img" 2>/dev/null); then
	echo "SKIP the loop-device tests (losetup, mkfs.ext4 or a free loop device unavailable)"
	LOOP=
else
	mount "$LOOP" "$SCRATCH/mnt/loop"
	L=$SCRATCH/mnt/loop
	test_expect_success "a loop device: its name, MAJ:MIN, ext4 and its backing file as identity" '
		probe -q --disk "$L" --disk "$REAL" -o p.json --json >out &&
		test "$(j disks.0.dev)" = "$(basename "$LOOP")" &&
		test "$(j disks.0.major):$(j disks.0.minor)" = "$(lsblk -n -d -o MAJ:MIN "$LOOP" | tr -d " ")" &&
		test "$(j disks.0.fs)" = ext4 &&
		j disks.0.identity | grep -qF "backing_file=$SCRATCH/a.img" &&
		test "$(j disks.1.dir)" = "$REAL" && test -z "$(ls -A "$L" | grep -v lost+found)"
	'
	test_expect_success "a second run reuses the CPU part and each disk; --force measures again" '
		probe --disk "$L" --disk "$REAL" -o p.json --json >out 2>err &&
		mv out first && probe --disk "$L" --disk "$REAL" -o p.json --json >out 2>err &&
		err_has "reused from p.json: the CPU measurements" "reused from p.json: $L on $(basename "$LOOP")" \
			"reused from p.json: $REAL on" &&
		test "$(j disks.0.direct_bps)" = "$(coli-json disks.0.direct_bps <first)" &&
		test "$(j cpu_taken)" = "$(coli-json cpu_taken <first)" &&
		probe --disk "$L" -o p.json --force --json >out 2>err &&
		! grep -q reused err &&
		test "$(j disks.0.direct_bps)" != "$(coli-json disks.0.direct_bps <first)" &&
		! coli-json disks.1 <out >/dev/null 2>&1
	'
	test_expect_success "a probe of revision 1.0 (no attention core, no burst figure) is measured again" '
		probe -q --disk "$L" -o p.json &&
		python3 -c "import json,sys; p=json.load(open(sys.argv[1])); del p[\"attn_fma_per_s\"]; del p[\"disks\"][0][\"burst_bps\"]; json.dump(p, open(sys.argv[1], \"w\"))" p.json &&
		probe --disk "$L" -o p.json --json >out 2>err &&
		! grep -q reused err &&
		awk -v a="$(j attn_fma_per_s)" -v b="$(j disks.0.burst_bps)" "BEGIN { exit !(a > 0 && b > 0) }"
	'
	test_expect_success "another record size is measured again; two folders on one device measured once" '
		probe --disk "$L" -o p.json >/dev/null 2>&1 &&
		probe --disk "$L" -o p.json --record-bytes 1048576 --json >out 2>err &&
		! grep -q "reused from p.json: $L" err && test "$(j disks.0.record_bytes)" = 1048576.0 &&
		mkdir -p "$L/sub" &&
		probe --disk "$L" --disk "$L/sub" -o q.json --json >out 2>err &&
		err_has "$L/sub is on $(basename "$LOOP"), like $L: its measurement serves both" &&
		test "$(j disks.0.direct_bps)" = "$(j disks.1.direct_bps)"
	'
	test_expect_success "another device (the loop device set up again on another file) is measured again" '
		probe -q --disk "$L" -o p.json && umount "$L" && losetup -d "$LOOP" &&
		truncate -s 64M "$SCRATCH/b.img" && mkfs.ext4 -q -F "$SCRATCH/b.img" &&
		LOOP=$(losetup -f --show "$SCRATCH/b.img") && mount "$LOOP" "$L" &&
		probe --disk "$L" -o p.json --json >out 2>err &&
		! grep -q "reused from p.json: $L" err &&
		err_has "coli-plan probe: $L is on $(basename "$LOOP") " "backing_file=$SCRATCH/b.img) now, p.json measured " \
			"backing_file=$SCRATCH/a.img) there: measured again" &&
		j disks.0.identity | grep -qF "backing_file=$SCRATCH/b.img"
	'
	LOOP=$(losetup -j "$SCRATCH/b.img" | cut -d: -f1)
	test_expect_success "too little free space: refused naming the folder and the space needed, exit 1" '
		probe -q -o p.json && cp p.json before &&
		expect_exit 1 probe --disk "$L" -o p.json --disk-mib 128 &&
		err_has "coli-plan probe: --disk $L: " "MiB free; the probe needs 128.0 MiB for its scratch file" &&
		cmp before p.json && test -z "$(ls -A "$L" | grep -v lost+found)"
	'
fi

test_expect_success "a probe edited to another cpu_model is refused (exit 1) until --force replaces it" '
	probe -q -o p.json &&
	sed "s/\"cpu_model\": \"[^\"]*\"/\"cpu_model\": \"Other CPU 9000\"/" p.json >o.json &&
	expect_exit 1 probe -o o.json &&
	err_has "o.json: cpu_model '"'"'Other CPU 9000'"'"' is not this machine'"'"'s '"'"'" "--force measures anew" &&
	grep -q "Other CPU 9000" o.json &&
	probe -q -o o.json --force && ! grep -q "Other CPU 9000" o.json
'
test_expect_success "a malformed probe file is refused naming the field, exit 1" '
	probe -q -o p.json &&
	sed "s/\"physical_cores\": [0-9]*/\"physical_cores\": 0/" p.json >bad.json &&
	expect_exit 1 probe -o bad.json && err_has "bad.json: physical_cores: 0 out of range [1, 65536]" &&
	echo "{" >broken.json && expect_exit 1 probe -o broken.json && err_has "broken.json: line " &&
	probe -q -o broken.json --force && grep -q coli-probe broken.json
'
test_expect_success "a missing folder: exit 1 naming it, no probe file written" '
	expect_exit 1 probe --disk "$SCRATCH/nonexistent" -o m.json &&
	err_has "coli-plan probe: --disk: $SCRATCH/nonexistent: No such file or directory" && test ! -e m.json
'
test_expect_success "tmpfs: refused as memory, not a disk (exit 1)" '
	mount -t tmpfs -o size=64m tmpfs "$SCRATCH/mnt/tmpfs" &&
	expect_exit 1 probe --disk "$SCRATCH/mnt/tmpfs" -o m.json &&
	err_has "--disk $SCRATCH/mnt/tmpfs: on tmpfs, which is memory, not a disk" && test ! -e m.json
'
test_expect_success "ramfs, which refuses O_DIRECT: a clear message (exit 1)" '
	mount -t ramfs ramfs "$SCRATCH/mnt/ramfs" &&
	expect_exit 1 probe --disk "$SCRATCH/mnt/ramfs" -o m.json &&
	err_has "--disk $SCRATCH/mnt/ramfs: the filesystem (ramfs) refuses O_DIRECT" &&
	test -z "$(ls -A "$SCRATCH/mnt/ramfs")"
'
test_expect_success "bad options: exit 2 with the problem" '
	expect_exit 2 coli-plan probe --qd 4,1 && err_has "--qd: '"'"'4,1'"'"' is not ascending" &&
	expect_exit 2 coli-plan probe --qd 1,100 && err_has "--qd: '"'"'100'"'"'" &&
	expect_exit 2 coli-plan probe --record-bytes 5000 && err_has "--record-bytes: 5000 is not a multiple of 4096" &&
	expect_exit 2 coli-plan probe --disk-mib 4 && err_has "--disk-mib: 4 MiB hold 1 records" &&
	expect_exit 2 coli-plan probe extra && err_has "takes no operands" &&
	expect_exit 2 coli-plan probe --disk "$REAL" --disk "$REAL/." && err_has "given twice"
'

CGM=/sys/fs/cgroup/memory
if [ -w "$CGM" ] && [ -f "$CGM/cgroup.procs" ]; then
	CG=$CGM/coli-t0700-$$
	test_expect_success "the memory cgroup limit (v1), also set on an ancestor only" '
		mkdir "$CG" "$CG/child" && echo 3G >"$CG/memory.limit_in_bytes" &&
		sh -c "echo \$\$ >$CG/cgroup.procs && exec coli-plan probe $Q -q -o c.json --json" >out &&
		test "$(j cgroup_limit)" = 3221225472.0 &&
		sh -c "echo \$\$ >$CG/child/cgroup.procs && exec coli-plan probe $Q -o c.json" >out 2>&1 &&
		grep -q "memory cgroup limit 3.0 GiB" out
	'
else
	echo "SKIP the memory cgroup test ($CGM is not a writable cgroup v1 hierarchy)"
fi

test_done
