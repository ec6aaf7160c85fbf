/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl stats: the counters of a running kvfs, read from
 * MOUNTPOINT/.kvfs/stats (Prometheus text), summed into a summary, or with
 * --watch turned into per-second rates like vmstat(8).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ctlproto.h"
#include "kc.h"
#include "tbuf.h"

static const char kc_stats_usage[] =
	"usage: kvfsctl stats [--json] [--watch SECONDS [--count N]]\n"
	"                     MOUNTPOINT|DATADIR\n"
	"\n"
	"The counters of a running kvfs (MOUNTPOINT/.kvfs/stats): lookups,\n"
	"hits, misses, probes, coalesced lookups, appends (stores), reads\n"
	"(loads), bytes, drops, quarantines, kernel invalidations and errors\n"
	"by kind. With --watch, a header line and then one line of per-second\n"
	"rates every SECONDS, like vmstat(8), until interrupted or N lines.\n"
	"\n"
	"  --json            one JSON object (with --watch: one per line)\n"
	"  --watch SECONDS   print rates every SECONDS (0.1 to 86400)\n"
	"  --count N         stop after N lines of rates\n"
	"  -h, --help        print this help\n"
	"\n"
	"Exit status: 0 success, 2 usage or operational error (also when the\n"
	"data directory is not mounted).\n";

struct kc_metric {
	char *name;
	char *text; /* the value as written */
	double v;
};

struct kc_metrics {
	struct kc_metric *m;
	size_t n;
};

static void kc_metrics_free(struct kc_metrics *ms)
{
	for (size_t i = 0; i < ms->n; i++) {
		free(ms->m[i].name);
		free(ms->m[i].text);
	}
	free(ms->m);
	memset(ms, 0, sizeof(*ms));
}

/* Parses Prometheus text: "name[{labels}] value [timestamp]" lines. */
static int kc_metrics_parse(char *text, struct kc_metrics *ms)
{
	size_t cap = 0;

	memset(ms, 0, sizeof(*ms));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *name, *val, *end, *save;
		double v;

		if (line[0] == '#' || line[0] == '\0')
			continue;
		name = strtok_r(line, " \t", &save);
		val = strtok_r(NULL, " \t", &save);
		if (!name || !val)
			continue;
		v = strtod(val, &end);
		if (end == val || *end)
			continue;
		if (ms->n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct kc_metric *nm =
				realloc(ms->m, ncap * sizeof(*nm));

			if (!nm)
				goto out_nomem;
			ms->m = nm;
			cap = ncap;
		}
		ms->m[ms->n] = (struct kc_metric){
			.name = strdup(name), .text = strdup(val), .v = v};
		if (!ms->m[ms->n].name || !ms->m[ms->n].text) {
			free(ms->m[ms->n].name);
			free(ms->m[ms->n].text);
			goto out_nomem;
		}
		ms->n++;
	}
	return 0;
out_nomem:
	kc_metrics_free(ms);
	return -ENOMEM;
}

/* The value of metric m; -1 when the daemon does not export it. */
static double kc_metric(const struct kc_metrics *ms, enum ctlproto_metric m)
{
	for (size_t i = 0; i < ms->n; i++)
		if (strcmp(ms->m[i].name, ctlproto_metrics[m].name) == 0)
			return ms->m[i].v;
	return -1;
}

/* Ends a list of metrics. */
#define KC_END CTLPROTO_NMETRICS

/* Sum of the metrics of list (up to KC_END) that exist (0 when none). */
static double kc_metric_sum(const struct kc_metrics *ms,
			    const enum ctlproto_metric *list)
{
	double sum = 0;

	for (; *list != KC_END; list++) {
		double v = kc_metric(ms, *list);

		if (v >= 0)
			sum += v;
	}
	return sum;
}

static const enum ctlproto_metric kc_error_metrics[] = {
	CTLPROTO_M_READ_SHORT_RECORDS, CTLPROTO_M_READ_CHECKSUM_ERRORS,
	CTLPROTO_M_IO_ERRORS,	       CTLPROTO_M_LOOKUP_PROBE_ERRORS,
	CTLPROTO_M_CAPACITY_ENOSPC,    KC_END,
};

/* One summary value: a counter or a sum of counters. */
struct kc_col {
	const char *key;  /* JSON name */
	const char *head; /* --watch column header */
	enum ctlproto_metric names[3];
	double scale; /* for --watch: 1, or 2^20 for MiB/s */
};

