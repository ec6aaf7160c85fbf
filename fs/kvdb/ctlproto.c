/* SPDX-License-Identifier: MIT */
/*
 * The control protocol (ctlproto.h): command names, the percent-encoding
 * of a request's argument, building and parsing request lines, reading a
 * request from and writing a response to a socket, error responses, the
 * JSON parser the client reads responses and control files with, and the
 * table of metric names. It does not serve requests (the daemon's control
 * socket thread does) nor open sockets (kvfsctl connects its own).
 */
#include "ctlproto.h"

#include <sys/socket.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a command's argument is. */
enum ctlproto_arg { CTLPROTO_ARG_NONE, CTLPROTO_ARG_PATH, CTLPROTO_ARG_RAW };

struct ctlproto_cmd_desc {
	const char *name;
	enum ctlproto_arg arg;
	const char *bad_arg; /* why, when the argument is missing or extra */
};

static const struct ctlproto_cmd_desc ctlproto_cmds[CTLPROTO_NCMDS] = {
	[CTLPROTO_INFO] = {"info", CTLPROTO_ARG_NONE, "info takes no argument"},
	[CTLPROTO_STATUS] = {"status", CTLPROTO_ARG_NONE,
			     "status takes no argument"},
	[CTLPROTO_VERDICTS] = {"verdicts", CTLPROTO_ARG_NONE,
			       "verdicts takes no argument (verdict PATH "
			       "asks about one name)"},
	[CTLPROTO_VERDICT] = {"verdict", CTLPROTO_ARG_PATH,
			      "verdict needs one PATH argument"},
	[CTLPROTO_CLEAR] = {"clear", CTLPROTO_ARG_PATH,
			    "clear needs one PATH argument"},
	[CTLPROTO_EVICT] = {"evict", CTLPROTO_ARG_RAW,
			    "evict needs one TARGET argument"},
	[CTLPROTO_SYNC] = {"sync", CTLPROTO_ARG_NONE, "sync takes no argument"},
};

const char *ctlproto_cmd_name(enum ctlproto_cmd cmd)
{
	return (unsigned)cmd < CTLPROTO_NCMDS ? ctlproto_cmds[cmd].name : NULL;
}

/* A byte that stands for itself in an argument: printable, not a space. */
static int ctlproto_plain(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

char *ctlproto_encode(const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(3 * len + 1), *q = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (ctlproto_plain(c) && c != '%') {
			*q++ = (char)c;
			continue;
		}
		*q++ = '%';
		*q++ = hex[c >> 4];
		*q++ = hex[c & 15];
	}
	*q = '\0';
	return out;
}

static int ctlproto_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ctlproto_decode(char *s, size_t *len)
{
	char *out = s;

	for (const char *p = s; *p; p++) {
		int hi, lo;

		if (*p != '%') {
			*out++ = *p;
			continue;
		}
		hi = ctlproto_hex(p[1]);
		lo = hi < 0 ? -1 : ctlproto_hex(p[2]);
		if (lo < 0)
			return -EINVAL;
		*out++ = (char)(hi << 4 | lo);
		p += 2;
	}
	*out = '\0';
	*len = (size_t)(out - s);
	return 0;
}

int ctlproto_request(enum ctlproto_cmd cmd, const char *arg, char **line)
{
	const char *name = ctlproto_cmd_name(cmd);
	char *enc = NULL, *out;
	size_t n;

	*line = NULL;
	if (!name || (ctlproto_cmds[cmd].arg == CTLPROTO_ARG_NONE) != !arg ||
	    (arg && !*arg))
		return -EINVAL;
	if (ctlproto_cmds[cmd].arg == CTLPROTO_ARG_PATH) {
		enc = ctlproto_encode(arg, strlen(arg));
		if (!enc)
			return -ENOMEM;
		arg = enc;
	} else if (arg) {
		for (const char *p = arg; *p; p++)
			if (!ctlproto_plain((unsigned char)*p))
				return -EINVAL;
	}
	n = strlen(name) + (arg ? 1 + strlen(arg) : 0) + 1;
	if (n > CTLPROTO_LINE_MAX) {
		free(enc);
		return -EMSGSIZE;
	}
	out = malloc(n + 1);
	if (!out) {
		free(enc);
		return -ENOMEM;
	}
	snprintf(out, n + 1, "%s%s%s\n", name, arg ? " " : "", arg ? arg : "");
	free(enc);
	*line = out;
	return 0;
}

