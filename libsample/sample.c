/*
 * flame_profd — the sample reply: decoded by the items it asked
 * (request.h), then folded into each process's history.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "fp/sample.h"
#include "request.h"
#include "sampler-private.h"
#include "util-mem.h"

static void
arena_reset(struct fp_sampler *s)
{
	struct arena_chunk *c = s->arena;

	if (!c)
		return;
	/* Keep the newest chunk, free the rest. */
	while (c->next) {
		struct arena_chunk *next = c->next;

		c->next = next->next;
		free(next);
	}
	c->used = 0;
}

struct fp_sampler *
fp_sampler_new(void)
{
	struct fp_sampler *s = xnew(struct fp_sampler);

	pidmap_init(&s->procs, sizeof(struct proc_state));
	pidmap_init(&s->ic_memo, sizeof(struct ic_memo));
	s->nspans = TAG_KEYS + 1;
	s->ntags = s->nspans;
	intern_init(&s->frame_cache);
	intern_init(&s->stack_cache);
	return s;
}

static void
forget_all(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	while (pidmap_next(&s->procs, &it, &key, &v))
		sampler_proc_release(v, s->ntags);
	pidmap_clear(&s->procs);
	sampler_memo_clear(s);
}

void
fp_sampler_destroy(struct fp_sampler *s)
{
	if (!s)
		return;
	forget_all(s);
	pidmap_release(&s->procs);
	pidmap_release(&s->ic_memo);
	intern_release(&s->frame_cache);
	intern_release(&s->stack_cache);
	free(s->spans);
	while (s->arena) {
		struct arena_chunk *next = s->arena->next;

		free(s->arena);
		s->arena = next;
	}
	free(s->samples);
	free(s->frame_start);
	free(s->sample_stack);
	free(s->sample_reused);
	free(s->stale);
	free(s->stale_reds);
	free(s->frames);
	free(s->tag_spans);
	free(s->key_text);
	for (size_t k = 0; k < s->nkeys + s->nlogger; k++)
		free(s->key_names[k]);
	free(s->key_names);
	free(s);
}

void
fp_sampler_set_extras(struct fp_sampler *s, const struct fp_extras *e)
{
	forget_all(s);
	for (size_t k = 0; k < s->nkeys + s->nlogger; k++)
		free(s->key_names[k]);
	free(s->key_names);
	s->nkeys = e->nkeys;
	s->nlogger = e->nlogger_keys;
	s->key_names = xzalloc((s->nkeys + s->nlogger + 1) * sizeof(char *));
	for (size_t k = 0; k < s->nkeys; k++)
		s->key_names[k] = xstrdup(e->keys[k]);
	for (size_t k = 0; k < s->nlogger; k++)
		s->key_names[s->nkeys + k] = xstrdup(e->logger_keys[k]);
	s->nspans = TAG_KEYS + s->nkeys + 1;
	s->ntags = s->nspans + s->nlogger;
	free(s->tag_spans);
	s->tag_spans = NULL;
	s->samples_cap = 0;	/* grow_per_sample() sizes the spans anew */
}

void
fp_sampler_reset(struct fp_sampler *s)
{
	forget_all(s);
	s->nsamples = 0;
	s->nframes = 0;
	arena_reset(s);
}

#define ATOM_IS(name, n, lit) etf_atom_is((name), (n), (lit), sizeof(lit) - 1)

/* {Key, _}: the tuple header and the key atom; the bytes themselves when
 * they are the name (the usual case), else through ei into @tmp. */
static int
read_keyed(const struct fp_sampler *s, const char *buf, int *index,
	   char *tmp, const char **name, size_t *n)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t p = (size_t)*index;
	int arity;

	if (s->len - p >= 2 && b[p] == ERL_SMALL_TUPLE_EXT && b[p + 1] == 2) {
		p += 2;
		if (etf_atom(b, s->len, &p, name, n) == 0) {
			*index = (int)p;
			return 0;
		}
	}
	if (guard(s, buf, *index) < 0 ||
	    ei_decode_tuple_header(buf, index, &arity) < 0 || arity != 2 ||
	    etf_decode_atom(buf, index, tmp) < 0)
		return -EBADMSG;
	*name = tmp;
	*n = strlen(tmp);
	return 0;
}

