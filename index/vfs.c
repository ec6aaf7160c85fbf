/* SPDX-License-Identifier: MIT */
/*
 * Read-around for the index's database file: an SQLite VFS ("kvfs") that
 * is the platform's default VFS with two changes. The first read of a page
 * of a main database file in each IDX_RA_BYTES-aligned window since the
 * file was opened asks the kernel for the whole window first
 * (POSIX_FADV_WILLNEED), so that a window not cached is one disk read; a
 * later read that had to wait for the disk (the window was reclaimed)
 * asks for it again, in the background.
 *
 * Why: a lookup in a large directory reads a few B-tree pages at random
 * (the name's index page, its inode's page), and the kernel does not read
 * ahead for random reads, so a cold index costs one disk read per page. The
 * pages of one window belong to the same trees, which every later lookup
 * descends as well; ext4 reads its inode tables the same way (32 blocks
 * around a missing inode). The window is small enough that a single cold
 * lookup costs about what it did, and the extra pages go to the page cache,
 * which the kernel may reclaim, not to the daemon's memory.
 *
 * Second, a page fetched through SQLite's memory mapping of the file enters
 * its whole IDX_MAP_BYTES window into the page tables the first time
 * (idx_map_populate()), and the mapping asks for huge pages (idx_mmap());
 * to know where the mappings are, the unix VFS's mmap, munmap and mremap
 * calls are wrapped (idx_vfs_wrap_maps()).
 *
 * Not here: anything about SQL (the rest of index/), the log (-wal) and
 * shared-memory files, which SQLite reads as it always does, and writes.
 *
 * Threads: idx_vfs_name(), called before every connection is opened, sets
 * SQLite's process-wide settings and registers the VFS once (pthread_once),
 * before SQLite's first use; the file methods run under whatever lock
 * SQLite's caller holds, like the default VFS's; the one shared state, the
 * table of mappings, has its own lock (idx_maps_lock, innermost). When the
 * default VFS is not SQLite's "unix" one, files are opened through it
 * without read-around.
 */
#include "index_int.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes read around a page missing from the page cache. */
#define IDX_RA_BYTES (128 * 1024)
/* Bytes of a mapping entered into the page tables at a time. */
#define IDX_MAP_BYTES (1024 * 1024)
/* Mappings of database files tracked at once (a few per connection). */
#define IDX_MAX_MAPS 32
/*
 * A read slower than this went to the disk (a page-cache hit takes a
 * microsecond or two; a disk read, tens at least). A read that was only
 * slow to be scheduled advises a window that is cached already: harmless.
 */
#define IDX_RA_SLOW_NS 10000

/* A bit per window of a file, grown as windows are met. */
struct idx_bits {
	uint64_t *w;
	size_t nwords;
};

/* An open file: ours first, the default VFS's file right after it. */
struct idx_vfs_file {
	sqlite3_file base;
	int fd; /* the real file's descriptor, for the advice; -1: none */
	struct idx_bits seen; /* windows read around since the open */
	sqlite3_file *real;
};

/*
 * How the "unix" VFS's file begins. SQLite does not hand out a file's
 * descriptor, and a second descriptor of our own would not do: closing it
 * would drop the process's POSIX locks on the file, which SQLite's other
 * connections in this process hold. The descriptor read from here is used
 * only when it names the very file just opened (same device and inode).
 */
struct idx_unix_head {
	const void *methods;
	void *vfs;
	void *inode;
	int h;
};

/*
 * A read-only mapping of a whole file that the unix VFS made (SQLite maps a
 * main database file so, and nothing else), and which of its
 * IDX_MAP_BYTES windows are in the page tables (a bit each).
 */
struct idx_map {
	char *addr; /* NULL: a free slot */
	size_t len;
	struct idx_bits done;
};

