/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl status: capacity, use, blocks, memory and uptime of a kvfs
 * mount, from its .kvfs/status file and the control socket's counts; or,
 * for a data directory nobody serves, what its index and data files say
 * offline (the index is opened only to count its rows).
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datadir.h"
#include "index.h"
#include "kc.h"
#include "tbuf.h"

/* "3d 04:05:06" or "04:05:06". */
static const char *kc_duration(char *buf, size_t len, uint64_t s)
{
	unsigned long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;

	if (d)
		snprintf(buf, len, "%llud %02llu:%02llu:%02llu", d, h, m,
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%02llu:%02llu:%02llu", h, m,
			 (unsigned long long)(s % 60));
	return buf;
}

static const char kc_status_usage[] =
	"usage: kvfsctl status [--json] MOUNTPOINT|DATADIR\n"
	"\n"
	"Capacity, use, blocks, data files, dirty memory, verdict-cache size,\n"
	"uptime and version of a kvfs mount. For a data directory that is not\n"
	"mounted, what can be read offline from its index and data files.\n"
	"\n"
	"  --json      print one JSON object instead of text\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error.\n";

/* Everything status shows; UINT64_MAX where unknown. */
struct kc_status {
	uint64_t uptime, capacity, used, fs_size, fs_free, stored, blocks;
	uint64_t dirs, others, orphans, inodes, dirty, dirty_limit, verdicts;
	uint64_t quarantined, wb_files, wb_bytes, wb_peak;
	/* The shared tier (rados_pool NULL: off). */
	uint64_t r_reachable, r_sweeper, r_queued, r_hits, r_pulls, r_errors;
	uint64_t r_usage, r_capacity;
	const char *rados_pool;
	struct datadir_usage u;
	const char *version;
	const char *count_err; /* why blocks is unknown */
};

#define KC_UNKNOWN UINT64_MAX

static void kc_status_offline(const struct kc_target *t, struct kc_status *s)
{
	struct idx_counts c;
	char path[PATH_MAX];
	struct idx *idx;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", t->datadir, DATADIR_INDEX);
	if (!kc_exists(t->datadir, DATADIR_INDEX, S_IFREG)) {
		s->count_err = "no index.db";
		return;
	}
	rc = idx_open(&idx, path, 0755, getuid(), getgid());
	if (rc < 0) {
		s->count_err = strerror(-rc);
		return;
	}
	if (idx_statfs(idx, &s->inodes, &s->stored) < 0)
		s->inodes = s->stored = KC_UNKNOWN;
	rc = idx_count(idx, &c);
	if (rc == 0) {
		s->blocks = c.files;
		s->dirs = c.dirs;
		s->others = c.others;
		s->orphans = c.orphans;
	} else {
		s->count_err = strerror(-rc);
	}
	idx_close(idx);
}

static void kc_status_live(const struct kc_target *t, struct kc_status *s)
{
	const struct ctlproto_json *j = &t->status;
	struct ctlproto_json resp;
	int rc;

	s->version = ctlproto_json_get(j, "version");
	ctlproto_json_u64(j, "uptime_seconds", &s->uptime);
	ctlproto_json_u64(j, "bytes", &s->stored);
	ctlproto_json_u64(j, "inodes", &s->inodes);
	ctlproto_json_u64(j, "dirty_bytes", &s->dirty);
	ctlproto_json_u64(j, "dirty_limit", &s->dirty_limit);
	ctlproto_json_u64(j, "wb_queued_files", &s->wb_files);
	ctlproto_json_u64(j, "wb_queued_bytes", &s->wb_bytes);
	ctlproto_json_u64(j, "wb_queued_peak_bytes", &s->wb_peak);
	ctlproto_json_u64(j, "verdicts", &s->verdicts);
	ctlproto_json_u64(j, "quarantined", &s->quarantined);
	ctlproto_json_u64(j, "capacity", &s->capacity);
	ctlproto_json_u64(j, "used", &s->used);
	s->rados_pool = ctlproto_json_get(j, "rados_pool");
	ctlproto_json_u64(j, "rados_reachable", &s->r_reachable);
	ctlproto_json_u64(j, "rados_sweeper", &s->r_sweeper);
	ctlproto_json_u64(j, "rados_puts_queued", &s->r_queued);
	ctlproto_json_u64(j, "rados_remote_hits", &s->r_hits);
	ctlproto_json_u64(j, "rados_pulls", &s->r_pulls);
	ctlproto_json_u64(j, "rados_errors", &s->r_errors);
	ctlproto_json_u64(j, "rados_usage_bytes", &s->r_usage);
	ctlproto_json_u64(j, "rados_capacity", &s->r_capacity);
	/* Counting blocks scans the index: the daemon does it on request. */
	rc = kc_request(t->datadir, CTLPROTO_STATUS, NULL, &resp, NULL);
	if (rc < 0) {
		s->count_err = "the control socket does not answer";
		return;
	}
	if (rc == 0) {
		ctlproto_json_u64(&resp, "files", &s->blocks);
		ctlproto_json_u64(&resp, "directories", &s->dirs);
		ctlproto_json_u64(&resp, "others", &s->others);
		ctlproto_json_u64(&resp, "orphans", &s->orphans);
	}
	if (s->blocks == KC_UNKNOWN)
		s->count_err = "the daemon could not count them";
	ctlproto_json_free(&resp);
}

