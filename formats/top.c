/*
 * flame_profd — per-function totals and the top table.
 *
 * Totals count a function once per sample: a recursive function (deep/2
 * twenty frames deep) would otherwise pass 100%. Each function carries
 * the number of the last sample that counted it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util-hash.h"
#include "fp/top.h"
#include "util-buf.h"
#include "util-mem.h"
#include "util-sat.h"

struct func {
	struct fp_func_stats stats;
	uint64_t hash;
	uint64_t stamp;		/* last sample counted in total */
};

struct fp_func_table {
	struct func *funcs;
	size_t count, cap;
	uint32_t *slots;	/* index + 1, 0 empty */
	size_t nslots;
	uint64_t samples;
	uint64_t unranked;	/* counted, in no row (idle left out) */
	uint64_t status_samples[FP_STATUS_COUNT];
	uint64_t abs_weight;
	int64_t net_weight;
	bool saturated;		/* a sum was held at a bound */
};

static uint64_t
hash_name(const char *s)
{
	return fnv1a_str(FNV1A_BASIS, s);
}

struct fp_func_table *
fp_func_table_new(void)
{
	struct fp_func_table *t = xnew(struct fp_func_table);

	t->nslots = 1024;
	t->slots = xzalloc(t->nslots * sizeof(*t->slots));
	return t;
}

void
fp_func_table_destroy(struct fp_func_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->count; i++)
		free((char *)t->funcs[i].stats.name);
	free(t->funcs);
	free(t->slots);
	free(t);
}

static void
rehash(struct fp_func_table *t)
{
	free(t->slots);
	t->nslots *= 2;
	t->slots = xzalloc(t->nslots * sizeof(*t->slots));
	for (size_t i = 0; i < t->count; i++) {
		size_t j = t->funcs[i].hash & (t->nslots - 1);

		while (t->slots[j])
			j = (j + 1) & (t->nslots - 1);
		t->slots[j] = (uint32_t)(i + 1);
	}
}

static struct func *
lookup(const struct fp_func_table *t, const char *name, uint64_t h,
       size_t *slot)
{
	size_t j = h & (t->nslots - 1);

	while (t->slots[j]) {
		struct func *f = &t->funcs[t->slots[j] - 1];

		if (f->hash == h && strcmp(f->stats.name, name) == 0)
			return f;
		j = (j + 1) & (t->nslots - 1);
	}
	if (slot)
		*slot = j;
	return NULL;
}

static struct func *
intern(struct fp_func_table *t, const char *name)
{
	uint64_t h = hash_name(name);
	size_t slot;
	struct func *f = lookup(t, name, h, &slot);

	if (f)
		return f;
	FP_GROW(t->funcs, t->cap, t->count + 1);
	f = &t->funcs[t->count++];
	memset(f, 0, sizeof(*f));
	f->stats.name = xstrdup(name);
	f->hash = h;
	t->slots[slot] = (uint32_t)t->count;
	if (t->count * 2 > t->nslots)
		rehash(t);
	return f;
}

void
fp_func_table_add(struct fp_func_table *t, enum fp_status status,
		  const char *const *frames, size_t nframes, int64_t weight)
{
	uint64_t stamp = ++t->samples;
	uint64_t magnitude = weight < 0 ? (uint64_t)0 - (uint64_t)weight :
			     (uint64_t)weight;
	bool sat;

	t->status_samples[(unsigned)status < FP_STATUS_COUNT ? status : 0]++;
	sat = sat_add_u64(&t->abs_weight, magnitude);
	sat |= sat_add_i64(&t->net_weight, weight);
	for (size_t i = 0; i < nframes; i++) {
		struct func *f = intern(t, frames[i]);

		if (i == 0) {
			f->stats.self_samples++;
			sat |= sat_add_i64(&f->stats.self_weight, weight);
			sat |= sat_add_u64(weight < 0 ? &f->stats.self_release :
					   &f->stats.self_growth, magnitude);
		}
		if (f->stamp != stamp) {
			f->stamp = stamp;
			f->stats.total_samples++;
			sat |= sat_add_i64(&f->stats.total_weight, weight);
			sat |= sat_add_u64(weight < 0 ? &f->stats.total_release :
					   &f->stats.total_growth, magnitude);
		}
	}
	t->saturated |= sat;
}

void
fp_func_table_add_unranked(struct fp_func_table *t, enum fp_status status)
{
	t->samples++;
	t->unranked++;
	t->status_samples[(unsigned)status < FP_STATUS_COUNT ? status : 0]++;
}

uint64_t
fp_func_table_samples(const struct fp_func_table *t)
{
	return t->samples;
}

uint64_t
fp_func_table_status_samples(const struct fp_func_table *t,
			     enum fp_status status)
{
	return (unsigned)status < FP_STATUS_COUNT ? t->status_samples[status] : 0;
}

uint64_t
fp_func_table_abs_weight(const struct fp_func_table *t)
{
	return t->abs_weight;
}

