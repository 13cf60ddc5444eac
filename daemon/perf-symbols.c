/*
 * flame_profd — names for the addresses of a --perf sample: the node's
 * perf map for JIT code, the ELF symbols of the mapped files for C code.
 */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-log.h"
#include "perf-symbols.h"
#include "util.h"
#include "util-buf.h"
#include "util-mem.h"

#define RESCAN_US 1000000u		/* read /proc/PID/maps again */
#define MAP_CHUNK (1u << 20)		/* read() size for the perf map */
#define MAP_STEP (16u << 20)		/* perf map bytes read per call */
#define NAME_BLOCK (256u << 10)		/* map names are kept in blocks */
#define JIT_SIZE_MAX (64ull << 20)	/* larger than any function */
#define USER_ADDR_MIN 0x10000ull	/* vm.mmap_min_addr's default */
#define USER_ADDR_END (1ull << 56)	/* user space, 5-level paging */
#define ELF_PART_MAX (256u << 20)	/* an ELF symbol or string table */

struct sym {
	uint64_t start, end;
	const char *name;
};

/* A perf map entry: 32 bytes beside its name, for maps of a million
 * lines. */
struct jit_sym {
	uint64_t start;
	uint32_t size;
	uint32_t arity;
	const char *module, *function;	/* in a name block, or static */
};

struct dso {
	char *path;			/* as /proc/PID/maps has it */
	char *name;			/* the path as UTF-8, for frames */
	const char *base;		/* in name */
	struct sym *syms;		/* sorted by start */
	size_t nsyms;
	char *strtab;			/* a copy of the string tables */
	Elf64_Phdr *loads;		/* PT_LOAD headers */
	size_t nloads;
	bool loaded;
};

struct mapping {
	uint64_t start, end, pgoff;
	struct dso *dso;
};

struct fpd_symbols {
	pid_t pid;
	int proc_fd;			/* /proc/PID: its owner is the node's user */
	char map_path[128];
	uint64_t map_read;		/* bytes of the perf map taken */
	bool map_skip_line;		/* in a line too long to take */
	int map_state;			/* 0, or why the map was not read */
	bool map_seen;			/* one map was read: map_dev, map_ino */
	dev_t map_dev;
	ino_t map_ino;
	bool map_stopped;		/* read no more of it */
	uint64_t map_tried_us;
	size_t bad_lines, bad_names;
	struct jit_sym *jit;
	size_t njit, jit_cap;
	struct fp_text *blocks;		/* the map's names; never moved */
	size_t nblocks, blocks_cap;
	struct mapping *maps;
	size_t nmaps, maps_cap;
	struct dso **dsos;
	size_t ndsos, dsos_cap;
	uint64_t maps_read_us;
};

/*
 * One atom as the JIT's map writes it, quoted where Erlang would
 * ('-start/2-fun-0-'), at @p: where it ends (the byte after the closing
 * quote, or the first @stop byte of an unquoted atom), NULL if a quote
 * is not closed. Reads only: a name that is not M:F/A stays whole.
 */
static char *
atom_end(char *p, char stop)
{
	if (*p != '\'')
		return strchr(p, stop);
	for (p++; *p && *p != '\''; p++) {
		if (*p == '\\' && p[1])
			p++;
	}
	return *p == '\'' ? p + 1 : NULL;
}

static bool
atom_empty(const char *p, const char *end)
{
	return end == p || (end - p == 2 && *p == '\'');
}

/* The atom atom_end() found at @p, its end made a NUL: unquoted in
 * place. */
static char *
unquote(char *p)
{
	char *w = p, *r;

	if (*p != '\'')
		return p;
	for (r = p + 1; *r != '\''; r++) {
		if (*r == '\\' && r[1])
			r++;
		*w++ = *r;
	}
	*w = '\0';
	return p;
}

