# safetensors.sh: shell helpers that read and craft safetensors files for the CLI tests
# (no python on a user's machine). Source it after lib.sh.

# le64 N: N as 8 bytes, little-endian.
le64() {
	local v s
	v=$1 s=
	for _ in 1 2 3 4 5 6 7 8; do
		s=$s$(printf '\\x%02x' $((v & 255)))
		v=$((v >> 8))
	done
	printf "$s"
}

# st_hlen FILE: the header length prefix of a safetensors file.
st_hlen() {
	local n i
	set -- $(od -A n -t u1 -N 8 "$1")
	n=0
	for i in 8 7 6 5 4 3 2 1; do n=$((n * 256 + ${!i})); done
	echo $n
}

# st_header FILE: the header JSON text.
st_header() {
	head -c $((8 + $(st_hlen "$1"))) "$1" | tail -c +9
}

# st_write FILE HEADER NBYTES: a safetensors file of HEADER and NBYTES zero bytes of data.
st_write() {
	{ le64 ${#2}; printf '%s' "$2"; head -c "$3" /dev/zero; } >"$1"
}

# poke FILE OFFSET ESCAPES: writes the printf escapes (e.g. '\xc0\x7f') at OFFSET.
poke() {
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# st_patch FILE OLD NEW: replaces the first OLD in FILE's header by NEW of the same length.
st_patch() {
	local at
	[ ${#2} -eq ${#3} ] || { echo "st_patch: '$2' and '$3' differ in length" >&2; return 1; }
	at=$(st_header "$1" | grep -boF -- "$2" | head -n 1 | cut -d: -f1)
	[ -n "$at" ] || { echo "st_patch: '$2' not in the header of $1" >&2; return 1; }
	printf '%s' "$3" | dd of="$1" bs=1 seek=$((8 + at)) conv=notrunc status=none
}

# st_elem FILE TENSOR INDEX ESIZE: the file offset of element INDEX of TENSOR.
st_elem() {
	local begin
	begin=$(st_header "$1" | grep -o "\"${2//./\\.}\":{[^}]*}" |
		sed 's/.*"data_offsets":\[\([0-9]*\),.*/\1/')
	[ -n "$begin" ] || { echo "st_elem: no tensor '$2' in $1" >&2; return 1; }
	echo $((8 + $(st_hlen "$1") + begin + $3 * $4))
}
