#!/usr/bin/env bash
# t0650-run-eio.sh: real I/O errors from a file system (tests/fault/eiofs.c, FUSE) under
# coli-run. The only copy failing: exit 1 naming the expert record and the file, the --usage and
# --session files untouched; a failing copy beside a good one: failover, reported, the RAM tokens.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_fuse

F=$FIX/qwen3_moe-tiny
SRC=$SCRATCH/src
MNT=$SCRATCH/mnt
GOOD=$SCRATCH/good.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
run() { coli-run -q --prompt-ids "$P" -n 16 --ignore-eos --print-ids "$@"; }

# qwen3_moe-tiny: 4 MoE layers x 32 experts, records of 8 KiB after experts.bin's 4096-byte header.
RS=8192
L0=$((32 * RS))
# The lowest expert of layer 0's union over the prompt: the first get of the prefill.
first_expert() {
	coli-run -q -m "$GOOD" --prompt-ids "$P" --teacher-force --dump-routing r.bin &&
	od -An -t d4 -v -N $(($(echo "$P" | wc -w) * 8 * 4)) r.bin | tr -s ' \n' '\n' | grep . | sort -n | head -1
}

test_expect_success "setup: a container, a good copy, RAM tokens, a usage and a session file" '
	mkdir -p "$SRC" &&
	coli-convert -q "$F/checkpoint" "$GOOD" &&
	test $(($(wc -c <"$GOOD/experts.bin") - 4096)) = $((4 * L0)) &&
	for d in layer0 all late cut; do cp -r "$GOOD" "$SRC/$d.coli" || exit 1; done &&
	run -m "$GOOD" >"$SCRATCH/ram" &&
	coli-run -q -m "$GOOD" --prompt-ids "$P" -n 4 --usage "$SCRATCH/u" --session "$SCRATCH/s" >/dev/null &&
	cp "$SCRATCH/u" "$SCRATCH/u.before" && cp "$SCRATCH/s" "$SCRATCH/s.before"
'

# layer0.coli: every read overlapping layer 0's records fails; all.coli: every record's;
# late.coli: every record's after the first 200 reads (the prompt needs about 100), as a disk failing mid-run;
# cut.coli: experts.bin's data ends 100 bytes into layer 1's first record (its size unchanged).
eiofs_mount "$SRC" "$MNT" --eio "layer0.coli/experts.bin:4096:$L0" --eio "all.coli/experts.bin:4096:$((4 * L0))" \
	--eio "late.coli/experts.bin:4096:$((4 * L0)):200" --cut "cut.coli/experts.bin:$((4196 + L0))" --log "$SCRATCH/eio.log" || { echo "FAIL eiofs mount"; exit 1; }

test_expect_success "eiofs passes the good bytes through" '
	cmp "$MNT/layer0.coli/manifest.coli" "$GOOD/manifest.coli" &&
	cmp "$MNT/layer0.coli/dense.bin" "$GOOD/dense.bin" &&
	test_must_fail dd if="$MNT/layer0.coli/experts.bin" of=/dev/null bs=4096 skip=1 count=1 2>err &&
	grep -q "Input/output error" err &&
	dd if="$MNT/layer0.coli/experts.bin" of=/dev/null bs=4096 skip=$((1 + L0 / 4096)) 2>/dev/null
'

for io in threads uring; do
	test_expect_success "streaming, the only copy fails (--io $io): exit 1 naming the record and the file" '
		x=$(first_expert) && : >"$SCRATCH/eio.log" &&
		expect_exit 1 coli-run -q -m "$MNT/layer0.coli" --stream --io $io --prompt-ids "$P" -n 4 --print-ids &&
		err_has "coli-run: $MNT/layer0.coli/experts.bin: expert record [layer 0][expert $x] at offset $((4096 + x * RS)): read at offset " \
			": Input/output error" &&
		test "$(wc -l <err)" = 1 &&
		grep -q "^eio layer0.coli/experts.bin " "$SCRATCH/eio.log"
	'
done

test_expect_success "streaming, the only copy fails: --usage and --session files byte-identical" '
	expect_exit 1 coli-run -q -m "$MNT/layer0.coli" --stream --prompt-ids "$P" -n 4 \
		--usage "$SCRATCH/u" --session "$SCRATCH/s" &&
	err_has "$MNT/layer0.coli/experts.bin: expert record [layer 0][expert " ": Input/output error" &&
	cmp "$SCRATCH/u" "$SCRATCH/u.before" && cmp "$SCRATCH/s" "$SCRATCH/s.before" &&
	expect_exit 1 coli-run -q -m "$MNT/layer0.coli" --ram 0.1 --prompt-ids "$P" -n 4 \
		--usage "$SCRATCH/u" --session "$SCRATCH/s" &&
	cmp "$SCRATCH/u" "$SCRATCH/u.before" && cmp "$SCRATCH/s" "$SCRATCH/s.before" &&
	! ls "$SCRATCH" | grep -q tmp
'

test_expect_success "the only copy fails while decoding: exit 1 naming a record, files untouched" '
	: >"$SCRATCH/eio.log" &&
	expect_exit 1 coli-run -m "$MNT/late.coli" --cache-slots 1 --prompt-ids "$P" -n 16 --ignore-eos \
		--usage "$SCRATCH/u" --session "$SCRATCH/s" --pins 0 &&
	grep -q "^coli-run: $MNT/late.coli/experts.bin: expert record \[layer [0-3]\]\[expert [0-9]*\] at offset [0-9]*: read at offset [0-9]*: Input/output error\$" err &&
	test "$(grep -c "^eio late.coli/experts.bin " "$SCRATCH/eio.log")" -ge 1 &&
	cmp "$SCRATCH/u" "$SCRATCH/u.before" && cmp "$SCRATCH/s" "$SCRATCH/s.before"
