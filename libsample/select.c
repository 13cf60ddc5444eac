/*
 * flame_profd — top-N selection by reductions rate, with a bounded scan.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "eval.h"
#include "fp/select.h"
#include "node-private.h"
#include "pidmap.h"
#include "util-buf.h"
#include "util-mem.h"

/* The most candidates a sweep leaves (fewer under a smaller --scan-max):
 * far more than any --top, and still a small reply (about 50 bytes a
 * pid) and a cheap re-read at the next selection. */
#define SWEEP_KEEP 10000u

struct history {
	int64_t reductions;
	uint64_t seen_us;
};

struct ranked {
	struct fp_pid pid;
	double rate;
};

struct fp_select {
	size_t scan_max;
	double floor;		/* reductions/s below which none is picked */
	struct pidmap history;	/* the pids the last scan read */
	bool have_history;
	bool last_full;		/* ... and it read the whole node */
	uint64_t last_scan_us;

	char *cursor;		/* where the next window starts (a term); */
	size_t cursor_len, cursor_cap;	/* 0 bytes: at the beginning */
	bool plan_at_start;	/* the pending plan's window is the first */
	bool last_at_start;	/* ... and so was the last one's */
	bool fresh;		/* the window starts where a sweep stopped:
				 * a first window too */

	struct fp_pid *keep;	/* the pending plan's re-read pids */
	size_t nkeep, keep_cap;
	bool pending;
	bool plan_sweep;	/* the pending plan is a sweep */
	bool sweep_due;		/* the next plan is a sweep, history or not */

	struct fp_pid *cand;	/* the last sweep's candidates, re-read */
	size_t ncand, cand_cap;	/* ... by the next plan */

	struct fp_pid *read;	/* a reply's pids, in the order read */
	size_t read_cap;
	int64_t *reds;
	size_t reds_cap;

	struct ranked *heap;
	size_t heap_cap;
};

struct fp_select *
fp_select_new(size_t scan_max)
{
	struct fp_select *sel = xnew(struct fp_select);

	/* one pid of window beside the current selection, at least */
	sel->scan_max = scan_max > 2 ? scan_max : 2;
	pidmap_init(&sel->history, sizeof(struct history));
	return sel;
}

void
fp_select_set_floor(struct fp_select *sel, double reductions_per_s)
{
	sel->floor = reductions_per_s > 0 ? reductions_per_s : 0;
}

void
fp_select_destroy(struct fp_select *sel)
{
	if (!sel)
		return;
	pidmap_release(&sel->history);
	free(sel->cursor);
	free(sel->keep);
	free(sel->cand);
	free(sel->read);
	free(sel->reds);
	free(sel->heap);
	free(sel);
}

void
fp_select_reset(struct fp_select *sel)
{
	pidmap_clear(&sel->history);
	sel->have_history = false;
	sel->last_full = false;
	sel->pending = false;
	sel->cursor_len = 0;
	sel->last_at_start = false;
	sel->fresh = false;
	sel->ncand = 0;
	sel->sweep_due = false;
}

void
fp_select_sweep_again(struct fp_select *sel)
{
	sel->sweep_due = true;
}

static bool
in_list(const struct fp_pid *list, size_t n, struct fp_pid pid)
{
	for (size_t i = 0; i < n; i++) {
		if (list[i].num == pid.num && list[i].serial == pid.serial)
			return true;
	}
	return false;
}

void
fp_select_plan(struct fp_select *sel, const struct fp_pid *keep, size_t nkeep,
	       size_t limit, struct fp_scan *scan)
{
	size_t cap = limit && limit < sel->scan_max ? limit : sel->scan_max;
	size_t nk, nsel, len;
	bool sweep = !sel->have_history || sel->sweep_due;

	if (cap < 2)
		cap = 2;
	/* the selection, then what the last sweep left, read again */
	nk = nkeep + sel->ncand < cap - 1 ? nkeep + sel->ncand : cap - 1;
	FP_GROW(sel->keep, sel->keep_cap, nk);
	nsel = nkeep < nk ? nkeep : nk;
	if (nsel)
		memcpy(sel->keep, keep, nsel * sizeof(*keep));
	if (nk > nsel)
		memcpy(sel->keep + nsel, sel->cand, (nk - nsel) * sizeof(*sel->cand));
	sel->ncand = 0;
	sel->nkeep = nk;
	sel->pending = true;
	sel->plan_sweep = sweep;
	sel->sweep_due = false;
	sel->plan_at_start = sel->cursor_len == 0 || sel->fresh;

	len = cap - nk;
	if (sweep && len > SWEEP_KEEP)
		len = SWEEP_KEEP;
	*scan = (struct fp_scan){
		.keep = sel->keep,
		.nkeep = nk,
		.max = cap,
		.sweep = sweep,
		.len = len,
		/* The window moves on by half its size, so every pid in it
		 * was also read last time and has a delta to rank by. */
		.step = sweep ? len : (len + 1) / 2,
		.cursor = sel->cursor,
		.cursor_len = sel->cursor_len,
	};
}