static const struct kc_col kc_cols[] = {
	{"lookups",
	 "lookup/s",
	 {CTLPROTO_M_LOOKUP_HITS, CTLPROTO_M_LOOKUP_MISSES, KC_END},
	 1},
	{"hits", "hit/s", {CTLPROTO_M_LOOKUP_HITS, KC_END}, 1},
	{"misses", "miss/s", {CTLPROTO_M_LOOKUP_MISSES, KC_END}, 1},
	{"probes", "probe/s", {CTLPROTO_M_LOOKUP_PROBES, KC_END}, 1},
	{"coalesced", "coal/s", {CTLPROTO_M_LOOKUP_COALESCED, KC_END}, 1},
	{"appends", "store/s", {CTLPROTO_M_STORE_APPENDS, KC_END}, 1},
	{"append_bytes",
	 "stMiB/s",
	 {CTLPROTO_M_STORE_APPEND_BYTES, KC_END},
	 1 << 20},
	{"reads", "load/s", {CTLPROTO_M_STORE_READS, KC_END}, 1},
	{"read_bytes",
	 "ldMiB/s",
	 {CTLPROTO_M_STORE_READ_BYTES, KC_END},
	 1 << 20},
	{"drops", "drop/s", {CTLPROTO_M_DROPPED, KC_END}, 1},
	{"quarantines", "quar/s", {CTLPROTO_M_QUARANTINED_TOTAL, KC_END}, 1},
	{"kernel_invalidations",
	 "inval/s",
	 {CTLPROTO_M_KERNEL_INVALIDATIONS, KC_END},
	 1},
};
#define KC_NCOLS (sizeof(kc_cols) / sizeof(kc_cols[0]))

static double kc_col_value(const struct kc_metrics *ms, const struct kc_col *c)
{
	return kc_metric_sum(ms, c->names);
}

static int kc_stats_read(const char *mnt, struct kc_metrics *ms)
{
	char path[PATH_MAX], *text;
	int rc;

	snprintf(path, sizeof(path), "%s/.kvfs/stats", mnt);
	rc = kc_read_file(path, &text);
	if (rc < 0)
		return rc;
	rc = kc_metrics_parse(text, ms);
	free(text);
	return rc;
}