'

test_expect_success "RAM store: the read at open fails, exit 1 naming record [layer 0][expert 0]; files untouched" '
	expect_exit 1 coli-run -q -m "$MNT/layer0.coli" --prompt-ids "$P" -n 4 --usage "$SCRATCH/u" --session "$SCRATCH/s" &&
	err_has "coli-run: $MNT/layer0.coli/experts.bin: expert record [layer 0][expert 0] at offset 4096: read at offset 4096: Input/output error" &&
	cmp "$SCRATCH/u" "$SCRATCH/u.before" && cmp "$SCRATCH/s" "$SCRATCH/s.before" &&
	expect_exit 1 coli-run -q -m "$MNT/all.coli" --prompt-ids "$P" -n 4 &&
	err_has "all.coli/experts.bin: expert record [layer 0][expert 0] at offset 4096:"
'

test_expect_success "data ending before the file does: the short read named, with the bytes missing" '
	expect_exit 1 coli-run -q -m "$MNT/cut.coli" --prompt-ids "$P" -n 4 &&
	err_has "coli-run: $MNT/cut.coli/experts.bin: expert record [layer 1][expert 0] at offset $((4096 + L0)): short read: end of file at offset $((4196 + L0)), 8092 bytes missing" &&
	expect_exit 1 coli-run -q -m "$MNT/cut.coli" --stream --prompt-ids "$P" -n 4 &&
	grep -q "^coli-run: $MNT/cut.coli/experts.bin: expert record \[layer 1\]\[expert [0-9]*\] at offset [0-9]*: short read: end of file at offset [0-9]*, [0-9]* bytes missing\$" err &&
	run -m "$MNT/cut.coli" --mirror "$GOOD" --cache-slots 1 >a 2>err && cmp "$SCRATCH/ram" a &&
	grep -q "short read: end of file at offset [0-9]*, [0-9]* bytes missing; reading it from the copy in $GOOD\$" err
'

test_expect_success "the model copy fails, a good mirror: the RAM tokens, each failover reported" '
	x=$(first_expert) &&
	for io in threads uring; do
		coli-run -m "$MNT/layer0.coli" --mirror "$GOOD" --io $io --prompt-ids "$P" -n 16 --ignore-eos \
			--print-ids --cache-slots 1 >out 2>err &&
		cmp "$SCRATCH/ram" out &&
		grep -qF "coli-run: $MNT/layer0.coli/experts.bin: expert record [layer 0][expert $x] at offset $((4096 + x * RS)): read at offset $((4096 + x * RS)): Input/output error; reading it from the copy in $GOOD" err &&
		n=$(grep -c "Input/output error; reading it from the copy in $GOOD\$" err) &&
		grep -q "^coli-run: disk $MNT/layer0.coli (.*, $n failed reads in the run\$" err || exit 1
	done
'

# A read of several neighbours that fails is read again record by record (each EIO of one
# record's size is a failed read, named and counted); the rest of eiofs's EIOs are such reads.
test_expect_success "a failing mirror beside the good model: the RAM tokens, failovers in --json and on stderr" '
	: >"$SCRATCH/eio.log" &&
	coli-run -m "$GOOD" --mirror "$MNT/all.coli" --prompt-ids "$P" -n 16 --ignore-eos --print-ids \
		--cache-slots 1 --json >out 2>err &&
	head -n 1 out >ids && cmp "$SCRATCH/ram" ids &&
	n=$(coli-json stream.disks.1.failed_reads <out) &&
	test "$(coli-json stream.disks.1.dir <out)" = "$MNT/all.coli" &&
	test "$(coli-json stream.disks.0.failed_reads <out)" = 0 &&
	test "$n" -gt 0 &&
	test "$(grep -c "^coli-run: $MNT/all.coli/experts.bin: expert record \[layer [0-3]\]\[expert [0-9]*\] at offset [0-9]*: read at offset [0-9]*: Input/output error; reading it from the copy in $GOOD\$" err)" = "$n" &&
	test "$(grep -c "^eio all.coli/experts.bin [0-9]* $RS\$" "$SCRATCH/eio.log")" = "$n" &&
	! grep "^eio all.coli/experts.bin " "$SCRATCH/eio.log" | awk -v rs=$RS "\$4 % rs" | grep . &&
	grep "^eio all.coli/experts.bin " "$SCRATCH/eio.log" | awk -v rs=$RS "\$4 > rs" | grep -q .
'

test_expect_success "a failing mirror: the session and usage saved as with the good copy alone" '
	cp "$SCRATCH/u.before" u1 && cp "$SCRATCH/s.before" s1 && cp "$SCRATCH/u.before" u2 && cp "$SCRATCH/s.before" s2 &&
	run -m "$GOOD" --usage u1 --session s1 >a &&
	run -m "$GOOD" --mirror "$MNT/all.coli" --cache-slots 1 --usage u2 --session s2 >b 2>/dev/null &&
	cmp a b && cmp u1 u2 && cmp s1 s2
'

test_expect_success "every copy fails: exit 1 naming the record, no file touched" '
	expect_exit 1 coli-run -q -m "$MNT/layer0.coli" --mirror "$MNT/all.coli" --prompt-ids "$P" -n 4 \
		--usage "$SCRATCH/u" --session "$SCRATCH/s" &&
	err_has "expert record [layer 0][expert " "none of its 2 copies" &&
	cmp "$SCRATCH/u" "$SCRATCH/u.before" && cmp "$SCRATCH/s" "$SCRATCH/s.before"
'

test_done