int64_t
fp_func_table_net_weight(const struct fp_func_table *t)
{
	return t->net_weight;
}

bool
fp_func_table_saturated(const struct fp_func_table *t)
{
	return t->saturated;
}

size_t
fp_func_table_count(const struct fp_func_table *t)
{
	return t->count;
}

const struct fp_func_stats *
fp_func_table_at(const struct fp_func_table *t, size_t i)
{
	return i < t->count ? &t->funcs[i].stats : NULL;
}

const struct fp_func_stats *
fp_func_table_find(const struct fp_func_table *t, const char *name)
{
	struct func *f = lookup(t, name, hash_name(name), NULL);

	return f ? &f->stats : NULL;
}

static int64_t
key_of(const struct fp_func_stats *s, enum fp_top_sort sort_key)
{
	switch (sort_key) {
	case FP_TOP_TOTAL:
		return (int64_t)s->total_samples;
	case FP_TOP_WEIGHT_SELF:
		return s->self_weight;
	case FP_TOP_WEIGHT_TOTAL:
		return s->total_weight;
	case FP_TOP_GROSS_GROWTH:
		return s->self_growth > INT64_MAX ? INT64_MAX : (int64_t)s->self_growth;
	case FP_TOP_GROSS_RELEASE:
		return s->self_release > INT64_MAX ? INT64_MAX : (int64_t)s->self_release;
	case FP_TOP_SELF:
	default:
		return (int64_t)s->self_samples;
	}
}

static int
by_key(const void *a, const void *b, void *data)
{
	const struct fp_func_stats *const *x = a, *const *y = b;
	enum fp_top_sort sort = *(const enum fp_top_sort *)data;
	int64_t kx = key_of(*x, sort), ky = key_of(*y, sort);

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp((*x)->name, (*y)->name);
}

static double
share(int64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int
fp_top_write(const struct fp_func_table *t, const struct fp_top_options *o,
	     FILE *out)
{
	const struct fp_func_stats **rows;
	size_t n = t->count, shown;
	bool weighted = o->weight_name != NULL;
	bool first = true;
	uint64_t ranked = t->samples - t->unranked;
	int rc = 0;

	fprintf(out, "samples: %" PRIu64 "\n", t->samples);
	if (weighted)
		fprintf(out, "weight: %s (sum %" PRId64 ", sum of absolute values %" PRIu64 ")\n",
			o->weight_name, t->net_weight, t->abs_weight);
	if (weighted && o->gross)
		fputs("(W: net sums; +W_SELF: growth, -W_SELF: release, by magnitude)\n",
		      out);
	fputs("status:", out);
	for (int s = 1; s <= FP_STATUS_COUNT; s++) {
		enum fp_status st = (enum fp_status)(s % FP_STATUS_COUNT);

		if (!t->status_samples[st])
			continue;
		fprintf(out, "%s %s %" PRIu64 " (%.2f%%)", first ? "" : ",",
			fp_status_name(st), t->status_samples[st],
			share((int64_t)t->status_samples[st], t->samples));
		first = false;
	}
	fputc('\n', out);
	if (t->unranked)
		fprintf(out, "idle: %" PRIu64 " samples (waiting, suspended, SLEEP) left out "
			"of the rows; --status counts them\n", t->unranked);
	fputc('\n', out);

	rows = xzalloc((n ? n : 1) * sizeof(*rows));
	for (size_t i = 0; i < n; i++)
		rows[i] = &t->funcs[i].stats;
	qsort_r(rows, n, sizeof(*rows), by_key, (void *)&o->sort);
	shown = o->limit && o->limit < n ? o->limit : n;

	fprintf(out, "%9s %7s %9s %7s", "SELF", "SELF%", "TOTAL", "TOTAL%");
	if (weighted)
		fprintf(out, " %15s %8s %15s %8s", "W_SELF", "W_SELF%",
			"W_TOTAL", "W_TOTAL%");
	if (weighted && o->gross)
		fprintf(out, " %15s %15s", "+W_SELF", "-W_SELF");
	fputs("  FUNCTION\n", out);
	for (size_t i = 0; i < shown; i++) {
		const struct fp_func_stats *s = rows[i];

		fprintf(out, "%9" PRIu64 " %6.2f%% %9" PRIu64 " %6.2f%%",
			s->self_samples, share((int64_t)s->self_samples, ranked),
			s->total_samples,
			share((int64_t)s->total_samples, ranked));
		if (weighted)
			fprintf(out, " %15" PRId64 " %7.2f%% %15" PRId64 " %7.2f%%",
				s->self_weight, share(s->self_weight, t->abs_weight),
				s->total_weight,
				share(s->total_weight, t->abs_weight));
		if (weighted && o->gross)
			fprintf(out, " %15" PRIu64 " %15" PRIu64, s->self_growth,
				s->self_release);
		fprintf(out, "  %s\n", s->name);
	}
	if (shown < n)
		fprintf(out, "(%zu more functions; --limit 0 shows all)\n",
			n - shown);
	free(rows);
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	return rc;
}
