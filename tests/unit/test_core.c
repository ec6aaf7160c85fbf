/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the small core modules: the clock and its injectable
 * source (core/clock.c, tests/fakes/fake_clock.h), the text buffer and the
 * JSON string writer (core/tbuf.c), and the data directory's names, lock,
 * data-file names, list and usage (core/datadir.c). Each datadir test gets
 * its own mkdtemp directory under $TMPDIR or /tmp.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "datadir.h"
#include "fake_clock.h"
#include "tbuf.h"

/* ---- clock ---- */

static void test_clock_real(void **state)
{
	uint64_t m0, m1, r;
	struct timespec ts;

	(void)state;
	m0 = clock_monotonic_ns();
	m1 = clock_now(&clock_monotonic);
	assert_true(m1 >= m0);
	assert_true(clock_now(NULL) >= m1);
	r = clock_realtime_ns();
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Both read the same clock, a moment apart. */
	assert_true(clock_ns(&ts) >= r);
	assert_true(clock_ns(&ts) - r < 10 * CLOCK_NS_PER_SEC);
	assert_true(clock_now(&clock_realtime) >= r);
}

static void test_clock_fake(void **state)
{
	struct fake_clock fc = {0};
	struct clock_src src = fake_clock_src(&fc);
	struct clock_src unset = {0};

	(void)state;
	assert_int_equal(clock_now(&src), 0);
	fake_clock_advance(&fc, 1500);
	assert_int_equal(clock_now(&src), 1500);
	assert_int_equal(fake_clock_now(&fc), 1500);
	fake_clock_set(&fc, 7);
	assert_int_equal(clock_now(&src), 7);
	/* An unset source is the monotonic clock. */
	assert_true(clock_now(&unset) > 0);
}

static void test_clock_ts(void **state)
{
	struct timespec ts = clock_ts(3 * CLOCK_NS_PER_SEC + 42);
	struct timespec neg = {.tv_sec = -1, .tv_nsec = 5};

	(void)state;
	assert_int_equal(ts.tv_sec, 3);
	assert_int_equal(ts.tv_nsec, 42);
	assert_int_equal(clock_ns(&ts), 3 * CLOCK_NS_PER_SEC + 42);
	assert_int_equal(clock_ns(&neg), 0);
}

/* ---- tbuf ---- */

static void test_tbuf_basic(void **state)
{
	struct tbuf b;
	size_t len = 99;
	char *s;

	(void)state;
	tbuf_init(&b);
	assert_non_null(b.buf);
	assert_string_equal(b.buf, "");
	tbuf_reset(&b); /* on the static empty text: harmless */
	tbuf_putc(&b, 'a');
	tbuf_puts(&b, "bc");
	tbuf_write(&b, "de", 2);
	tbuf_printf(&b, "%d-%s", 42, "x");
	assert_string_equal(b.buf, "abcde42-x");
	assert_int_equal(b.len, 9);
	assert_false(b.oom);
	tbuf_reset(&b);
	assert_string_equal(b.buf, "");
	tbuf_puts(&b, "kept");
	s = tbuf_detach(&b, &len);
	assert_string_equal(s, "kept");
	assert_int_equal(len, 4);
	free(s);
	/* Detached: empty again, and a second detach gives "". */
	assert_non_null(b.buf);
	assert_int_equal(b.len, 0);
	s = tbuf_detach(&b, NULL);
	assert_string_equal(s, "");
	free(s);
	tbuf_release(&b);
	tbuf_release(&b); /* twice is fine */
}

static void test_tbuf_grows(void **state)
{
	struct tbuf b;
	char big[5000];

	(void)state;
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tbuf_init(&b);
	for (int i = 0; i < 1000; i++)
		tbuf_printf(&b, "%04d,", i);
	assert_int_equal(b.len, 5000);
	assert_memory_equal(b.buf + 4995, "0999,", 5);
	assert_int_equal(b.buf[b.len], '\0');
	tbuf_printf(&b, "%s", big);
	assert_int_equal(b.len, 5000 + sizeof(big) - 1);
	assert_int_equal(strlen(b.buf), b.len);
	assert_true(b.cap > b.len);
	tbuf_release(&b);
}

