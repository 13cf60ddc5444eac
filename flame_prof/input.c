/*
 * flame_prof — which files to read, and time bounds.
 *
 * flame_profd names its files after the UTC time they were opened, and a
 * file's samples all come before the next file of the same node was
 * opened: a time range over a week of rotated files only opens the files
 * that can hold it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "flame_prof.h"
#include "fp/perf-file.h"
#include "util-mem.h"
#include "util-parse.h"

/* A file's first sample may predate its name by one request round trip
 * (its time is the middle of the request); allow far more than any
 * --timeout. */
#define START_SLACK_US (600ULL * 1000000)
/* +DUR: about all that a uint64_t of microseconds holds. */
#define DURATION_MAX_US 18000000000000000000ULL

static bool
all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
	}
	return true;
}

static int
parse_fraction(const char **p, uint64_t *us)
{
	uint64_t v = 0, scale = 100000;
	const char *s = *p;

	if (!(*s >= '0' && *s <= '9'))
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		v += (uint64_t)(*s - '0') * scale;
		scale /= 10;
	}
	*us = v;
	*p = s;
	return 0;
}

static int
parse_iso(const char *s, uint64_t *us)
{
	struct tm tm = { 0 };
	uint64_t frac = 0;
	int y, mo, d, h, mi, sec = 0, n = 0;
	char sep;
	time_t t;

	if (sscanf(s, "%4d-%2d-%2d%c%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &n) != 6 ||
	    (sep != 'T' && sep != ' '))
		return -EINVAL;
	s += n;
	if (*s == ':') {
		if (!all_digits(s + 1, 2))
			return -EINVAL;
		sec = (s[1] - '0') * 10 + (s[2] - '0');
		s += 3;
		if (*s == '.') {
			s++;
			if (parse_fraction(&s, &frac) < 0)
				return -EINVAL;
		}
	}
	if (*s == 'Z')
		s++;
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t < 0)
		return -EINVAL;
	*us = (uint64_t)t * 1000000 + frac;
	return 0;
}

int
fpp_time_parse(const char *text, struct fpp_time *t)
{
	const char *s = text;
	uint64_t sec = 0, frac = 0;

	memset(t, 0, sizeof(*t));
	if (*s == '+') {
		if (parse_duration(s + 1, DURATION_MAX_US, &t->us) < 0)
			return -EINVAL;
		t->set = t->relative = true;
		return 0;
	}
	if (strchr(s, '-')) {
		if (parse_iso(s, &t->us) < 0)
			return -EINVAL;
		t->set = true;
		return 0;
	}
	if (!(*s >= '0' && *s <= '9'))
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (sec > 10000000000ULL)
			return -EINVAL;
		sec = sec * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.') {
		s++;
		if (parse_fraction(&s, &frac) < 0)
			return -EINVAL;
	}
	if (*s)
		return -EINVAL;
	t->us = sec * 1000000 + frac;
	t->set = true;
	return 0;
}

/* The time in the name of a file of flame_profd's */
static bool
name_time(const char *path, uint64_t *us)
{
	const char *base = strrchr(path, '/');
	struct fp_perf_name name;

	if (!fp_perf_name_parse(base ? base + 1 : path, &name))
		return false;
	*us = name.epoch_ms * 1000;
	return true;
}

static bool
perf_name(const char *name)
{
	return name[0] != '.' && fp_perf_name_kind(name, NULL);
}

/* Directories below an input, counted from it; deeper is an error,
 * never an empty result. */
#define MAX_DEPTH 32

/* What walking the inputs keeps: the capacity of the file list and the
 * (device, inode) of each file taken, so that a file reached twice (a
 * file named twice, a link to it) is read once. */
struct expand {
	struct fpp_inputs *in;
	size_t cap;
	struct file_id {
		dev_t dev;
		ino_t ino;
	} *ids;
	size_t nids, ids_cap;
};

