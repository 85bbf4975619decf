#!/usr/bin/env bash
# t0120-convert-verify.sh: `coli-convert --verify` finds one changed byte anywhere in a
# container (expert record, dense or MTP tensor, padding, section header, manifest, carried
# file) and a section file of the wrong size, with exit 1 and a message naming where.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
SQ="'"
REF=$SCRATCH/ref.coli

# ---- helpers --------------------------------------------------------------------------------

# bad_verify STRING...: --verify of ./c fails with exit 1, nothing on stdout, every STRING in
# the message; -q changes nothing but the silence on success.
bad_verify() {
	expect_exit 1 coli-convert --verify c &&
	test ! -s out &&
	err_has "$@" &&
	expect_exit 1 coli-convert -q --verify c &&
	err_has "$@"
}

# byte FILE OFFSET: the byte at OFFSET, as a number.
byte() {
	od -A n -t u1 -j "$2" -N 1 "$1" | tr -d ' '
}

# setbyte FILE OFFSET VALUE: writes one byte.
setbyte() {
	printf "\\x$(printf %02x "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# flip FILE OFFSET: inverts every bit of the byte at OFFSET.
flip() {
	setbyte "$1" "$2" $(($(byte "$1" "$2") ^ 255))
}

# fresh: ./c, a copy of the reference container.
fresh() {
	cp -R "$REF" c
}

# manifest_json DIR: the manifest's JSON text (after the 64-byte binary header).
manifest_json() {
	tail -c +65 "$1/manifest.coli"
}

# tensors DIR: one line "name section offset nbytes" per tensor of the manifest.
tensors() {
	manifest_json "$1" | awk -F': ' '
		/"experts": \[/ { exit }
		/"nbytes":/ { nb = $2 + 0 }
		/"name":/ { nm = $2; gsub(/[",]/, "", nm) }
		/"section":/ { sec = $2; gsub(/[",]/, "", sec) }
		/"offset":/ { off = $2 + 0 }
		/"crc32":/ { print nm, sec, off, nb }'
}

# elayers DIR: one line "layer mtp count offset record_size" per expert layer.
elayers() {
	manifest_json "$1" | sed -n '/"experts": \[/,/"carried": \[/p' | awk -F': ' '
		/"layer":/ { l = $2 + 0 }
		/"mtp":/ { m = $2; gsub(/,/, "", m) }
		/"count":/ { c = $2 + 0 }
		/"offset":/ { o = $2 + 0 }
		/"record_size":/ { print l, m, c, o, $2 + 0 }'
}

# tensor DIR NAME: "section offset nbytes" of one tensor.
tensor() {
	tensors "$1" | awk -v n="$2" '$1 == n { print $2, $3, $4 }'
}

# padding DIR SECTION: the offset of the first byte of SECTION not in its header or a tensor.
padding() {
	tensors "$1" | awk -v s="$2" -v size=$(stat -c %s "$1/$2") '
		$2 == s { t[n++] = $3 " " $4 }
		END {
			at = 4096
			for (i = 0; i < n; i++) {
				split(t[i], a, " ")
				if (a[1] > at) { print at; exit }
				at = a[1] + a[2]
			}
			if (at < size) print at
		}' | head -n 1
}

# ---- the reference --------------------------------------------------------------------------

# deepseek_v3: dense.bin, mtp.bin with tensors, MTP expert records in experts.bin.
test_expect_success 'setup: a container with dense, MTP and expert sections' '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" "$REF" &&
	tensors "$REF" >t &&
	test $(wc -l <t) -eq 77 &&
	grep -q " mtp.bin " t &&
	elayers "$REF" >x &&
	test $(wc -l <x) -eq 4 &&
	grep -q "^4 true 16 " x
'

test_expect_success 'an intact container verifies' '
	cp -R "$REF" c &&
	coli-convert --verify c >out 2>err &&
	test ! -s err &&
	grep -E "^c: ok: 77 tensors, 64 expert records, 2 carried files, [0-9.]+ (B|KiB|MiB|GiB) verified$" out &&
	test $(wc -l <out) -eq 1 &&
	coli-convert -q --verify c >out 2>err &&
	test ! -s out && test ! -s err
'

# ---- expert records -------------------------------------------------------------------------

test_expect_success 'flipped byte at offset 4096 of experts.bin: the first record' '
	fresh &&
	set -- $(elayers c | head -n 1) &&
	test $4 -eq 4096 &&
	flip c/experts.bin 4096 &&
	bad_verify "c/experts.bin: expert record [layer $1][expert 0] at offset 4096 ($5 bytes): crc32 0x" ", expected 0x"
'

test_expect_success 'flipped byte inside a record in the middle of experts.bin' '
	fresh &&
	set -- $(elayers c | sed -n 2p) &&
	at=$(($4 + 5 * $5)) &&
	flip c/experts.bin $((at + 1000)) &&
	bad_verify "c/experts.bin: expert record [layer $1][expert 5] at offset $at ($5 bytes): crc32 0x"
'

test_expect_success 'flipped last byte of a record (its zero tail) belongs to the record' '
	fresh &&
	set -- $(elayers c | sed -n 1p) &&
	at=$(($4 + 9 * $5)) &&
	flip c/experts.bin $((at + $5 - 1)) &&
	bad_verify "c/experts.bin: expert record [layer $1][expert 9] at offset $at ($5 bytes)"
'

test_expect_success 'flipped byte in an MTP expert record' '
	fresh &&
	set -- $(elayers c | grep " true ") &&
	at=$(($4 + 15 * $5)) &&
	flip c/experts.bin $((at + 7)) &&
	bad_verify "c/experts.bin: expert record [layer $1][expert 15] at offset $at ($5 bytes)"
'

# ---- dense and MTP tensors ------------------------------------------------------------------

test_expect_success 'flipped byte in a dense tensor names the tensor' '
	fresh &&
	T=model.layers.1.self_attn.kv_b_proj.weight &&
	set -- $(tensor c $T) &&
	test $1 = dense.bin &&
	flip c/dense.bin $(($2 + $3 / 2)) &&
	bad_verify "c/dense.bin: tensor ${SQ}$T${SQ} at offset $2 ($3 bytes): crc32 0x" ", expected 0x"
'

test_expect_success 'flipped last byte of a q4 tensor (its scales) names the tensor' '
	fresh &&
	T=lm_head.weight &&
	set -- $(tensor c $T) &&
	flip c/dense.bin $(($2 + $3 - 1)) &&
	bad_verify "c/dense.bin: tensor ${SQ}$T${SQ} at offset $2 ($3 bytes)"
'

test_expect_success 'flipped byte in an f32 tensor (a norm)' '
	fresh &&
	T=model.norm.weight &&
	set -- $(tensor c $T) &&
	flip c/dense.bin $(($2 + 5)) &&
	bad_verify "c/dense.bin: tensor ${SQ}$T${SQ} at offset $2 ($3 bytes)"
'

test_expect_success 'flipped byte in mtp.bin names the MTP tensor' '
	fresh &&
	T=model.layers.4.eh_proj.weight &&
	set -- $(tensor c $T) &&
	test $1 = mtp.bin &&
	flip c/mtp.bin $(($2 + 100)) &&
	bad_verify "c/mtp.bin: tensor ${SQ}$T${SQ} at offset $2 ($3 bytes)"
'

# ---- padding --------------------------------------------------------------------------------

test_expect_success 'a non-zero padding byte in dense.bin and in mtp.bin' '
	for s in dense.bin mtp.bin; do
		rm -rf c && fresh &&
		at=$(padding c $s) &&
		test -n "$at" &&
		test "$(byte c/$s $at)" -eq 0 &&
		setbyte c/$s $at 1 &&
		bad_verify "c/$s: padding byte at offset $at is 0x01, must be 0" || return 1
	done
'

test_expect_success 'a non-zero last byte of dense.bin (padding up to 4096)' '
	fresh &&
	size=$(stat -c %s c/dense.bin) &&
	last=$(tensors c | awk "\$2 == \"dense.bin\" && \$3 + \$4 > e { e = \$3 + \$4 } END { print e }") &&
	test $last -lt $size &&
	setbyte c/dense.bin $((size - 1)) 128 &&
	bad_verify "c/dense.bin: padding byte at offset $((size - 1)) is 0x80, must be 0"
'

test_expect_success 'the last byte of experts.bin belongs to the last record' '
	fresh &&
	size=$(stat -c %s c/experts.bin) &&
	set -- $(elayers c | tail -n 1) &&
	test $(($4 + $3 * $5)) -eq $size &&
	flip c/experts.bin $((size - 1)) &&
	bad_verify "c/experts.bin: expert record [layer $1][expert $(($3 - 1))]"
'

# ---- section headers ------------------------------------------------------------------------

test_expect_success 'a section header: reserved byte, magic, kind, identity' '
	fresh &&
	setbyte c/experts.bin 100 1 &&
	bad_verify "c/experts.bin: section header crc32 0x" &&
	rm -rf c && fresh &&
	flip c/dense.bin 1 &&
	bad_verify "c/dense.bin: bad binary format (magic)" &&
	rm -rf c && fresh &&
	{ head -c 4096 c/dense.bin && tail -c +4097 c/mtp.bin; } >mtp &&
	mv mtp c/mtp.bin &&
	bad_verify "c/mtp.bin: section kind 1, expected 2"
'

test_expect_success 'a section file of another container (same size, other identity)' '
	coli-convert -q --dense-bits 8 "$FIX/deepseek_v3-tiny/checkpoint" other &&
	fresh &&
	test $(stat -c %s other/experts.bin) -eq $(stat -c %s c/experts.bin) &&
	cp other/experts.bin c/experts.bin &&
	bad_verify "c/experts.bin: identity differs from the manifest${SQ}s (a file of another container)"
'

# ---- section sizes --------------------------------------------------------------------------

test_expect_success 'a truncated experts.bin fails at open, naming the sizes' '
	fresh &&
	size=$(stat -c %s c/experts.bin) &&
	truncate -s -4096 c/experts.bin &&
	bad_verify "c/experts.bin: size $((size - 4096)), manifest says $size" &&
	expect_exit 1 coli-convert --info c &&
	err_has "c/experts.bin: size $((size - 4096)), manifest says $size"
'

test_expect_success 'a grown dense.bin, a missing mtp.bin' '
	fresh &&
	size=$(stat -c %s c/dense.bin) &&
	printf x >>c/dense.bin &&
	bad_verify "c/dense.bin: size $((size + 1)), manifest says $size" &&
	rm -rf c && fresh &&
	rm c/mtp.bin &&
	bad_verify "c/mtp.bin: No such file or directory"
'

# ---- the manifest ---------------------------------------------------------------------------

test_expect_success 'a flipped byte in the manifest header' '
	fresh &&
	flip c/manifest.coli 20 &&
	bad_verify "c/manifest.coli: header crc32 0x" ", stored 0x" &&
	rm -rf c && fresh &&
	flip c/manifest.coli 0 &&
	bad_verify "c/manifest.coli: bad binary format (magic"
'

test_expect_success 'a flipped byte in the manifest JSON' '
	fresh &&
	at=$((64 + $(manifest_json c | grep -b -o "\"record_size\"" | head -n 1 | cut -d: -f1) + 3)) &&
	flip c/manifest.coli $at &&
	bad_verify "c/manifest.coli: manifest crc32 0x" ", stored 0x"
'

test_expect_success 'a manifest cut short' '
	fresh &&
	size=$(stat -c %s c/manifest.coli) &&
	truncate -s -1 c/manifest.coli &&
	bad_verify "c/manifest.coli: manifest length $((size - 64)) does not match file size $((size - 1))" &&
	truncate -s 40 c/manifest.coli &&
	bad_verify "c/manifest.coli: 40 bytes, shorter than the 64-byte header" &&
	rm c/manifest.coli &&
	bad_verify "c/manifest.coli: No such file or directory"
'

# ---- carried files --------------------------------------------------------------------------

test_expect_success 'a carried file changed in place (same size)' '
	fresh &&
	size=$(stat -c %s c/config.json) &&
	at=$(grep -b -o "\"hidden_size\": [0-9]" c/config.json | head -n 1 | cut -d: -f1) &&
	setbyte c/config.json $((at + 15)) 57 &&
	test $(stat -c %s c/config.json) -eq $size &&
	! cmp -s c/config.json "$REF/config.json" &&
	bad_verify "c/config.json: crc32 0x" ", manifest says 0x" "(changed since conversion)"
'

test_expect_success 'a carried file grown or missing' '
	fresh &&
	size=$(stat -c %s c/generation_config.json) &&
	echo >>c/generation_config.json &&
	bad_verify "c/generation_config.json: size $((size + 1)), manifest says $size" &&
	rm c/generation_config.json &&
	bad_verify "c/generation_config.json: No such file or directory"
'

test_expect_success 'a folder that is not a container' '
	mkdir c &&
	bad_verify "c/manifest.coli: No such file or directory" &&
	expect_exit 1 coli-convert --verify no-such.coli &&
	err_has "coli-convert: no-such.coli: no such folder"
'

test_done