/* Protected by idx_maps_lock. */
static struct idx_map idx_maps[IDX_MAX_MAPS];
static pthread_mutex_t idx_maps_lock = PTHREAD_MUTEX_INITIALIZER;
/* The unix VFS's own calls, which ours wrap; set once, by idx_vfs_init. */
static void *(*idx_os_mmap)(void *, size_t, int, int, int, off_t);
static int (*idx_os_munmap)(void *, size_t);
static void *(*idx_os_mremap)(void *, size_t, size_t, int, ...);

static sqlite3_vfs idx_vfs;
static sqlite3_vfs *idx_vfs_under;
static sqlite3_io_methods idx_vfs_methods;
static pthread_once_t idx_vfs_once = PTHREAD_ONCE_INIT;
static int idx_vfs_ok;

#define IDX_REAL(f) (((struct idx_vfs_file *)(f))->real)

/* Sets bit i; 1 when it was not set (or when out of memory: 0). */
static int idx_bits_first(struct idx_bits *b, uint64_t i)
{
	size_t word = (size_t)(i / 64), n;
	uint64_t bit = 1ull << (i % 64), *grown;

	if (word >= b->nwords) {
		for (n = b->nwords ? b->nwords : 16; n <= word; n *= 2)
			;
		grown = realloc(b->w, n * sizeof(*grown));
		if (!grown)
			return 0;
		memset(grown + b->nwords, 0, (n - b->nwords) * sizeof(*grown));
		b->w = grown;
		b->nwords = n;
	}
	if (b->w[word] & bit)
		return 0;
	b->w[word] |= bit;
	return 1;
}

static void idx_bits_free(struct idx_bits *b)
{
	free(b->w);
	*b = (struct idx_bits){0};
}

static int idx_vfs_close(sqlite3_file *f)
{
	struct idx_vfs_file *p = (struct idx_vfs_file *)f;
	int rc = p->real->pMethods ? p->real->pMethods->xClose(p->real)
				   : SQLITE_OK;

	p->fd = -1; /* the real file's, closed by it */
	idx_bits_free(&p->seen);
	return rc;
}

static int64_t idx_vfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int idx_vfs_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	struct idx_vfs_file *p = (struct idx_vfs_file *)f;
	off_t win = off & ~(off_t)(IDX_RA_BYTES - 1);
	int64_t t0 = 0;
	int rc;

	if (p->fd >= 0 && off >= 0) {
		/*
		 * The first read in a window since the open asks for the whole
		 * window first, and then waits for it as one disk read when it
		 * is not cached (a cached window costs one quick call, once).
		 */
		if (idx_bits_first(&p->seen, (uint64_t)win / IDX_RA_BYTES))
			posix_fadvise(p->fd, win, IDX_RA_BYTES,
				      POSIX_FADV_WILLNEED);
		else
			t0 = idx_vfs_now_ns();
	}
	rc = p->real->pMethods->xRead(p->real, buf, n, off);
	/*
	 * Later, a read that took this long went to the disk (the window's
	 * pages were reclaimed): the kernel reads the rest of the window in
	 * the background. Asking whether a page is cached before every read
	 * would cost a system call per read.
	 */
	if (t0 && idx_vfs_now_ns() - t0 > IDX_RA_SLOW_NS)
		posix_fadvise(p->fd, win, IDX_RA_BYTES, POSIX_FADV_WILLNEED);
	return rc;
}

static int idx_vfs_write(sqlite3_file *f, const void *buf, int n,
			 sqlite3_int64 off)
{
	return IDX_REAL(f)->pMethods->xWrite(IDX_REAL(f), buf, n, off);
}

static int idx_vfs_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return IDX_REAL(f)->pMethods->xTruncate(IDX_REAL(f), size);
}

static int idx_vfs_sync(sqlite3_file *f, int flags)
{
	return IDX_REAL(f)->pMethods->xSync(IDX_REAL(f), flags);
}

static int idx_vfs_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return IDX_REAL(f)->pMethods->xFileSize(IDX_REAL(f), size);
}

