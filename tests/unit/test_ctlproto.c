/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for fs/kvdb/ctlproto.c, the control protocol both kvfs and
 * kvfsctl speak: percent-encoding round trips (every byte, '%', spaces,
 * UTF-8), request lines built and parsed back, malformed requests each
 * refused with a reason, responses (including the error response the
 * daemon writes) parsed back, the socket helpers over a socketpair, and
 * the metric table (valid, unique Prometheus names; exact exposition).
 */
#include <sys/socket.h>

#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ctlproto.h"

/* Encodes s[0..len), checks the encoding's alphabet, decodes it back. */
static void tc_round_trip(const char *s, size_t len)
{
	char *enc = ctlproto_encode(s, len);
	size_t n = SIZE_MAX;

	assert_non_null(enc);
	for (const char *p = enc; *p; p++) {
		unsigned char c = (unsigned char)*p;

		assert_true(c > 0x20 && c < 0x7f);
		if (c == '%') {
			assert_non_null(strchr("0123456789ABCDEF", p[1]));
			assert_non_null(strchr("0123456789ABCDEF", p[2]));
		}
	}
	assert_int_equal(ctlproto_decode(enc, &n), 0);
	assert_int_equal(n, len);
	assert_memory_equal(enc, s, len);
	assert_int_equal(enc[n], '\0');
	free(enc);
}

static void test_encode_every_byte(void **state)
{
	char all[256];

	(void)state;
	for (int c = 0; c < 256; c++) {
		char one = (char)c;

		all[c] = (char)c;
		tc_round_trip(&one, 1);
	}
	tc_round_trip(all, sizeof(all));
	tc_round_trip("", 0);
}

static void test_encode_special(void **state)
{
	static const char utf8[] = "/models/caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c"
				   "\xac/\xf0\x9f\x98\x80.bin";
	char *enc;

	(void)state;
	enc = ctlproto_encode("a b%c", 5);
	assert_string_equal(enc, "a%20b%25c");
	free(enc);
	enc = ctlproto_encode("%%%", 3);
	assert_string_equal(enc, "%25%25%25");
	free(enc);
	enc = ctlproto_encode("\t\n\x7f\x80\xff", 5);
	assert_string_equal(enc, "%09%0A%7F%80%FF");
	free(enc);
	/* Printable ASCII but the space and '%' is left as it is. */
	enc = ctlproto_encode("/a/B~!\"#$&'()*+,-./:;<=>?@[\\]^_`{|}", 35);
	assert_string_equal(enc, "/a/B~!\"#$&'()*+,-./:;<=>?@[\\]^_`{|}");
	free(enc);
	tc_round_trip(utf8, strlen(utf8));
	tc_round_trip("   ", 3);
	tc_round_trip("100%", 4);
	tc_round_trip("%41", 3);
}

static void test_decode_bad(void **state)
{
	static const char *const bad[] = {"%",	"a%",	"%4",  "%4g", "%g4",
					  "%%", "a%zz", "%-1", "%\n0"};
	char buf[16];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", bad[i]);
		assert_int_equal(ctlproto_decode(buf, &n), -EINVAL);
	}
	snprintf(buf, sizeof(buf), "%%4a%%4A%%2f");
	assert_int_equal(ctlproto_decode(buf, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(buf, "JJ/");
}

static void test_request_build(void **state)
{
	char *line;

	(void)state;
	assert_int_equal(ctlproto_request(CTLPROTO_INFO, NULL, &line), 0);
	assert_string_equal(line, "info\n");
	free(line);
	assert_int_equal(ctlproto_request(CTLPROTO_STATUS, NULL, &line), 0);
	assert_string_equal(line, "status\n");
	free(line);
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICTS, NULL, &line), 0);
	assert_string_equal(line, "verdicts\n");
	free(line);
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICT, "/a b/c%", &line),
			 0);
	assert_string_equal(line, "verdict /a%20b/c%25\n");
	free(line);
	assert_int_equal(ctlproto_request(CTLPROTO_CLEAR, "/x", &line), 0);
	assert_string_equal(line, "clear /x\n");
	free(line);
	/* evict's TARGET is sent as it is: its '%' means percent. */
	assert_int_equal(ctlproto_request(CTLPROTO_EVICT, "50%", &line), 0);
	assert_string_equal(line, "evict 50%\n");
	free(line);

	assert_int_equal(ctlproto_request(CTLPROTO_INFO, "x", &line), -EINVAL);
	assert_null(line);
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICT, NULL, &line),
			 -EINVAL);
	assert_int_equal(ctlproto_request(CTLPROTO_CLEAR, "", &line), -EINVAL);
	assert_int_equal(ctlproto_request(CTLPROTO_EVICT, "1 2", &line),
			 -EINVAL);
	assert_int_equal(ctlproto_request(CTLPROTO_EVICT, "1\n", &line),
			 -EINVAL);
	assert_int_equal(ctlproto_request(CTLPROTO_NCMDS, NULL, &line),
			 -EINVAL);
	assert_null(ctlproto_cmd_name(CTLPROTO_NCMDS));
}

