#!/usr/bin/env bash
# t0155-convert-info.sh: coli-convert's wording. --info gives each section file one figure (the
# experts line and the total agree on experts.bin; the total is the three files' sum) and says
# "none" for a model without an MTP layer (mtp.bin is then only its header); a SRC_DIR that does
# not exist or is a file is named as such, not as a folder without safetensors.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
SQ="'"

# fig FIELD TEXT: the "123.45 KiB" figure of ./info's line FIELD right after TEXT (a sed pattern).
fig() { sed -n "s/^$1 .*$2\([0-9.]* [KMG]*i*B\).*/\1/p" info; }

test_expect_success 'mixtral (no MTP layer): mtp says none, one experts.bin figure, the total adds up' '
	coli-convert -q "$FIX/mixtral-tiny/checkpoint" m.coli &&
	coli-convert --info m.coli >info && cat info &&
	grep -qx "mtp         none (mtp.bin holds only its 4.00 KiB header)" info &&
	test "$(fig experts "(experts.bin ")" = "$(fig total "experts.bin ")" &&
	test "$(fig experts "(experts.bin ")" = "516.00 KiB" &&
	grep -qx "total       596.00 KiB: dense.bin 76.00 KiB + mtp.bin 4.00 KiB + experts.bin 516.00 KiB" info &&
	grep -q "^dense       76.00 KiB (dense.bin: " info
'
test_expect_success 'deepseek_v3 (an MTP layer): mtp gives mtp.bin, the same figure in the total' '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" d.coli &&
	coli-convert --info d.coli >info && cat info &&
	grep -qx "mtp         140.00 KiB (mtp.bin)" info &&
	grep -qx "total       960.00 KiB: dense.bin 176.00 KiB + mtp.bin 140.00 KiB + experts.bin 644.00 KiB" info &&
	test "$(fig experts "(experts.bin ")" = "644.00 KiB"
'
test_expect_success 'SRC_DIR that does not exist: no such folder (exit 1), nothing created' '
	expect_exit 1 coli-convert nothing out.coli &&
	test "$(cat err)" = "coli-convert: nothing: SRC_DIR: no such folder" &&
	test ! -e out.coli
'
test_expect_success 'SRC_DIR a file: not a folder (exit 2), nothing created' '
	echo x >model.safetensors &&
	expect_exit 2 coli-convert model.safetensors out.coli &&
	test "$(cat err)" = "coli-convert: model.safetensors: SRC_DIR: not a folder (the checkpoint${SQ}s folder: config.json and the safetensors shards)" &&
	test ! -e out.coli
'
test_expect_success '--info and --verify of a folder that does not exist, or of a file' '
	expect_exit 1 coli-convert --info nothing.coli && test "$(cat err)" = "coli-convert: nothing.coli: no such folder" &&
	expect_exit 1 coli-convert --verify nothing.coli && test "$(cat err)" = "coli-convert: nothing.coli: no such folder" &&
	echo x >f.coli &&
	expect_exit 1 coli-convert --info f.coli &&
	test "$(cat err)" = "coli-convert: f.coli: not a folder, so not a coli container (a folder holding manifest.coli)"
'
test_done
