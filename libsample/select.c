/*
 * flame_profd — top-N selection by reductions rate, with a bounded scan.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp/select.h"
#include "node-private.h"
#include "pidmap.h"
#include "util-mem.h"

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
	struct pidmap history;
	bool have_history;
	unsigned full_scans;	/* whole-node reads still due after a reset */
	bool plan_full;		/* the pending plan holds every pid */
	uint64_t last_scan_us;

	struct fp_pid *all;	/* the node's pid list */
	size_t nall, all_cap;
	size_t window;		/* where the next window starts in all[] */
	bool wrapped;
	unsigned since_refresh;

	struct fp_pid *plan;	/* what the pending reductions reply is for */
	size_t nplan, plan_cap;
	bool pending;

	struct ranked *heap;
	size_t heap_cap;
};

struct fp_select *
fp_select_new(size_t scan_max)
{
	struct fp_select *sel = xnew(struct fp_select);

	sel->scan_max = scan_max ? scan_max : 1;
	sel->full_scans = 2;
	pidmap_init(&sel->history, sizeof(struct history));
	return sel;
}

void
fp_select_destroy(struct fp_select *sel)
{
	if (!sel)
		return;
	pidmap_release(&sel->history);
	free(sel->all);
	free(sel->plan);
	free(sel->heap);
	free(sel);
}

void
fp_select_reset(struct fp_select *sel)
{
	pidmap_clear(&sel->history);
	sel->have_history = false;
	sel->full_scans = 2;
	sel->pending = false;
	sel->nall = sel->nplan = sel->window = 0;
	sel->wrapped = false;
	sel->since_refresh = 0;
}

bool
fp_select_needs_processes(const struct fp_select *sel)
{
	return sel->nall == 0 || sel->nall <= sel->scan_max ||
	       sel->full_scans > 0 || sel->wrapped ||
	       sel->since_refresh >= FP_SELECT_REFRESH;
}