void
fpd_symbols_split_jit(char *buf, struct fp_frame *frame)
{
	static const char prologue[] = "-CodeInfoPrologue";
	char *p = buf, *mod, *fun, *mend, *fend, *slash, *num;
	size_t len = strlen(buf);
	unsigned long arity;

	*frame = (struct fp_frame){ .module = "[jit]", .function = buf };
	if (*p != '$')
		return;
	p++;
	if (p[0] != '\'') {
		char *colon = strchr(p, ':');

		/* '$M::NAME': the '$' stays, so that '$global' (the VM's
		 * shared code) is not read as the module global */
		if (colon && colon != p && colon[1] == ':') {
			*colon = '\0';
			frame->module = buf;
			frame->function = colon + 2;
			return;
		}
	}
	if (len > sizeof(prologue) - 1 &&
	    strcmp(buf + len - (sizeof(prologue) - 1), prologue) == 0)
		buf[len - (sizeof(prologue) - 1)] = '\0';
	/* the arity first: a quoted function name may hold '/' and ':' */
	slash = strrchr(p, '/');
	if (!slash)
		return;
	arity = strtoul(slash + 1, &num, 10);
	if (num == slash + 1 || *num || arity > 255)
		return;
	*slash = '\0';
	mend = atom_end(p, ':');
	fend = mend && *mend == ':' ? atom_end(mend + 1, '\0') : NULL;
	if (!fend || *fend || atom_empty(p, mend) || atom_empty(mend + 1, fend)) {
		*slash = '/';
		return;
	}
	*mend = '\0';
	mod = unquote(p);
	fun = unquote(mend + 1);
	frame->module = mod;
	frame->function = fun;
	frame->arity = (uint32_t)arity;
}

static int
cmp_jit(const void *a, const void *b)
{
	const struct jit_sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int
cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int
fpd_perf_map_open(const char *path, uid_t uid, struct stat *st)
{
	int fd, rc;

	/* O_NONBLOCK: a FIFO in its place must not hold the daemon in
	 * open(2) past --duration or SIGTERM */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0)
		rc = -errno;
	else if (!S_ISREG(st->st_mode))
		rc = -EINVAL;
	else if (st->st_uid != uid && st->st_uid != 0)
		rc = -EPERM;
	else if (st->st_mode & S_IWOTH)
		rc = -EACCES;
	else if (st->st_nlink != 1)
		/* a hard link to a file of root's another user made
		 * (fs.protected_hardlinks=0): the JIT's map has one name */
		rc = -EMLINK;
	else
		return fd;
	close(fd);
	return rc;
}

const char *
fpd_perf_map_why(int rc)
{
	switch (rc) {
	case -ELOOP:
		return "is a symbolic link";
	case -EINVAL:
		return "is not a regular file";
	case -EPERM:
		return "is owned by another user than the node's";
	case -EACCES:
		return "is writable by others";
	case -EMLINK:
		return "has more than one link";
	default:
		return strerror(-rc);
	}
}

/* One kind of warning each (the log holds back repeats of one kind). */
static void
warn_refused(const char *path, int rc)
{
	switch (rc) {
	case -ELOOP:
		fpd_warn("--perf: not reading the perf map %s: it is a symbolic link; JIT code stays unnamed",
			 path);
		break;
	case -EINVAL:
		fpd_warn("--perf: not reading the perf map %s: it is not a regular file; JIT code stays unnamed",
			 path);
		break;
	case -EPERM:
		fpd_warn("--perf: not reading the perf map %s: it is owned by another user than the node's; JIT code stays unnamed",
			 path);
		break;
	case -EACCES:
		fpd_warn("--perf: not reading the perf map %s: it is writable by others; JIT code stays unnamed",
			 path);
		break;
	case -EMLINK:
		fpd_warn("--perf: not reading the perf map %s: it has other hard links; JIT code stays unnamed",
			 path);
		break;
	default:
		fpd_warn("--perf: not reading the perf map %s: %s; JIT code stays unnamed",
			 path, strerror(-rc));
		break;
	}
}

static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A number of 1 to 16 hex digits at @p, an optional 0x before it: where
 * it ends, NULL if there is none. */
static const char *
take_hex(const char *p, const char *end, uint64_t *v)
{
	const char *digits;

	if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	*v = 0;
	for (digits = p; p < end && hex_digit(*p) >= 0; p++) {
		if (p - digits == 16)
			return NULL;
		*v = *v << 4 | (uint64_t)hex_digit(*p);
	}
	return p == digits ? NULL : p;
}

