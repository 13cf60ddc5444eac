/*
 * flame_profd — sample decoding and per-process history.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp/sample.h"
#include "node-private.h"
#include "pidmap.h"
#include "util-mem.h"

struct proc_state {
	bool have_prev;
	bool ic_from_proc_lib;
	int64_t prev[FP_METRIC_COUNT];
	char *ic_module;	/* NULL when the initial call is unknown */
	char *ic_function;
	uint32_t ic_arity;
};

/* Strings of one batch: chunks that never move. */
struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	char data[];
};

struct fp_sampler {
	struct pidmap procs;

	struct fp_sample *samples;
	size_t nsamples, samples_cap;
	size_t *frame_start;	/* per sample, index into frames */
	struct fp_frame *frames;
	size_t nframes, frames_cap;
	struct arena_chunk *arena;
	size_t gone;
};

enum { ARENA_CHUNK = 64 * 1024 };

static char *
arena_strdup(struct fp_sampler *s, const char *str, size_t len)
{
	struct arena_chunk *c = s->arena;
	char *p;

	if (!c || c->size - c->used < len + 1) {
		size_t size = len + 1 > ARENA_CHUNK ? len + 1 : ARENA_CHUNK;

		c = xzalloc(sizeof(*c) + size);
		c->size = size;
		c->next = s->arena;
		s->arena = c;
	}
	p = c->data + c->used;
	memcpy(p, str, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

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

static void
proc_state_release(struct proc_state *st)
{
	free(st->ic_module);
	free(st->ic_function);
	st->ic_module = st->ic_function = NULL;
}

struct fp_sampler *
fp_sampler_new(void)
{
	struct fp_sampler *s = xnew(struct fp_sampler);

	pidmap_init(&s->procs, sizeof(struct proc_state));
	return s;
}

static void
forget_all(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	while (pidmap_next(&s->procs, &it, &key, &v))
		proc_state_release(v);
	pidmap_clear(&s->procs);
}

void
fp_sampler_destroy(struct fp_sampler *s)
{
	if (!s)
		return;
	forget_all(s);
	pidmap_release(&s->procs);
	while (s->arena) {
		struct arena_chunk *next = s->arena->next;

		free(s->arena);
		s->arena = next;
	}
	free(s->samples);
	free(s->frame_start);
	free(s->frames);
	free(s);
}

void
fp_sampler_reset(struct fp_sampler *s)
{
	forget_all(s);
	s->nsamples = 0;
	s->nframes = 0;
	arena_reset(s);
}

void
fp_sampler_retain(struct fp_sampler *s, const struct fp_pid *pids, size_t n)
{
	struct pidmap keep;
	size_t it = 0;
	uint64_t key;
	void *v;

	pidmap_init(&keep, sizeof(struct proc_state));
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pids[i]));
		bool created;

		if (st && !pidmap_find(&keep, fp_pid_key(pids[i]))) {
			memcpy(pidmap_insert(&keep, fp_pid_key(pids[i]), &created),
			       st, sizeof(*st));
			/* ownership of the strings moved to keep */
			st->ic_module = st->ic_function = NULL;
		}
	}
	while (pidmap_next(&s->procs, &it, &key, &v))
		proc_state_release(v);
	pidmap_release(&s->procs);
	s->procs = keep;
}

bool
fp_sampler_wants_initial_call(const struct fp_sampler *s, struct fp_pid pid)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	return !st || !st->ic_module;
}

static bool
is_atom_type(int type)
{
	return type == ERL_ATOM_EXT || type == ERL_SMALL_ATOM_EXT ||
	       type == ERL_ATOM_UTF8_EXT || type == ERL_SMALL_ATOM_UTF8_EXT;
}

static int
set_initial_call(struct proc_state *st, const char *m, const char *f,
		 uint32_t arity)
{
	proc_state_release(st);
	st->ic_module = xstrdup(m);
	st->ic_function = xstrdup(f);
	st->ic_arity = arity;
	return 0;
}

