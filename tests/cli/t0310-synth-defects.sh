#!/usr/bin/env bash
# t0310-synth-defects.sh: coli-synth --out never deletes or overwrites a folder it did not write
# (a real checkpoint, a finished container): such a folder must be empty, or --force given.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
SMALL="--no-tokenizer --vocab 512 --layers 2 --measure 0 -q"

# listing DIR: the names and sizes of DIR's files, one a line.
listing() { (cd "$1" && ls -A | while read -r f; do echo "$f $(wc -c <"$f")"; done); }

test_expect_success 'a checkpoint coli-synth did not write is refused (exit 2), naming the folder and --force' '
	cp -R "$FIX/qwen3_moe-tiny/checkpoint" ck && chmod -R u+w ck &&
	listing ck >before &&
	expect_exit 2 coli-synth --family qwen3_moe --out ck $SMALL &&
	err_has "ck: folder is not empty and coli-synth did not write it" "--force" &&
	listing ck >after && cmp before after
'

test_expect_success 'a finished container is refused; its carried files stay as they were' '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" m.coli &&
	listing m.coli >before &&
	expect_exit 2 coli-synth --family olmoe --out m.coli $SMALL &&
	err_has "m.coli: folder is not empty" "--force" &&
	listing m.coli >after && cmp before after &&
	coli-convert -q --verify m.coli
'

test_expect_success 'an empty folder, and a folder of an earlier run, are written without --force' '
	mkdir empty &&
	coli-synth --family olmoe --out empty $SMALL &&
	test -f empty/.coli-synth && test -f empty/model.safetensors &&
	coli-synth --family olmoe --out empty $SMALL --shard-size 64K &&
	test -f empty/model.safetensors.index.json && test ! -e empty/model.safetensors
'

test_expect_success '--force writes into a foreign folder, replacing its checkpoint' '
	cp -R "$FIX/qwen3_moe-tiny/checkpoint" ck && chmod -R u+w ck &&
	coli-synth --family olmoe --out ck $SMALL --force &&
	test -f ck/.coli-synth && grep -F "\"olmoe\"" ck/config.json &&
	test ! -e ck/model-00001-of-00002.safetensors
'

test_expect_success 'a refused or failed run into a new folder leaves nothing behind' '
	expect_exit 2 coli-synth --family olmoe --out new $SMALL --vocab 0 &&
	test ! -e new
'

test_done