static int
read_int(const struct fp_sampler *s, const char *buf, int *index,
	 int64_t *value)
{
	size_t p = (size_t)*index;

	if (etf_int((const unsigned char *)buf, s->len, &p, value) == 0) {
		*index = (int)p;
		return 0;
	}
	if (guard(s, buf, *index) < 0)
		return -EBADMSG;
	return etf_decode_int(buf, index, value);
}

/* A list header, fast for the LIST_EXT and NIL_EXT every reply uses. */
static int
read_list(const struct fp_sampler *s, const char *buf, int *index, int *count)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t p = (size_t)*index;

	if (p < s->len && b[p] == ERL_NIL_EXT) {
		*count = 0;
		*index = (int)p + 1;
		return 0;
	}
	if (s->len - p >= 5 && b[p] == ERL_LIST_EXT && etf_be32(b + p + 1) <= INT32_MAX) {
		*count = (int)etf_be32(b + p + 1);
		*index = (int)p + 5;
		return 0;
	}
	if (guard(s, buf, *index) < 0)
		return -EBADMSG;
	return ei_decode_list_header(buf, index, count) < 0 ? -EBADMSG : 0;
}

/* The [] that ends a proper list of @count > 0 elements. */
static int
read_tail(const struct fp_sampler *s, const char *buf, int *index, int count)
{
	int n;

	if (count <= 0)
		return 0;
	return read_list(s, buf, index, &n) < 0 || n != 0 ? -EBADMSG : 0;
}

/* [{Key, Int} | {Key, Other}]: pick the integer keys we want. */
static int
decode_int_proplist(const struct fp_sampler *s, const char *buf, int *index,
		    const char *const *keys, int64_t *values, size_t nkeys)
{
	char tmp[MAXATOMLEN_UTF8];
	int count, type;

	if (read_list(s, buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		bool taken = false;
		const char *key;
		size_t n;

		if (read_keyed(s, buf, index, tmp, &key, &n) < 0)
			return -EBADMSG;
		type = peek_tag(s, buf, *index);
		if (type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT ||
		    type == ERL_SMALL_BIG_EXT) {
			for (size_t k = 0; k < nkeys; k++) {
				if (etf_atom_is(key, n, keys[k], strlen(keys[k]))) {
					if (read_int(s, buf, index, &values[k]) < 0)
						return -EBADMSG;
					taken = true;
					break;
				}
			}
		}
		if (!taken && skip(s, buf, index) < 0)
			return -EBADMSG;
	}
	return read_tail(s, buf, index, count);
}

/* The metric an integer item reads into, or -1. */
static int
item_metric(int item)
{
	switch (item) {
	case NODE_ITEM_REDUCTIONS:
		return FP_METRIC_REDUCTIONS;
	case NODE_ITEM_MEMORY:
		return FP_METRIC_MEMORY;
	case NODE_ITEM_MESSAGE_QUEUE_LEN:
		return FP_METRIC_MESSAGE_QUEUE_LEN;
	case NODE_ITEM_TOTAL_HEAP_SIZE:
		return FP_METRIC_TOTAL_HEAP_SIZE;
	case NODE_ITEM_HEAP_SIZE:
		return FP_METRIC_HEAP_SIZE;
	case NODE_ITEM_STACK_SIZE:
		return FP_METRIC_STACK_SIZE;
	default:
		return -1;
	}
}

/* Which span a dictionary key's value goes to, or -1. */
static int
tag_slot(const struct fp_sampler *s, const char *key, size_t n)
{
	if (ATOM_IS(key, n, NODE_KEY_LABEL))
		return TAG_LABEL;
	if (ATOM_IS(key, n, NODE_KEY_CALLERS))
		return TAG_CALLERS;
	if (ATOM_IS(key, n, NODE_KEY_LOGGER))
		return (int)(TAG_KEYS + s->nkeys);
	for (size_t k = 0; k < s->nkeys; k++) {
		if (etf_atom_is(key, n, s->key_names[k], strlen(s->key_names[k])))
			return (int)(TAG_KEYS + k);
	}
	return -1;
}

/* The value's place, taken at once: its text is made only when it
 * differs from the process's last (apply_tags()). */
static int
take_span(const struct fp_sampler *s, const char *buf, int *index,
	  struct tag_span *span)
{
	int at = *index;

	if (skip(s, buf, index) < 0)
		return -EBADMSG;
	if (span) {
		span->at = (uint32_t)at;
		span->end = (uint32_t)*index;
	}
	return 0;
}

/* {{dictionary, Key}, Value}: 1 when the element is one (and taken) */
static int
read_dict_item(struct fp_sampler *s, const char *buf, int *index,
	       struct tag_span *spans)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t p = (size_t)*index, n;
	const char *name;
	int slot;

	if (s->len - p < 4 || b[p] != ERL_SMALL_TUPLE_EXT || b[p + 1] != 2 ||
	    b[p + 2] != ERL_SMALL_TUPLE_EXT || b[p + 3] != 2)
		return 0;
	p += 4;
	if (etf_atom(b, s->len, &p, &name, &n) < 0 ||
	    !ATOM_IS(name, n, "dictionary") ||
	    etf_atom(b, s->len, &p, &name, &n) < 0)
		return -EBADMSG;
	slot = tag_slot(s, name, n);
	*index = (int)p;
	if (take_span(s, buf, index, slot >= 0 ? &spans[slot] : NULL) < 0)
		return -EBADMSG;
	return 1;
}

