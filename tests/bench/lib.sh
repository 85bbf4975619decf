# lib.sh: what the benchmark scripts share (sourced; $dir set first): progress, cache drops,
# medians, models made once per shape, and fields of coli-run's closing lines.
say() { echo "$*" >&2; }
# need_root SCRIPT WHY: exits 2 with a message unless running as root.
need_root() { [ "$(id -u)" = 0 ] || { echo "$1: needs root ($2); run it as root" >&2; exit 2; }; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || say "warning: cannot drop caches (not root)"; }
# The median of the numbers on stdin ("-" lines skipped; "-" when none).
median() { grep -v '^-$' | sort -g | awk '{v[NR]=$1} END {if (!NR) print "-"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
commit() { git rev-parse --short HEAD 2>/dev/null || echo unknown; }

# model_of NAME SHAPE: the container $dir/NAME.coli of that coli-synth shape, converted with
# the defaults (int4 experts), regenerated only when the shape changes; the source is deleted.
model_of() {
	local name=$1 shape=$2 model=$dir/$1.coli
	if [ "$(cat "$dir/$name.args" 2>/dev/null)" != "$shape" ] || [ ! -e "$model/manifest.coli" ]; then
		say "generating $name: coli-synth $shape, then coli-convert"
		rm -rf "$dir/$name-src" "$model"
		bin/coli-synth $shape --out "$dir/$name-src" -q >&2
		bin/coli-convert -q "$dir/$name-src" "$model"
		rm -rf "$dir/$name-src"
		echo "$shape" >"$dir/$name.args"
	fi
	echo "$model"
}

# The 4 GiB model of bench-run and learn.sh: a qwen3_moe of 12 layers x 128 experts, top-8,
# hidden 2048, expert FFN 768 (2.4 MiB int4 records): the width of DESIGN.md's in-RAM figure.
run_q4_shape="--family qwen3_moe --layers 12 --experts 128 --top-k 8 --hidden 2048 --expert-ffn 768 --heads 32 --kv-heads 4 --head-dim 128 --measure 64 --seed 11"

# Fields of coli-run's closing lines (its stderr text in $1); "-" when absent.
field() { local v; v=$(echo "$1" | sed -n "$2" | head -1); echo "${v:--}"; }
tok_s() { field "$1" 's/.*decode [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s.*/\1/p'; }
rss_of() { field "$1" 's/.*peak RSS \([0-9]*\) MiB.*/\1/p'; }
hit_rate() { field "$1" 's/.*hit rate \([0-9.]*\)%.*/\1/p'; }
mib_tok() { field "$1" 's/.* \([0-9.]*\) MiB read per token.*/\1/p'; }