/* {M, F, Arity} or {M, F, Args}: arity from either. */
static int
decode_mfa(const char *buf, int *index, char *m, char *f, uint32_t *arity)
{
	int n, type, size;
	int64_t a;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 3 ||
	    node_decode_atom(buf, index, m) < 0 ||
	    node_decode_atom(buf, index, f) < 0 ||
	    ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_LIST_EXT || type == ERL_NIL_EXT || type == ERL_STRING_EXT) {
		*arity = (uint32_t)size;
		return node_skip_term(buf, index);
	}
	if (node_decode_int(buf, index, &a) < 0 || a < 0 || a > 255)
		return -EBADMSG;
	*arity = (uint32_t)a;
	return 0;
}

int
fp_sampler_initial_calls(struct fp_sampler *s, const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count, type, size;
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];

	if (reply->badrpc || ei_decode_list_header(buf, &index, &count) < 0 ||
	    (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st;
		uint32_t arity;
		bool created;

		if (ei_get_type(buf, &index, &type, &size) < 0)
			return -EBADMSG;
		if (is_atom_type(type)) {	/* false: not a proc_lib process */
			if (node_decode_atom(buf, &index, m) < 0)
				return -EBADMSG;
			continue;
		}
		if (decode_mfa(buf, &index, m, f, &arity) < 0)
			return -EBADMSG;
		st = pidmap_insert(&s->procs, fp_pid_key(pids[i]), &created);
		set_initial_call(st, m, f, arity);
		st->ic_from_proc_lib = true;
	}
	return 0;
}