/* One element of the zipwith result: undefined, or [{Item, Value}]. */
static int
decode_one(struct fp_sampler *s, const char *buf, int *index,
	   struct fp_sample *smp, unsigned wordsize,
	   const struct cached_stack *prev, const struct cached_stack **used,
	   struct tag_span *spans)
{
	static const char *const gc_keys[] = { "minor_gcs" };
	static const char *const gci_keys[] = { "bin_vheap_size",
						"bin_old_vheap_size" };
	char tmp[MAXATOMLEN_UTF8], atom[MAXATOMLEN_UTF8];
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];
	int count;

	if (is_atom_type(peek_tag(s, buf, *index))) {
		/* undefined: the process is gone */
		if (read_atom(s, buf, index, atom) < 0)
			return -EBADMSG;
		return 0;
	}
	if (read_list(s, buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		const char *item;
		size_t n;
		int rc, k, metric;

		/* the dictionary's items come last and only where asked:
		 * one compare of four bytes for the others */
		rc = read_dict_item(s, buf, index, spans);
		if (rc < 0)
			return -EBADMSG;
		if (rc)
			continue;
		if (read_keyed(s, buf, index, tmp, &item, &n) < 0)
			return -EBADMSG;
		k = node_item_of(item, n);
		metric = item_metric(k);
		if (metric >= 0) {
			if (read_int(s, buf, index, &smp->value[metric]) < 0)
				return -EBADMSG;
			continue;
		}

		switch (k) {
		case NODE_ITEM_STATUS:
			if (read_atom(s, buf, index, atom) < 0)
				return -EBADMSG;
			smp->status = fp_status_from_name(atom);
			break;
		case NODE_ITEM_REGISTERED_NAME:
			if (is_atom_type(peek_tag(s, buf, *index))) {
				if (read_atom(s, buf, index, atom) < 0)
					return -EBADMSG;
				smp->registered_name = arena_strdup(s, atom, strlen(atom));
			} else if (skip(s, buf, index) < 0) {
				return -EBADMSG;	/* [] when not registered */
			}
			break;
		case NODE_ITEM_CURRENT_STACKTRACE:
			/* frames are appended; the caller fixes the pointer */
			if (sampler_decode_stack(s, buf, index, smp, prev, used) < 0)
				return -EBADMSG;
			break;
		case NODE_ITEM_GARBAGE_COLLECTION:
			if (decode_int_proplist(s, buf, index, gc_keys,
						&smp->value[FP_METRIC_MINOR_GCS], 1) < 0)
				return -EBADMSG;
			break;
		case NODE_ITEM_GARBAGE_COLLECTION_INFO: {
			int64_t v[2] = { 0, 0 };

			if (decode_int_proplist(s, buf, index, gci_keys, v, 2) < 0)
				return -EBADMSG;
			if (__builtin_add_overflow(v[0], v[1], &v[0]) ||
			    __builtin_mul_overflow(v[0], (int64_t)wordsize, &v[0]))
				v[0] = INT64_MAX;
			smp->value[FP_METRIC_BINARY_BYTES] = v[0];
			break;
		}
		case NODE_ITEM_LABEL:
			if (take_span(s, buf, index, &spans[TAG_LABEL]) < 0)
				return -EBADMSG;
			break;
		case NODE_ITEM_INITIAL_CALL: {
			uint32_t arity;

			if (guard(s, buf, *index) < 0 ||
			    sampler_decode_mfa(buf, index, m, f, &arity) < 0)
				return -EBADMSG;
			smp->has_initial_call = true;
			smp->initial_call.module = arena_strdup(s, m, strlen(m));
			smp->initial_call.function = arena_strdup(s, f, strlen(f));
			smp->initial_call.arity = arity;
			break;
		}
		default:
			if (skip(s, buf, index) < 0)
				return -EBADMSG;
		}
	}
	return read_tail(s, buf, index, count) < 0 ? -EBADMSG : 1;
}