bool
fpd_perf_map_line(const char *line, size_t len, uint64_t *start,
		  uint64_t *size, const char **name, size_t *name_len)
{
	const char *p = line, *end = line + len;

	if (len >= FPD_PERF_MAP_LINE_MAX)
		return false;
	p = take_hex(p, end, start);
	if (!p || p == end || *p++ != ' ')
		return false;
	p = take_hex(p, end, size);
	if (!p || p == end || *p++ != ' ' || p == end ||
	    memchr(p, '\0', (size_t)(end - p)))
		return false;
	/* a range no code can have: the whole address space, or a
	 * catch-all over the VM's own text */
	if (!*size || *size > JIT_SIZE_MAX || *start < USER_ADDR_MIN ||
	    *start >= USER_ADDR_END || *size > USER_ADDR_END - *start)
		return false;
	*name = p;
	*name_len = (size_t)(end - p);
	return true;
}

size_t
fpd_utf8_fix(char *s, size_t len)
{
	unsigned char *p = (unsigned char *)s, *end = p + len;
	size_t fixed = 0;

	while (p < end) {
		unsigned c = *p;
		uint32_t cp, min;
		size_t n, k;

		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 2, cp = c & 0x1f, min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 3, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 4, cp = c & 0x07, min = 0x10000;
		} else {
			*p++ = '?';
			fixed++;
			continue;
		}
		for (k = 1; k < n && (size_t)(end - p) > k && (p[k] & 0xc0) == 0x80; k++)
			cp = cp << 6 | (p[k] & 0x3f);
		if (k < n || cp < min || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff)) {
			/* the lead byte only: what follows is looked at
			 * again, a stray continuation byte each */
			*p++ = '?';
			fixed++;
			continue;
		}
		p += n;
	}
	return fixed;
}

/* A copy of @len bytes and a NUL in a name block: blocks are never
 * reallocated, so frames handed out keep pointing at their names while
 * the map is read further. */
static char *
keep_name(struct fpd_symbols *s, const char *name, size_t len)
{
	struct fp_text *b = s->nblocks ? &s->blocks[s->nblocks - 1] : NULL;
	char *copy;

	if (!b || b->cap - b->len < len + 1) {
		FP_GROW(s->blocks, s->blocks_cap, s->nblocks + 1);
		b = &s->blocks[s->nblocks++];
		*b = (struct fp_text){ 0 };
		fp_text_reserve_first(b, NAME_BLOCK, NAME_BLOCK);
	}
	copy = b->buf + b->len;
	fp_text_put(b, name, len);
	fp_text_putc(b, '\0');
	return copy;
}

static void
take_line(struct fpd_symbols *s, const char *line, size_t len)
{
	uint64_t start, size;
	const char *name;
	size_t name_len;
	struct fp_frame frame;
	char *copy;

	if (!fpd_perf_map_line(line, len, &start, &size, &name, &name_len)) {
		s->bad_lines++;
		return;
	}
	copy = keep_name(s, name, name_len);
	if (fpd_utf8_fix(copy, name_len))
		s->bad_names++;
	fpd_symbols_split_jit(copy, &frame);
	FP_GROW(s->jit, s->jit_cap, s->njit + 1);
	s->jit[s->njit++] = (struct jit_sym){
		.start = start, .size = (uint32_t)size, .arity = frame.arity,
		.module = frame.module, .function = frame.function,
	};
}

/*
 * Whole lines from @fd, from where the last read stopped to at most
 * @end: a line not finished yet is read again next time. Memory is a
 * chunk for reading, and what the lines taken keep.
 */
static void
read_lines(struct fpd_symbols *s, int fd, uint64_t end)
{
	uint64_t off = s->map_read;
	/* the map grows a few lines at a time: a buffer for what is new */
	size_t cap = end - off < MAP_CHUNK ? (size_t)(end - off) : MAP_CHUNK;
	char *buf = xrealloc(NULL, cap);
	size_t have = 0;

	while (off + have < end) {
		size_t want = cap - have;
		ssize_t got;
		char *p, *nl;

		if (want > end - off - have)
			want = (size_t)(end - off - have);
		got = pread(fd, buf + have, want, (off_t)(off + have));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		have += (size_t)got;
		for (p = buf; (nl = memchr(p, '\n', have - (size_t)(p - buf))); p = nl + 1) {
			if (s->map_skip_line)
				s->map_skip_line = false;
			else
				take_line(s, p, (size_t)(nl - p));
		}
		off += (uint64_t)(p - buf);
		have -= (size_t)(p - buf);
		memmove(buf, p, have);
		if (have >= FPD_PERF_MAP_LINE_MAX) {
			/* no newline yet: a line too long to take */
			if (!s->map_skip_line)
				s->bad_lines++;
			s->map_skip_line = true;
			off += have;
			have = 0;
		}
	}
	s->map_read = off;
	free(buf);
}

