/* SPDX-License-Identifier: MIT */
/*
 * The shared tier's RADOS client (rtier.h): object names, the block and
 * directory-index layouts, and the checks a read makes, on librados.
 */
#include "rtier.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>

#include "crc32c.h"
#include "kvtypes.h"

/* Bytes a get asks for in its first round trip (most blocks fit). */
#define RTIER_FIRST_READ (4u << 20)
#define RTIER_XATTR_LEN "kvfs.len"
#define RTIER_XATTR_CRCS "kvfs.crcs"

struct rtier {
	rados_t cluster;
	rados_ioctx_t io;
};

static void rtier_say(char *err, size_t errlen, const char *what, int rc)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", what, strerror(-rc));
}

int rtier_open(struct rtier **out, const struct rtier_config *cfg, char *err,
	       size_t errlen)
{
	char tmo[16];
	struct rtier *rt;
	int rc;

	if (!cfg->pool || !*cfg->pool) {
		rtier_say(err, errlen, "no pool given", -EINVAL);
		return -EINVAL;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	snprintf(tmo, sizeof(tmo), "%u", cfg->timeout_s ? cfg->timeout_s : 10);
	rc = rados_create(&rt->cluster, cfg->id);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot create a RADOS handle", rc);
		free(rt);
		return rc;
	}
	rc = rados_conf_read_file(rt->cluster, cfg->conf);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot read the Ceph configuration",
			  rc);
		goto out_shutdown;
	}
	/* Nothing may wait without bound on a sick cluster. */
	if ((rc = rados_conf_set(rt->cluster, "rados_osd_op_timeout", tmo)) <
		    0 ||
	    (rc = rados_conf_set(rt->cluster, "rados_mon_op_timeout", tmo)) <
		    0 ||
	    (rc = rados_conf_set(rt->cluster, "client_mount_timeout", tmo)) <
		    0) {
		rtier_say(err, errlen, "cannot set the RADOS timeouts", rc);
		goto out_shutdown;
	}
	rc = rados_connect(rt->cluster);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot connect to the cluster", rc);
		goto out_shutdown;
	}
	rc = rados_ioctx_create(rt->cluster, cfg->pool, &rt->io);
	if (rc < 0) {
		rtier_say(err, errlen, "cannot open the pool", rc);
		goto out_shutdown;
	}
	if (cfg->ns)
		rados_ioctx_set_namespace(rt->io, cfg->ns);
	*out = rt;
	return 0;
out_shutdown:
	rados_shutdown(rt->cluster);
	free(rt);
	return rc;
}

void rtier_close(struct rtier *rt)
{
	if (!rt)
		return;
	rados_ioctx_destroy(rt->io);
	rados_shutdown(rt->cluster);
	free(rt);
}

/*
 * The object names of path: its block's ("b:" PATH) and its directory's
 * ("d:" DIR), and a pointer to its name within path.
 */
static int rtier_names(const char *path, char *boid, char *doid,
		       const char **name)
{
	size_t len = strlen(path);
	const char *slash;

	if (path[0] != '/' || len < 2 || len > RTIER_PATH_MAX ||
	    path[len - 1] == '/')
		return -EINVAL;
	slash = strrchr(path, '/');
	snprintf(boid, RTIER_PATH_MAX + 3, "b:%s", path);
	if (slash == path)
		snprintf(doid, RTIER_PATH_MAX + 3, "d:/");
	else
		snprintf(doid, RTIER_PATH_MAX + 3, "d:%.*s",
			 (int)(slash - path), path);
	*name = slash + 1;
	return 0;
}

static void rtier_le64(char *out, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		out[i] = (char)(v >> (8 * i));
}

static uint64_t rtier_get_le64(const char *in)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | (unsigned char)in[i];
	return v;
}