/* Charlist (STRING_EXT, or LIST_EXT of code points) to UTF-8. */
static int
decode_charlist(struct fp_sampler *s, const char *buf, int *index,
		const char **out)
{
	char tmp[4096];
	size_t len = 0;
	int type, size;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_STRING_EXT) {
		/* Every frame has one: no allocation for the usual short path. */
		char ubuf[2 * sizeof(tmp) + 1];
		char *str = size < (int)sizeof(tmp) ? tmp : xzalloc((size_t)size + 1);
		int rc = ei_decode_string(buf, index, str);
		char *u = NULL;

		if (rc == 0) {
			u = (size_t)size * 2 + 1 <= sizeof(ubuf) ? ubuf :
			    xzalloc((size_t)size * 2 + 1);
			/* STRING_EXT holds bytes 0..255 (latin-1); re-encode. */
			for (int i = 0; i < size; i++) {
				unsigned char c = (unsigned char)str[i];

				if (c < 0x80) {
					u[len++] = (char)c;
				} else {
					u[len++] = (char)(0xc0 | (c >> 6));
					u[len++] = (char)(0x80 | (c & 0x3f));
				}
			}
			*out = arena_strdup(s, u, len);
		}
		if (u != ubuf)
			free(u);
		if (str != tmp)
			free(str);
		return rc < 0 ? -EBADMSG : 0;
	}
	if (type == ERL_NIL_EXT) {
		*out = arena_strdup(s, "", 0);
		return node_skip_term(buf, index);
	}
	if (type == ERL_LIST_EXT) {
		int count;

		if (ei_decode_list_header(buf, index, &count) < 0)
			return -EBADMSG;
		for (int i = 0; i < count; i++) {
			int64_t cp;

			if (node_decode_int(buf, index, &cp) < 0 || cp < 0 ||
			    cp > 0x10ffff)
				return -EBADMSG;
			if (len + 4 >= sizeof(tmp))
				continue;	/* truncate absurdly long names */
			if (cp < 0x80) {
				tmp[len++] = (char)cp;
			} else if (cp < 0x800) {
				tmp[len++] = (char)(0xc0 | (cp >> 6));
				tmp[len++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				tmp[len++] = (char)(0xe0 | (cp >> 12));
				tmp[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				tmp[len++] = (char)(0x80 | (cp & 0x3f));
			} else {
				tmp[len++] = (char)(0xf0 | (cp >> 18));
				tmp[len++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				tmp[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				tmp[len++] = (char)(0x80 | (cp & 0x3f));
			}
		}
		/* the tail of a proper list */
		if (ei_decode_list_header(buf, index, &count) < 0 || count != 0)
			return -EBADMSG;
		*out = arena_strdup(s, tmp, len);
		return 0;
	}
	return -EBADMSG;
}

static struct fp_frame *
new_frame(struct fp_sampler *s)
{
	if (s->nframes == s->frames_cap) {
		s->frames_cap = s->frames_cap ? s->frames_cap * 2 : 1024;
		s->frames = xrealloc(s->frames, s->frames_cap * sizeof(*s->frames));
	}
	memset(&s->frames[s->nframes], 0, sizeof(*s->frames));
	return &s->frames[s->nframes++];
}

/* [{M, F, ArityOrArgs, Location}] */
static int
decode_stacktrace(struct fp_sampler *s, const char *buf, int *index,
		  uint32_t *nframes)
{
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8], key[MAXATOMLEN_UTF8];
	int count, n, type, size;

	if (ei_decode_list_header(buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		struct fp_frame *fr;
		int nloc;

		if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 4 ||
		    node_decode_atom(buf, index, m) < 0 ||
		    node_decode_atom(buf, index, f) < 0 ||
		    ei_get_type(buf, index, &type, &size) < 0)
			return -EBADMSG;
		fr = new_frame(s);
		fr->module = arena_strdup(s, m, strlen(m));
		fr->function = arena_strdup(s, f, strlen(f));
		if (type == ERL_LIST_EXT || type == ERL_NIL_EXT ||
		    type == ERL_STRING_EXT) {
			fr->arity = (uint32_t)size;
			if (node_skip_term(buf, index) < 0)
				return -EBADMSG;
		} else {
			int64_t a;

			if (node_decode_int(buf, index, &a) < 0 || a < 0 || a > 255)
				return -EBADMSG;
			fr->arity = (uint32_t)a;
		}
		if (ei_decode_list_header(buf, index, &nloc) < 0)
			return -EBADMSG;
		for (int k = 0; k < nloc; k++) {
			if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 2 ||
			    node_decode_atom(buf, index, key) < 0)
				return -EBADMSG;
			if (strcmp(key, "file") == 0) {
				if (decode_charlist(s, buf, index, &fr->file) < 0)
					return -EBADMSG;
			} else if (strcmp(key, "line") == 0) {
				int64_t line;

				if (node_decode_int(buf, index, &line) < 0)
					return -EBADMSG;
				fr->line = line > 0 && line < UINT32_MAX ? (uint32_t)line : 0;
			} else if (node_skip_term(buf, index) < 0) {
				return -EBADMSG;
			}
		}
		if (nloc > 0 && (ei_decode_list_header(buf, index, &nloc) < 0 || nloc != 0))
			return -EBADMSG;
	}
	*nframes = (uint32_t)(count > 0 ? count : 0);
	if (count > 0 && (ei_decode_list_header(buf, index, &count) < 0 || count != 0))
		return -EBADMSG;
	return 0;
}

/* [{Key, Int} | {Key, Other}]: pick the integer keys we want. */
static int
decode_int_proplist(const char *buf, int *index, const char *const *keys,
		    int64_t *values, size_t nkeys)
{
	char key[MAXATOMLEN_UTF8];
	int count, n, type, size;

	if (ei_decode_list_header(buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		bool taken = false;

		if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 2 ||
		    node_decode_atom(buf, index, key) < 0 ||
		    ei_get_type(buf, index, &type, &size) < 0)
			return -EBADMSG;
		if (type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT ||
		    type == ERL_SMALL_BIG_EXT) {
			for (size_t k = 0; k < nkeys; k++) {
				if (strcmp(key, keys[k]) == 0) {
					if (node_decode_int(buf, index, &values[k]) < 0)
						return -EBADMSG;
					taken = true;
					break;
				}
			}
		}
		if (!taken && node_skip_term(buf, index) < 0)
			return -EBADMSG;
	}
	if (count > 0 && (ei_decode_list_header(buf, index, &count) < 0 || count != 0))
		return -EBADMSG;
	return 0;
}

static const struct {
	const char *item;
	enum fp_metric metric;
} int_items[] = {
	{ "reductions", FP_METRIC_REDUCTIONS },
	{ "memory", FP_METRIC_MEMORY },
	{ "message_queue_len", FP_METRIC_MESSAGE_QUEUE_LEN },
	{ "total_heap_size", FP_METRIC_TOTAL_HEAP_SIZE },
	{ "heap_size", FP_METRIC_HEAP_SIZE },
	{ "stack_size", FP_METRIC_STACK_SIZE },
};

/* One element of the zipwith result: undefined, or [{Item, Value}]. */
static int
decode_one(struct fp_sampler *s, const char *buf, int *index,
	   struct fp_sample *smp, unsigned wordsize)
{
	static const char *const gc_keys[] = { "minor_gcs" };
	static const char *const gci_keys[] = { "bin_vheap_size",
						"bin_old_vheap_size" };
	char item[MAXATOMLEN_UTF8], atom[MAXATOMLEN_UTF8];
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];
	int count, n, type, size;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (is_atom_type(type)) {	/* undefined: the process is gone */
		if (node_decode_atom(buf, index, atom) < 0)
			return -EBADMSG;
		return 0;
	}
	if (ei_decode_list_header(buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		bool done = false;

		if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 2 ||
		    node_decode_atom(buf, index, item) < 0)
			return -EBADMSG;

		for (size_t k = 0; k < sizeof(int_items) / sizeof(int_items[0]); k++) {
			if (strcmp(item, int_items[k].item) == 0) {
				if (node_decode_int(buf, index,
						    &smp->value[int_items[k].metric]) < 0)
					return -EBADMSG;
				done = true;
				break;
			}
		}
		if (done)
			continue;

		if (strcmp(item, "status") == 0) {
			if (node_decode_atom(buf, index, atom) < 0)
				return -EBADMSG;
			smp->status = fp_status_from_name(atom);
		} else if (strcmp(item, "registered_name") == 0) {
			if (ei_get_type(buf, index, &type, &size) < 0)
				return -EBADMSG;
			if (is_atom_type(type)) {
				if (node_decode_atom(buf, index, atom) < 0)
					return -EBADMSG;
				smp->registered_name = arena_strdup(s, atom, strlen(atom));
			} else if (node_skip_term(buf, index) < 0) {
				return -EBADMSG;	/* [] when not registered */
			}
		} else if (strcmp(item, "current_stacktrace") == 0) {
			/* frames are appended; the caller fixes the pointer */
			if (decode_stacktrace(s, buf, index, &smp->nframes) < 0)
				return -EBADMSG;
		} else if (strcmp(item, "garbage_collection") == 0) {
			if (decode_int_proplist(buf, index, gc_keys,
						&smp->value[FP_METRIC_MINOR_GCS], 1) < 0)
				return -EBADMSG;
		} else if (strcmp(item, "garbage_collection_info") == 0) {
			int64_t v[2] = { 0, 0 };

			if (decode_int_proplist(buf, index, gci_keys, v, 2) < 0)
				return -EBADMSG;
			if (__builtin_add_overflow(v[0], v[1], &v[0]) ||
			    __builtin_mul_overflow(v[0], (int64_t)wordsize, &v[0]))
				v[0] = INT64_MAX;
			smp->value[FP_METRIC_BINARY_BYTES] = v[0];
		} else if (strcmp(item, "initial_call") == 0) {
			uint32_t arity;

			if (decode_mfa(buf, index, m, f, &arity) < 0)
				return -EBADMSG;
			smp->has_initial_call = true;
			smp->initial_call.module = arena_strdup(s, m, strlen(m));
			smp->initial_call.function = arena_strdup(s, f, strlen(f));
			smp->initial_call.arity = arity;
		} else if (node_skip_term(buf, index) < 0) {
			return -EBADMSG;
		}
	}
	if (count > 0 && (ei_decode_list_header(buf, index, &count) < 0 || count != 0))
		return -EBADMSG;
	return 1;
}

