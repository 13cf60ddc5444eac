/*
 * flame_profd — names for the addresses of a --perf sample: the node's
 * perf map for JIT code, the ELF symbols of the mapped files for C code.
 */
#include "config.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "perf-symbols.h"
#include "util-mem.h"

#define RESCAN_US 1000000u		/* read /proc/PID/maps again */

struct sym {
	uint64_t start, end;
	const char *name;
};

struct jit_sym {
	uint64_t start, end;
	struct fp_frame frame;
	char *buf;			/* the frame's strings */
};

struct dso {
	char *path;
	const char *base;		/* in path */
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
	char map_path[128];
	off_t map_read;			/* bytes of the perf map parsed */
	char *map_tail;			/* an unfinished last line */
	struct jit_sym *jit;
	size_t njit, jit_cap;
	bool jit_sorted;
	struct mapping *maps;
	size_t nmaps;
	struct dso **dsos;
	size_t ndsos;
	uint64_t maps_read_us;
};

/*
 * One atom as the JIT's map writes it, quoted where Erlang would
 * ('-start/2-fun-0-'): unquoted in place. @p points at it; returns where
 * it ends (the byte after the closing quote, or @stop's match), NULL if
 * a quote is not closed. An unquoted atom ends at the first @stop byte.
 */
static char *
take_atom(char *p, char stop, char **atom)
{
	char *w;

	*atom = p;
	if (*p != '\'') {
		char *e = strchr(p, stop);

		return e;
	}
	*atom = w = p;
	for (p++; *p && *p != '\''; p++) {
		if (*p == '\\' && p[1])
			p++;
		*w++ = *p;
	}
	if (*p != '\'')
		return NULL;
	*w = '\0';
	return p + 1;
}