ssize_t ctlproto_recv_request(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len < cap) {
		ssize_t n = recv(fd, buf + len, cap - len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			break;
		if (memchr(buf + len, '\n', (size_t)n)) {
			len += (size_t)n;
			break;
		}
		len += (size_t)n;
	}
	return (ssize_t)len;
}

/* Finds the command word w (NUL-terminated) in the table; -1 if none. */
static int ctlproto_find_cmd(const char *w)
{
	for (int i = 0; i < CTLPROTO_NCMDS; i++)
		if (strcmp(w, ctlproto_cmds[i].name) == 0)
			return i;
	return -1;
}

/* The argument of a parsed line: checks and decodes it in place. */
static int ctlproto_parse_arg(const struct ctlproto_cmd_desc *d,
			      struct ctlproto_req *req, const char **why)
{
	if ((d->arg == CTLPROTO_ARG_NONE) != !req->arg ||
	    (req->arg && !*req->arg)) {
		*why = d->bad_arg;
		return -EINVAL;
	}
	if (!req->arg)
		return 0;
	if (strchr(req->arg, ' ')) {
		*why = d->arg == CTLPROTO_ARG_PATH
			       ? "more than one argument (a space in a path "
				 "is written %20)"
			       : d->bad_arg;
		return -EINVAL;
	}
	req->arg_len = strlen(req->arg);
	if (d->arg != CTLPROTO_ARG_PATH)
		return 0;
	if (ctlproto_decode(req->arg, &req->arg_len) < 0) {
		*why = "bad %-escape in the path";
		return -EINVAL;
	}
	if (strlen(req->arg) != req->arg_len) {
		*why = "a NUL byte (%00) in the path";
		return -EINVAL;
	}
	return 0;
}

int ctlproto_parse(char *buf, size_t len, struct ctlproto_req *req,
		   const char **why)
{
	char *lf = memchr(buf, '\n', len), *sp;
	int cmd;

	memset(req, 0, sizeof(*req));
	*why = NULL;
	if (len == 0) {
		*why = "no request";
		return -EINVAL;
	}
	if ((lf ? (size_t)(lf - buf) + 1 : len) > CTLPROTO_LINE_MAX) {
		*why = "request too long";
		return -EMSGSIZE;
	}
	if (!lf) {
		*why = "request not ended by a newline";
		return -EINVAL;
	}
	if ((size_t)(lf - buf) + 1 != len) {
		*why = "data after the request line (one request per "
		       "connection)";
		return -EINVAL;
	}
	*lf = '\0';
	if (memchr(buf, '\0', (size_t)(lf - buf))) {
		*why = "a NUL byte in the request";
		return -EINVAL;
	}
	sp = strchr(buf, ' ');
	if (sp)
		*sp++ = '\0';
	cmd = ctlproto_find_cmd(buf);
	if (cmd < 0) {
		*why = "unknown request; expected info, status, verdicts, "
		       "verdict PATH, clear PATH or evict TARGET";
		return -EINVAL;
	}
	req->cmd = (enum ctlproto_cmd)cmd;
	req->arg = sp;
	return ctlproto_parse_arg(&ctlproto_cmds[cmd], req, why);
}

int ctlproto_send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -EPIPE;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void ctlproto_error(struct tbuf *b, int err, const char *msg)
{
	const char *name = strerrorname_np(-err);

	tbuf_reset(b);
	tbuf_puts(b, "{\"" CTLPROTO_KEY_OK "\": false, \"" CTLPROTO_KEY_ERROR
		     "\": ");
	tbuf_json_str(b, name ? name : "EIO");
	tbuf_puts(b, ", \"" CTLPROTO_KEY_MESSAGE "\": ");
	tbuf_json_str(b, msg ? msg : strerror(-err));
	tbuf_puts(b, "}\n");
}

/*
 * JSON, as much as kvfs writes: one object of strings, numbers, booleans,
 * null, nested objects and arrays, flattened into "a.b" / "a.0" keys.
 */
struct ctlproto_parser {
	const char *p;
	struct ctlproto_json *j;
};

#define CTLPROTO_JSON_DEPTH 8

static void ctlproto_ws(struct ctlproto_parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
	       *ps->p == '\r')
		ps->p++;
}

/* Adds key = val; takes ownership of val (also on failure). */
static int ctlproto_json_add(struct ctlproto_json *j, const char *key,
			     char *val, int is_str)
{
	char *k = strdup(key);

	if (!k)
		goto out_nomem;
	if (j->n == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 32;
		struct ctlproto_kv *v = realloc(j->v, cap * sizeof(*v));

		if (!v)
			goto out_nomem;
		j->v = v;
		j->cap = cap;
	}
	j->v[j->n++] =
		(struct ctlproto_kv){.key = k, .val = val, .is_str = is_str};
	return 0;
out_nomem:
	free(k);
	free(val);
	return -ENOMEM;
}