/* The JIT appends to its map as modules load: read what was added. */
static bool
read_perf_map(struct fpd_symbols *s)
{
	size_t before = s->njit, bad_lines = s->bad_lines, bad_names = s->bad_names;
	uint64_t now = fpd_now_mono_us(), end;
	struct stat st, proc;
	int fd;

	if (s->map_stopped)
		return false;
	/* no map yet, or one refused: looked for again once a second */
	if (s->map_state < 0 && now - s->map_tried_us < RESCAN_US)
		return false;
	s->map_tried_us = now;
	if (fstat(s->proc_fd, &proc) < 0)
		return false;
	fd = fpd_perf_map_open(s->map_path, proc.st_uid, &st);
	if (fd < 0) {
		if (fd != -ENOENT && fd != s->map_state)
			warn_refused(s->map_path, fd);
		s->map_state = fd;
		return false;
	}
	s->map_state = 0;
	if (s->map_seen && (st.st_dev != s->map_dev || st.st_ino != s->map_ino)) {
		fpd_warn("--perf: the perf map %s is another file than the one read so far: not reading it any more",
			 s->map_path);
		s->map_stopped = true;
		close(fd);
		return false;
	}
	s->map_seen = true;
	s->map_dev = st.st_dev;
	s->map_ino = st.st_ino;
	if ((uint64_t)st.st_size <= s->map_read) {
		close(fd);
		return false;
	}
	end = (uint64_t)st.st_size;
	if (end > FPD_PERF_MAP_MAX)
		end = FPD_PERF_MAP_MAX;
	if (end > s->map_read + MAP_STEP)
		end = s->map_read + MAP_STEP;
	if (end > s->map_read)
		read_lines(s, fd, end);
	close(fd);

	if (s->bad_lines && !bad_lines)
		fpd_warn("--perf: the perf map %s has lines not of the form \"HEXADDR HEXSIZE NAME\", or with a range no JIT code has: skipped",
			 s->map_path);
	if (s->bad_names && !bad_names)
		fpd_warn("--perf: the perf map %s has names that are not UTF-8: their bad bytes are written as '?'",
			 s->map_path);
	if ((uint64_t)st.st_size > FPD_PERF_MAP_MAX &&
	    s->map_read + FPD_PERF_MAP_LINE_MAX >= FPD_PERF_MAP_MAX) {
		fpd_warn("--perf: the perf map %s is larger than %u MiB: read up to there; JIT code it names further on stays unnamed",
			 s->map_path, FPD_PERF_MAP_MAX >> 20);
		s->map_stopped = true;
	}
	if (s->njit == before)
		return false;
	qsort(s->jit, s->njit, sizeof(*s->jit), cmp_jit);
	return true;
}

/* The last of @n entries of @size bytes, sorted by the uint64_t start
 * each begins with, whose start is at most @addr; NULL if none is. */