static void
grow_per_sample(struct fp_sampler *s, size_t n)
{
	if (n <= s->samples_cap)
		return;
	s->samples_cap = n;
	s->samples = xrealloc(s->samples, n * sizeof(*s->samples));
	s->frame_start = xrealloc(s->frame_start, n * sizeof(*s->frame_start));
	s->sample_stack = xrealloc(s->sample_stack, n * sizeof(*s->sample_stack));
	s->sample_reused = xrealloc(s->sample_reused, n * sizeof(*s->sample_reused));
	s->stale = xrealloc(s->stale, n * sizeof(*s->stale));
	s->stale_reds = xrealloc(s->stale_reds, n * sizeof(*s->stale_reds));
	s->tag_spans = xrealloc(s->tag_spans, n * s->nspans * sizeof(*s->tag_spans));
	s->key_text = xrealloc(s->key_text, (n * (s->nkeys + s->nlogger) + 1) *
					    sizeof(*s->key_text));
}

/*
 * Reductions a process that a message woke does, at most, between
 * answering its status and answering its stack: it takes the message,
 * runs what it woke for and waits again. Measured on the demo's and the
 * fidelity bench's gen:call clients: under 100 nearly always, under 1000
 * always; a server at work (a 60 us handler) or a busy loop does 1000 or
 * more (a time slice is 4000).
 */
#define WOKEN_REDS 1000

/*
 * The share of the busiest sampled process's reductions a second under
 * which a process is not taken to be one that keeps a scheduler busy,
 * and how fast that busiest rate is forgotten.
 */
#define RUNNING_SHARE_MIN 0.1
#define RATE_HALF_LIFE_US (10 * 1000 * 1000)

/*
 * The status a process had before it was asked. `running` in the first
 * list means the process answered it itself, at a signal-handling point:
 * when a scheduler took it up, or in a receive that had run out of the
 * messages it held. It has by then taken every message sent to it before
 * the request. A queue that is not empty says a message was what made it
 * want a scheduler, and then it answered where a scheduler took it up,
 * having waited for one (`runnable` before the request), or where it
 * next handled signals after running (`running`): the node tells the two
 * apart to nobody. Two readings decide for `runnable`:
 *
 * - next to no work before it answered the second list (@reds less
 *   @asked_reds): it ran only to take the message and wait again (on the
 *   demo's gen:call clients, server and producer, the state read just
 *   before the request said `runnable` for 98% of such answers);
 * - a rate of reductions since its last sample (@rate, negative when
 *   unknown) under a tenth of the busiest sampled process's (@rate_max):
 *   a process that keeps a scheduler busy for under a tenth of the time
 *   was, when asked, far likelier in a run queue with its messages than
 *   on a scheduler (the demo's server, 0.3% of the reductions, was
 *   `running` in 2.6-3.3% of the VM's own state reads and `runnable` in
 *   40-81%, but answered `running` in 20-73% of its samples).
 *
 * A server that keeps a scheduler busy keeps `running`: its stack is
 * taken where it next handles signals.
 */