static void test_tbuf_oom_sticky(void **state)
{
	struct tbuf b;

	(void)state;
	tbuf_init(&b);
	tbuf_puts(&b, "abc");
	/* More than can ever be allocated: the flag goes up and stays. */
	assert_int_equal(tbuf_reserve(&b, SIZE_MAX - 1), -ENOMEM);
	assert_true(b.oom);
	tbuf_puts(&b, "def");
	tbuf_printf(&b, "%d", 1);
	assert_string_equal(b.buf, "abc");
	tbuf_reset(&b);
	assert_true(b.oom);
	tbuf_puts(&b, "x");
	assert_int_equal(b.len, 0);
	assert_null(tbuf_detach(&b, NULL));
	/* Detach (or release) starts over. */
	assert_false(b.oom);
	tbuf_puts(&b, "y");
	assert_string_equal(b.buf, "y");
	tbuf_release(&b);
}

static void test_tbuf_json(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"", "\"\""},
		{"plain /a/b.bin", "\"plain /a/b.bin\""},
		{"q\"b\\", "\"q\\\"b\\\\\""},
		{"\x01\t\n\r\x1f", "\"\\u0001\\u0009\\u000a\\u000d\\u001f\""},
		{"del\x7f.", "\"del\\u007f.\""},
		{"\xc3\xa9\xff", "\"\xc3\xa9\xff\""}, /* bytes >= 0x80 as is */
		{" ~", "\" ~\""},
	};
	struct tbuf b;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tbuf_init(&b);
		tbuf_puts(&b, "<");
		tbuf_json_str(&b, cases[i].in);
		tbuf_puts(&b, ">");
		assert_memory_equal(b.buf, "<", 1);
		assert_int_equal(b.len, strlen(cases[i].out) + 2);
		assert_memory_equal(b.buf + 1, cases[i].out,
				    strlen(cases[i].out));
		tbuf_release(&b);
	}
	/* Every byte 1..0x1f and 0x7f, as the \u00XX form. */
	for (int c = 1; c < 0x80; c++) {
		char in[2] = {(char)c, 0}, want[16];

		if (c == '"' || c == '\\')
			snprintf(want, sizeof(want), "\"\\%c\"", c);
		else if (c < 0x20 || c == 0x7f)
			snprintf(want, sizeof(want), "\"\\u%04x\"", c);
		else
			snprintf(want, sizeof(want), "\"%c\"", c);
		tbuf_init(&b);
		tbuf_json_str(&b, in);
		assert_string_equal(b.buf, want);
		tbuf_release(&b);
	}
}

static void test_tbuf_json_fput(void **state)
{
	char out[64] = {0};
	FILE *f = fmemopen(out, sizeof(out) - 1, "w");

	(void)state;
	assert_non_null(f);
	assert_int_equal(tbuf_json_fput(f, "a\"\x7f"), 0);
	fclose(f);
	assert_string_equal(out, "\"a\\\"\\u007f\"");
}

/* ---- datadir ---- */

struct td_ctx {
	char dir[256];
	char data[300];
};

static int td_setup(void **state)
{
	struct td_ctx *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");

	if (!t)
		return -1;
	snprintf(t->dir, sizeof(t->dir), "%s/kvfs-core-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	snprintf(t->data, sizeof(t->data), "%s/data", t->dir);
	*state = t;
	return 0;
}

static int td_teardown(void **state)
{
	struct td_ctx *t = *state;
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	if (system(cmd) != 0)
		return -1;
	free(t);
	return 0;
}

static void td_touch(const struct td_ctx *t, const char *name, size_t bytes)
{
	char path[600], *buf = calloc(1, bytes + 1);
	int fd;

	assert_non_null(buf);
	memset(buf, 'k', bytes);
	snprintf(path, sizeof(path), "%s/%s", t->data, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, bytes), (ssize_t)bytes);
	close(fd);
	free(buf);
}

static void test_datadir_path(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(datadir_path(buf, sizeof(buf), "/d", DATADIR_LOCK), 0);
	assert_string_equal(buf, "/d/kvfs.lock");
	assert_int_equal(datadir_path(buf, sizeof(buf), "/d", DATADIR_INDEX),
			 0);
	assert_string_equal(buf, "/d/index.db");
	assert_int_equal(datadir_path(buf, sizeof(buf), "/d", DATADIR_SOCK), 0);
	assert_string_equal(buf, "/d/kvfs.sock");
	assert_int_equal(datadir_path(buf, sizeof(buf), "/d", DATADIR_DATA), 0);
	assert_string_equal(buf, "/d/data");
	assert_int_equal(datadir_path(buf, 8, "/longer", "name"),
			 -ENAMETOOLONG);
}