/* A request line exactly len bytes long (LF included) is or is not sent. */
static void test_request_too_long(void **state)
{
	size_t room = CTLPROTO_LINE_MAX - strlen("verdict ") - 1;
	char *path = malloc(room + 2), *line;

	(void)state;
	assert_non_null(path);
	memset(path, 'a', room + 1);
	path[room] = '\0';
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICT, path, &line), 0);
	assert_int_equal(strlen(line), CTLPROTO_LINE_MAX);
	free(line);
	path[room] = 'a';
	path[room + 1] = '\0';
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICT, path, &line),
			 -EMSGSIZE);
	assert_null(line);
	/* Three bytes per encoded byte count. */
	memset(path, ' ', room / 3 + 1);
	path[room / 3 + 1] = '\0';
	assert_int_equal(ctlproto_request(CTLPROTO_VERDICT, path, &line),
			 -EMSGSIZE);
	free(path);
}

/* Parses a copy of text[0..len); returns rc, *why and the request. */
static int tc_parse(const char *text, size_t len, struct ctlproto_req *req,
		    const char **why, char **buf)
{
	*buf = malloc(len + 1);
	assert_non_null(*buf);
	memcpy(*buf, text, len);
	return ctlproto_parse(*buf, len, req, why);
}

static void test_parse_round_trip(void **state)
{
	char path[257], *line, *buf;
	struct ctlproto_req req;
	const char *why;

	(void)state;
	path[0] = '/';
	for (int c = 1; c < 256; c++)
		path[c] = (char)c; /* every byte but NUL */
	path[256] = '\0';
	for (int cmd = 0; cmd < CTLPROTO_NCMDS; cmd++) {
		const char *arg =
			cmd == CTLPROTO_VERDICT || cmd == CTLPROTO_CLEAR ? path
			: cmd == CTLPROTO_EVICT ? "1048576"
						: NULL;

		assert_int_equal(ctlproto_request(cmd, arg, &line), 0);
		assert_int_equal(tc_parse(line, strlen(line), &req, &why, &buf),
				 0);
		assert_null(why);
		assert_int_equal(req.cmd, cmd);
		if (arg) {
			assert_non_null(req.arg);
			assert_string_equal(req.arg, arg);
			assert_int_equal(req.arg_len, strlen(arg));
		} else {
			assert_null(req.arg);
		}
		free(buf);
		free(line);
	}
	assert_int_equal(tc_parse("evict 50%\n", 10, &req, &why, &buf), 0);
	assert_int_equal(req.cmd, CTLPROTO_EVICT);
	assert_string_equal(req.arg, "50%");
	free(buf);
	/* Lower-case escapes from other clients are fine too. */
	assert_int_equal(
		tc_parse("clear /a%2fb%e2%82%ac\n", 22, &req, &why, &buf), 0);
	assert_string_equal(req.arg, "/a/b\xe2\x82\xac");
	free(buf);
}

/* Each malformed request: its bytes, the error and a word of the reason. */
struct tc_bad {
	const char *text;
	size_t len; /* 0: strlen(text) */
	int rc;
	const char *why;
};