static enum fp_status
status_before_asked(enum fp_status answered, int64_t queued, int64_t asked_reds,
		    int64_t reds, double rate, double rate_max)
{
	int64_t worked;

	if (answered != FP_STATUS_RUNNING || queued <= 0)
		return answered;
	/* the node's numbers: an overflow is no evidence of idleness */
	if (!__builtin_sub_overflow(reds, asked_reds, &worked) &&
	    worked < WOKEN_REDS)
		return FP_STATUS_RUNNABLE;
	if (rate >= 0 && rate < RUNNING_SHARE_MIN * rate_max)
		return FP_STATUS_RUNNABLE;
	return answered;
}

/* Reductions a second of the process @st since its last sample, or -1
 * when there is no last sample to measure from. */
static double
reds_rate(const struct proc_state *st, int64_t reds, uint64_t time_us)
{
	int64_t d;

	if (!st || !st->have_prev || time_us <= st->prev_us ||
	    __builtin_sub_overflow(reds, st->prev[FP_METRIC_REDUCTIONS], &d) ||
	    d < 0)
		return -1;
	return (double)d * 1e6 / (double)(time_us - st->prev_us);
}

/* A process running or waiting to: asking it for its stack cost a signal
 * handled between its time slices, the dearest kind of sample. */
static bool
in_run_queue(enum fp_status status)
{
	return status == FP_STATUS_RUNNING || status == FP_STATUS_RUNNABLE ||
	       status == FP_STATUS_GARBAGE_COLLECTING;
}