/* Min-heap on rate: the root is the weakest of the current top. */
static void
sift_down(struct ranked *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct ranked t;

		if (l < n && h[l].rate < h[m].rate)
			m = l;
		if (r < n && h[r].rate < h[m].rate)
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void
sift_up(struct ranked *h, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		struct ranked t;

		if (h[p].rate <= h[i].rate)
			return;
		t = h[i];
		h[i] = h[p];
		h[p] = t;
		i = p;
	}
}

static int
cmp_ranked_desc(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->rate != y->rate)
		return x->rate < y->rate ? 1 : -1;
	return x->pid.num < y->pid.num ? -1 : x->pid.num > y->pid.num;
}

/* One element of the reductions list: {reductions, N} or undefined. */
static int
decode_reductions(const char *buf, int *index, int64_t *reds)
{
	char atom[MAXATOMLEN_UTF8];
	int arity, type, size;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_ATOM_EXT || type == ERL_SMALL_ATOM_EXT ||
	    type == ERL_ATOM_UTF8_EXT || type == ERL_SMALL_ATOM_UTF8_EXT) {
		if (etf_decode_atom(buf, index, atom) < 0)
			return -EBADMSG;
		return 0;	/* undefined: gone */
	}
	if (ei_decode_tuple_header(buf, index, &arity) < 0 || arity != 2 ||
	    etf_decode_atom(buf, index, atom) < 0 ||
	    etf_decode_int(buf, index, reds) < 0)
		return -EBADMSG;
	return 1;
}

static void
rank(struct fp_select *sel, size_t top, size_t *nheap, struct fp_pid pid,
     double rate)
{
	if (*nheap < top) {
		sel->heap[*nheap] = (struct ranked){ pid, rate };
		sift_up(sel->heap, (*nheap)++);
	} else if (rate > sel->heap[0].rate) {
		sel->heap[0] = (struct ranked){ pid, rate };
		sift_down(sel->heap, *nheap, 0);
	}
}

/* Grow @p (of @cap elements of @size) to hold @n. */
static void *
reserve(void *p, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return p;
	*cap = n;
	return xrealloc(p, n * size);
}

/*
 * {full | window, Count, Pids, Reductions, Next} or {sweep, ..., Next,
 * Read} into sel->read (Keep ++ Pids, or Pids) and sel->reds (-1: gone);
 * the bytes of Next at [*next_start, *next_end), *swept what a sweep
 * read.
 * The cursor is not touched: a bad reply changes nothing.
 */
static int
decode_scan(struct fp_select *sel, const struct fp_reply *reply, bool *full,
	    bool *sweep, size_t *processes, size_t *nread, int *next_start,
	    int *next_end, size_t *swept)
{
	const char *buf = reply->buf;
	char tag[MAXATOMLEN_UTF8];
	int index = reply->index, arity, count, nreds, rc;
	int64_t procs, read;
	size_t first;

	if (ei_decode_tuple_header(buf, &index, &arity) < 0 ||
	    (arity != 5 && arity != 6) ||
	    etf_decode_atom(buf, &index, tag) < 0 ||
	    etf_decode_int(buf, &index, &procs) < 0 || procs < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || count < 0)
		return -EBADMSG;
	*full = strcmp(tag, "full") == 0;
	*sweep = strcmp(tag, "sweep") == 0;
	if ((!*full && !*sweep && strcmp(tag, "window") != 0) ||
	    (arity == 6) != *sweep)
		return -EBADMSG;

	first = *full ? 0 : sel->nkeep;
	sel->read = reserve(sel->read, &sel->read_cap, first + (size_t)count + 1,
			    sizeof(*sel->read));
	if (first)
		memcpy(sel->read, sel->keep, first * sizeof(*sel->keep));
	for (int i = 0; i < count; i++) {
		if (etf_decode_pid(buf, &index, &sel->read[first + (size_t)i]) < 0)
			return -EBADMSG;
	}
	if (count > 0 && (ei_decode_list_header(buf, &index, &arity) < 0 ||
			  arity != 0))
		return -EBADMSG;

	*nread = first + (size_t)count;
	if (ei_decode_list_header(buf, &index, &nreds) < 0 ||
	    (size_t)nreds != *nread)
		return -EBADMSG;
	sel->reds = reserve(sel->reds, &sel->reds_cap, *nread + 1,
			    sizeof(*sel->reds));
	for (size_t i = 0; i < *nread; i++) {
		rc = decode_reductions(buf, &index, &sel->reds[i]);
		if (rc < 0)
			return rc;
		if (rc == 0)
			sel->reds[i] = -1;
	}
	if (nreds > 0 && (ei_decode_list_header(buf, &index, &arity) < 0 ||
			  arity != 0))
		return -EBADMSG;
	*next_start = index;
	if (etf_skip_term(buf, &index) < 0)
		return -EBADMSG;
	*next_end = index;
	*swept = 0;
	if (*sweep) {
		if (etf_decode_int(buf, &index, &read) < 0 || read < 0)
			return -EBADMSG;
		*swept = (size_t)read;
	}
	*processes = (size_t)procs;
	return 0;
}