static void test_datadir_names(void **state)
{
	static const struct {
		const char *name;
		int ok;
		uint32_t id;
	} cases[] = {
		{"000001.kvd", 1, 1},
		{"123456.kvd", 1, 123456},
		{"1234567.kvd", 1, 1234567},
		{"1.kvd", 1, 1},
		{"0.kvd", 1, 0},
		{"4294967295.kvd", 1, 4294967295u},
		{"000001.kvd.tmp", 0, 0},
		{"000001.kv", 0, 0},
		{"000001", 0, 0},
		{"+00001.kvd", 0, 0},
		{"-00001.kvd", 0, 0},
		{" 00001.kvd", 0, 0},
		{"x.kvd", 0, 0},
		{".kvd", 0, 0},
		{"", 0, 0},
		{".", 0, 0},
		{"..", 0, 0},
		{"index.db", 0, 0},
	};
	char buf[DATADIR_NAME_MAX];
	uint32_t id;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = datadir_parse_name(cases[i].name, &id);

		if (cases[i].ok != (rc == 0))
			fail_msg("%s: %d", cases[i].name, rc);
		if (cases[i].ok)
			assert_int_equal(id, cases[i].id);
		else
			assert_int_equal(rc, -EINVAL);
	}
	assert_int_equal(datadir_file_name(buf, sizeof(buf), 7), 0);
	assert_string_equal(buf, "000007.kvd");
	assert_int_equal(datadir_file_name(buf, sizeof(buf), 1234567), 0);
	assert_string_equal(buf, "1234567.kvd");
	assert_int_equal(datadir_file_name(buf, sizeof(buf), UINT32_MAX), 0);
	assert_int_equal(datadir_parse_name(buf, &id), 0);
	assert_int_equal(id, UINT32_MAX);
	assert_int_equal(datadir_file_name(buf, 5, 7), -ENAMETOOLONG);
}