static int idx_vfs_lock(sqlite3_file *f, int level)
{
	return IDX_REAL(f)->pMethods->xLock(IDX_REAL(f), level);
}

static int idx_vfs_unlock(sqlite3_file *f, int level)
{
	return IDX_REAL(f)->pMethods->xUnlock(IDX_REAL(f), level);
}

static int idx_vfs_check_reserved(sqlite3_file *f, int *out)
{
	return IDX_REAL(f)->pMethods->xCheckReservedLock(IDX_REAL(f), out);
}

static int idx_vfs_file_control(sqlite3_file *f, int op, void *arg)
{
	return IDX_REAL(f)->pMethods->xFileControl(IDX_REAL(f), op, arg);
}

static int idx_vfs_sector_size(sqlite3_file *f)
{
	return IDX_REAL(f)->pMethods->xSectorSize(IDX_REAL(f));
}

static int idx_vfs_device_chars(sqlite3_file *f)
{
	return IDX_REAL(f)->pMethods->xDeviceCharacteristics(IDX_REAL(f));
}

static int idx_vfs_shm_map(sqlite3_file *f, int pg, int pgsz, int extend,
			   void volatile **out)
{
	return IDX_REAL(f)->pMethods->xShmMap(IDX_REAL(f), pg, pgsz, extend,
					      out);
}

static int idx_vfs_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	return IDX_REAL(f)->pMethods->xShmLock(IDX_REAL(f), off, n, flags);
}

static void idx_vfs_shm_barrier(sqlite3_file *f)
{
	IDX_REAL(f)->pMethods->xShmBarrier(IDX_REAL(f));
}

static int idx_vfs_shm_unmap(sqlite3_file *f, int del)
{
	return IDX_REAL(f)->pMethods->xShmUnmap(IDX_REAL(f), del);
}

/*
 * The tracked mapping that starts at addr, or a free slot for addr NULL;
 * idx_maps_lock held.
 */
static struct idx_map *idx_map_at(const void *addr)
{
	for (int i = 0; i < IDX_MAX_MAPS; i++)
		if (idx_maps[i].addr == addr)
			return &idx_maps[i];
	return NULL;
}

static void idx_map_drop(struct idx_map *m)
{
	idx_bits_free(&m->done);
	*m = (struct idx_map){0};
}

static void *idx_mmap(void *addr, size_t len, int prot, int flags, int fd,
		      off_t off)
{
	void *p = idx_os_mmap(addr, len, prot, flags, fd, off);
	struct idx_map *m;

	/* The -shm file's mappings are writable: not ours. */
	if (p == MAP_FAILED || prot != PROT_READ || off != 0)
		return p;
	/*
	 * Asks for huge pages: the kernel then reads the file in 2 MiB folios
	 * and maps each with one page-table entry. On this VM the first load
	 * from each 4 KiB page mapped took a quarter of a cold lookup's daemon
	 * CPU, madvise or not; one entry per 2 MiB ends that (kvfs(7), the
	 * checkpointer). Without THP the advice fails; nothing else changes.
	 */
	(void)madvise(p, len, MADV_HUGEPAGE);
	pthread_mutex_lock(&idx_maps_lock);
	m = idx_map_at(NULL);
	if (m)
		*m = (struct idx_map){.addr = p, .len = len};
	pthread_mutex_unlock(&idx_maps_lock);
	return p;
}

static int idx_munmap(void *addr, size_t len)
{
	char *a = addr;

	pthread_mutex_lock(&idx_maps_lock);
	for (int i = 0; i < IDX_MAX_MAPS; i++) {
		struct idx_map *m = &idx_maps[i];

		if (!m->addr || a + len <= m->addr || a >= m->addr + m->len)
			continue;
		if (a <= m->addr)
			idx_map_drop(m); /* SQLite unmaps whole or a tail */
		else
			m->len = (size_t)(a - m->addr);
	}
	pthread_mutex_unlock(&idx_maps_lock);
	return idx_os_munmap(addr, len);
}