static void
add_file(struct expand *x, const char *path, const struct stat *st)
{
	struct fpp_inputs *in = x->in;
	struct fpp_input *f;

	if (st) {
		for (size_t i = 0; i < x->nids; i++) {
			if (x->ids[i].dev == st->st_dev &&
			    x->ids[i].ino == st->st_ino)
				return;
		}
		FP_GROW(x->ids, x->ids_cap, x->nids + 1);
		x->ids[x->nids++] = (struct file_id){ st->st_dev, st->st_ino };
	}
	FP_GROW(in->files, x->cap, in->count + 1);
	f = &in->files[in->count++];
	memset(f, 0, sizeof(*f));
	f->path = xstrdup(path);
	f->has_start = name_time(path, &f->start_us);
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * A link to a directory is not followed: flame_profd's own directories
 * hold none, and a "latest -> node@host" link beside the node's
 * directory would read every file twice (a link to its own parent,
 * forever). Links to files are followed; add_file() reads each file
 * once.
 */
static int
walk(struct expand *x, const char *dir, int depth)
{
	DIR *d;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, ncap = 0;
	int rc = 0;

	if (depth > MAX_DEPTH) {
		free(x->in->error_path);
		x->in->error_path = xstrdup(dir);
		return -ELOOP;
	}
	d = opendir(dir);
	if (!d) {
		rc = -errno;
		free(x->in->error_path);
		x->in->error_path = xstrdup(dir);
		return rc;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		FP_GROW(names, ncap, n + 1);
		names[n++] = xstrdup(e->d_name);
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		char *path = xzalloc(strlen(dir) + strlen(names[i]) + 2);
		struct stat st;

		sprintf(path, "%s%s%s", dir,
			dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]);
		if (lstat(path, &st) < 0)
			st.st_mode = 0;		/* gone since readdir */
		else if (S_ISLNK(st.st_mode) &&
			 (stat(path, &st) < 0 || S_ISDIR(st.st_mode)))
			st.st_mode = 0;		/* dangling, or a directory */
		if (S_ISDIR(st.st_mode))
			rc = walk(x, path, depth + 1);
		else if (S_ISREG(st.st_mode) && perf_name(names[i]))
			add_file(x, path, &st);
		free(path);
		if (rc < 0)
			break;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

struct order {
	struct fpp_input file;
	size_t index;
};

static int
by_time(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	uint64_t tx = x->file.has_start ? x->file.start_us : 0;
	uint64_t ty = y->file.has_start ? y->file.start_us : 0;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static size_t
dir_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) : 0;
}

/* Next file of the same directory (the same node) with a time. */
static const struct fpp_input *
next_of_node(const struct fpp_inputs *in, size_t i)
{
	size_t dl = dir_len(in->files[i].path);

	for (size_t j = i + 1; j < in->count; j++) {
		const struct fpp_input *f = &in->files[j];

		if (f->has_start && dir_len(f->path) == dl &&
		    strncmp(f->path, in->files[i].path, dl) == 0)
			return f;
	}
	return NULL;
}

int
fpp_inputs_expand(char *const *args, size_t nargs, const struct fpp_time *from,
		  const struct fpp_time *to, struct fpp_inputs *in,
		  const char **bad)
{
	struct expand x = { .in = in };
	struct order *order;
	int rc = 0;

	memset(in, 0, sizeof(*in));
	for (size_t i = 0; i < nargs; i++) {
		struct stat st;
		size_t before = in->count;

		*bad = args[i];
		if (strcmp(args[i], "-") == 0) {
			add_file(&x, "-", NULL);
			continue;
		}
		/* an input named on the command line is followed, also
		 * through a link */
		if (stat(args[i], &st) < 0) {
			rc = -errno;
			goto free_ids;
		}
		if (S_ISREG(st.st_mode)) {
			add_file(&x, args[i], &st);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc = -EINVAL;
			goto free_ids;
		}
		rc = walk(&x, args[i], 0);
		if (rc < 0) {
			if (in->error_path)
				*bad = in->error_path;
			goto free_ids;
		}
		if (in->count == before) {
			rc = -ENODATA;
			goto free_ids;
		}
	}
	*bad = NULL;

	order = xzalloc((in->count + 1) * sizeof(*order));
	for (size_t i = 0; i < in->count; i++)
		order[i] = (struct order){ in->files[i], i };
	qsort(order, in->count, sizeof(*order), by_time);
	for (size_t i = 0; i < in->count; i++)
		in->files[i] = order[i].file;
	free(order);

	for (size_t i = 0; i < in->count; i++) {
		struct fpp_input *f = &in->files[i];
		const struct fpp_input *next;

		if (!f->has_start)
			continue;
		if (to->set && !to->relative &&
		    f->start_us > to->us + START_SLACK_US)
			f->skip = true;
		next = next_of_node(in, i);
		if (from->set && !from->relative && next &&
		    next->start_us < from->us)
			f->skip = true;
	}
free_ids:
	free(x.ids);
	return rc;
}

void
fpp_inputs_free(struct fpp_inputs *in)
{
	for (size_t i = 0; i < in->count; i++)
		free(in->files[i].path);
	free(in->files);
	free(in->error_path);
	memset(in, 0, sizeof(*in));
}