static void test_datadir_list_usage(void **state)
{
	struct td_ctx *t = *state;
	struct datadir_usage u;
	uint32_t *ids;
	size_t n;
	char path[600];
	int dfd;

	/* No data/ yet: nothing, not an error. */
	assert_int_equal(datadir_list(t->dir, &ids, &n), 0);
	assert_int_equal(n, 0);
	assert_null(ids);
	assert_int_equal(datadir_usage(t->dir, &u), 0);
	assert_int_equal(u.nfiles, 0);

	assert_int_equal(mkdir(t->data, 0700), 0);
	td_touch(t, "000010.kvd", 5000);
	td_touch(t, "000002.kvd", 1);
	td_touch(t, "000300.kvd", 0);
	td_touch(t, "000004.kvd.old", 100);
	td_touch(t, "notes", 100);
	snprintf(path, sizeof(path), "%s/000005.kvd", t->data);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/000006.kvd", t->data);
	assert_int_equal(symlink("000010.kvd", path), 0);

	/* The list names every entry that looks like a data file, sorted. */
	assert_int_equal(datadir_list(t->dir, &ids, &n), 0);
	assert_int_equal(n, 5);
	assert_int_equal(ids[0], 2);
	assert_int_equal(ids[1], 5);
	assert_int_equal(ids[2], 6);
	assert_int_equal(ids[3], 10);
	assert_int_equal(ids[4], 300);
	free(ids);

	/* Usage counts the regular files only, links not followed. */
	assert_int_equal(datadir_usage(t->dir, &u), 0);
	assert_int_equal(u.nfiles, 3);
	assert_int_equal(u.apparent, 5001);
	assert_true(u.physical >= 4096 && u.physical % 512 == 0);

	/* The same through an O_PATH descriptor, as the store holds one. */
	dfd = open(t->data, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(datadir_list_at(dfd, &ids, &n), 0);
	assert_int_equal(n, 5);
	free(ids);
	assert_int_equal(datadir_usage_at(dfd, &u), 0);
	assert_int_equal(u.nfiles, 3);
	close(dfd);
}

static int td_collect(void *arg, int dirfd, const char *name, uint32_t id)
{
	char *out = arg;
	struct stat sb;

	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	snprintf(out + strlen(out), 200 - strlen(out), "%s=%u,", name, id);
	return id == 99 ? -ECANCELED : 0;
}

/* Entries come with their own names; fn's error stops the walk. */
static void test_datadir_each(void **state)
{
	struct td_ctx *t = *state;
	char seen[200] = "";
	int dfd;

	assert_int_equal(mkdir(t->data, 0700), 0);
	td_touch(t, "1.kvd", 1);
	td_touch(t, "x.kvd", 1);
	dfd = open(t->data, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(datadir_each_at(dfd, td_collect, seen), 0);
	assert_string_equal(seen, "1.kvd=1,");
	td_touch(t, "000099.kvd", 1);
	seen[0] = '\0';
	assert_int_equal(datadir_each_at(dfd, td_collect, seen), -ECANCELED);
	assert_non_null(strstr(seen, "000099.kvd=99,"));
	close(dfd);
}

/*
 * Opens and takes DATADIR's lock the way kvdb_lock() does: the fd, or
 * -errno; when held, holder gets the pid text recorded in the file.
 */
static int td_lock_take(const char *datadir, char *holder, size_t holder_len)
{
	int fd = datadir_lock_open(datadir), rc;

	if (fd < 0)
		return fd;
	rc = datadir_lock_try(fd);
	if (rc == 0)
		return fd;
	if (rc == -EWOULDBLOCK && holder && holder_len)
		datadir_lock_holder(fd, holder, holder_len);
	close(fd);
	return rc;
}

static void test_datadir_lock(void **state)
{
	struct td_ctx *t = *state;
	char holder[32] = "junk";
	long pid = -1;
	int fd, fd2, up[2], down[2];
	pid_t child;
	char c;

	/* No lock file: nobody holds it, and probing creates none. */
	assert_int_equal(datadir_lock_probe(t->dir, &pid), 0);
	assert_int_equal(pid, 0);
	fd = datadir_lock_open(t->dir);
	assert_true(fd >= 0);
	close(fd);

	fd = td_lock_take(t->dir, holder, sizeof(holder));
	assert_true(fd >= 0);
	assert_int_equal(datadir_lock_record_pid(fd), 0);
	datadir_lock_holder(fd, holder, sizeof(holder));
	assert_int_equal(strtol(holder, NULL, 10), (long)getpid());

	/* A second open file description is refused while fd holds it. */
	fd2 = td_lock_take(t->dir, holder, sizeof(holder));
	assert_int_equal(fd2, -EWOULDBLOCK);
	assert_int_equal(fd2, -EAGAIN);
	assert_int_equal(strtol(holder, NULL, 10), (long)getpid());
	assert_null(strchr(holder, '\n'));
	assert_int_equal(datadir_lock_probe(t->dir, &pid), 1);
	assert_int_equal(pid, (long)getpid());

	/* Released: free again (the pid text stays behind). */
	datadir_lock_release(fd);
	datadir_lock_release(-1);
	assert_int_equal(datadir_lock_probe(t->dir, &pid), 0);

	/* Held by another process, as kvfs holds it. */
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int cfd = td_lock_take(t->dir, NULL, 0);

		if (cfd < 0 || datadir_lock_record_pid(cfd) < 0)
			_exit(1);
		if (write(up[1], "x", 1) != 1 || read(down[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(read(up[0], &c, 1), 1);
	fd2 = td_lock_take(t->dir, holder, sizeof(holder));
	assert_int_equal(fd2, -EWOULDBLOCK);
	assert_int_equal(strtol(holder, NULL, 10), (long)child);
	assert_int_equal(datadir_lock_probe(t->dir, &pid), 1);
	assert_int_equal(pid, (long)child);
	/* Let the child go: its lock goes with it. */
	assert_int_equal(write(down[1], "y", 1), 1);
	{
		int status;

		assert_int_equal(waitpid(child, &status, 0), child);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	fd = td_lock_take(t->dir, NULL, 0);
	assert_true(fd >= 0);
	datadir_lock_release(fd);
}

static void test_datadir_lock_errors(void **state)
{
	struct td_ctx *t = *state;
	char missing[600];
	long pid;

	snprintf(missing, sizeof(missing), "%s/nope", t->dir);
	assert_int_equal(td_lock_take(missing, NULL, 0), -ENOENT);
	assert_int_equal(datadir_lock_open(missing), -ENOENT);
	assert_int_equal(datadir_lock_probe(missing, &pid), 0);
}

int main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_real),
		cmocka_unit_test(test_clock_fake),
		cmocka_unit_test(test_clock_ts),
		cmocka_unit_test(test_tbuf_basic),
		cmocka_unit_test(test_tbuf_grows),
		cmocka_unit_test(test_tbuf_oom_sticky),
		cmocka_unit_test(test_tbuf_json),
		cmocka_unit_test(test_tbuf_json_fput),
		cmocka_unit_test(test_datadir_path),
		cmocka_unit_test(test_datadir_names),
#define T(fn) cmocka_unit_test_setup_teardown(fn, td_setup, td_teardown)
		T(test_datadir_list_usage),
		T(test_datadir_each),
		T(test_datadir_lock),
		T(test_datadir_lock_errors),
#undef T
	};

	return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
