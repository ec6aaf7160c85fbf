# SPDX-License-Identifier: MIT
# Shared helpers for the ctl tests (sourced, not run): kvfsctl run against
# kvfs mounts and unmounted data directories, on top of the mount suite's
# helpers (tests/mount/lib.sh).
#
# Environment, beyond tests/mount/lib.sh's:
#   KVFSCTL        kvfsctl
#   LOOKUP_PROBE   the lookup/store helper program
#
# Variables a test may set before calling kc_fails:
#   KC_FAILS_CMD   what follows "kvfsctl" in the refusal message's regex
#                  (default: anything; e.g. " gc: " for "kvfsctl gc: ...")
#   KC_FAILS_STATUS the exit status kc_fails wants (default 2; fsck's are
#                  16 for a usage error, 8 for an operational one), e.g.
#                  KC_FAILS_STATUS=16 kc_fails "unknown option" "$KC" fsck -x
. "$(dirname "${BASH_SOURCE[0]}")/../mount/lib.sh"

KC=${KVFSCTL:?KVFSCTL is not set}
LP=${LOOKUP_PROBE:?LOOKUP_PROBE is not set}
KC_FAILS_CMD=
KC_FAILS_STATUS=

# kc_run WANT WHAT CMD...: CMD must exit WANT; stdout left in $T_TMP/out,
# stderr in $T_TMP/err.
kc_run() {
	local want=$1 what=$2 rc
	shift 2
	"$@" >"$T_TMP/out" 2>"$T_TMP/err"
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		t_show "$T_TMP/err"
		t_show "$T_TMP/out"
		t_fail "$what: exit status $rc, want $want ($*)"
	fi
}

# kc_ok WHAT CMD...: CMD must exit 0; its stdout is left in $T_TMP/out.
kc_ok() {
	kc_run 0 "$@"
}

# has WHAT REGEX: the last kc_run's stdout has a line matching REGEX.
has() {
	grep -E -q -- "$2" "$T_TMP/out" || {
		t_show "$T_TMP/out"
		t_fail "$1: no line matches /$2/"
	}
}

# kc_fails REGEX CMD...: CMD must exit ${KC_FAILS_STATUS:-2}, print nothing
# on stdout, and say why on stderr in a line "kvfsctl$KC_FAILS_CMD...: ..."
# matching REGEX.
kc_fails() {
	local re=$1
	shift
	kc_run "${KC_FAILS_STATUS:-2}" "bad arguments" "$@"
	[ ! -s "$T_TMP/out" ] || {
		t_show "$T_TMP/out"
		t_fail "bad arguments ($*): printed on stdout"
	}
	grep -E -q -- "^kvfsctl${KC_FAILS_CMD:-}.*$re" "$T_TMP/err" || {
		t_show "$T_TMP/err"
		t_fail "bad arguments ($*): no message matching /$re/"
	}
	t_log "refused as expected: $* -> $(head -n 1 "$T_TMP/err")"
}

# records DATADIR: "path file_id offset header_length length" of every
# named regular file with a record, in data-file order (read with sqlite3,
# independently of kvfsctl).
records() {
	sqlite3 -readonly "$1/index.db" "
		WITH RECURSIVE p(ino, path) AS (
			SELECT 1, ''
			UNION ALL
			SELECT d.ino, p.path || '/' || d.name
			FROM dentries AS d JOIN p ON d.parent = p.ino)
		SELECT p.path, i.file_id, i.rec_off, i.hdr_len, i.rec_len
		FROM p JOIN inodes AS i ON i.ino = p.ino
		WHERE i.file_id != 0 ORDER BY i.file_id, i.rec_off" |
		tr '|' ' '
}

# expect CMD... = LINE: the helper's output must be LINE.
expect() {
	local want=${*: -1} got
	got=$("${@:1:$#-2}") || t_fail "$* could not run"
	[ "$got" = "$want" ] || t_fail "$*: got '$got'"
}

# json_num FILE KEY: a number field of a one-line JSON object.
json_num() {
	grep -o "\"$2\": [0-9]*" "$1" | head -n 1 | awk '{ print $2 }'
}

# Checksums of everything in a data directory but the lock file (fsck and
# gc write their pid there).
sums() {
	(cd "$1" && find . -type f ! -name kvfs.lock -print0 | sort -z |
		xargs -0 sha256sum)
}

# copy NAME [DATADIR]: a copy of DATADIR (default $DATA), holes kept.
copy() {
	local d src=${2:-$DATA}
	d=$(t_plain_dir "$1")
	cp -a --sparse=always "$src/." "$d/" || t_fail "cp $src $d"
	rm -f "$d/kvfs.lock"
	echo "$d"
}

# dump MNT TAG: names, types, modes, owners, sizes and content hashes.
dump() {
	t_run "$T_TMP/$2.tree" "$T_TMP/$2.tree.err" "$TREE_DUMP" -C -i .kvfs "$1"
}

# kc_init: t_init, and a skip unless kvfs itself is under test.
kc_init() {
	t_init
	[ "$T_MODE" = mount ] || {
		T_DONE=1
		t_skip "kvfsctl needs kvfs (KVFS is not set)"
	}
}