/* "123" or "-" for a metric the daemon does not export. */
static const char *kc_num(char *buf, size_t len, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

/* A byte-count metric as a size ("-" when the daemon did not report it). */
static const char *kc_size_metric(char *buf, size_t len, double v)
{
	if (v < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	return kc_size(buf, len, (uint64_t)v);
}

/* part of whole as a hit rate ("-" before there is any). */
static const char *kc_pct(char *buf, size_t len, double part, double whole)
{
	if (part < 0 || whole <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f%% hit rate", 100.0 * part / whole);
	return buf;
}

static void kc_stats_text(const struct kc_metrics *ms)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], i[32];

#define M(name) kc_metric(ms, name)
	printf("lookups        %12.0f  hits %s, misses %s\n",
	       kc_metric_sum(ms, kc_cols[0].names),
	       kc_num(a, sizeof(a), M(CTLPROTO_M_LOOKUP_HITS)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_LOOKUP_MISSES)));
	printf("probes         %12s  names probed %s, coalesced %s, "
	       "cancelled %s, stale results %s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_LOOKUP_PROBES)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_LOOKUP_BATCHED_KEYS)),
	       kc_num(c, sizeof(c), M(CTLPROTO_M_LOOKUP_COALESCED)),
	       kc_num(d, sizeof(d), M(CTLPROTO_M_LOOKUP_CANCELLED)),
	       kc_num(e, sizeof(e), M(CTLPROTO_M_STALE_RESULTS)));
	printf("stores         %12s  appends (data and name records), %s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_STORE_APPENDS)),
	       kc_size_metric(b, sizeof(b), M(CTLPROTO_M_STORE_APPEND_BYTES)));
	printf("loads          %12s  reads from data files, %s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_STORE_READS)),
	       kc_size_metric(b, sizeof(b), M(CTLPROTO_M_STORE_READ_BYTES)));
	printf("frees          %12s  records punched; data files removed "
	       "%s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_STORE_FREES)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_STORE_FILES_REMOVED)));
	printf("drops          %12s  provably short blocks removed\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_DROPPED)));
	printf("quarantines    %12s  quarantined now %s, marked misses %s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_QUARANTINED_TOTAL)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_QUARANTINED)),
	       kc_num(c, sizeof(c), M(CTLPROTO_M_MARKED_MISSES)));
	printf("invalidations  %12s  kernel entries and inodes\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_KERNEL_INVALIDATIONS)));
	if (M(CTLPROTO_M_EVICTED) >= 0)
		printf("evictions      %12s  blocks evicted for capacity\n",
		       kc_num(a, sizeof(a), M(CTLPROTO_M_EVICTED)));
	printf("errors         %12.0f  short records %s, checksum %s, I/O "
	       "%s, probe %s, no space %s\n",
	       kc_metric_sum(ms, kc_error_metrics),
	       kc_num(a, sizeof(a), M(CTLPROTO_M_READ_SHORT_RECORDS)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_READ_CHECKSUM_ERRORS)),
	       kc_num(c, sizeof(c), M(CTLPROTO_M_IO_ERRORS)),
	       kc_num(d, sizeof(d), M(CTLPROTO_M_LOOKUP_PROBE_ERRORS)),
	       kc_num(f, sizeof(f), M(CTLPROTO_M_CAPACITY_ENOSPC)));
	printf("verdicts       %12s  held; %s lookups parked\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_VERDICTS)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_LOOKUPS_PARKED)));
	printf("write-behind   %12s  files queued (%s, peak %s); appends %s "
	       "in %s writes, commits %s, cancelled %s, failed %s\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_WB_QUEUED_FILES)),
	       kc_size_metric(b, sizeof(b), M(CTLPROTO_M_WB_QUEUED_BYTES)),
	       kc_size_metric(c, sizeof(c), M(CTLPROTO_M_WB_QUEUED_PEAK_BYTES)),
	       kc_num(d, sizeof(d), M(CTLPROTO_M_WB_APPENDS)),
	       kc_num(e, sizeof(e), M(CTLPROTO_M_WB_WRITES)),
	       kc_num(f, sizeof(f), M(CTLPROTO_M_WB_COMMITS)),
	       kc_num(g, sizeof(g), M(CTLPROTO_M_WB_CANCELLED)),
	       kc_num(h, sizeof(h), M(CTLPROTO_M_WB_FAILED)));
	if (M(CTLPROTO_M_INDEX_COMMITS) >= 0)
		printf("index          %12s  commits; %s changes not committed "
		       "yet, %s lost\n",
		       kc_num(a, sizeof(a), M(CTLPROTO_M_INDEX_COMMITS)),
		       kc_num(b, sizeof(b), M(CTLPROTO_M_INDEX_BATCH)),
		       kc_num(c, sizeof(c), M(CTLPROTO_M_INDEX_LOST)));
	printf("memory waits   %12s  writes that waited for the queue (%s ms "
	       "in all); %s refused (EDQUOT)\n",
	       kc_num(a, sizeof(a), M(CTLPROTO_M_DIRTY_WAITS)),
	       kc_num(b, sizeof(b), M(CTLPROTO_M_DIRTY_WAIT_MS)),
	       kc_num(c, sizeof(c), M(CTLPROTO_M_DIRTY_REFUSED)));
	if (M(CTLPROTO_M_RA_STARTED) >= 0) {
		double started = M(CTLPROTO_M_RA_STARTED);

		printf("read-ahead     %12s  used %s (%s), wasted %s, "
		       "failed %s, skipped %s; %s held (peak %s, budget %s)\n",
		       kc_num(a, sizeof(a), started),
		       kc_num(b, sizeof(b), M(CTLPROTO_M_RA_USED)),
		       kc_pct(c, sizeof(c), M(CTLPROTO_M_RA_USED), started),
		       kc_num(d, sizeof(d), M(CTLPROTO_M_RA_WASTED)),
		       kc_num(e, sizeof(e), M(CTLPROTO_M_RA_FAILED)),
		       kc_num(i, sizeof(i), M(CTLPROTO_M_RA_SKIPPED)),
		       kc_size_metric(f, sizeof(f), M(CTLPROTO_M_RA_BYTES)),
		       kc_size_metric(g, sizeof(g),
				      M(CTLPROTO_M_RA_PEAK_BYTES)),
		       kc_size_metric(h, sizeof(h), M(CTLPROTO_M_RA_BUDGET)));
	}
#undef M
}

static void kc_stats_json(const struct kc_metrics *ms)
{
	printf("{\"summary\": {");
	for (size_t i = 0; i < KC_NCOLS; i++)
		printf("\"%s\": %.0f, ", kc_cols[i].key,
		       kc_col_value(ms, &kc_cols[i]));
	printf("\"errors\": %.0f}, \"metrics\": {",
	       kc_metric_sum(ms, kc_error_metrics));
	for (size_t i = 0; i < ms->n; i++) {
		printf("%s", i ? ", " : "");
		tbuf_json_fput(stdout, ms->m[i].name);
		printf(": %s", ms->m[i].text);
	}
	printf("}}\n");
}

/* The monotonic clock in seconds. */
static double kc_mono(void)
{
	return (double)clock_monotonic_ns() / 1e9;
}

static void kc_sleep_until(double t)
{
	double left = t - kc_mono();
	struct timespec ts;

	if (left <= 0)
		return;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int kc_stats_watch(const char *cmd, const char *mnt,
			  const struct kc_opts *o)
{
	struct kc_metrics prev, cur;
	double t0, t1, next;
	int rc;

	rc = kc_stats_read(mnt, &prev);
	if (rc < 0) {
		kc_err(cmd, "%s/.kvfs/stats: %s", mnt, strerror(-rc));
		return KC_EXIT_ERROR;
	}
	t0 = next = kc_mono();
	if (!o->json) {
		for (size_t i = 0; i < KC_NCOLS; i++)
			if (i != 1 && i != 2)
				printf("%9s", kc_cols[i].head);
		printf("%9s\n", "err/s");
	}
	for (long n = 0; !o->count || n < o->count; n++) {
		double dt;

		next += o->watch;
		kc_sleep_until(next);
		rc = kc_stats_read(mnt, &cur);
		if (rc < 0) {
			kc_err(cmd, "%s/.kvfs/stats: %s (was it unmounted?)",
			       mnt, strerror(-rc));
			kc_metrics_free(&prev);
			return KC_EXIT_ERROR;
		}
		t1 = kc_mono();
		dt = t1 - t0 > 0 ? t1 - t0 : o->watch;
		if (o->json)
			printf("{\"interval_seconds\": %.3f, \"rates\": {", dt);
		for (size_t i = 0; i < KC_NCOLS; i++) {
			double r = (kc_col_value(&cur, &kc_cols[i]) -
				    kc_col_value(&prev, &kc_cols[i])) /
				   dt;

			if (o->json)
				printf("\"%s\": %.3f, ", kc_cols[i].key, r);
			else if (i != 1 && i != 2) /* hits, misses: JSON */
				printf("%9.1f", r / kc_cols[i].scale);
		}
		if (o->json)
			printf("\"errors\": %.3f}}\n",
			       (kc_metric_sum(&cur, kc_error_metrics) -
				kc_metric_sum(&prev, kc_error_metrics)) /
				       dt);
		else
			printf("%9.1f\n",
			       (kc_metric_sum(&cur, kc_error_metrics) -
				kc_metric_sum(&prev, kc_error_metrics)) /
				       dt);
		fflush(stdout);
		kc_metrics_free(&prev);
		prev = cur;
		t0 = t1;
	}
	kc_metrics_free(&prev);
	return KC_EXIT_OK;
}

int kc_stats(int argc, char **argv)
{
	const char *cmd = "stats";
	struct kc_metrics ms;
	struct kc_target t;
	struct kc_opts o;
	int i, rc, ret = KC_EXIT_ERROR;

	i = kc_begin(cmd, argc, argv, 1, kc_stats_usage, 1, 1,
		     "MOUNTPOINT|DATADIR", &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (kc_need_mounted(cmd, &t) < 0)
		goto out_free;
	if (!t.mountpoint) {
		kc_err(cmd,
		       "%s is locked by process %ld (a kvfs whose control "
		       "socket does not answer, or a kvfsctl fsck); give the "
		       "mount point",
		       t.datadir, t.pid);
		goto out_free;
	}
	if (o.watch) {
		ret = kc_stats_watch(cmd, t.mountpoint, &o);
		goto out_free;
	}
	rc = kc_stats_read(t.mountpoint, &ms);
	if (rc < 0) {
		kc_err(cmd, "%s/.kvfs/stats: %s", t.mountpoint, strerror(-rc));
		goto out_free;
	}
	if (o.json)
		kc_stats_json(&ms);
	else
		kc_stats_text(&ms);
	kc_metrics_free(&ms);
	ret = KC_EXIT_OK;
out_free:
	kc_target_free(&t);
	return ret;
}