/* SQLite calls it with MREMAP_MAYMOVE only (no fifth argument). */
static void *idx_mremap(void *old, size_t oldlen, size_t len, int flags, ...)
{
	void *p = idx_os_mremap(old, oldlen, len, flags);
	struct idx_map *m;

	pthread_mutex_lock(&idx_maps_lock);
	m = idx_map_at(old);
	/* The page tables move with the pages: the windows stay done. */
	if (m && p == MAP_FAILED) {
		idx_map_drop(m);
	} else if (m) {
		m->addr = p;
		m->len = len;
	}
	pthread_mutex_unlock(&idx_maps_lock);
	return p;
}

/*
 * Enters the IDX_MAP_BYTES window of the mapping that starts at base which
 * holds offset off into the page tables, the first time it is fetched.
 * Why: the first touch of a mapped page costs a page fault, which maps 16
 * pages (the kernel's fault-around). Where faults are dear (this VM: a
 * third of a cold lookup's time went to them) one madvise per window is
 * much cheaper. The pages are the page cache's, as those of faults are.
 */
static void idx_map_populate(char *base, uint64_t off)
{
	uint64_t w = off / IDX_MAP_BYTES;
	struct idx_map *m = NULL;
	size_t start = (size_t)(w * IDX_MAP_BYTES), len = 0;

	pthread_mutex_lock(&idx_maps_lock);
	if (base)
		m = idx_map_at(base);
	if (m && start < m->len && idx_bits_first(&m->done, w))
		len = m->len - start < IDX_MAP_BYTES ? m->len - start
						     : IDX_MAP_BYTES;
	pthread_mutex_unlock(&idx_maps_lock);
	/*
	 * A failure (a kernel before 5.14, a disk error) leaves the pages to
	 * the faults, as without this call.
	 */
	if (len)
		madvise(base + start, len, MADV_POPULATE_READ);
}

static int idx_vfs_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out)
{
	const sqlite3_io_methods *m = IDX_REAL(f)->pMethods;
	int rc;

	/* No memory map: SQLite reads the page instead. */
	*out = NULL;
	if (m->iVersion < 3)
		return SQLITE_OK;
	rc = m->xFetch(IDX_REAL(f), off, n, out);
	if (rc == SQLITE_OK && *out && off >= 0)
		idx_map_populate((char *)*out - off, (uint64_t)off);
	return rc;
}

static int idx_vfs_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	const sqlite3_io_methods *m = IDX_REAL(f)->pMethods;

	return m->iVersion >= 3 ? m->xUnfetch(IDX_REAL(f), off, p) : SQLITE_OK;
}

