# SPDX-License-Identifier: MIT
# Shared by the ceph suite's scripts (sourced, not run): NAME must be set.
# log and fail say which test speaks; without Ceph the test is skipped
# (exit 77); T is a scratch directory the caller's cleanup removes.
# Environment: CEPH_TEST_CLUSTER (scripts/ceph-test-cluster).
set -u -o pipefail

CTC=${CEPH_TEST_CLUSTER:?CEPH_TEST_CLUSTER is not set}
log() { echo "[$NAME] $*" >&2; }
fail() {
	echo "[$NAME] FAIL: $*" >&2
	exit 1
}
command -v ceph-mon >/dev/null && command -v rados >/dev/null || {
	log "SKIP: Ceph is not installed (scripts/setup-deps --ceph)"
	exit 77
}
T=$(mktemp -d "/var/tmp/kvfs-$NAME.XXXXXX") || fail "mktemp"