/* Prints v as a JSON number, or null when unknown. */
static void kc_jnum(const char *key, uint64_t v, int last)
{
	if (v == KC_UNKNOWN)
		printf("\"%s\": null%s", key, last ? "" : ", ");
	else
		printf("\"%s\": %llu%s", key, (unsigned long long)v,
		       last ? "" : ", ");
}

static void kc_status_json(const struct kc_target *t, const struct kc_status *s)
{
	printf("{\"mounted\": %s, \"datadir\": ",
	       t->mounted ? "true" : "false");
	tbuf_json_fput(stdout, t->datadir);
	printf(", \"mountpoint\": ");
	if (t->mountpoint)
		tbuf_json_fput(stdout, t->mountpoint);
	else
		printf("null");
	printf(", \"version\": ");
	tbuf_json_fput(stdout, s->version ? s->version : KVFS_VERSION);
	printf(", ");
	kc_jnum("pid", t->pid ? (uint64_t)t->pid : KC_UNKNOWN, 0);
	kc_jnum("uptime_seconds", s->uptime, 0);
	kc_jnum("capacity_bytes", s->capacity, 0);
	kc_jnum("used_bytes", s->used, 0);
	kc_jnum("fs_size_bytes", s->fs_size, 0);
	kc_jnum("fs_free_bytes", s->fs_free, 0);
	kc_jnum("stored_bytes", s->stored, 0);
	kc_jnum("physical_bytes", s->u.physical, 0);
	kc_jnum("apparent_bytes", s->u.apparent, 0);
	kc_jnum("data_files", s->u.nfiles, 0);
	kc_jnum("blocks", s->blocks, 0);
	kc_jnum("directories", s->dirs, 0);
	kc_jnum("other_inodes", s->others, 0);
	kc_jnum("orphans", s->orphans, 0);
	kc_jnum("inodes", s->inodes, 0);
	kc_jnum("dirty_bytes", s->dirty, 0);
	kc_jnum("dirty_limit", s->dirty_limit, 0);
	kc_jnum("wb_queued_files", s->wb_files, 0);
	kc_jnum("wb_queued_bytes", s->wb_bytes, 0);
	kc_jnum("wb_queued_peak_bytes", s->wb_peak, 0);
	kc_jnum("verdicts", s->verdicts, 0);
	kc_jnum("quarantined", s->quarantined, 1);
	printf("}\n");
}

