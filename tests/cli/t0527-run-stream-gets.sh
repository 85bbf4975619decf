#!/usr/bin/env bash
# t0527-run-stream-gets.sh: the streaming store counts every expert lookup once: in --json,
# hits + misses = decode tokens x MoE layers x top_k, with prediction on or off, on both I/O
# backends, with a mirror; the trace's outcomes and coli-profile's hit rate are the same figures.
. "$(dirname "$0")/lib.sh"

# family, MoE layers (not the MTP layer), top_k of each fixture
FAMS="qwen3_moe:4:4 deepseek_v3:3:4 mixtral:4:2"
j() { coli-json "$@" <json; }

for f in $FAMS; do
	fam=${f%%:*} moe=$(echo "$f" | cut -d: -f2) k=${f##*:}
	M=$SCRATCH/$fam.coli
	test_expect_success "$fam: convert the fixture" '
		coli-convert -q "$FIX/$fam-tiny/checkpoint" "$M" && cp -r "$M" "$SCRATCH/$fam-m1.coli"
	'
	for opts in "--prefetch on --io threads" "--prefetch on --io uring" "--prefetch off" \
		"--prefetch on --mirror $SCRATCH/$fam-m1.coli"; do
		label=${opts%% --mirror *}
		[ "$label" = "$opts" ] || label="$label --mirror"
		for slots in 1 3; do
			test_expect_success "$fam, $slots slot(s), $label: hits + misses = tokens x $moe layers x top-$k" '
				coli-run -q -m "$M" --prompt-ids "1 2 3" -n 24 --ignore-eos --cache-slots $slots $opts --json \
					>out && tail -n 1 out >json &&
				gets=$(( $(j stream.hits) + $(j stream.misses) )) &&
				echo "hits $(j stream.hits) misses $(j stream.misses) tokens $(j decode.tokens)" &&
				test "$gets" = $(( $(j decode.tokens) * moe * k ))
			'
		done
	done
done

# The trace: one outcome per get (PREDICT_WASTED is none), coli-profile's hit rate = coli-run's.
M=$SCRATCH/qwen3_moe.coli
test_expect_success "qwen3_moe, predicting: coli-profile reads the hit rate coli-run reports from the trace" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 24 --ignore-eos --cache-slots 3 --prefetch on --json \
		--trace t.coli_trace >out && tail -n 1 out >json &&
	test $(( $(j stream.hits) + $(j stream.misses) )) = $(( 23 * 16 )) &&
	coli-profile report t.coli_trace --json -o rep >pj &&
	run=$(j stream.hit_rate) && prof=$(coli-json phases.decode.hit_rate <pj) &&
	echo "coli-run $run, coli-profile $prof" && test "$run" = "$prof"
'
test_done