int
fp_select_processes(struct fp_select *sel, const struct fp_reply *reply)
{
	const char *buf = reply->buf;
	int index = reply->index, count;
	struct pidmap alive;

	if (reply->badrpc || node_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || count < 0)
		return -EBADMSG;
	if ((size_t)count > sel->all_cap) {
		sel->all_cap = (size_t)count;
		sel->all = xrealloc(sel->all, sel->all_cap * sizeof(*sel->all));
	}
	for (int i = 0; i < count; i++) {
		if (node_decode_pid(buf, &index, &sel->all[i]) < 0) {
			sel->nall = 0;
			return -EBADMSG;
		}
	}
	sel->nall = (size_t)count;
	if (sel->window >= sel->nall)
		sel->window = 0;
	sel->wrapped = false;
	sel->since_refresh = 0;

	/* Forget the processes that are gone. */
	pidmap_init(&alive, sizeof(struct history));
	for (size_t i = 0; i < sel->nall; i++) {
		uint64_t key = fp_pid_key(sel->all[i]);
		struct history *h = pidmap_find(&sel->history, key);
		bool created;

		if (h)
			*(struct history *)pidmap_insert(&alive, key, &created) = *h;
	}
	pidmap_release(&sel->history);
	sel->history = alive;
	return count;
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

size_t
fp_select_plan(struct fp_select *sel, const struct fp_pid *keep, size_t nkeep,
	       const struct fp_pid **pids)
{
	size_t cap = sel->nall < sel->scan_max ? sel->nall : sel->scan_max;
	size_t n = 0;

	if (sel->nall == 0) {
		sel->nplan = 0;
		sel->pending = false;
		*pids = sel->plan;
		return 0;
	}

	/* The baseline and the first ranking read the whole node, once, so
	 * that hot processes are found at once however big it is. */
	if (sel->full_scans > 0)
		cap = sel->nall;
	if (cap + nkeep > sel->plan_cap) {
		sel->plan_cap = cap + nkeep;
		sel->plan = xrealloc(sel->plan, sel->plan_cap * sizeof(*sel->plan));
	}
	sel->plan_full = sel->nall <= sel->scan_max || sel->full_scans > 0;
	if (sel->plan_full) {
		memcpy(sel->plan, sel->all, sel->nall * sizeof(*sel->all));
		n = sel->nall;
	} else {
		/* The window moves on by half its size, so every pid in it was
		 * also read last time and has a delta to rank by. */
		size_t budget, half, pos = sel->window, next = sel->window;
		size_t taken = 0;

		for (size_t i = 0; i < nkeep && n < cap; i++)
			sel->plan[n++] = keep[i];
		budget = cap - n;
		half = (budget + 1) / 2;
		for (size_t k = 0; k < sel->nall && taken < budget; k++) {
			struct fp_pid pid = sel->all[pos];

			pos = (pos + 1) % sel->nall;
			if (!in_list(keep, nkeep, pid)) {
				sel->plan[n++] = pid;
				if (++taken == half)
					next = pos;
			}
		}
		if (taken < half)
			next = pos;
		if (next <= sel->window)
			sel->wrapped = true;
		sel->window = next;
		sel->since_refresh++;
	}
	sel->nplan = n;
	sel->pending = n > 0;
	*pids = sel->plan;
	return n;
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
		if (node_decode_atom(buf, index, atom) < 0)
			return -EBADMSG;
		return 0;	/* undefined: gone */
	}
	if (ei_decode_tuple_header(buf, index, &arity) < 0 || arity != 2 ||
	    node_decode_atom(buf, index, atom) < 0 ||
	    node_decode_int(buf, index, reds) < 0)
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

int
fp_select_reductions(struct fp_select *sel, const struct fp_reply *reply,
		     uint64_t now_us, const struct fp_pid *exclude,
		     size_t nexclude, size_t top, struct fp_pid *out,
		     struct fp_select_result *result)
{
	const char *buf = reply->buf;
	int index = reply->index, count, rc;
	size_t nheap = 0, alive = 0;
	bool full = sel->plan_full;
	int64_t *reds;

	memset(result, 0, sizeof(*result));
	if (!sel->pending)
		return -EINVAL;
	sel->pending = false;
	if (reply->badrpc || node_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 ||
	    (size_t)count != sel->nplan)
		return -EBADMSG;

	/* Decode everything first: a bad reply must not touch history. */
	reds = xzalloc((sel->nplan ? sel->nplan : 1) * sizeof(*reds));
	for (size_t i = 0; i < sel->nplan; i++) {
		rc = decode_reductions(buf, &index, &reds[i]);
		if (rc < 0) {
			free(reds);
			return rc;
		}
		if (rc == 0)
			reds[i] = -1;
	}

	if (top > sel->heap_cap) {
		sel->heap_cap = top;
		sel->heap = xrealloc(sel->heap, top * sizeof(*sel->heap));
	}
	for (size_t i = 0; i < sel->nplan; i++) {
		struct fp_pid pid = sel->plan[i];
		struct history *h;
		int64_t delta;
		uint64_t since;
		bool created;

		if (reds[i] < 0)
			continue;
		alive++;
		h = pidmap_insert(&sel->history, fp_pid_key(pid), &created);
		if (!created) {
			if (__builtin_sub_overflow(reds[i], h->reductions, &delta))
				delta = 0;
			since = now_us - h->seen_us;
		} else if (full && sel->have_history) {
			/* Born since the last full scan: all its work is new. */
			delta = reds[i];
			since = now_us - sel->last_scan_us;
		} else {
			delta = 0;
			since = 0;
		}
		h->reductions = reds[i];
		h->seen_us = now_us;
		if (!sel->have_history || top == 0 || delta <= 0 ||
		    in_list(exclude, nexclude, pid))
			continue;
		rank(sel, top, &nheap, pid,
		     (double)delta * 1e6 / (double)(since ? since : 1));
	}
	free(reds);

	if (sel->full_scans > 0)
		sel->full_scans--;
	result->processes = sel->nall;
	result->scanned = sel->nplan;
	result->alive = alive;
	result->baseline = !sel->have_history;
	sel->have_history = true;
	sel->last_scan_us = now_us;

	if (nheap > 1)
		qsort(sel->heap, nheap, sizeof(*sel->heap), cmp_ranked_desc);
	for (size_t i = 0; i < nheap; i++)
		out[i] = sel->heap[i].pid;
	return (int)nheap;
}