/* The descriptor of the unix VFS's file real, opened as name, or -1. */
static int idx_vfs_fd(sqlite3_file *real, const char *name)
{
	const struct idx_unix_head *u = (const struct idx_unix_head *)real;
	struct stat a, b;

	if (strncmp(idx_vfs_under->zName, "unix", 4) != 0 ||
	    idx_vfs_under->szOsFile < (int)sizeof(*u) || u->h < 0 ||
	    fstat(u->h, &a) < 0 || stat(name, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return -1;
	return u->h;
}

static int idx_vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
			int flags, int *out_flags)
{
	struct idx_vfs_file *p = (struct idx_vfs_file *)f;
	int rc;

	p->real = (sqlite3_file *)(p + 1);
	p->fd = -1;
	p->seen = (struct idx_bits){0};
	rc = idx_vfs_under->xOpen(idx_vfs_under, name, p->real, flags,
				  out_flags);
	if (rc != SQLITE_OK) {
		/* SQLite closes a file whose open failed only if pMethods. */
		f->pMethods = NULL;
		return rc;
	}
	if ((flags & SQLITE_OPEN_MAIN_DB) && name)
		p->fd = idx_vfs_fd(p->real, name);
	f->pMethods = &idx_vfs_methods;
	return SQLITE_OK;
}

/*
 * Puts idx_mmap() and its siblings in the unix VFS's place, so that the
 * mappings of database files are known (idx_map_populate()). It is the
 * process's one unix VFS: every connection's mappings pass through them.
 */
static void idx_vfs_wrap_maps(void)
{
	sqlite3_vfs *v = idx_vfs_under;
	sqlite3_syscall_ptr a, b, c;

	if (v->iVersion < 3 || strcmp(v->zName, "unix") != 0)
		return;
	a = v->xGetSystemCall(v, "mmap");
	b = v->xGetSystemCall(v, "munmap");
	c = v->xGetSystemCall(v, "mremap");
	if (!a || !b || !c)
		return;
	idx_os_mmap = (void *(*)(void *, size_t, int, int, int, off_t))a;
	idx_os_munmap = (int (*)(void *, size_t))b;
	idx_os_mremap = (void *(*)(void *, size_t, size_t, int, ...))c;
	if (v->xSetSystemCall(v, "mmap", (sqlite3_syscall_ptr)idx_mmap) ||
	    v->xSetSystemCall(v, "munmap", (sqlite3_syscall_ptr)idx_munmap) ||
	    v->xSetSystemCall(v, "mremap", (sqlite3_syscall_ptr)idx_mremap)) {
		/* Back to SQLite's own, all three. */
		v->xSetSystemCall(v, "mmap", a);
		v->xSetSystemCall(v, "munmap", b);
		v->xSetSystemCall(v, "mremap", c);
	}
}

static void idx_vfs_init(void)
{
	/*
	 * First, while nothing has used SQLite yet, its one process-wide
	 * setting: memory statistics off. With them (the default) every
	 * allocation takes one global mutex to be counted, and Debian's build
	 * (no lookaside) allocates for nearly every cell it touches; kvfs
	 * reads none of them. Refused (and harmless) once SQLite is in use.
	 */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	idx_vfs_under = sqlite3_vfs_find(NULL);
	if (!idx_vfs_under || idx_vfs_under->iVersion < 1)
		return;
	idx_vfs_methods = (sqlite3_io_methods){
		.iVersion = 3,
		.xClose = idx_vfs_close,
		.xRead = idx_vfs_read,
		.xWrite = idx_vfs_write,
		.xTruncate = idx_vfs_truncate,
		.xSync = idx_vfs_sync,
		.xFileSize = idx_vfs_file_size,
		.xLock = idx_vfs_lock,
		.xUnlock = idx_vfs_unlock,
		.xCheckReservedLock = idx_vfs_check_reserved,
		.xFileControl = idx_vfs_file_control,
		.xSectorSize = idx_vfs_sector_size,
		.xDeviceCharacteristics = idx_vfs_device_chars,
		.xShmMap = idx_vfs_shm_map,
		.xShmLock = idx_vfs_shm_lock,
		.xShmBarrier = idx_vfs_shm_barrier,
		.xShmUnmap = idx_vfs_shm_unmap,
		.xFetch = idx_vfs_fetch,
		.xUnfetch = idx_vfs_unfetch,
	};
	idx_vfs_wrap_maps();
	/* Everything but the open is the default VFS's own. */
	idx_vfs = *idx_vfs_under;
	idx_vfs.szOsFile =
		(int)sizeof(struct idx_vfs_file) + idx_vfs_under->szOsFile;
	idx_vfs.zName = IDX_VFS_NAME;
	idx_vfs.pNext = NULL;
	idx_vfs.xOpen = idx_vfs_open;
	idx_vfs_ok = sqlite3_vfs_register(&idx_vfs, 0) == SQLITE_OK;
}

const char *idx_vfs_name(void)
{
	pthread_once(&idx_vfs_once, idx_vfs_init);
	return idx_vfs_ok ? IDX_VFS_NAME : NULL;
}