int
fp_select_scan(struct fp_select *sel, const struct fp_reply *reply,
	       uint64_t now_us, const struct fp_pid *exclude, size_t nexclude,
	       size_t top, struct fp_pid *out, struct fp_select_result *result)
{
	struct fp_reply value = *reply;
	struct pidmap seen;
	size_t nheap = 0, alive = 0, processes, nread, swept;
	int rc, next_start, next_end;
	bool full, sweep;

	memset(result, 0, sizeof(*result));
	if (!sel->pending)
		return -EINVAL;
	sel->pending = false;
	if (reply->badrpc || node_reply_eval_value(&value) < 0)
		return -EBADMSG;
	rc = decode_scan(sel, &value, &full, &sweep, &processes, &nread,
			 &next_start, &next_end, &swept);
	if (rc < 0)
		return rc;
	if (sweep && !sel->plan_sweep)
		return -EBADMSG;	/* a sweep was not asked for */

	/* The first window of a round is read twice: there is no window
	 * before it that would have read its first half. The windows go on
	 * where a sweep stopped: at the start, when it read the whole
	 * table. */
	if (sweep) {
		size_t n = nread - sel->nkeep;

		/* the node sends them least first; a plan cut short by the
		 * budget reads the first */
		FP_GROW(sel->cand, sel->cand_cap, n);
		for (size_t i = 0; i < n; i++)
			sel->cand[i] = sel->read[nread - 1 - i];
		sel->ncand = n;
	}
	if (sweep || full || !sel->plan_at_start || sel->last_at_start) {
		int index = next_start;

		/* a window read twice where the sweep stopped moves on */
		sel->fresh = sweep;
		if (ei_decode_atom(value.buf, &index, NULL) == 0 &&
		    index == next_end) {
			sel->cursor_len = 0;	/* start */
		} else {
			sel->cursor_len = (size_t)(next_end - next_start);
			sel->cursor = reserve(sel->cursor, &sel->cursor_cap,
					      sel->cursor_len, 1);
			memcpy(sel->cursor, value.buf + next_start,
			       sel->cursor_len);
		}
	}
	sel->last_at_start = !full && !sweep && sel->plan_at_start;

	if (top > sel->heap_cap) {
		sel->heap_cap = top;
		sel->heap = xrealloc(sel->heap, top * sizeof(*sel->heap));
	}
	/* History is what this scan read: a window's pids are read twice in
	 * a row, and older readings would only dilute their rates. */
	pidmap_init(&seen, sizeof(struct history));
	for (size_t i = 0; i < nread; i++) {
		struct fp_pid pid = sel->read[i];
		uint64_t key = fp_pid_key(pid), since;
		struct history *h, *now;
		int64_t delta;
		double rate;
		bool created;

		if (sel->reds[i] < 0)
			continue;
		now = pidmap_insert(&seen, key, &created);
		if (!created)
			continue;	/* in the selection and the window */
		alive++;
		h = pidmap_find(&sel->history, key);
		if (h) {
			if (__builtin_sub_overflow(sel->reds[i], h->reductions, &delta))
				delta = 0;
			since = now_us - h->seen_us;
		} else if (full && sel->last_full && sel->have_history) {
			/* Born since the last full scan: all its work is new. */
			delta = sel->reds[i];
			since = now_us - sel->last_scan_us;
		} else {
			delta = 0;
			since = 0;
		}
		now->reductions = sel->reds[i];
		now->seen_us = now_us;
		if (!sel->have_history || top == 0 || delta <= 0 ||
		    in_list(exclude, nexclude, pid))
			continue;
		rate = (double)delta * 1e6 / (double)(since ? since : 1);
		if (rate < sel->floor)
			continue;
		rank(sel, top, &nheap, pid, rate);
	}
	pidmap_release(&sel->history);
	sel->history = seen;

	result->processes = processes;
	/* a sweep read what it walked, and sent back nread */
	result->scanned = sweep ? swept + sel->nkeep : nread;
	result->sweep = sweep;
	result->alive = alive;
	result->full = full;
	result->baseline = !sel->have_history;
	sel->have_history = true;
	sel->last_full = full;
	sel->last_scan_us = now_us;

	if (nheap > 1)
		qsort(sel->heap, nheap, sizeof(*sel->heap), cmp_ranked_desc);
	for (size_t i = 0; i < nheap; i++)
		out[i] = sel->heap[i].pid;
	return (int)nheap;
}
