/*
 * flame_profd — speedscope JSON writer.
 *
 * speedscope reads the whole file into the browser, so frames are shared
 * (one entry per distinct name) and a stack is a list of frame indices,
 * root first. Samples are kept in memory until the end because the
 * shared frame list must be complete before the first profile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "svg-util.h"
#include "util-hash.h"
#include "fp/speedscope.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"
#include "util-sat.h"

struct frame {
	char *name;
	char *file;		/* decoded, or NULL */
	uint32_t line;		/* 0: none */
	uint64_t hash;
};

struct profile {
	char *name;
	uint64_t total;
	/* samples: stack of sample i is idx[off[i] .. off[i + 1]) */
	uint32_t *idx;
	size_t nidx, idx_cap;
	size_t *off;
	uint64_t *weights;
	uint64_t *times;	/* timed: epoch microseconds */
	size_t count, cap;
};

struct fp_speedscope {
	struct fp_speedscope_options options;
	struct frame *frames;
	size_t nframes, frames_cap;
	uint32_t *slots;	/* frame index + 1 */
	size_t nslots;
	struct profile *profiles;
	size_t nprofiles, profiles_cap;
	uint64_t first_us;	/* of all samples, when timed */
	uint64_t nsamples;	/* added to all profiles */
};

static uint64_t
hash_name(const char *s)
{
	return fnv1a_str(FNV1A_BASIS, s);
}

struct fp_speedscope *
fp_speedscope_new(const struct fp_speedscope_options *o)
{
	struct fp_speedscope *ss = xnew(struct fp_speedscope);

	ss->options = *o;
	ss->nslots = 1024;
	ss->slots = xzalloc(ss->nslots * sizeof(*ss->slots));
	return ss;
}

void
fp_speedscope_destroy(struct fp_speedscope *ss)
{
	if (!ss)
		return;
	for (size_t i = 0; i < ss->nframes; i++) {
		free(ss->frames[i].name);
		free(ss->frames[i].file);
	}
	for (size_t i = 0; i < ss->nprofiles; i++) {
		free(ss->profiles[i].name);
		free(ss->profiles[i].idx);
		free(ss->profiles[i].off);
		free(ss->profiles[i].weights);
		free(ss->profiles[i].times);
	}
	free(ss->profiles);
	free(ss->frames);
	free(ss->slots);
	free(ss);
}

static char *
decode_file(const char *s)
{
	char *d = xzalloc(strlen(s) + 1), *q = d;

	while (*s) {
		int byte = fp_hex_escape_at(s);

		if (byte >= 0) {
			*q++ = (char)byte;
			s += 4;
		} else {
			*q++ = *s++;
		}
	}
	return d;
}

/* "m:f/2:123" -> 123; 0 without a line. */
static uint32_t
line_of(const char *name)
{
	const char *colon = strrchr(name, ':');
	const char *slash = strrchr(name, '/');
	uint32_t line = 0;

	if (!colon || !slash || colon < slash || !colon[1])
		return 0;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9' || line > 400000000)
			return 0;
		line = line * 10 + (uint32_t)(*p - '0');
	}
	return line;
}

static void
rehash(struct fp_speedscope *ss)
{
	free(ss->slots);
	ss->nslots *= 2;
	ss->slots = xzalloc(ss->nslots * sizeof(*ss->slots));
	for (size_t i = 0; i < ss->nframes; i++) {
		size_t j = ss->frames[i].hash & (ss->nslots - 1);

		while (ss->slots[j])
			j = (j + 1) & (ss->nslots - 1);
		ss->slots[j] = (uint32_t)(i + 1);
	}
}

static uint32_t
frame_index(struct fp_speedscope *ss, const char *name, const char *file)
{
	uint64_t h = hash_name(name);
	size_t j = h & (ss->nslots - 1);
	struct frame *f;

	while (ss->slots[j]) {
		f = &ss->frames[ss->slots[j] - 1];
		if (f->hash == h && strcmp(f->name, name) == 0)
			return ss->slots[j] - 1;
		j = (j + 1) & (ss->nslots - 1);
	}
	FP_GROW(ss->frames, ss->frames_cap, ss->nframes + 1);
	f = &ss->frames[ss->nframes++];
	f->name = xstrdup(name);
	/* "unknown" is the writer's word for no file */
	f->file = file && strcmp(file, "unknown") != 0 ? decode_file(file) : NULL;
	f->line = file ? line_of(name) : 0;
	f->hash = h;
	ss->slots[j] = (uint32_t)ss->nframes;
	if (ss->nframes * 2 > ss->nslots)
		rehash(ss);
	return (uint32_t)(ss->nframes - 1);
}