static void
apply_history(struct fp_sampler *s, struct fp_sample *smp)
{
	struct proc_state *st;
	bool created;

	st = pidmap_insert(&s->procs, fp_pid_key(smp->pid), &created);
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		int64_t v = smp->value[m], d = 0;

		if (st->have_prev) {
			/* Saturate rather than wrap on absurd values. */
			if (__builtin_sub_overflow(v, st->prev[m], &d))
				d = v < st->prev[m] ? INT64_MIN : INT64_MAX;
			if (fp_metric_is_counter((enum fp_metric)m) && d < 0)
				d = v;	/* reset: count since the reset */
		}
		smp->delta[m] = d;
		st->prev[m] = v;
	}
	st->have_prev = true;

	/* The node's own initial_call names proc_lib for every OTP
	 * process; proc_lib's answer, once we have it, is the useful one. */
	if (smp->has_initial_call && !st->ic_from_proc_lib)
		set_initial_call(st, smp->initial_call.module,
				 smp->initial_call.function,
				 smp->initial_call.arity);
	if (st->ic_module) {
		smp->has_initial_call = true;
		smp->initial_call.module = st->ic_module;
		smp->initial_call.function = st->ic_function;
		smp->initial_call.arity = st->ic_arity;
		smp->initial_call.file = NULL;
		smp->initial_call.line = 0;
	}
}