static const void *
last_at_or_below(const void *base, size_t n, size_t size, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t start;

		memcpy(&start, (const char *)base + mid * size, sizeof(start));
		if (start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? (const char *)base + (lo - 1) * size : NULL;
}

static const struct jit_sym *
find_jit(const struct fpd_symbols *s, uint64_t addr)
{
	const struct jit_sym *j = last_at_or_below(s->jit, s->njit,
						   sizeof(*s->jit), addr);

	return j && addr - j->start < j->size ? j : NULL;
}

/* @len bytes at @off of @fd, a file of @size bytes, and a NUL: NULL when
 * they are not all in the file or more than ELF_PART_MAX. Read, never
 * mapped: a file the node's user truncates meanwhile cannot fault the
 * daemon, and memory follows what the tables hold, not what the headers
 * claim. */
static char *
read_part(int fd, uint64_t size, uint64_t off, uint64_t len)
{
	size_t got = 0;
	char *buf;

	if (off > size || len > size - off || len > ELF_PART_MAX)
		return NULL;
	buf = xzalloc((size_t)len + 1);
	while (got < len) {
		ssize_t n = pread(fd, buf + got, (size_t)len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	return buf;
}

static void
dso_load(struct dso *d)
{
	Elf64_Ehdr *eh = NULL;
	Elf64_Phdr *ph = NULL;
	Elf64_Shdr *sh = NULL;
	Elf64_Sym *sy = NULL;
	struct stat st;
	uint64_t size;
	int fd;

	d->loaded = true;
	/* the path names the file the node mapped, unless its user has
	 * put something else there since: a link or a FIFO is not read */
	fd = open(d->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	size = (uint64_t)st.st_size;
	eh = (Elf64_Ehdr *)read_part(fd, size, 0, sizeof(*eh));
	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64)
		goto out;
	ph = (Elf64_Phdr *)read_part(fd, size, eh->e_phoff,
				     (uint64_t)eh->e_phnum * sizeof(*ph));
	sh = (Elf64_Shdr *)read_part(fd, size, eh->e_shoff,
				     (uint64_t)eh->e_shnum * sizeof(*sh));
	if (!ph || !sh)
		goto out;

	d->loads = xzalloc((eh->e_phnum ? eh->e_phnum : 1) * sizeof(*d->loads));
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD)
			d->loads[d->nloads++] = ph[i];
	}

	/* .symtab when the file keeps it (the OTP builds do), else
	 * .dynsym: exported symbols only */
	for (int pass = 0; pass < 2 && !d->nsyms; pass++) {
		unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;

		for (unsigned i = 0; i < eh->e_shnum; i++) {
			const Elf64_Shdr *str;
			size_t n, strtab_len;

			if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
				continue;
			str = &sh[sh[i].sh_link];
			if (!str->sh_size)
				continue;
			free(sy);
			free(d->strtab);
			free(d->syms);
			d->syms = NULL;
			sy = (Elf64_Sym *)read_part(fd, size, sh[i].sh_offset, sh[i].sh_size);
			d->strtab = read_part(fd, size, str->sh_offset, str->sh_size);
			if (!sy || !d->strtab)
				continue;
			strtab_len = (size_t)str->sh_size;
			/* names go into files read as UTF-8 */
			fpd_utf8_fix(d->strtab, strtab_len);
			n = (size_t)(sh[i].sh_size / sizeof(*sy));
			d->syms = xzalloc((n ? n : 1) * sizeof(*d->syms));
			for (size_t k = 0; k < n; k++) {
				if (ELF64_ST_TYPE(sy[k].st_info) != STT_FUNC ||
				    !sy[k].st_value || sy[k].st_name >= strtab_len)
					continue;
				d->syms[d->nsyms++] = (struct sym){
					.start = sy[k].st_value,
					.end = sy[k].st_value + (sy[k].st_size ? sy[k].st_size : 1),
					.name = d->strtab + sy[k].st_name,
				};
			}
			break;
		}
	}
	if (d->nsyms)
		qsort(d->syms, d->nsyms, sizeof(*d->syms), cmp_sym);
out:
	free(sy);
	free(sh);
	free(ph);
	free(eh);
	close(fd);
}

static struct dso *
dso_get(struct fpd_symbols *s, const char *path)
{
	for (size_t i = 0; i < s->ndsos; i++) {
		if (strcmp(s->dsos[i]->path, path) == 0)
			return s->dsos[i];
	}
	struct dso *d = xnew(struct dso);
	const char *slash;

	d->path = xstrdup(path);
	d->name = xstrdup(path);
	fpd_utf8_fix(d->name, strlen(d->name));
	slash = strrchr(d->name, '/');
	d->base = slash ? slash + 1 : d->name;
	FP_GROW(s->dsos, s->dsos_cap, s->ndsos + 1);
	s->dsos[s->ndsos++] = d;
	return d;
}

static void
read_maps(struct fpd_symbols *s)
{
	char path[64], line[4096];
	FILE *f;

	s->maps_read_us = fpd_now_mono_us();
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)s->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	s->nmaps = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8];
		int name_at = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end,
			   perms, &off, &name_at) < 4 || perms[2] != 'x' ||
		    !name_at || line[name_at] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line + name_at, " (deleted)"))
			continue;
		FP_GROW(s->maps, s->maps_cap, s->nmaps + 1);
		s->maps[s->nmaps++] = (struct mapping){
			.start = start, .end = end, .pgoff = off,
			.dso = dso_get(s, line + name_at),
		};
	}
	fclose(f);
}

