/*
 * flame_prof — the sliding window of top --follow: the samples of the
 * last seconds, counted per second.
 *
 * Each second of the window is a bucket with its own name tables, so a
 * second leaves the window by clearing one bucket, and what the window
 * holds is bounded by its seconds times what one second names, whatever
 * the run's length: a node that starts a million short-lived processes
 * over a day holds only the last seconds' names.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "flame_prof.h"
#include "util-buf.h"
#include "util-hash.h"
#include "util-mem.h"

struct entry {
	uint64_t hash;
	size_t name;		/* offset in the table's names + 1; 0: empty */
	uint64_t self, total;
	uint64_t stamp;		/* the sample that last counted its total */
};

/* Names to counts, open addressing; a table is cleared, never shrunk. */
struct table {
	struct entry *slots;
	size_t cap, n;		/* cap a power of two, or 0 */
	struct fp_text names;
};

struct bucket {
	bool used;
	uint64_t sec;		/* the second it counts */
	uint64_t samples, idle;
	uint64_t status[FP_STATUS_COUNT];
	uint64_t stamp;		/* samples counted, for the totals */
	struct table tables[FPP_VIEW_COUNT];
};

struct fpp_window {
	size_t nb;		/* buckets: the window's seconds */
	struct bucket *b;
	bool any;
	uint64_t first_sec, newest_sec, newest_us;
	struct table merged;
	struct fpp_window_row *rows;
	size_t rows_cap;
};

static void
table_clear(struct table *t)
{
	if (t->cap)
		memset(t->slots, 0, t->cap * sizeof(*t->slots));
	t->n = 0;
	t->names.len = 0;
}

static void
table_free(struct table *t)
{
	free(t->slots);
	fp_text_free(&t->names);
}

static struct entry *
table_slot(struct entry *slots, size_t cap, uint64_t hash, const char *names,
	   const char *name)
{
	for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
		struct entry *e = &slots[i];

		if (!e->name ||
		    (e->hash == hash && strcmp(names + e->name - 1, name) == 0))
			return e;
	}
}

/* The entry of @name, added with zero counts if new. */
static struct entry *
table_get(struct table *t, const char *name)
{
	uint64_t hash = fnv1a_str(FNV1A_BASIS, name);
	struct entry *e;

	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct entry *slots = xzalloc(cap * sizeof(*slots));

		for (size_t i = 0; i < t->cap; i++) {
			struct entry *old = &t->slots[i];

			if (old->name)
				*table_slot(slots, cap, old->hash, t->names.buf,
					    t->names.buf + old->name - 1) = *old;
		}
		free(t->slots);
		t->slots = slots;
		t->cap = cap;
	}
	e = table_slot(t->slots, t->cap, hash, t->names.buf, name);
	if (!e->name) {
		e->hash = hash;
		e->name = fp_text_put_str(&t->names, name, strlen(name)) + 1;
		t->n++;
	}
	return e;
}

struct fpp_window *
fpp_window_new(uint64_t window_us)
{
	struct fpp_window *w = xnew(struct fpp_window);

	w->nb = (size_t)((window_us + 999999) / 1000000);
	if (w->nb < 1)
		w->nb = 1;
	w->b = xzalloc(w->nb * sizeof(*w->b));
	return w;
}

void
fpp_window_destroy(struct fpp_window *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nb; i++) {
		for (int v = 0; v < FPP_VIEW_COUNT; v++)
			table_free(&w->b[i].tables[v]);
	}
	free(w->b);
	table_free(&w->merged);
	free(w->rows);
	free(w);
}

static void
bucket_reset(struct bucket *b, uint64_t sec)
{
	b->used = true;
	b->sec = sec;
	b->samples = b->idle = b->stamp = 0;
	memset(b->status, 0, sizeof(b->status));
	for (int v = 0; v < FPP_VIEW_COUNT; v++)
		table_clear(&b->tables[v]);
}

