#!/bin/bash
# SPDX-License-Identifier: MIT
# The engine-compatibility suite: runs one engine client (ENG_CLIENT, named
# ENG_NAME; see the top comment of tests/engines/<name>.c for the engine
# source it follows) against a plain directory on the local disk and then
# against a kvfs mount, and compares the transcripts. Each client checks
# its own invariants too (every byte read back is a whole block some writer
# wrote, names that exist never vanish, evicted keys are gone); a failed
# check makes the client exit 1, on either side. The kvfs side runs under
# each daemon option set in ENG_OPTSETS (default: the defaults, and no
# kernel caching so every lookup reaches kvfs).
#
# Environment (besides tests/mount/lib.sh's): ENG_CLIENT, ENG_NAME;
# KVFS_ENGINES_POOL_MB (Dynamo's pool, default 256) and
# KVFS_ENGINES_BUCKET_MB (Mooncake's bucket cap, default 16) are read by the
# clients themselves.
T_NEEDS=ENG_CLIENT
. "$(dirname "$0")/../mount/lib.sh"
T_NAME=engines-${ENG_NAME:?ENG_NAME is not set}

t_init
# Report every option set's differences, not just the first.
T_KEEP_GOING=1
# Lines no correct run prints, on either side.
bad='CORRUPT|NO WHOLE LOADS|(absent-when-present|short|torn|unknown-version|errors|missed)=[1-9]|FAILED'
set=0
for opts in "${T_OPTSETS[@]}"; do
	set=$((set + 1))
	REF=$(t_plain_dir ref)
	T_OPTS=$opts
	t_target
	t_run "$T_TMP/ref.$set.txt" "$T_TMP/ref.$set.err" "$ENG_CLIENT" "$REF"
	t_expect_none "$T_TMP/ref.$set.txt" "$bad" "reference run"
	t_run "$T_TMP/kvfs.$set.txt" "$T_TMP/kvfs.$set.err" \
		"$ENG_CLIENT" "$T_MNT"
	t_log "kvfs: $(grep 'race info' "$T_TMP/kvfs.$set.err")"
	if ! cmp -s "$T_TMP/ref.$set.txt" "$T_TMP/kvfs.$set.txt"; then
		echo "----- first complaints of the client on kvfs -----" >&2
		grep -v 'race info' "$T_TMP/kvfs.$set.err" | head -n 40 >&2
	fi
	t_compare "$ENG_NAME-opts$set" "$T_TMP/ref.$set.txt" \
		"$T_TMP/kvfs.$set.txt"
	t_umount "$T_MNT"
done
t_finish