static const struct mapping *
find_mapping(const struct fpd_symbols *s, uint64_t addr)
{
	/* every address of a sample is looked for here first: the kernel
	 * lists the mappings in address order, so a binary search */
	const struct mapping *m = last_at_or_below(s->maps, s->nmaps,
						   sizeof(*s->maps), addr);

	return m && addr < m->end ? m : NULL;
}

static const struct sym *
dso_find(struct dso *d, uint64_t file_off)
{
	const struct sym *sy;
	uint64_t vaddr = 0;
	bool found = false;

	if (!d->loaded)
		dso_load(d);
	for (size_t i = 0; i < d->nloads; i++) {
		const Elf64_Phdr *p = &d->loads[i];

		if (file_off >= p->p_offset && file_off < p->p_offset + p->p_filesz) {
			vaddr = file_off - p->p_offset + p->p_vaddr;
			found = true;
			break;
		}
	}
	if (!found)
		return NULL;
	sy = last_at_or_below(d->syms, d->nsyms, sizeof(*d->syms), vaddr);
	return sy && vaddr < sy->end ? sy : NULL;
}

struct fpd_symbols *
fpd_symbols_new(pid_t pid, const char *map_dir)
{
	struct fpd_symbols *s = xnew(struct fpd_symbols);
	char path[64];

	s->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	/* held for the run: the owner of the process, not of a later one
	 * of that pid */
	s->proc_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(s->map_path, sizeof(s->map_path), "%s/perf-%d.map",
		 map_dir ? map_dir : "/tmp", (int)pid);
	read_perf_map(s);
	read_maps(s);
	return s;
}

void
fpd_symbols_destroy(struct fpd_symbols *s)
{
	if (!s)
		return;
	if (s->proc_fd >= 0)
		close(s->proc_fd);
	for (size_t i = 0; i < s->nblocks; i++)
		fp_text_free(&s->blocks[i]);
	free(s->blocks);
	free(s->jit);
	for (size_t i = 0; i < s->ndsos; i++) {
		free(s->dsos[i]->path);
		free(s->dsos[i]->name);
		free(s->dsos[i]->syms);
		free(s->dsos[i]->strtab);
		free(s->dsos[i]->loads);
		free(s->dsos[i]);
	}
	free(s->dsos);
	free(s->maps);
	free(s);
}

static void
elf_frame(const struct mapping *m, uint64_t addr, struct fp_frame *frame)
{
	const struct sym *sy = dso_find(m->dso, addr - m->start + m->pgoff);

	*frame = (struct fp_frame){
		.module = m->dso->base,
		.function = sy ? sy->name : "[unknown]",
		.file = m->dso->name,
	};
}

void
fpd_symbols_lookup(struct fpd_symbols *s, uint64_t addr, struct fp_frame *frame)
{
	const struct jit_sym *j;
	const struct mapping *m;

	/* the files mapped first: the map names only what is in none of
	 * them, as the JIT's code is (anonymous mappings) */
	m = find_mapping(s, addr);
	if (m) {
		elf_frame(m, addr, frame);
		return;
	}
	j = find_jit(s, addr);
	if (!j && read_perf_map(s))
		j = find_jit(s, addr);
	/* a library loaded since: read the maps again, at most once a
	 * second */
	if (fpd_now_mono_us() - s->maps_read_us >= RESCAN_US) {
		read_maps(s);
		m = find_mapping(s, addr);
		if (m) {
			elf_frame(m, addr, frame);
			return;
		}
	}
	if (j) {
		*frame = (struct fp_frame){
			.module = j->module, .function = j->function,
			.arity = j->arity, .file = "jit",
		};
		return;
	}
	*frame = (struct fp_frame){ .module = "[unknown]", .function = "[unknown]" };
}