/* The four hex digits at p (a \uXXXX escape); -EINVAL if they are not. */
static int ctlproto_hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		int d = ctlproto_hex(p[i]);

		if (d < 0)
			return -EINVAL;
		v = v << 4 | (unsigned)d;
	}
	*out = v;
	return 0;
}

/* Appends code point cp as UTF-8 at q; returns the new end. */
static char *ctlproto_utf8(char *q, unsigned cp)
{
	if (cp < 0x80) {
		*q++ = (char)cp;
	} else if (cp < 0x800) {
		*q++ = (char)(0xc0 | cp >> 6);
		*q++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*q++ = (char)(0xe0 | cp >> 12);
		*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*q++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*q++ = (char)(0xf0 | cp >> 18);
		*q++ = (char)(0x80 | (cp >> 12 & 0x3f));
		*q++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*q++ = (char)(0x80 | (cp & 0x3f));
	}
	return q;
}

/* A string literal at ps->p; *out is malloc'd and decoded. */
static int ctlproto_parse_string(struct ctlproto_parser *ps, char **out)
{
	const char *p = ps->p + 1, *e = p;
	char *s, *q;

	if (*ps->p != '"')
		return -EINVAL;
	/* The decoded text is never longer than the literal. */
	while (*e && *e != '"')
		e += *e == '\\' && e[1] ? 2 : 1;
	if (*e != '"')
		return -EINVAL;
	s = q = malloc((size_t)(e - p) + 1);
	if (!s)
		return -ENOMEM;
	while (p < e) {
		unsigned cp, lo;

		if (*p != '\\') {
			*q++ = *p++;
			continue;
		}
		p++;
		switch (*p++) {
		case '"':
			*q++ = '"';
			break;
		case '\\':
			*q++ = '\\';
			break;
		case '/':
			*q++ = '/';
			break;
		case 'b':
			*q++ = '\b';
			break;
		case 'f':
			*q++ = '\f';
			break;
		case 'n':
			*q++ = '\n';
			break;
		case 'r':
			*q++ = '\r';
			break;
		case 't':
			*q++ = '\t';
			break;
		case 'u':
			if (p + 4 > e || ctlproto_hex4(p, &cp) < 0)
				goto out_bad;
			p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && p + 6 <= e &&
			    p[0] == '\\' && p[1] == 'u' &&
			    ctlproto_hex4(p + 2, &lo) == 0 && lo >= 0xdc00 &&
			    lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
				p += 6;
			}
			if (cp == 0)
				goto out_bad;
			q = ctlproto_utf8(q, cp);
			break;
		default:
			goto out_bad;
		}
	}
	*q = '\0';
	ps->p = e + 1;
	*out = s;
	return 0;
out_bad:
	free(s);
	return -EINVAL;
}

static int ctlproto_parse_value(struct ctlproto_parser *ps, const char *key,
				int depth);

/* An object or array at ps->p; members get keys "prefix.name". */
static int ctlproto_parse_container(struct ctlproto_parser *ps,
				    const char *prefix, int depth)
{
	char close = *ps->p == '{' ? '}' : ']';
	size_t index = 0;
	int rc;

	if (depth > CTLPROTO_JSON_DEPTH)
		return -EINVAL;
	ps->p++;
	ctlproto_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *name = NULL, *key;
		char num[32];
		size_t klen;

		ctlproto_ws(ps);
		if (close == '}') {
			rc = ctlproto_parse_string(ps, &name);
			if (rc < 0)
				return rc;
			ctlproto_ws(ps);
			if (*ps->p != ':') {
				free(name);
				return -EINVAL;
			}
			ps->p++;
		} else {
			snprintf(num, sizeof(num), "%zu", index++);
		}
		klen = strlen(prefix) + 1 + strlen(name ? name : num) + 1;
		key = malloc(klen);
		if (!key) {
			free(name);
			return -ENOMEM;
		}
		snprintf(key, klen, "%s%s%s", prefix, *prefix ? "." : "",
			 name ? name : num);
		free(name);
		rc = ctlproto_parse_value(ps, key, depth + 1);
		free(key);
		if (rc < 0)
			return rc;
		ctlproto_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p != close)
			return -EINVAL;
		ps->p++;
		return 0;
	}
}

