/* SPDX-License-Identifier: MIT */
/*
 * The growable text buffer and the JSON string writer; see tbuf.h.
 */
#include "tbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* First allocation; the capacity doubles from there. */
#define TBUF_MIN_CAP 1024u

/* What buf points at while nothing is allocated: never written to. */
static char tbuf_empty[1];

void tbuf_init(struct tbuf *b)
{
	b->buf = tbuf_empty;
	b->len = 0;
	b->cap = 0;
	b->oom = 0;
}

void tbuf_release(struct tbuf *b)
{
	if (b->cap)
		free(b->buf);
	tbuf_init(b);
}

char *tbuf_detach(struct tbuf *b, size_t *len)
{
	char *s = NULL;

	if (!b->oom) {
		s = b->cap ? b->buf : strdup("");
		if (s && len)
			*len = b->len;
		if (b->cap)
			b->cap =
				0; /* handed over: tbuf_release must not free */
	}
	tbuf_release(b);
	return s;
}

void tbuf_reset(struct tbuf *b)
{
	b->len = 0;
	if (b->cap)
		b->buf[0] = '\0';
}

int tbuf_reserve(struct tbuf *b, size_t n)
{
	size_t ncap;
	char *nb;

	if (b->oom)
		return -ENOMEM;
	if (n < SIZE_MAX - b->len && b->len + n < b->cap)
		return 0;
	if (n >= SIZE_MAX / 2 - b->len) {
		b->oom = 1;
		return -ENOMEM;
	}
	ncap = b->cap ? b->cap : TBUF_MIN_CAP;
	while (ncap <= b->len + n)
		ncap *= 2;
	nb = realloc(b->cap ? b->buf : NULL, ncap);
	if (!nb) {
		b->oom = 1;
		return -ENOMEM;
	}
	if (!b->cap)
		nb[0] = '\0';
	b->buf = nb;
	b->cap = ncap;
	return 0;
}

void tbuf_write(struct tbuf *b, const void *p, size_t n)
{
	if (tbuf_reserve(b, n) < 0)
		return;
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

void tbuf_putc(struct tbuf *b, char c)
{
	tbuf_write(b, &c, 1);
}

void tbuf_puts(struct tbuf *b, const char *s)
{
	tbuf_write(b, s, strlen(s));
}

void tbuf_vprintf(struct tbuf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (b->oom)
		return;
	va_copy(aq, ap);
	n = vsnprintf(b->cap ? b->buf + b->len : NULL,
		      b->cap ? b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0) {
		/* Only an invalid format or a conversion error: no text. */
		b->oom = 1;
		if (b->cap)
			b->buf[b->len] = '\0';
		return;
	}
	if (b->cap && b->len + (size_t)n < b->cap) {
		b->len += (size_t)n;
		return;
	}
	if (tbuf_reserve(b, (size_t)n) < 0)
		return;
	vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
	b->len += (size_t)n;
}

void tbuf_printf(struct tbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

void tbuf_json_str(struct tbuf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	tbuf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};

			tbuf_write(b, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			char esc[6] = {'\\', 'u',	  '0',
				       '0',  hex[c >> 4], hex[c & 15]};

			tbuf_write(b, esc, 6);
		} else {
			tbuf_putc(b, (char)c);
		}
	}
	tbuf_putc(b, '"');
}

int tbuf_json_fput(FILE *f, const char *s)
{
	struct tbuf b;
	int rc = 0;

	tbuf_init(&b);
	tbuf_json_str(&b, s);
	if (b.oom)
		rc = -ENOMEM;
	else if (fwrite(b.buf, 1, b.len, f) != b.len)
		rc = -EIO;
	tbuf_release(&b);
	return rc;
}