int rtier_put(struct rtier *rt, const char *path, const void *buf, uint64_t len,
	      const uint32_t *crcs)
{
	char boid[RTIER_PATH_MAX + 3], doid[RTIER_PATH_MAX + 3], slen[24];
	char vlen[8];
	uint32_t n = kv_nchunks(len);
	const char *name, *val = vlen;
	size_t vsize = sizeof(vlen);
	rados_write_op_t op;
	char *blob;
	int rc;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	blob = malloc((size_t)n * 4 + 1);
	if (!blob)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			blob[4 * i + b] = (char)(crcs[i] >> (8 * b));
	snprintf(slen, sizeof(slen), "%" PRIu64, len);
	op = rados_create_write_op();
	if (!op) {
		free(blob);
		return -ENOMEM;
	}
	rados_write_op_write_full(op, buf, (size_t)len);
	rados_write_op_setxattr(op, RTIER_XATTR_LEN, slen, strlen(slen));
	rados_write_op_setxattr(op, RTIER_XATTR_CRCS, blob, (size_t)n * 4);
	rc = rados_write_op_operate(op, rt->io, boid, NULL, 0);
	rados_release_write_op(op);
	free(blob);
	if (rc < 0)
		return rc;
	/* The name after the block: whoever finds the name finds its bytes. */
	rtier_le64(vlen, len);
	op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_omap_set(op, &name, &val, &vsize, 1);
	rc = rados_write_op_operate(op, rt->io, doid, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

int rtier_probe(struct rtier *rt, const char *dir, size_t n,
		const char *const *names, int *found, uint64_t *sizes)
{
	char doid[RTIER_PATH_MAX + 3];
	rados_omap_iter_t it = NULL;
	rados_read_op_t op;
	int rc, prval = 0;
	char *key, *val;
	size_t vlen;

	if (dir[0] != '/' || strlen(dir) > RTIER_PATH_MAX)
		return -EINVAL;
	snprintf(doid, sizeof(doid), "d:%s", dir);
	memset(found, 0, n * sizeof(*found));
	if (n == 0)
		return 0;
	op = rados_create_read_op();
	if (!op)
		return -ENOMEM;
	rados_read_op_omap_get_vals_by_keys(op, (char const *const *)names, n,
					    &it, &prval);
	rc = rados_read_op_operate(op, rt->io, doid, 0);
	if (rc == -ENOENT)
		rc = 0; /* nothing was ever stored in dir */
	else if (rc == 0 && prval < 0)
		rc = prval;
	else if (rc == 0)
		while (rados_omap_get_next(it, &key, &val, &vlen) == 0 && key)
			for (size_t i = 0; i < n; i++) {
				if (found[i] || strcmp(key, names[i]) != 0)
					continue;
				found[i] = 1;
				sizes[i] = vlen == 8 ? rtier_get_le64(val) : 0;
			}
	/* Made when the op was prepared: freed whatever the outcome. */
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return rc;
}

/* The length and CRCs a block's xattrs give: 0, or -EBADMSG. */
static int rtier_meta(rados_xattrs_iter_t it, uint64_t *len, char **crcs,
		      size_t *ncrc_bytes)
{
	const char *name, *val;
	int have_len = 0;
	size_t vlen;

	*crcs = NULL;
	while (rados_getxattrs_next(it, &name, &val, &vlen) == 0 && name) {
		if (strcmp(name, RTIER_XATTR_LEN) == 0 && vlen < 24) {
			char tmp[24], *end;

			memcpy(tmp, val, vlen);
			tmp[vlen] = '\0';
			*len = strtoull(tmp, &end, 10);
			have_len = vlen > 0 && *end == '\0';
		} else if (strcmp(name, RTIER_XATTR_CRCS) == 0 && !*crcs) {
			*crcs = malloc(vlen + 1);
			/* An empty block's CRCs are empty: val may be NULL. */
			if (*crcs && vlen)
				memcpy(*crcs, val, vlen);
			*ncrc_bytes = vlen;
		}
	}
	return have_len && *crcs ? 0 : -EBADMSG;
}

/* Checks buf (len bytes) against the stored CRCs. */
static int rtier_verify(const char *buf, uint64_t len, const char *crcs,
			size_t ncrc_bytes)
{
	uint32_t n = kv_nchunks(len);

	if (ncrc_bytes != (size_t)n * 4)
		return -EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * KV_CHUNK_SIZE;
		size_t clen = len - off < KV_CHUNK_SIZE ? (size_t)(len - off)
							: KV_CHUNK_SIZE;
		uint32_t want = 0;

		for (int b = 3; b >= 0; b--)
			want = want << 8 | (unsigned char)crcs[4 * i + b];
		if (crc32c(0, buf + off, clen) != want)
			return -EBADMSG;
	}
	return 0;
}

int rtier_get(struct rtier *rt, const char *path, void **out, uint64_t *len)
{
	char boid[RTIER_PATH_MAX + 3], doid[RTIER_PATH_MAX + 3];
	int rc, pr_stat = 0, pr_x = 0, pr_read = 0;
	size_t got = 0, ncrc_bytes = 0;
	rados_xattrs_iter_t it = NULL;
	uint64_t psize = 0, want = 0;
	char *buf, *crcs = NULL, *nb;
	const char *name;
	rados_read_op_t op;
	time_t mtime;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	buf = malloc(RTIER_FIRST_READ);
	op = rados_create_read_op();
	if (!buf || !op) {
		free(buf);
		if (op)
			rados_release_read_op(op);
		return -ENOMEM;
	}
	/* One round trip: size, metadata and (most often) every byte. */
	rados_read_op_stat(op, &psize, &mtime, &pr_stat);
	rados_read_op_getxattrs(op, &it, &pr_x);
	rados_read_op_read(op, 0, RTIER_FIRST_READ, buf, &got, &pr_read);
	rc = rados_read_op_operate(op, rt->io, boid, 0);
	if (rc == 0 && pr_x == 0)
		rc = rtier_meta(it, &want, &crcs, &ncrc_bytes);
	/* Made when the op was prepared: freed whatever the outcome. */
	if (it)
		rados_getxattrs_end(it);
	if (rc == 0)
		rc = pr_stat < 0 ? pr_stat : pr_x < 0 ? pr_x : pr_read;
	rados_release_read_op(op);
	/* Provably short: fewer bytes than the length it was stored with. */
	if (rc == 0 && psize < want)
		rc = -ENODATA;
	else if (rc == 0 && psize > want)
		rc = -EBADMSG;
	if (rc == 0 && want > got) {
		nb = realloc(buf, (size_t)want);
		if (!nb)
			rc = -ENOMEM;
		else
			buf = nb;
		while (rc == 0 && got < want) {
			int r = rados_read(rt->io, boid, buf + got,
					   (size_t)(want - got), got);

			if (r < 0)
				rc = r;
			else if (r == 0)
				rc = -ENODATA; /* cut short meanwhile */
			else
				got += (size_t)r;
		}
	}
	if (rc == 0)
		rc = rtier_verify(buf, want, crcs, ncrc_bytes);
	free(crcs);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = want;
	return 0;
}

int rtier_remove(struct rtier *rt, const char *path)
{
	char boid[RTIER_PATH_MAX + 3], doid[RTIER_PATH_MAX + 3];
	rados_write_op_t op;
	const char *name;
	int rc, rc2;

	rc = rtier_names(path, boid, doid, &name);
	if (rc < 0)
		return rc;
	/* The name first: nobody is sent to a block that is going. */
	op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_omap_rm_keys(op, &name, 1);
	rc2 = rados_write_op_operate(op, rt->io, doid, NULL, 0);
	rados_release_write_op(op);
	/* A name still there keeps its block (and a sick cluster one wait). */
	if (rc2 < 0 && rc2 != -ENOENT)
		return rc2;
	return rados_remove(rt->io, boid);
}