static struct profile *
profile_named(struct fp_speedscope *ss, const char *name)
{
	struct profile *p;

	for (size_t i = 0; i < ss->nprofiles; i++) {
		if (strcmp(ss->profiles[i].name, name) == 0)
			return &ss->profiles[i];
	}
	FP_GROW(ss->profiles, ss->profiles_cap, ss->nprofiles + 1);
	p = &ss->profiles[ss->nprofiles++];
	memset(p, 0, sizeof(*p));
	p->name = xstrdup(name);
	p->off = xzalloc(sizeof(*p->off));
	return p;
}

void
fp_speedscope_add(struct fp_speedscope *ss, const char *profile,
		  const char *const *names, const char *const *files, size_t n,
		  uint64_t weight, uint64_t time_us)
{
	struct profile *p = profile_named(ss, profile);

	FP_GROW(p->idx, p->idx_cap, p->nidx + n);
	for (size_t i = 0; i < n; i++)
		p->idx[p->nidx++] = frame_index(ss, names[i],
						files ? files[i] : NULL);
	if (p->count + 1 >= p->cap) {
		/* off holds one more entry than weights and times; all
		 * three are p->cap long */
		FP_GROW(p->off, p->cap, p->count + 2);
		p->weights = xrealloc(p->weights, p->cap * sizeof(*p->weights));
		p->times = xrealloc(p->times, p->cap * sizeof(*p->times));
	}
	if (!ss->nsamples++ || time_us < ss->first_us)
		ss->first_us = time_us;
	p->times[p->count] = time_us;
	p->weights[p->count++] = weight;
	p->off[p->count] = p->nidx;
	sat_add_u64(&p->total, weight);
}

void
fp_json_write_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putc('"', out);
	while (*p) {
		unsigned char c = *p;
		size_t n;

		if (c == '"' || c == '\\') {
			putc('\\', out);
			putc(c, out);
			p++;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(out, "\\u%04x", c);
			p++;
			continue;
		}
		if (c < 0x80) {
			putc(c, out);
			p++;
			continue;
		}
		/* multi-byte: copy a valid sequence, else U+FFFD; a C1
		 * control (U+0080..U+009F) escaped as the C0 ones are */
		n = fp_utf8_seq(p, false);
		if (n == 2 && c == 0xc2 && p[1] < 0xa0) {
			fprintf(out, "\\u%04x", p[1]);
			p += 2;
		} else if (n) {
			fwrite(p, 1, n, out);
			p += n;
		} else {
			fputs("\\ufffd", out);
			p++;
		}
	}
	putc('"', out);
}

static void
write_stack(const struct profile *p, size_t s, FILE *out)
{
	putc('[', out);
	for (size_t k = p->off[s]; k < p->off[s + 1]; k++)
		fprintf(out, k > p->off[s] ? ",%" PRIu32 : "%" PRIu32, p->idx[k]);
	putc(']', out);
}