static void kc_status_text(const struct kc_target *t, const struct kc_status *s)
{
	char a[32], b[32], c[32];

	if (t->mounted && t->mountpoint)
		printf("kvfs %s, mounted at %s (pid %ld), up %s\n",
		       s->version ? s->version : "?", t->mountpoint, t->pid,
		       s->uptime == KC_UNKNOWN
			       ? "?"
			       : kc_duration(a, sizeof(a), s->uptime));
	else
		printf("kvfs data directory, not mounted (read offline by "
		       "kvfsctl %s)\n",
		       KVFS_VERSION);
	printf("data directory  %s\n", t->datadir);
	printf("capacity        ");
	if (s->capacity != KC_UNKNOWN)
		printf("%s configured, %s used; ",
		       kc_size(a, sizeof(a), s->capacity),
		       s->used == KC_UNKNOWN ? "?"
					     : kc_size(b, sizeof(b), s->used));
	printf("backing filesystem %s, %s free\n",
	       kc_size(c, sizeof(c), s->fs_size),
	       kc_size(b, sizeof(b), s->fs_free));
	printf("stored          %s in ",
	       s->stored == KC_UNKNOWN ? "?"
				       : kc_size(a, sizeof(a), s->stored));
	if (s->blocks == KC_UNKNOWN)
		printf("? blocks (%s)\n", s->count_err ? s->count_err : "?");
	else
		printf("%llu blocks (regular files)\n",
		       (unsigned long long)s->blocks);
	printf("physical        %s in %llu data files (st_blocks of data/; "
	       "apparent size %s)\n",
	       kc_size(a, sizeof(a), s->u.physical),
	       (unsigned long long)s->u.nfiles,
	       kc_size(b, sizeof(b), s->u.apparent));
	if (s->blocks != KC_UNKNOWN)
		printf("namespace       %llu directories, %llu other inodes, "
		       "%llu orphans (unlinked while open)\n",
		       (unsigned long long)s->dirs,
		       (unsigned long long)s->others,
		       (unsigned long long)s->orphans);
	if (!t->mounted || !t->mountpoint) {
		printf("dirty memory    - (not mounted)\n");
		printf("write-behind:   - (not mounted)\n");
		printf("verdict cache   - (not mounted)\n");
		return;
	}
	printf("dirty memory    %s of %s\n", kc_size(a, sizeof(a), s->dirty),
	       kc_size(b, sizeof(b), s->dirty_limit));
	if (s->wb_files != KC_UNKNOWN)
		printf("write-behind:   %llu files queued (%s), peak %s\n",
		       (unsigned long long)s->wb_files,
		       kc_size(a, sizeof(a), s->wb_bytes),
		       kc_size(b, sizeof(b), s->wb_peak));
	printf("verdict cache   %llu verdicts, %llu quarantined\n",
	       (unsigned long long)s->verdicts,
	       (unsigned long long)s->quarantined);
	if (!s->rados_pool || !*s->rados_pool) {
		printf("shared tier:    off\n");
		return;
	}
	printf("shared tier:    pool %s, %s%s; %llu puts queued, %llu remote "
	       "hits, %llu pulls, %llu errors; pool %s of %s\n",
	       s->rados_pool, s->r_reachable == 1 ? "reachable" : "UNREACHABLE",
	       s->r_sweeper == 1 ? ", sweeper" : "",
	       (unsigned long long)s->r_queued, (unsigned long long)s->r_hits,
	       (unsigned long long)s->r_pulls, (unsigned long long)s->r_errors,
	       kc_size(a, sizeof(a), s->r_usage),
	       s->r_capacity ? kc_size(b, sizeof(b), s->r_capacity)
			     : "no budget");
}

int kc_status(int argc, char **argv)
{
	const char *cmd = "status";
	struct kc_status s;
	struct kc_target t;
	struct statvfs sv;
	struct kc_opts o;
	int i;

	i = kc_begin(cmd, argc, argv, 0, kc_status_usage, 1, 1,
		     "MOUNTPOINT|DATADIR", &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	memset(&s, 0xff, sizeof(s)); /* every number unknown */
	s.version = NULL;
	s.count_err = NULL;
	if (t.mounted && !t.mountpoint) {
		kc_err(cmd,
		       "%s is locked by process %ld (a kvfs whose control "
		       "socket does not answer, or a kvfsctl fsck); ask its "
		       "mount point instead",
		       t.datadir, t.pid);
		kc_target_free(&t);
		return KC_EXIT_ERROR;
	}
	if (statvfs(t.datadir, &sv) == 0) {
		s.fs_size = (uint64_t)sv.f_blocks * sv.f_frsize;
		s.fs_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	}
	if (datadir_usage(t.datadir, &s.u) < 0)
		memset(&s.u, 0, sizeof(s.u));
	if (t.mounted)
		kc_status_live(&t, &s);
	else
		kc_status_offline(&t, &s);
	if (o.json)
		kc_status_json(&t, &s);
	else
		kc_status_text(&t, &s);
	kc_target_free(&t);
	return KC_EXIT_OK;
}