void
fpp_window_add(struct fpp_window *w, const struct fpp_window_sample *s)
{
	uint64_t sec = s->time_us / 1000000;
	struct bucket *b;

	if (!w->any) {
		w->any = true;
		w->first_sec = w->newest_sec = sec;
	}
	if (sec > w->newest_sec) {
		/* the seconds passed leave the window */
		for (uint64_t k = w->newest_sec + 1; k <= sec && k - w->newest_sec <= w->nb;
		     k++)
			w->b[k % w->nb].used = false;
		w->newest_sec = sec;
	}
	if (sec + w->nb <= w->newest_sec)
		return;		/* older than the window */
	if (s->time_us > w->newest_us)
		w->newest_us = s->time_us;
	b = &w->b[sec % w->nb];
	if (!b->used || b->sec != sec)
		bucket_reset(b, sec);
	b->samples++;
	b->stamp++;
	b->status[s->status < FP_STATUS_COUNT ? s->status : FP_STATUS_UNKNOWN]++;
	if (s->process)
		table_get(&b->tables[FPP_VIEW_PROCESSES], s->process)->self++;
	if (s->value)
		table_get(&b->tables[FPP_VIEW_FIELD], s->value)->self++;
	if (s->idle) {
		b->idle++;
		return;
	}
	for (size_t i = 0; i < s->nframes; i++) {
		struct entry *e = table_get(&b->tables[FPP_VIEW_FUNCTIONS],
					    s->frames[i]);

		if (i == 0)
			e->self++;
		if (e->stamp != b->stamp) {
			/* recursion counts once */
			e->stamp = b->stamp;
			e->total++;
		}
	}
}

static bool sort_by_total;

static int
row_cmp(const void *a, const void *b)
{
	const struct fpp_window_row *x = a, *y = b;
	uint64_t kx = sort_by_total ? x->total : x->self;
	uint64_t ky = sort_by_total ? y->total : y->self;

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

size_t
fpp_window_rows(struct fpp_window *w, enum fpp_view view, bool by_total,
		const struct fpp_window_row **rows,
		struct fpp_window_summary *sum)
{
	struct table *m = &w->merged;
	uint64_t oldest = w->newest_sec + 1 >= w->nb ? w->newest_sec + 1 - w->nb : 0;
	size_t n = 0;

	if (sum) {
		memset(sum, 0, sizeof(*sum));
		if (w->any) {
			sum->newest_us = w->newest_us;
			sum->seconds = w->newest_sec -
				       (w->first_sec > oldest ? w->first_sec : oldest) + 1;
		}
	}
	table_clear(m);
	for (size_t i = 0; i < w->nb; i++) {
		const struct bucket *b = &w->b[i];
		const struct table *t = &b->tables[view];

		if (!b->used || b->sec < oldest || b->sec > w->newest_sec)
			continue;
		if (sum) {
			sum->samples += b->samples;
			sum->idle += b->idle;
			for (int s = 0; s < FP_STATUS_COUNT; s++)
				sum->status[s] += b->status[s];
		}
		for (size_t k = 0; k < t->cap; k++) {
			const struct entry *e = &t->slots[k];
			struct entry *to;

			if (!e->name)
				continue;
			to = table_get(m, t->names.buf + e->name - 1);
			to->self += e->self;
			to->total += e->total;
		}
	}
	FP_GROW(w->rows, w->rows_cap, m->n + 1);
	for (size_t k = 0; k < m->cap; k++) {
		const struct entry *e = &m->slots[k];

		if (e->name)
			w->rows[n++] = (struct fpp_window_row){
				m->names.buf + e->name - 1, e->self,
				view == FPP_VIEW_FUNCTIONS ? e->total : e->self,
			};
	}
	sort_by_total = by_total && view == FPP_VIEW_FUNCTIONS;
	if (n > 1)
		qsort(w->rows, n, sizeof(*w->rows), row_cmp);
	*rows = w->rows;
	return n;
}
