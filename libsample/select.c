/*
 * flame_profd — top-N selection by reductions delta.
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
};

struct ranked {
	struct fp_pid pid;
	int64_t delta;
};

struct fp_select {
	struct pidmap prev, cur;
	bool have_history;

	struct fp_pid *pids;	/* the pending processes() list */
	size_t npids, pids_cap;
	bool pending;

	struct ranked *heap;
	size_t heap_cap;
};

struct fp_select *
fp_select_new(void)
{
	struct fp_select *sel = xnew(struct fp_select);

	pidmap_init(&sel->prev, sizeof(struct history));
	pidmap_init(&sel->cur, sizeof(struct history));
	return sel;
}

void
fp_select_destroy(struct fp_select *sel)
{
	if (!sel)
		return;
	pidmap_release(&sel->prev);
	pidmap_release(&sel->cur);
	free(sel->pids);
	free(sel->heap);
	free(sel);
}

void
fp_select_reset(struct fp_select *sel)
{
	pidmap_clear(&sel->prev);
	pidmap_clear(&sel->cur);
	sel->have_history = false;
	sel->pending = false;
	sel->npids = 0;
}

int
fp_select_processes(struct fp_select *sel, const struct fp_reply *reply)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;

	if (reply->badrpc || ei_get_type(buf, &index, &type, &size) < 0)
		return -EBADMSG;
	if (ei_decode_list_header(buf, &index, &count) < 0 || count < 0)
		return -EBADMSG;
	if ((size_t)count > sel->pids_cap) {
		sel->pids_cap = (size_t)count;
		sel->pids = xrealloc(sel->pids, sel->pids_cap * sizeof(*sel->pids));
	}
	for (int i = 0; i < count; i++) {
		if (node_decode_pid(buf, &index, &sel->pids[i]) < 0)
			return -EBADMSG;
	}
	sel->npids = (size_t)count;
	sel->pending = true;
	return count;
}

/* Min-heap on delta: the root is the weakest of the current top. */
static void
sift_down(struct ranked *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct ranked t;

		if (l < n && h[l].delta < h[m].delta)
			m = l;
		if (r < n && h[r].delta < h[m].delta)
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

		if (h[p].delta <= h[i].delta)
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

	if (x->delta != y->delta)
		return x->delta < y->delta ? 1 : -1;
	return x->pid.num < y->pid.num ? -1 : x->pid.num > y->pid.num;
}

static bool
is_excluded(struct fp_pid pid, const struct fp_pid *exclude, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (exclude[i].num == pid.num && exclude[i].serial == pid.serial)
			return true;
	}
	return false;
}

/* Decode one element of the reductions list: {reductions, N} or undefined. */
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

int
fp_select_reductions(struct fp_select *sel, const struct fp_reply *reply,
		     const struct fp_pid *exclude, size_t nexclude,
		     size_t top, struct fp_pid *out,
		     struct fp_select_result *result)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;
	size_t nheap = 0, alive = 0;
	struct pidmap tmp;
	int rc;

	memset(result, 0, sizeof(*result));
	if (!sel->pending)
		return -EINVAL;
	sel->pending = false;
	if (reply->badrpc || ei_get_type(buf, &index, &type, &size) < 0)
		return -EBADMSG;
	if (ei_decode_list_header(buf, &index, &count) < 0 ||
	    (size_t)count != sel->npids)
		return -EBADMSG;

	if (top > sel->heap_cap) {
		sel->heap_cap = top;
		sel->heap = xrealloc(sel->heap, top * sizeof(*sel->heap));
	}
	pidmap_clear(&sel->cur);

	for (size_t i = 0; i < sel->npids; i++) {
		struct fp_pid pid = sel->pids[i];
		uint64_t key = fp_pid_key(pid);
		struct history *prev, *cur;
		int64_t reds = 0, delta;
		bool created;

		rc = decode_reductions(buf, &index, &reds);
		if (rc < 0) {
			pidmap_clear(&sel->cur);
			return rc;
		}
		if (rc == 0)
			continue;
		alive++;
		cur = pidmap_insert(&sel->cur, key, &created);
		cur->reductions = reds;

		if (!sel->have_history || top == 0 ||
		    is_excluded(pid, exclude, nexclude))
			continue;
		prev = pidmap_find(&sel->prev, key);
		delta = prev ? reds - prev->reductions : reds;
		if (delta <= 0)
			continue;
		if (nheap < top) {
			sel->heap[nheap] = (struct ranked){ pid, delta };
			sift_up(sel->heap, nheap++);
		} else if (delta > sel->heap[0].delta) {
			sel->heap[0] = (struct ranked){ pid, delta };
			sift_down(sel->heap, nheap, 0);
		}
	}

	tmp = sel->prev;
	sel->prev = sel->cur;
	sel->cur = tmp;

	result->scanned = sel->npids;
	result->alive = alive;
	result->baseline = !sel->have_history;
	sel->have_history = true;

	qsort(sel->heap, nheap, sizeof(*sel->heap), cmp_ranked_desc);
	for (size_t i = 0; i < nheap; i++)
		out[i] = sel->heap[i].pid;
	return (int)nheap;
}
