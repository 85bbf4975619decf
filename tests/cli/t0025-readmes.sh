#!/usr/bin/env bash
# t0025-readmes.sh: each folder's README.md is a guide that stays true: it names every .c file
# of its folder (as `x.c`, `x.c/.h` or `x.c`, `x.h`) (the engine's: of each subfolder, by its path under engine/), and tests/README.md
# names every folder of tests/.
. "$(dirname "$0")/lib.sh"

for d in formats convert run plan profile; do
	test_expect_success "$d/README.md names every .c file of $d/" '
		for f in "$TOP"/'"$d"'/*.c; do
			b=$(basename "$f" .c)
			grep -qE "\`$b\.c(/\.h|, \`$b\.h)?\`" "$TOP"/'"$d"'/README.md || { echo "not named: $f" >&2; exit 1; }
		done
	'
done

test_expect_success 'engine/README.md names every .c file of engine/ by its path there' '
	for f in "$TOP"/engine/*/*.c; do
		rel=${f#"$TOP"/engine/}
		grep -qF "\`$rel\`" "$TOP"/engine/README.md || { echo "not named: $rel" >&2; exit 1; }
	done
'

test_expect_success 'tests/README.md names every folder of tests/' '
	for d in "$TOP"/tests/*/; do
		n=$(basename "$d")
		test "$n" = node_modules && continue
		grep -qF "\`$n/\`" "$TOP"/tests/README.md || { echo "not named: tests/$n/" >&2; exit 1; }
	done
'

test_done