void
fpd_symbols_split_jit(char *buf, struct fp_frame *frame)
{
	static const char prologue[] = "-CodeInfoPrologue";
	char *p = buf, *mod, *fun, *end, *slash, *num;
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
	{
		char save = *slash;

		*slash = '\0';
		end = take_atom(p, ':', &mod);
		if (!end || *end != ':' || end == mod) {
			*slash = save;
			return;
		}
		*end = '\0';
		end = take_atom(end + 1, '\0', &fun);
		if (!end || *end || !*fun) {
			*slash = save;
			return;
		}
	}
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

/* The JIT appends to its map as modules load: read what was added. */
static bool
read_perf_map(struct fpd_symbols *s)
{
	struct stat st;
	char *text, *line, *next;
	size_t tail = s->map_tail ? strlen(s->map_tail) : 0;
	ssize_t got;
	size_t want;
	int fd;
	bool added = false;

	fd = open(s->map_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || st.st_size <= s->map_read) {
		close(fd);
		return false;
	}
	want = (size_t)(st.st_size - s->map_read);
	text = xzalloc(tail + want + 1);
	if (tail)
		memcpy(text, s->map_tail, tail);
	got = pread(fd, text + tail, want, s->map_read);
	close(fd);
	if (got <= 0) {
		free(text);
		return false;
	}
	s->map_read += got;
	text[tail + (size_t)got] = '\0';
	free(s->map_tail);
	s->map_tail = NULL;

	for (line = text; *line; line = next) {
		unsigned long long start, size;
		int name_at = 0;

		next = strchr(line, '\n');
		if (!next) {
			s->map_tail = xstrdup(line);
			break;
		}
		*next++ = '\0';
		if (sscanf(line, "%llx %llx %n", &start, &size, &name_at) < 2 ||
		    !name_at || !line[name_at])
			continue;
		if (s->njit == s->jit_cap) {
			s->jit_cap = s->jit_cap ? 2 * s->jit_cap : 4096;
			s->jit = xrealloc(s->jit, s->jit_cap * sizeof(*s->jit));
		}
		struct jit_sym *j = &s->jit[s->njit++];
		j->start = start;
		j->end = start + size;
		j->buf = xstrdup(line + name_at);
		fpd_symbols_split_jit(j->buf, &j->frame);
		j->frame.file = "jit";
		added = true;
	}
	free(text);
	if (added)
		qsort(s->jit, s->njit, sizeof(*s->jit), cmp_jit);
	return added;
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

	return j && addr < j->end ? j : NULL;
}

static void
dso_load(struct dso *d)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	struct stat st;
	void *map;
	size_t strtab_len = 0;
	int fd;

	d->loaded = true;
	fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(*eh)) {
		close(fd);
		return;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > (uint64_t)st.st_size ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size)
		goto out;

	const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)map + eh->e_phoff);
	d->loads = xzalloc((eh->e_phnum ? eh->e_phnum : 1) * sizeof(*d->loads));
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD)
			d->loads[d->nloads++] = ph[i];
	}

	/* .symtab when the file keeps it (the OTP builds do), else
	 * .dynsym: exported symbols only */
	sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
	for (int pass = 0; pass < 2 && !d->nsyms; pass++) {
		unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;

		for (unsigned i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum)
				continue;
			const Elf64_Shdr *str = &sh[sh[i].sh_link];
			if (sh[i].sh_offset + sh[i].sh_size > (uint64_t)st.st_size ||
			    str->sh_offset + str->sh_size > (uint64_t)st.st_size ||
			    !str->sh_size)
				continue;
			const Elf64_Sym *sy = (const Elf64_Sym *)((const char *)map + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*sy);

			d->strtab = xzalloc(str->sh_size + 1);
			memcpy(d->strtab, (const char *)map + str->sh_offset, str->sh_size);
			strtab_len = str->sh_size;
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
	qsort(d->syms, d->nsyms, sizeof(*d->syms), cmp_sym);
out:
	munmap(map, (size_t)st.st_size);
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
	slash = strrchr(d->path, '/');
	d->base = slash ? slash + 1 : d->path;
	s->dsos = xrealloc(s->dsos, (s->ndsos + 1) * sizeof(*s->dsos));
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
		s->maps = xrealloc(s->maps, (s->nmaps + 1) * sizeof(*s->maps));
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
	for (size_t i = 0; i < s->nmaps; i++) {
		if (addr >= s->maps[i].start && addr < s->maps[i].end)
			return &s->maps[i];
	}
	return NULL;
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

	s->pid = pid;
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
	for (size_t i = 0; i < s->njit; i++)
		free(s->jit[i].buf);
	free(s->jit);
	free(s->map_tail);
	for (size_t i = 0; i < s->ndsos; i++) {
		free(s->dsos[i]->path);
		free(s->dsos[i]->syms);
		free(s->dsos[i]->strtab);
		free(s->dsos[i]->loads);
		free(s->dsos[i]);
	}
	free(s->dsos);
	free(s->maps);
	free(s);
}

void
fpd_symbols_lookup(struct fpd_symbols *s, uint64_t addr, struct fp_frame *frame)
{
	const struct jit_sym *j;
	const struct mapping *m;

	j = find_jit(s, addr);
	if (!j && !find_mapping(s, addr) && read_perf_map(s))
		j = find_jit(s, addr);
	if (j) {
		*frame = j->frame;
		return;
	}
	m = find_mapping(s, addr);
	/* a library loaded since: read the maps again, at most once a
	 * second */
	if (!m && fpd_now_mono_us() - s->maps_read_us >= RESCAN_US) {
		read_maps(s);
		m = find_mapping(s, addr);
	}
	if (m) {
		const struct sym *sy = dso_find(m->dso, addr - m->start + m->pgoff);

		*frame = (struct fp_frame){
			.module = m->dso->base,
			.function = sy ? sy->name : "[unknown]",
			.file = m->dso->path,
		};
		return;
	}
	*frame = (struct fp_frame){ .module = "[unknown]", .function = "[unknown]" };
}