static void test_parse_malformed(void **state)
{
	static const struct tc_bad bad[] = {
		{"", 0, -EINVAL, "no request"},
		{"info", 0, -EINVAL, "newline"},
		{"verdict /a", 0, -EINVAL, "newline"},
		{"info\nstatus\n", 0, -EINVAL, "one request"},
		{"info\n\n", 0, -EINVAL, "one request"},
		{"in\0fo\n", 6, -EINVAL, "NUL"},
		{"verdict /a\0b\n", 13, -EINVAL, "NUL"},
		{"verdict /a%00b\n", 0, -EINVAL, "%00"},
		{"verdict /a%4\n", 0, -EINVAL, "%-escape"},
		{"verdict /a%zz\n", 0, -EINVAL, "%-escape"},
		{"clear /a%\n", 0, -EINVAL, "%-escape"},
		{"bogus\n", 0, -EINVAL, "unknown request"},
		{"INFO\n", 0, -EINVAL, "unknown request"},
		{"\n", 0, -EINVAL, "unknown request"},
		{" info\n", 0, -EINVAL, "unknown request"},
		{"info\r\n", 0, -EINVAL, "unknown request"},
		{"verdict\n", 0, -EINVAL, "needs one PATH"},
		{"verdict \n", 0, -EINVAL, "needs one PATH"},
		{"clear\n", 0, -EINVAL, "needs one PATH"},
		{"evict\n", 0, -EINVAL, "needs one TARGET"},
		{"info x\n", 0, -EINVAL, "no argument"},
		{"info \n", 0, -EINVAL, "no argument"},
		{"status x\n", 0, -EINVAL, "no argument"},
		{"verdicts /a\n", 0, -EINVAL, "no argument"},
		{"verdict /a b\n", 0, -EINVAL, "more than one argument"},
		{"clear /a  \n", 0, -EINVAL, "more than one argument"},
		{"evict 1 2\n", 0, -EINVAL, "needs one TARGET"},
	};
	struct ctlproto_req req;
	const char *why;
	char *buf;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = bad[i].len ? bad[i].len : strlen(bad[i].text);
		int rc = tc_parse(bad[i].text, len, &req, &why, &buf);

		if (rc != bad[i].rc || !why || !strstr(why, bad[i].why))
			fail_msg("request %zu (\"%s\"): rc %d, why \"%s\"", i,
				 bad[i].text, rc, why ? why : "(null)");
		free(buf);
	}
}

static void test_parse_too_long(void **state)
{
	size_t max = CTLPROTO_LINE_MAX;
	char *text = malloc(max + 2), *buf;
	struct ctlproto_req req;
	const char *why;

	(void)state;
	assert_non_null(text);
	memcpy(text, "verdict /", 9);
	memset(text + 9, 'a', max + 2 - 9);
	/* Exactly CTLPROTO_LINE_MAX bytes with the LF: accepted. */
	text[max - 1] = '\n';
	assert_int_equal(tc_parse(text, max, &req, &why, &buf), 0);
	assert_int_equal(req.arg_len, max - 9);
	free(buf);
	/* One more: refused, with or without its LF. */
	text[max - 1] = 'a';
	text[max] = '\n';
	assert_int_equal(tc_parse(text, max + 1, &req, &why, &buf), -EMSGSIZE);
	assert_non_null(strstr(why, "too long"));
	free(buf);
	text[max] = 'a';
	assert_int_equal(tc_parse(text, max + 1, &req, &why, &buf), -EMSGSIZE);
	free(buf);
	free(text);
}

static void test_socket_helpers(void **state)
{
	char buf[CTLPROTO_LINE_MAX + 1];
	struct ctlproto_req req;
	const char *why;
	int sv[2];
	ssize_t n;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(ctlproto_send_all(sv[0], "verdict /a%20b\n", 15), 0);
	n = ctlproto_recv_request(sv[1], buf, sizeof(buf));
	assert_int_equal(n, 15);
	assert_int_equal(ctlproto_parse(buf, (size_t)n, &req, &why), 0);
	assert_int_equal(req.cmd, CTLPROTO_VERDICT);
	assert_string_equal(req.arg, "/a b");
	/* A client that shuts down its side without an LF. */
	assert_int_equal(ctlproto_send_all(sv[0], "info", 4), 0);
	shutdown(sv[0], SHUT_WR);
	n = ctlproto_recv_request(sv[1], buf, sizeof(buf));
	assert_int_equal(n, 4);
	assert_int_equal(ctlproto_parse(buf, (size_t)n, &req, &why), -EINVAL);
	assert_non_null(strstr(why, "newline"));
	close(sv[0]);
	close(sv[1]);
}

