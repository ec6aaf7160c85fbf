#!/bin/bash
# SPDX-License-Identifier: MIT
# Test 1: vLLM's exact syscall sequences (kvfs(7), LIFE OF A BLOCK):
# engine start-up (mkdir -p of the namespace dir, config.json
# written only when absent, the O_DIRECT probe and its unlink), stores
# (access, mkdir -p incl. 8-thread races on one new leaf dir and one new top
# dir, O_CREAT|O_EXCL temp with O_DIRECT, one write, close, rename) and loads
# (O_DIRECT open, one read, byte compare) of 512 KiB, 2 MiB, 5 MiB and
# 3 MiB+123 byte blocks (the last buffered, as vLLM does for sizes that are
# not a multiple of 4 KiB), the access() short-cut on re-store, EEXIST from a
# leftover temp, lookups (access F_OK, stat) of present and absent names,
# a longer file loading its first block_size bytes, and the short-read
# unlink. The engine is then restarted on the same root (config kept,
# every store short-cut). Transcripts must equal the plain directory's.
# Run once per daemon option set (T_OPTSETS).
. "$(dirname "$0")/lib.sh"

t_init
set=0
for opts in "${T_OPTSETS[@]}"; do
	set=$((set + 1))
	REF=$(t_plain_dir ref)
	T_OPTS=$opts
	t_target
	for run in 1 2; do
		tag=$set.$run
		t_run "$T_TMP/ref.$tag.txt" "$T_TMP/ref.$tag.err" \
			"$VLLM_IO" seq "$REF"
		t_expect_none "$T_TMP/ref.$tag.txt" 'CORRUPT|whole but|changed' \
			"reference run $run"
		t_run "$T_TMP/kvfs.$tag.txt" "$T_TMP/kvfs.$tag.err" \
			"$VLLM_IO" seq "$T_MNT"
		t_compare "vllm-seq-opts$set-run$run" "$T_TMP/ref.$tag.txt" \
			"$T_TMP/kvfs.$tag.txt"
	done
	# The first run must have done real work: every store stored, every
	# load matched (guards against an equal but vacuous transcript).
	[ "$(grep -c -- '-> stored$' "$T_TMP/ref.$set.1.txt")" -eq 9 ] ||
		t_fail "reference run 1 did not store all 9 blocks"
	[ "$(grep -c ': read=[0-9]* match$' "$T_TMP/ref.$set.1.txt")" -ge 36 ] ||
		t_fail "reference run 1 did not load and match every block"
	grep -q '^startup1.o_direct: yes$' "$T_TMP/ref.$set.1.txt" ||
		t_fail "the reference directory does not support O_DIRECT"

	# The whole namespace, with contents, seen through ordinary calls.
	t_run "$T_TMP/ref.$set.tree" "$T_TMP/ref.tree.err" \
		"$TREE_DUMP" -C "$REF"
	t_run "$T_TMP/kvfs.$set.tree" "$T_TMP/kvfs.tree.err" \
		"$TREE_DUMP" -C -i .kvfs "$T_MNT"
	t_compare "vllm-seq-opts$set-tree" "$T_TMP/ref.$set.tree" \
		"$T_TMP/kvfs.$set.tree" 1
	t_umount "$T_MNT"
done
t_finish