int
fp_sampler_decode(struct fp_sampler *s, const struct fp_reply *reply,
		  const struct fp_pid *pids, const enum fp_ask *asks, size_t n,
		  uint64_t time_us, unsigned wordsize)
{
	const char *buf = reply->buf;
	int index = reply->index, count, rc;
	size_t lists = asks ? fp_node_sample_lists(asks, n) : 0;
	bool pairs;
	double rate_max;

	s->nsamples = 0;
	s->nframes = 0;
	s->gone = 0;
	s->nstale = 0;
	s->reused = 0;
	s->running = 0;
	s->len = reply->len;
	if (time_us > s->rate_max_us) {
		s->rate_max *= exp2(-(double)(time_us - s->rate_max_us) /
				    RATE_HALF_LIFE_US);
		s->rate_max_us = time_us;
	}
	rate_max = s->rate_max;
	s->trusted = reply->checked;
	arena_reset(s);
	if (s->frame_cache.bytes + s->stack_cache.bytes > CACHE_BYTES)
		fp_sampler_drop_caches(s);

	/* two item lists per fully asked pid: what the caller read, then
	 * what the process answered (fp_node_sample_request()); one per
	 * probed pid. Without @asks, one or two per pid, all alike. */
	if (reply->badrpc || read_list(s, buf, &index, &count) < 0 ||
	    (asks ? (size_t)count != lists :
		    (size_t)count != n && (size_t)count != 2 * n))
		return -EBADMSG;
	pairs = n && (size_t)count == 2 * n;
	grow_per_sample(s, n);

	for (size_t i = 0; i < n; i++) {
		struct fp_sample *smp = &s->samples[s->nsamples];
		const struct proc_state *st = pidmap_find(&s->procs,
							  fp_pid_key(pids[i]));
		const struct cached_stack *prev = NULL;
		bool probe = asks && asks[i] == FP_ASK_PROBE;
		/* read with the status, not with the stack */
		int64_t queued = 0, asked_reds = 0;
		struct tag_span *spans = &s->tag_spans[s->nsamples * s->nspans];

		if (st && st->last_gen == s->cache_gen)
			prev = st->last_stack;
		memset(smp, 0, sizeof(*smp));
		memset(spans, 0, s->nspans * sizeof(*spans));
		smp->pid = pids[i];
		smp->time_us = time_us;
		s->frame_start[s->nsamples] = s->nframes;
		s->sample_stack[s->nsamples] = NULL;
		s->sample_reused[s->nsamples] = false;
		if (probe) {
			rc = decode_one(s, buf, &index, smp, wordsize, NULL,
					&s->sample_stack[s->nsamples], spans);
			if (rc < 0)
				goto fail;
			/* a stack has no business in a probe's answer */
			s->nframes = s->frame_start[s->nsamples];
			smp->nframes = 0;
			smp->stack_id = 0;
			s->sample_stack[s->nsamples] = NULL;
			if (rc == 0) {
				s->gone++;
			} else if (sampler_reuse_probe(s, st, smp,
						       &s->sample_stack[s->nsamples])) {
				s->sample_reused[s->nsamples] = true;
				s->reused++;
				s->nsamples++;
			} else {
				s->stale_reds[s->nstale] =
					smp->value[FP_METRIC_REDUCTIONS];
				s->stale[s->nstale++] = i;
			}
			continue;
		}
		if (asks || pairs) {
			const struct cached_stack *unused = NULL;

			rc = decode_one(s, buf, &index, smp, wordsize, NULL, &unused,
					spans);
			if (rc < 0)
				goto fail;
			queued = smp->value[FP_METRIC_MESSAGE_QUEUE_LEN];
			asked_reds = smp->value[FP_METRIC_REDUCTIONS];
			if (rc == 0) {
				/* gone before the first question: skip the second */
				if (skip(s, buf, &index) < 0)
					goto fail;
				s->nframes = s->frame_start[s->nsamples];
				s->gone++;
				continue;
			}
		}
		rc = decode_one(s, buf, &index, smp, wordsize, prev,
				&s->sample_stack[s->nsamples], spans);
		if (rc < 0)
			goto fail;
		if (rc == 0) {
			s->nframes = s->frame_start[s->nsamples];
			s->gone++;
			continue;
		}
		{
			double rate = reds_rate(st, smp->value[FP_METRIC_REDUCTIONS],
						time_us);

			if (rate > rate_max)
				rate_max = rate;
			smp->status = status_before_asked(smp->status, queued,
							  asked_reds,
							  smp->value[FP_METRIC_REDUCTIONS],
							  rate, rate_max);
		}
		s->nsamples++;
	}
	if (read_tail(s, buf, &index, count) < 0)
		goto fail;
	/* an unchecked result must end the message, as a checked one does */
	if (!s->trusted && (size_t)index != s->len)
		goto fail;
	s->rate_max = rate_max;

	/* Only now, with the whole reply understood, touch the history. */
	for (size_t i = 0; i < s->nsamples; i++) {
		s->samples[i].frames = s->samples[i].nframes ?
				       s->frames + s->frame_start[i] : NULL;
		sampler_apply_history(s, buf, i, s->sample_stack[i], s->sample_reused[i]);
		if (!s->sample_reused[i] &&
		    in_run_queue(s->samples[i].status))
			s->running++;
	}
	/* A probed process that ran: its full sample, asked next, has not
	 * run since if its reductions are still where the probe read them
	 * (then it is idle again, likely to stay so). */
	for (size_t k = 0; k < s->nstale; k++) {
		struct proc_state *st = pidmap_find(&s->procs,
						    fp_pid_key(pids[s->stale[k]]));

		if (st) {
			st->expect_reds = s->stale_reds[k];
			st->idle = false;	/* asked in full next */
		}
	}
	return (int)s->nsamples;

fail:
	s->nsamples = 0;
	s->nframes = 0;
	s->nstale = 0;
	s->reused = 0;
	s->running = 0;
	return -EBADMSG;
}

size_t
fp_sampler_stale(const struct fp_sampler *s, const size_t **idx)
{
	*idx = s->stale;
	return s->nstale;
}

size_t
fp_sampler_reused(const struct fp_sampler *s)
{
	return s->reused;
}

size_t
fp_sampler_running(const struct fp_sampler *s)
{
	return s->running;
}

const struct fp_sample *
fp_sampler_samples(const struct fp_sampler *s, size_t *n)
{
	*n = s->nsamples;
	return s->samples;
}

size_t
fp_sampler_gone(const struct fp_sampler *s)
{
	return s->gone;
}