static void test_response_parse(void **state)
{
	struct ctlproto_json j;
	uint64_t v = 0;

	(void)state;
	assert_int_equal(
		ctlproto_response_parse(
			"{\"ok\": true, \"verdicts\": 512, \"verdict\": "
			"{\"phase\": \"resolved\", \"quarantined\": "
			"false}, \"a\": [1, \"x\"], \"n\": null}\n",
			&j),
		0);
	assert_int_equal(ctlproto_json_u64(&j, "verdicts", &v), 0);
	assert_int_equal(v, 512);
	assert_string_equal(ctlproto_json_get(&j, "verdict.phase"), "resolved");
	assert_false(ctlproto_json_true(&j, "verdict.quarantined"));
	assert_true(ctlproto_json_true(&j, "ok"));
	assert_string_equal(ctlproto_json_get(&j, "a.1"), "x");
	assert_null(ctlproto_json_get(&j, "n"));
	assert_int_equal(ctlproto_json_u64(&j, "n", &v), -ENOENT);
	assert_int_equal(ctlproto_json_u64(&j, "verdict.phase", &v), -ENOENT);
	ctlproto_json_free(&j);

	assert_int_equal(ctlproto_response_parse(
				 "{\"ok\": false, \"error\": \"ENOENT\", "
				 "\"message\": \"a \\\"dir\\\" on the way\"}\n",
				 &j),
			 1);
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_ERROR),
			    "ENOENT");
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_MESSAGE),
			    "a \"dir\" on the way");
	ctlproto_json_free(&j);
	assert_int_equal(ctlproto_response_parse(CTLPROTO_OOM_RESPONSE, &j), 1);
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_ERROR),
			    "ENOMEM");
	ctlproto_json_free(&j);
}

static void test_response_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[true]",
		"{\"ok\": true",
		"{\"ok\": true} trailing",
		"{\"verdicts\": 1}",
		"{\"ok\": \"true\"}",
		"{\"ok\": null}",
		"{\"ok\": 1}",
		"{\"x\": {\"ok\": true}}",
		"{\"ok\": true, \"s\": \"\\u0000\"}",
		"{\"ok\": true, \"s\": \"\\q\"}",
	};
	struct ctlproto_json j;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ctlproto_response_parse(bad[i], &j) != -EBADMSG)
			fail_msg("response %zu (%s) was not refused", i,
				 bad[i]);
}

static void test_json_strings(void **state)
{
	struct ctlproto_json j;

	(void)state;
	assert_int_equal(
		ctlproto_json_parse("{\"s\": \"caf\\u00e9 \\ud83d\\ude00 "
				    "\\t\\/\\\\\", \"u\": \"\xe6\x97\xa5\"}",
				    &j),
		0);
	assert_string_equal(ctlproto_json_get(&j, "s"),
			    "caf\xc3\xa9 \xf0\x9f\x98\x80 \t/\\");
	assert_string_equal(ctlproto_json_get(&j, "u"), "\xe6\x97\xa5");
	ctlproto_json_free(&j);
}