static void
write_weighted(const struct profile *p, FILE *out)
{
	fprintf(out, ", \"startValue\": 0, \"endValue\": %" PRIu64 ",\n\"samples\": [",
		p->total);
	for (size_t s = 0; s < p->count; s++) {
		fputs(s ? ",\n" : "\n", out);
		write_stack(p, s, out);
	}
	fputs("\n],\n\"weights\": [", out);
	for (size_t s = 0; s < p->count; s++)
		fprintf(out, s ? ",%" PRIu64 : "%" PRIu64, p->weights[s]);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median interval between the samples of @p; 0 with fewer than 2. */
static uint64_t
median_gap(const struct profile *p)
{
	uint64_t *gaps, m;

	if (p->count < 2)
		return 0;
	gaps = xzalloc((p->count - 1) * sizeof(*gaps));
	for (size_t s = 1; s < p->count; s++)
		gaps[s - 1] = p->times[s] > p->times[s - 1] ?
			      p->times[s] - p->times[s - 1] : 0;
	qsort(gaps, p->count - 1, sizeof(*gaps), cmp_u64);
	m = gaps[(p->count - 1) / 2];
	free(gaps);
	return m;
}

/* A sample that lasts @us, of stack @s or (s == SIZE_MAX) of none. */
static void
put_timed(const struct profile *p, size_t s, uint64_t us, bool *first,
	  FILE *out, FILE *weights)
{
	fputs(*first ? "\n" : ",\n", out);
	if (s == SIZE_MAX)
		fputs("[]", out);
	else
		write_stack(p, s, out);
	fprintf(weights, "%s%" PRIu64 ".%06" PRIu64, *first ? "" : ",",
		us / 1000000, us % 1000000);
	*first = false;
}

/* Seconds since the first sample of all (fp_speedscope_write()). The
 * weights are written to a buffer while the samples go out. */
static void
write_timed(const struct fp_speedscope *ss, const struct profile *p, FILE *out)
{
	uint64_t gap = median_gap(p), end = ss->first_us;
	char *buf = NULL;
	size_t len = 0;
	FILE *weights = open_memstream(&buf, &len);
	bool first = true;

	if (!weights)
		abort();
	/* a process sampled once lasts as long as a millisecond */
	if (!gap)
		gap = 1000;
	fputs(",\n\"samples\": [", out);
	for (size_t s = 0; s < p->count; s++) {
		uint64_t t = p->times[s] > end ? p->times[s] : end;
		uint64_t next = s + 1 < p->count ? p->times[s + 1] : t + gap;

		if (t > end)
			put_timed(p, SIZE_MAX, t - end, &first, out, weights);
		if (next <= t)
			next = t;
		else if (next - t > 4 * gap)
			next = t + gap;
		put_timed(p, s, next - t, &first, out, weights);
		end = next;
	}
	fclose(weights);
	fprintf(out, "\n],\n\"startValue\": 0, \"endValue\": %" PRIu64 ".%06" PRIu64
		",\n\"weights\": [%s", (end - ss->first_us) / 1000000,
		(end - ss->first_us) % 1000000, buf);
	free(buf);
}

static int
by_profile_name(const void *a, const void *b)
{
	const struct profile *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

int
fp_speedscope_write(const struct fp_speedscope *ss, FILE *out)
{
	const struct profile **order;
	size_t active = 0;
	int rc = 0;

	order = xzalloc((ss->nprofiles + 1) * sizeof(*order));
	for (size_t i = 0; i < ss->nprofiles; i++)
		order[i] = &ss->profiles[i];
	qsort(order, ss->nprofiles, sizeof(*order), by_profile_name);
	for (size_t i = 1; i < ss->nprofiles; i++) {
		if (order[i]->total > order[active]->total)
			active = i;
	}

	fputs("{\n\"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n", out);
	fputs("\"exporter\": ", out);
	fp_json_write_string(out, ss->options.exporter ? ss->options.exporter :
							  "flame_prof");
	fputs(",\n", out);
	if (ss->options.name) {
		fputs("\"name\": ", out);
		fp_json_write_string(out, ss->options.name);
		fputs(",\n", out);
	}
	fprintf(out, "\"activeProfileIndex\": %zu,\n", active);
	fputs("\"shared\": {\"frames\": [", out);
	for (size_t i = 0; i < ss->nframes; i++) {
		const struct frame *f = &ss->frames[i];

		fputs(i ? ",\n{\"name\": " : "\n{\"name\": ", out);
		fp_json_write_string(out, f->name);
		if (f->file) {
			fputs(", \"file\": ", out);
			fp_json_write_string(out, f->file);
		}
		if (f->line)
			fprintf(out, ", \"line\": %" PRIu32, f->line);
		putc('}', out);
	}
	fputs("\n]},\n\"profiles\": [", out);
	for (size_t i = 0; i < ss->nprofiles; i++) {
		const struct profile *p = order[i];

		fputs(i ? ",\n{\"type\": \"sampled\", \"name\": " :
			  "\n{\"type\": \"sampled\", \"name\": ", out);
		fp_json_write_string(out, p->name);
		fputs(", \"unit\": ", out);
		fp_json_write_string(out, ss->options.unit ? ss->options.unit :
							      "none");
		if (ss->options.timed)
			write_timed(ss, p, out);
		else
			write_weighted(p, out);
		fputs("]}", out);
	}
	fputs("\n]\n}\n", out);
	free(order);
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	return rc;
}
