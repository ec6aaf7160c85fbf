#!/bin/bash
# SPDX-License-Identifier: MIT
# Test 2: concurrency. 16 writer and 16 reader threads (plus vLLM's lookup
# thread doing access()+stat()) over 40 overlapping keys: 8 exist before the
# threads start, 2 of them "hot" keys that every writer keeps replacing with
# new versions (O_EXCL temp, write, close, rename over the name) while the
# readers load them (sometimes holding the fd across the renames); the other
# keys are stored concurrently by several writers each. Every 4 KiB page of
# a block names (key, writer, version, page), so a reader proves it got one
# whole version. Asserted: no reader ever gets ENOENT for a name that
# always existed, a short read, a torn or mixed block, or a version nobody
# wrote; lookups never miss and always see the exact st_size; no store
# fails; at the end every key holds one whole version and no temp file is
# left. Run with 1 MiB O_DIRECT blocks and with 256 KiB+100 byte buffered
# blocks, under each daemon option set (T_OPTSETS).
. "$(dirname "$0")/lib.sh"

t_init
bad='(enoent-on-existing|short|torn|unknown-version|errors|wrong-size|tmp-files)=[1-9]|NO WHOLE LOADS'
n=0
for opts in "${T_OPTSETS[@]}"; do
	REF=$(t_plain_dir ref)
	T_OPTS=$opts
	t_target
	for args in "-b 1048576 -d 1 -n 32" "-b 262244 -d 0 -n 24"; do
		n=$((n + 1))
		mkdir "$REF/s$n" "$T_MNT/s$n" || t_fail "mkdir s$n"
		# shellcheck disable=SC2086
		t_run "$T_TMP/ref.$n.txt" "$T_TMP/ref.$n.err" \
			"$VLLM_IO" stress "$REF/s$n" $args
		t_expect_none "$T_TMP/ref.$n.txt" "$bad" "reference stress $args"
		grep -q 'present=40/40 whole=40/40' "$T_TMP/ref.$n.txt" ||
			t_fail "reference stress $args: final state incomplete"
		# shellcheck disable=SC2086
		t_run "$T_TMP/kvfs.$n.txt" "$T_TMP/kvfs.$n.err" \
			"$VLLM_IO" stress "$T_MNT/s$n" $args
		t_log "kvfs stress $args: $(grep 'stress info' "$T_TMP/kvfs.$n.err")"
		if ! cmp -s "$T_TMP/ref.$n.txt" "$T_TMP/kvfs.$n.txt"; then
			echo "----- first complaints of the threads on kvfs -----" >&2
			grep -v '^stress info' "$T_TMP/kvfs.$n.err" | head -n 40 >&2
		fi
		t_compare "stress$n" "$T_TMP/ref.$n.txt" "$T_TMP/kvfs.$n.txt"
	done
	t_umount "$T_MNT"
done
t_finish
