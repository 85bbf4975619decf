#!/usr/bin/env bash
# t0715-plan-mirrors.sh: coli-plan with mirrors on a real loop-device disk: a full and a partial
# mirror staged there, probed with the container's disk, planned (the mirror a knob, its share of
# the reads; a partial one's share within what it holds), run with --plan: the RAM tokens, reads
# on both disks, the store's target shares the plan's.
# Budgets of 0.1161 GiB: 0.1 beside the tables of the models' Qwen3 tokenizer (16.5 MiB), which
# the budget counts.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
fault_need_loop

M=$SCRATCH/m.coli
P="1 2 3 4 5 6 7 8"
j() { tr -d "\n" <"$1" | coli-json "$2"; }

test_expect_success "setup: a model, its usage, a 256 MiB ext4 loop disk with a full and a partial mirror, a probe of both disks" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 4 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 48 --ignore-eos --print-ids --stream --usage "$SCRATCH/u" >/dev/null &&
	loop_fs "$SCRATCH/disk.img" "$SCRATCH/mnt" 256M >/dev/null &&
	mkdir "$SCRATCH/mnt/full" "$SCRATCH/mnt/part" "$SCRATCH/mnt/rr" &&
	coli-plan mirror stage -q "$M" "$SCRATCH/mnt/full" --reserve 0 &&
	coli-plan mirror stage -q "$M" "$SCRATCH/mnt/part" --max 0.004 --usage "$SCRATCH/u" --reserve 0 &&
	coli-plan mirror stage -q "$M" "$SCRATCH/mnt/rr" --max 0.004 --reserve 0 &&
	test -e "$SCRATCH/mnt/part/mirror.coli" && test -e "$SCRATCH/mnt/rr/mirror.coli" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" --disk "$SCRATCH/mnt" \
		-o "$SCRATCH/probe.json"
'

test_expect_success "a full mirror: a knob, both disks in the plan, a share of the reads for each" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 1024 \
		--mirror "$SCRATCH/mnt/full" -o "$SCRATCH/full.json" --explain >out &&
	test "$(j "$SCRATCH/full.json" knobs.mirror.0)" = "$SCRATCH/mnt/full" &&
	test "$(j "$SCRATCH/full.json" machine.disks.1.dir)" = "$SCRATCH/mnt/full" &&
	test "$(j "$SCRATCH/full.json" disks.1.held)" = 1.0 &&
	awk "BEGIN { exit !($(j "$SCRATCH/full.json" disks.1.share) > 0 && $(j "$SCRATCH/full.json" disks.0.share) > 0) }" &&
	grep -q "^mirror: 2 copies read together" out
'

test_expect_success "coli-run --plan with the mirror refuses a planned knob given again" '
	expect_exit 2 coli-run -m "$M" --plan "$SCRATCH/full.json" --cache-slots 4 --prompt-ids "$P" -n 2 &&
	err_has "coli-run: --cache-slots: $SCRATCH/full.json sets it (knobs.cache-slots)"
'

test_expect_success "coli-run --plan with the mirror: the RAM tokens, the mirror among the disks read" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ram &&
	cp "$SCRATCH/u" u0 &&
	coli-run -m "$M" --plan "$SCRATCH/full.json" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --json >out 2>err &&
	cp u0 "$SCRATCH/u" &&
	head -1 out >ids && cmp ram ids &&
	tail -1 out >js && test "$(coli-json stream.disks.1.dir <js)" = "$SCRATCH/mnt/full"
'

test_expect_success "coli-run --plan reads by the plan's shares: its targets are the plan's disks[].share" '
	cp "$SCRATCH/u" u0 &&
	coli-run -m "$M" --plan "$SCRATCH/full.json" --prompt-ids "$P" -n 4 --ignore-eos --print-ids --json >out 2>err &&
	cp u0 "$SCRATCH/u" &&
	tail -1 out >js &&
	for i in 0 1; do
		t=$(coli-json stream.disks.$i.target_share <js) && s=$(j "$SCRATCH/full.json" disks.$i.share) &&
		awk "BEGIN { d = $t - $s; exit !(d < 1e-9 && d > -1e-9 && $s > 0) }" || exit 1
	done
'

test_expect_success "a partial mirror of the hottest records, all pinned: it serves none of the misses" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 1024 \
		--mirror "$SCRATCH/mnt/part" -o "$SCRATCH/part.json" --explain >out &&
	grep -q "^mirror partial: $SCRATCH/mnt/part holds [0-9]* of 256 records, where 0% of the misses fall" out &&
	test "$(j "$SCRATCH/part.json" disks.1.held)" = 0.0
'

test_expect_success "a partial mirror of records by id: a share of the misses within what it holds; the RAM tokens" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 1024 \
		--mirror "$SCRATCH/mnt/rr" -o "$SCRATCH/rr.json" --explain >out &&
	h=$(j "$SCRATCH/rr.json" disks.1.held) &&
	awk "BEGIN { exit !($h > 0 && $h < 1) }" &&
	awk "BEGIN { exit !($(j "$SCRATCH/rr.json" disks.1.share) <= $h) }" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ram &&
	cp "$SCRATCH/u" u0 &&
	coli-run -q -m "$M" --plan "$SCRATCH/rr.json" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ids &&
	cp u0 "$SCRATCH/u" && cmp ram ids
'

test_expect_success "mirror stage --plan: the records the plan pins go last, so a partial mirror serves misses" '
	mkdir "$SCRATCH/mnt/byplan" &&
	coli-plan mirror stage -q "$M" "$SCRATCH/mnt/byplan" --max 0.004 --plan "$SCRATCH/part.json" --reserve 0 &&
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 1024 \
		--mirror "$SCRATCH/mnt/byplan" -o "$SCRATCH/byplan.json" --explain >out &&
	h=$(j "$SCRATCH/byplan.json" disks.1.held) &&
	awk "BEGIN { exit !($h > 0.3) }" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ram &&
	cp "$SCRATCH/u" u0 &&
	coli-run -q -m "$M" --plan "$SCRATCH/byplan.json" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ids &&
	cp u0 "$SCRATCH/u" && cmp ram ids &&
	expect_exit 2 coli-plan mirror stage "$M" "$SCRATCH/mnt/byplan" --plan "$SCRATCH/part.json" --usage "$SCRATCH/u" &&
	err_has "--usage and --plan exclude each other"
'

test_done