/* The daemon's error response parses back to what it was given. */
static void test_error_response(void **state)
{
	static const char msg[] = "bad \"path\" \\ with\ttab, \x7f and "
				  "caf\xc3\xa9";
	struct ctlproto_json j;
	struct tbuf b;

	(void)state;
	tbuf_init(&b);
	tbuf_puts(&b, "{\"ok\": true, \"half\": "); /* replaced, not kept */
	ctlproto_error(&b, -ENOENT, msg);
	assert_false(b.oom);
	assert_int_equal(b.buf[b.len - 1], '\n');
	assert_null(strchr(b.buf, '\t'));
	assert_null(strchr(b.buf, '\x7f'));
	assert_int_equal(ctlproto_response_parse(b.buf, &j), 1);
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_ERROR),
			    "ENOENT");
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_MESSAGE), msg);
	assert_null(ctlproto_json_get(&j, "half"));
	ctlproto_json_free(&j);

	ctlproto_error(&b, -EACCES, NULL);
	assert_string_equal(b.buf, "{\"ok\": false, \"error\": \"EACCES\", "
				   "\"message\": \"Permission denied\"}\n");
	ctlproto_error(&b, -4000, "odd");
	assert_int_equal(ctlproto_response_parse(b.buf, &j), 1);
	assert_string_equal(ctlproto_json_get(&j, CTLPROTO_KEY_ERROR), "EIO");
	ctlproto_json_free(&j);
	tbuf_release(&b);
}

static void test_metric_names(void **state)
{
	regex_t re;

	(void)state;
	assert_int_equal(regcomp(&re, "^[a-zA-Z_:][a-zA-Z0-9_:]*$",
				 REG_EXTENDED | REG_NOSUB),
			 0);
	assert_true(CTLPROTO_NMETRICS > 0);
	for (int i = 0; i < CTLPROTO_NMETRICS; i++) {
		const struct ctlproto_metric_desc *d = &ctlproto_metrics[i];
		size_t n = strlen(d->name);
		int counter = strcmp(d->type, "counter") == 0;

		if (regexec(&re, d->name, 0, NULL, 0) != 0)
			fail_msg("metric %d: \"%s\" is not a Prometheus name",
				 i, d->name);
		assert_int_equal(strncmp(d->name, CTLPROTO_METRIC_PREFIX,
					 strlen(CTLPROTO_METRIC_PREFIX)),
				 0);
		assert_true(counter || strcmp(d->type, "gauge") == 0);
		/* Counters, and only they, end in _total. */
		assert_int_equal(counter, n > 6 && strcmp(d->name + n - 6,
							  "_total") == 0);
		assert_true(d->help[0] != '\0');
		assert_null(strpbrk(d->help, "\n\\"));
		assert_int_equal(ctlproto_metric_find(d->name), i);
		for (int k = 0; k < i; k++)
			if (strcmp(ctlproto_metrics[k].name, d->name) == 0)
				fail_msg("metric \"%s\" twice", d->name);
	}
	assert_int_equal(ctlproto_metric_find("kvfs_bogus_total"), -1);
	regfree(&re);
}

static void test_metric_put(void **state)
{
	static const char want[] =
		"# HELP kvfs_lookup_hits_total Lookups answered: the name "
		"exists.\n# TYPE kvfs_lookup_hits_total counter\n"
		"kvfs_lookup_hits_total 18446744073709551615\n"
		"# HELP kvfs_nodes Inodes held in memory.\n"
		"# TYPE kvfs_nodes gauge\nkvfs_nodes 3\n";
	struct tbuf b;

	(void)state;
	tbuf_init(&b);
	assert_int_equal(
		ctlproto_metric_put(&b, CTLPROTO_M_LOOKUP_HITS, UINT64_MAX), 0);
	assert_int_equal(ctlproto_metric_put(&b, CTLPROTO_M_NODES, 3), 0);
	assert_int_equal(ctlproto_metric_put(&b, CTLPROTO_NMETRICS, 0),
			 -EINVAL);
	assert_false(b.oom);
	assert_string_equal(b.buf, want);
	tbuf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_every_byte),
		cmocka_unit_test(test_encode_special),
		cmocka_unit_test(test_decode_bad),
		cmocka_unit_test(test_request_build),
		cmocka_unit_test(test_request_too_long),
		cmocka_unit_test(test_parse_round_trip),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_too_long),
		cmocka_unit_test(test_socket_helpers),
		cmocka_unit_test(test_response_parse),
		cmocka_unit_test(test_response_bad),
		cmocka_unit_test(test_json_strings),
		cmocka_unit_test(test_error_response),
		cmocka_unit_test(test_metric_names),
		cmocka_unit_test(test_metric_put),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