int
fp_sampler_decode(struct fp_sampler *s, const struct fp_reply *reply,
		  const struct fp_pid *pids, size_t n, uint64_t time_us,
		  unsigned wordsize)
{
	const char *buf = reply->buf;
	int index = reply->index, count, rc;

	s->nsamples = 0;
	s->nframes = 0;
	s->gone = 0;
	arena_reset(s);

	if (reply->badrpc || ei_decode_list_header(buf, &index, &count) < 0 ||
	    (size_t)count != n)
		return -EBADMSG;
	if (n > s->samples_cap) {
		s->samples_cap = n;
		s->samples = xrealloc(s->samples, n * sizeof(*s->samples));
		s->frame_start = xrealloc(s->frame_start, n * sizeof(*s->frame_start));
	}

	for (size_t i = 0; i < n; i++) {
		struct fp_sample *smp = &s->samples[s->nsamples];

		memset(smp, 0, sizeof(*smp));
		smp->pid = pids[i];
		smp->time_us = time_us;
		s->frame_start[s->nsamples] = s->nframes;
		rc = decode_one(s, buf, &index, smp, wordsize);
		if (rc < 0)
			goto fail;
		if (rc == 0) {
			s->nframes = s->frame_start[s->nsamples];
			s->gone++;
			continue;
		}
		s->nsamples++;
	}
	if (n > 0 && (ei_decode_list_header(buf, &index, &count) < 0 || count != 0))
		goto fail;

	/* Only now, with the whole reply understood, touch the history. */
	for (size_t i = 0; i < s->nsamples; i++) {
		s->samples[i].frames = s->samples[i].nframes ?
				       s->frames + s->frame_start[i] : NULL;
		apply_history(s, &s->samples[i]);
	}
	return (int)s->nsamples;

fail:
	s->nsamples = 0;
	s->nframes = 0;
	return -EBADMSG;
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