static int ctlproto_parse_value(struct ctlproto_parser *ps, const char *key,
				int depth)
{
	const char *start;
	char *val;
	int rc;

	ctlproto_ws(ps);
	switch (*ps->p) {
	case '{':
	case '[':
		return ctlproto_parse_container(ps, key, depth);
	case '"':
		rc = ctlproto_parse_string(ps, &val);
		return rc < 0 ? rc : ctlproto_json_add(ps->j, key, val, 1);
	case 'n':
		if (strncmp(ps->p, "null", 4) != 0)
			return -EINVAL;
		ps->p += 4;
		return ctlproto_json_add(ps->j, key, NULL, 0);
	default:
		break;
	}
	start = ps->p;
	while (*ps->p && strchr("+-0123456789.eEtruefals", *ps->p))
		ps->p++;
	if (ps->p == start)
		return -EINVAL;
	val = strndup(start, (size_t)(ps->p - start));
	if (!val)
		return -ENOMEM;
	return ctlproto_json_add(ps->j, key, val, 0);
}

int ctlproto_json_parse(const char *text, struct ctlproto_json *out)
{
	struct ctlproto_parser ps = {.p = text, .j = out};
	int rc;

	memset(out, 0, sizeof(*out));
	ctlproto_ws(&ps);
	if (*ps.p != '{')
		return -EINVAL;
	rc = ctlproto_parse_container(&ps, "", 0);
	if (rc == 0) {
		ctlproto_ws(&ps);
		if (*ps.p)
			rc = -EINVAL;
	}
	if (rc < 0)
		ctlproto_json_free(out);
	return rc;
}

void ctlproto_json_free(struct ctlproto_json *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->v[i].key);
		free(j->v[i].val);
	}
	free(j->v);
	memset(j, 0, sizeof(*j));
}

const char *ctlproto_json_get(const struct ctlproto_json *j, const char *key)
{
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->v[i].key, key) == 0)
			return j->v[i].val;
	return NULL;
}

int ctlproto_json_u64(const struct ctlproto_json *j, const char *key,
		      uint64_t *out)
{
	const char *v = NULL;
	char *end;
	unsigned long long n;

	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->v[i].key, key) == 0 && !j->v[i].is_str)
			v = j->v[i].val;
	if (!v || *v < '0' || *v > '9')
		return -ENOENT;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end)
		return -ENOENT;
	*out = n;
	return 0;
}

int ctlproto_json_true(const struct ctlproto_json *j, const char *key)
{
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->v[i].key, key) == 0)
			return !j->v[i].is_str && j->v[i].val &&
			       strcmp(j->v[i].val, "true") == 0;
	return 0;
}

int ctlproto_response_parse(const char *text, struct ctlproto_json *out)
{
	const struct ctlproto_kv *ok = NULL;
	int rc = ctlproto_json_parse(text, out);

	if (rc < 0)
		return rc == -ENOMEM ? rc : -EBADMSG;
	for (size_t i = 0; i < out->n; i++)
		if (strcmp(out->v[i].key, CTLPROTO_KEY_OK) == 0)
			ok = &out->v[i];
	if (!ok || ok->is_str || !ok->val ||
	    (strcmp(ok->val, "true") != 0 && strcmp(ok->val, "false") != 0)) {
		ctlproto_json_free(out);
		return -EBADMSG;
	}
	return strcmp(ok->val, "true") == 0 ? 0 : 1;
}

/* --- metrics -------------------------------------------------------- */

const struct ctlproto_metric_desc ctlproto_metrics[CTLPROTO_NMETRICS] = {
#define CTLPROTO_METRIC_DESC(id, name, type, help)                             \
	[CTLPROTO_M_##id] = {CTLPROTO_METRIC_PREFIX name, #type, help},
	CTLPROTO_METRICS(CTLPROTO_METRIC_DESC)
#undef CTLPROTO_METRIC_DESC
};

int ctlproto_metric_put(struct tbuf *b, enum ctlproto_metric m, uint64_t v)
{
	const struct ctlproto_metric_desc *d;

	if ((unsigned)m >= CTLPROTO_NMETRICS)
		return -EINVAL;
	d = &ctlproto_metrics[m];
	tbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", d->name,
		    d->help, d->name, d->type, d->name, (unsigned long long)v);
	return 0;
}

int ctlproto_metric_find(const char *name)
{
	for (int i = 0; i < CTLPROTO_NMETRICS; i++)
		if (strcmp(name, ctlproto_metrics[i].name) == 0)
			return i;
	return -1;
}
