/*
 * flame_profd — sample decoding and per-process history.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "fp/sample.h"
#include "intern.h"
#include "node-private.h"
#include "pidmap.h"
#include "request.h"
#include "util-hash.h"
#include "util-mem.h"

/* A whole stacktrace seen before: its bytes and its frames, in order. */
struct cached_stack {
	uint64_t id;
	const unsigned char *key;
	size_t len;
	uint32_t nframes;
	struct fp_frame frames[];
};

/*
 * What proc_lib said a process was started as, kept while the process
 * lives, whether or not it is in the set: asking costs the node a copy of
 * the process's dictionary where it cannot read one key of it, so each
 * process is asked once in its life (also when the answer was lost).
 */
struct ic_memo {
	char *module;		/* NULL: asked, no answer */
	char *function;
	uint32_t arity;
};

/* Memo entries kept at most; past it, those of processes not in the set
 * go (they may be asked again if they come back). */
enum { IC_MEMO_MAX = 65536 };

/*
 * A dictionary value of a process as last seen: its bytes (when small
 * enough to keep) and its text. Labels and request ids stay the same for
 * many samples: a compare saves rendering the term again.
 */
struct tag_memo {
	unsigned char *raw;	/* NULL: not kept, render every time */
	size_t len;
	char *text;		/* NULL: the process has none */
};

/* Bytes of a value kept to compare with; larger ones are rendered anew. */
enum { TAG_RAW_MAX = 1024 };

/* Where a value of a sample lies in the reply; end 0: not there. */
struct tag_span {
	uint32_t at, end;
};

struct proc_state {
	bool have_prev;
	bool ic_from_proc_lib;
	int64_t prev[FP_METRIC_COUNT];
	char *ic_module;	/* NULL when the initial call is unknown */
	char *ic_function;
	uint32_t ic_arity;
	/* the stack of the last sample, while the cache holds it */
	const struct cached_stack *last_stack;
	uint64_t last_gen;
	/* The reductions a process that has not run since its last sample
	 * shows to a read that needs no signal: a signal it answered (a full
	 * sample) cost it one, after it was read. */
	int64_t expect_reds;
	bool idle;		/* the last sample found it had not run */
	/* label, callers, the keys, the Logger map (raw only), the Logger
	 * keys (text only): fp_sampler.ntags of them, or NULL */
	struct tag_memo *tags;
};

/* Strings of one batch: chunks that never move. */
struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	char data[];
};

/* Where one frame of a stacktrace lies in the reply, and its bytes' hash. */
struct frame_span {
	size_t at, end;
	uint64_t hash;
};

struct fp_sampler {
	struct pidmap procs;

	/*
	 * Frames and whole stacktraces by the bytes the node sent for them.
	 * A process blocked where it was at the last sample sends the same
	 * bytes again, and most frames recur across processes: a hit costs a
	 * skip, a hash and a compare. Both are dropped together (stacks point
	 * at the frames' strings) when they outgrow CACHE_BYTES, between two
	 * decodes, never during one.
	 */
	struct intern frame_cache, stack_cache;
	uint64_t cache_gen;	/* bumped when the caches are dropped */
	struct fp_cache_stats stats;
	size_t len;		/* of the reply being decoded */
	bool trusted;		/* ...and it was checked on arrival */
	const struct cached_stack **sample_stack;	/* per sample */
	bool *sample_reused;				/* per sample */
	size_t *stale;		/* probed pids that need a full sample */
	int64_t *stale_reds;	/* ... and the reductions the probe read */
	size_t nstale, reused;
	size_t running;		/* full samples of processes in a run queue */

	struct fp_sample *samples;
	size_t nsamples, samples_cap;
	size_t *frame_start;	/* per sample, index into frames */
	struct fp_frame *frames;
	size_t nframes, frames_cap;
	struct frame_span *spans;	/* decode_stacktrace()'s scratch */
	size_t spans_cap;
	struct arena_chunk *arena;
	size_t gone;
	struct pidmap ic_memo;	/* struct ic_memo */

	/* fp_sampler_set_extras() */
	char **key_names;	/* nkeys dictionary keys, then nlogger */
	size_t nkeys, nlogger;
	size_t nspans;		/* per sample: label, callers, keys, map */
	size_t ntags;		/* per process: nspans + nlogger */
	struct tag_span *tag_spans;	/* nspans per sample */
	const char **key_text;		/* nkeys + nlogger per sample */
};

enum { TAG_LABEL = 0, TAG_CALLERS = 1, TAG_KEYS = 2 };

enum { ARENA_CHUNK = 64 * 1024 };
enum { CACHE_BYTES = 8 * 1024 * 1024 };

/* Ids of cached frames and stacks: unique in the process, never reused,
 * so a writer keying its own cache on them can never see a stale entry. */
static uint64_t
next_cache_id(void)
{
	static uint64_t last;

	return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

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
proc_state_release(struct proc_state *st, size_t ntags)
{
	free(st->ic_module);
	free(st->ic_function);
	st->ic_module = st->ic_function = NULL;
	for (size_t k = 0; st->tags && k < ntags; k++) {
		free(st->tags[k].raw);
		free(st->tags[k].text);
	}
	free(st->tags);
	st->tags = NULL;
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
memo_clear(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	while (pidmap_next(&s->ic_memo, &it, &key, &v)) {
		struct ic_memo *m = v;

		free(m->module);
		free(m->function);
	}
	pidmap_clear(&s->ic_memo);
}

static void
forget_all(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	while (pidmap_next(&s->procs, &it, &key, &v))
		proc_state_release(v, s->ntags);
	pidmap_clear(&s->procs);
	memo_clear(s);
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
			st->tags = NULL;
		}
	}
	while (pidmap_next(&s->procs, &it, &key, &v))
		proc_state_release(v, s->ntags);
	pidmap_release(&s->procs);
	s->procs = keep;
}

bool
fp_sampler_wants_initial_call(const struct fp_sampler *s, struct fp_pid pid)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	return !st || !st->ic_module;
}

bool
fp_sampler_wants_proc_lib_call(const struct fp_sampler *s, struct fp_pid pid,
			       int64_t max_memory)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	/* proc_lib only knows better for what it started itself */
	if (!st || !st->have_prev || !st->ic_module || st->ic_from_proc_lib ||
	    strcmp(st->ic_module, "proc_lib") != 0 ||
	    strncmp(st->ic_function, "init_p", 6) != 0 ||
	    pidmap_find(&s->ic_memo, fp_pid_key(pid)))
		return false;
	return max_memory < 0 || st->prev[FP_METRIC_MEMORY] <= max_memory;
}

/* Room for one more memo: past IC_MEMO_MAX, forget the processes that
 * are not in the set. */
static void
memo_make_room(struct fp_sampler *s)
{
	size_t it = 0;
	uint64_t key;
	void *v;

	uint64_t *gone;
	size_t n = 0;

	if (s->ic_memo.count < IC_MEMO_MAX)
		return;
	gone = xzalloc(s->ic_memo.count * sizeof(*gone));
	while (pidmap_next(&s->ic_memo, &it, &key, &v)) {
		struct ic_memo *m = v;

		if (pidmap_find(&s->procs, key))
			continue;
		free(m->module);
		free(m->function);
		gone[n++] = key;
	}
	/* removing moves entries: not while walking */
	for (size_t i = 0; i < n; i++)
		pidmap_remove(&s->ic_memo, gone[i]);
	free(gone);
	if (s->ic_memo.count >= IC_MEMO_MAX)
		memo_clear(s);
}

void
fp_sampler_initial_calls_asked(struct fp_sampler *s, const struct fp_pid *pids,
			       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool created;
		struct ic_memo *m;

		memo_make_room(s);
		m = pidmap_insert(&s->ic_memo, fp_pid_key(pids[i]), &created);
		if (created)
			m->module = m->function = NULL;
	}
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
	free(st->ic_module);
	free(st->ic_function);
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
	    etf_decode_atom(buf, index, m) < 0 ||
	    etf_decode_atom(buf, index, f) < 0 ||
	    ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (type == ERL_LIST_EXT || type == ERL_NIL_EXT || type == ERL_STRING_EXT) {
		*arity = (uint32_t)size;
		return etf_skip_term(buf, index);
	}
	if (etf_decode_int(buf, index, &a) < 0 || a < 0 || a > 255)
		return -EBADMSG;
	*arity = (uint32_t)a;
	return 0;
}

/* proc_lib's {M, F, Args}, or a dictionary read's
 * {{dictionary, '$initial_call'}, {M, F, Arity} | undefined}: 1 with the
 * call, 0 for an answer without one (false, undefined), or -EBADMSG. */
static int
decode_initial_call(const char *buf, int *index, char *m, char *f,
		    uint32_t *arity)
{
	int type, size, start = *index, n;

	if (ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	if (is_atom_type(type))
		return etf_decode_atom(buf, index, m) < 0 ? -EBADMSG : 0;
	if (ei_decode_tuple_header(buf, index, &n) < 0)
		return -EBADMSG;
	if (n == 2) {
		/* the key, then the value */
		if (etf_skip_term(buf, index) < 0)
			return -EBADMSG;
		return decode_initial_call(buf, index, m, f, arity);
	}
	*index = start;
	return decode_mfa(buf, index, m, f, arity) < 0 ? -EBADMSG : 1;
}

int
fp_sampler_initial_calls(struct fp_sampler *s, const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n)
{
	const char *buf = reply->buf;
	int index = reply->index, count, rc;
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8];

	if (reply->badrpc || etf_reply_check(reply) < 0 ||
	    ei_decode_list_header(buf, &index, &count) < 0 || (size_t)count != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st;
		struct ic_memo *memo;
		uint32_t arity;
		bool created;

		rc = decode_initial_call(buf, &index, m, f, &arity);
		if (rc < 0)
			return -EBADMSG;
		if (rc == 0)
			continue;
		memo_make_room(s);
		memo = pidmap_insert(&s->ic_memo, fp_pid_key(pids[i]), &created);
		if (!created) {
			free(memo->module);
			free(memo->function);
		}
		memo->module = xstrdup(m);
		memo->function = xstrdup(f);
		memo->arity = arity;
		st = pidmap_find(&s->procs, fp_pid_key(pids[i]));
		if (st) {
			set_initial_call(st, m, f, arity);
			st->ic_from_proc_lib = true;
		}
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
		return etf_skip_term(buf, index);
	}
	if (type == ERL_LIST_EXT) {
		int count;

		if (ei_decode_list_header(buf, index, &count) < 0)
			return -EBADMSG;
		for (int i = 0; i < count; i++) {
			int64_t cp;

			if (etf_decode_int(buf, index, &cp) < 0 || cp < 0 ||
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

/*
 * An unchecked reply (fp_reply.checked) is read by the bounds-checked
 * readers of etf.h; a term goes to ei only after guard() has walked it.
 */
static int
guard(const struct fp_sampler *s, const char *buf, int index)
{
	size_t p = (size_t)index;

	return s->trusted ? 0 : etf_term_skip(buf, s->len, &p);
}

/* Skip a term, checking it on the way. */
static int
skip(const struct fp_sampler *s, const char *buf, int *index)
{
	size_t p = (size_t)*index;

	if (etf_term_skip(buf, s->len, &p) < 0)
		return -EBADMSG;
	*index = (int)p;
	return 0;
}

/* An atom into @dst (MAXATOMLEN_UTF8 bytes), NUL-terminated. */
static int
read_atom(const struct fp_sampler *s, const char *buf, int *index, char *dst)
{
	size_t p = (size_t)*index, n;
	const char *name;

	if (etf_atom((const unsigned char *)buf, s->len, &p, &name, &n) == 0) {
		memcpy(dst, name, n);
		dst[n] = '\0';
		*index = (int)p;
		return 0;
	}
	if (guard(s, buf, *index) < 0)
		return -EBADMSG;
	return etf_decode_atom(buf, index, dst);
}

/* The tag of the next term, or -1 at the end of the buffer. */
static int
peek_tag(const struct fp_sampler *s, const char *buf, int index)
{
	return (size_t)index < s->len ? (unsigned char)buf[index] : -1;
}

/* {M, F, ArityOrArgs, Location} with ei, strings in the batch arena. */
static int
decode_frame_slow(struct fp_sampler *s, const char *buf, int *index,
		  struct fp_frame *fr)
{
	char m[MAXATOMLEN_UTF8], f[MAXATOMLEN_UTF8], key[MAXATOMLEN_UTF8];
	int n, type, size, nloc;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 4 ||
	    etf_decode_atom(buf, index, m) < 0 ||
	    etf_decode_atom(buf, index, f) < 0 ||
	    ei_get_type(buf, index, &type, &size) < 0)
		return -EBADMSG;
	fr->module = arena_strdup(s, m, strlen(m));
	fr->function = arena_strdup(s, f, strlen(f));
	if (type == ERL_LIST_EXT || type == ERL_NIL_EXT ||
	    type == ERL_STRING_EXT) {
		fr->arity = (uint32_t)size;
		if (etf_skip_term(buf, index) < 0)
			return -EBADMSG;
	} else {
		int64_t a;

		if (etf_decode_int(buf, index, &a) < 0 || a < 0 || a > 255)
			return -EBADMSG;
		fr->arity = (uint32_t)a;
	}
	if (ei_decode_list_header(buf, index, &nloc) < 0)
		return -EBADMSG;
	for (int k = 0; k < nloc; k++) {
		if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 2 ||
		    etf_decode_atom(buf, index, key) < 0)
			return -EBADMSG;
		if (strcmp(key, "file") == 0) {
			if (decode_charlist(s, buf, index, &fr->file) < 0)
				return -EBADMSG;
		} else if (strcmp(key, "line") == 0) {
			int64_t line;

			if (etf_decode_int(buf, index, &line) < 0)
				return -EBADMSG;
			fr->line = line > 0 && line < UINT32_MAX ? (uint32_t)line : 0;
		} else if (etf_skip_term(buf, index) < 0) {
			return -EBADMSG;
		}
	}
	if (nloc > 0 && (ei_decode_list_header(buf, index, &nloc) < 0 || nloc != 0))
		return -EBADMSG;
	return 0;
}

/*
 * One frame whose context-free bytes are @f, from the cache when they
 * were seen before, else decoded and cached; either way *fr's strings
 * then live in the cache.
 */
static int
frame_from_span(struct fp_sampler *s, const char *buf,
		const struct frame_span *f, struct fp_frame *fr)
{
	const unsigned char *b = (const unsigned char *)buf;
	const struct fp_frame *hit;
	struct fp_frame *e;
	int index = (int)f->at;

	hit = intern_find(&s->frame_cache, f->hash, b + f->at, f->end - f->at);
	if (hit) {
		*fr = *hit;
		s->stats.frame_hits++;
		return 0;
	}
	s->stats.frame_misses++;
	if (decode_frame_slow(s, buf, &index, fr) < 0 ||
	    (size_t)index != f->end)
		return -EBADMSG;
	e = intern_add(&s->frame_cache, f->hash, b + f->at, f->end - f->at,
		       sizeof(*e), NULL);
	e->module = intern_strdup(&s->frame_cache, fr->module, strlen(fr->module));
	e->function = intern_strdup(&s->frame_cache, fr->function,
				    strlen(fr->function));
	e->file = fr->file ? intern_strdup(&s->frame_cache, fr->file,
					   strlen(fr->file)) : NULL;
	e->arity = fr->arity;
	e->line = fr->line;
	e->id = next_cache_id();
	*fr = *e;
	return 0;
}

/*
 * One frame, from the cache when its bytes were seen before. A frame
 * decoded anew is cached when its bytes are context-free; *cached says
 * whether the frame (and its strings) now lives in the cache.
 */
static int
decode_frame(struct fp_sampler *s, const char *buf, int *index,
	     struct fp_frame *fr, bool *cached)
{
	const unsigned char *b = (const unsigned char *)buf;
	struct frame_span f = { .at = (size_t)*index, .end = (size_t)*index };

	*cached = false;
	if (etf_skip_frame_or_plain(b, s->len, &f.end) < 0)
		return decode_frame_slow(s, buf, index, fr);
	f.hash = hash_bytes(b + f.at, f.end - f.at);
	if (frame_from_span(s, buf, &f, fr) < 0)
		return -EBADMSG;
	*index = (int)f.end;
	*cached = true;
	return 0;
}

/*
 * A proper list of context-free frames at @start: each frame's span and
 * hash into s->spans, the list's end into *end and a hash of the whole
 * list folded from the frames' into *hash (the same bytes always give the
 * same hash, which is all the stack cache needs). -1 for anything else:
 * [] (NIL_EXT), an improper list, an element that is not a plain
 * 4-tuple.
 */
static int
scan_frames(struct fp_sampler *s, const unsigned char *b, size_t start,
	    size_t *nframes, size_t *end, uint64_t *hash)
{
	size_t p = start + 5, n;
	uint64_t h;

	if (start >= s->len || s->len - start < 5 || b[start] != ERL_LIST_EXT)
		return -1;
	n = etf_be32(b + start + 1);
	h = hash_mix64(n ^ 0x5851f42d4c957f2dULL, 0x14057b7ef767814fULL);
	for (size_t i = 0; i < n; i++) {
		struct frame_span *f;

		/* Only 4-tuples go on (anything else is refused further on),
		 * and the scratch grows with the frames found, never with a
		 * count the reply merely claims: at 9 bytes a frame at least,
		 * it stays under 3 times the reply. */
		if (s->len - p < 2 || b[p] != ERL_SMALL_TUPLE_EXT || b[p + 1] != 4)
			return -1;
		if (i == s->spans_cap) {
			s->spans_cap = s->spans_cap ? s->spans_cap * 2 : 64;
			s->spans = xrealloc(s->spans,
					    s->spans_cap * sizeof(*s->spans));
		}
		f = &s->spans[i];
		f->at = f->end = p;
		if (etf_skip_frame_or_plain(b, s->len, &f->end) < 0)
			return -1;
		f->hash = hash_bytes(b + p, f->end - p);
		h = hash_mix64(h ^ f->hash, 0x9e3779b97f4a7c15ULL);
		p = f->end;
	}
	if (p >= s->len || b[p] != ERL_NIL_EXT)
		return -1;
	*nframes = n;
	*end = p + 1;
	*hash = h;
	return 0;
}

static void
copy_stack(struct fp_sampler *s, const struct cached_stack *cs,
	   struct fp_sample *smp, const struct cached_stack **used)
{
	for (uint32_t i = 0; i < cs->nframes; i++)
		*new_frame(s) = cs->frames[i];
	smp->nframes = cs->nframes;
	smp->stack_id = cs->id;
	*used = cs;
}

static void
take_cached_stack(struct fp_sampler *s, const struct cached_stack *cs,
		  struct fp_sample *smp, const struct cached_stack **used)
{
	copy_stack(s, cs, smp, used);
	s->stats.stack_hits++;
}

/*
 * [{M, F, ArityOrArgs, Location}]: the whole list from the cache when its
 * bytes were seen before, else frame by frame. @prev is the process's
 * stack at its last sample: a process still where it was sends the same
 * bytes, and since an encoded term determines its own length, bytes equal
 * to a whole earlier term *are* that term — one memcmp, no walk.
 */
static int
decode_stacktrace(struct fp_sampler *s, const char *buf, int *index,
		  struct fp_sample *smp, const struct cached_stack *prev,
		  const struct cached_stack **used)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t start = (size_t)*index, end = start, first = s->nframes, n;
	const struct cached_stack *hit = NULL;
	bool plain, all_cached;
	struct cached_stack *cs;
	const void *key;
	uint64_t h = 0;
	int count;

	if (prev && s->len - start >= prev->len &&
	    memcmp(b + start, prev->key, prev->len) == 0) {
		take_cached_stack(s, prev, smp, used);
		*index = (int)(start + prev->len);
		return 0;
	}
	/*
	 * The usual stack, a proper list of plain frames, is walked once:
	 * each frame's span and hash are kept for the frame cache, the
	 * stack's hash is made of theirs.
	 */
	if (scan_frames(s, b, start, &n, &end, &h) == 0) {
		hit = intern_find(&s->stack_cache, h, b + start, end - start);
		if (hit) {
			take_cached_stack(s, hit, smp, used);
			*index = (int)end;
			return 0;
		}
		s->stats.stack_misses++;
		for (size_t i = 0; i < n; i++) {
			if (frame_from_span(s, buf, &s->spans[i], new_frame(s)) < 0)
				return -EBADMSG;
		}
		smp->nframes = (uint32_t)n;
		*index = (int)end;
		goto add;
	}

	/* anything else (an empty list too): the term, then frame by frame */
	end = start;
	plain = all_cached = etf_skip_plain(b, s->len, &end) == 0;
	if (plain) {
		h = hash_bytes(b + start, end - start);
		hit = intern_find(&s->stack_cache, h, b + start, end - start);
	}
	if (hit) {
		take_cached_stack(s, hit, smp, used);
		*index = (int)end;
		return 0;
	}
	if (plain)
		s->stats.stack_misses++;

	/* a plain span was walked within bounds already */
	if ((!plain && guard(s, buf, *index) < 0) ||
	    ei_decode_list_header(buf, index, &count) < 0)
		return -EBADMSG;
	for (int i = 0; i < count; i++) {
		bool cached;

		if (decode_frame(s, buf, index, new_frame(s), &cached) < 0)
			return -EBADMSG;
		all_cached = all_cached && cached;
	}
	/* the tail; [] as a LIST_EXT of none has one too */
	if ((count > 0 || b[start] == ERL_LIST_EXT) &&
	    (ei_decode_list_header(buf, index, &count) < 0 || count != 0))
		return -EBADMSG;
	smp->nframes = (uint32_t)(s->nframes - first);
	if (!all_cached || (size_t)*index != end)
		return 0;

add:
	cs = intern_add(&s->stack_cache, h, b + start, end - start,
			sizeof(*cs) + smp->nframes * sizeof(struct fp_frame), &key);
	cs->id = next_cache_id();
	cs->key = key;
	cs->len = end - start;
	cs->nframes = smp->nframes;
	if (smp->nframes)
		memcpy(cs->frames, s->frames + first,
		       smp->nframes * sizeof(struct fp_frame));
	smp->stack_id = cs->id;
	*used = cs;
	return 0;
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

static const struct {
	const char *item;
	size_t len;
	enum fp_metric metric;
} int_items[] = {
#define INT_ITEM(name, metric) { name, sizeof(name) - 1, metric }
	INT_ITEM("reductions", FP_METRIC_REDUCTIONS),
	INT_ITEM("memory", FP_METRIC_MEMORY),
	INT_ITEM("message_queue_len", FP_METRIC_MESSAGE_QUEUE_LEN),
	INT_ITEM("total_heap_size", FP_METRIC_TOTAL_HEAP_SIZE),
	INT_ITEM("heap_size", FP_METRIC_HEAP_SIZE),
	INT_ITEM("stack_size", FP_METRIC_STACK_SIZE),
#undef INT_ITEM
};

/* Which span a dictionary key's value goes to, or -1. */
static int
tag_slot(const struct fp_sampler *s, const char *key, size_t n)
{
	if (ATOM_IS(key, n, "$process_label"))
		return TAG_LABEL;
	if (ATOM_IS(key, n, "$callers"))
		return TAG_CALLERS;
	if (ATOM_IS(key, n, "$logger_metadata$"))
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
		bool done = false;
		size_t n;
		int rc;

		/* the dictionary's items come last and only where asked:
		 * one compare of four bytes for the others */
		rc = read_dict_item(s, buf, index, spans);
		if (rc < 0)
			return -EBADMSG;
		if (rc)
			continue;
		if (read_keyed(s, buf, index, tmp, &item, &n) < 0)
			return -EBADMSG;

		for (size_t k = 0; k < sizeof(int_items) / sizeof(int_items[0]); k++) {
			if (etf_atom_is(item, n, int_items[k].item, int_items[k].len)) {
				if (read_int(s, buf, index,
					     &smp->value[int_items[k].metric]) < 0)
					return -EBADMSG;
				done = true;
				break;
			}
		}
		if (done)
			continue;

		if (ATOM_IS(item, n, "status")) {
			if (read_atom(s, buf, index, atom) < 0)
				return -EBADMSG;
			smp->status = fp_status_from_name(atom);
		} else if (ATOM_IS(item, n, "registered_name")) {
			if (is_atom_type(peek_tag(s, buf, *index))) {
				if (read_atom(s, buf, index, atom) < 0)
					return -EBADMSG;
				smp->registered_name = arena_strdup(s, atom, strlen(atom));
			} else if (skip(s, buf, index) < 0) {
				return -EBADMSG;	/* [] when not registered */
			}
		} else if (ATOM_IS(item, n, "current_stacktrace")) {
			/* frames are appended; the caller fixes the pointer */
			if (decode_stacktrace(s, buf, index, smp, prev, used) < 0)
				return -EBADMSG;
		} else if (ATOM_IS(item, n, "garbage_collection")) {
			if (decode_int_proplist(s, buf, index, gc_keys,
						&smp->value[FP_METRIC_MINOR_GCS], 1) < 0)
				return -EBADMSG;
		} else if (ATOM_IS(item, n, "garbage_collection_info")) {
			int64_t v[2] = { 0, 0 };

			if (decode_int_proplist(s, buf, index, gci_keys, v, 2) < 0)
				return -EBADMSG;
			if (__builtin_add_overflow(v[0], v[1], &v[0]) ||
			    __builtin_mul_overflow(v[0], (int64_t)wordsize, &v[0]))
				v[0] = INT64_MAX;
			smp->value[FP_METRIC_BINARY_BYTES] = v[0];
		} else if (ATOM_IS(item, n, "label")) {
			if (take_span(s, buf, index, &spans[TAG_LABEL]) < 0)
				return -EBADMSG;
		} else if (ATOM_IS(item, n, "initial_call")) {
			uint32_t arity;

			if (guard(s, buf, *index) < 0 ||
			    decode_mfa(buf, index, m, f, &arity) < 0)
				return -EBADMSG;
			smp->has_initial_call = true;
			smp->initial_call.module = arena_strdup(s, m, strlen(m));
			smp->initial_call.function = arena_strdup(s, f, strlen(f));
			smp->initial_call.arity = arity;
		} else if (skip(s, buf, index) < 0) {
			return -EBADMSG;
		}
	}
	return read_tail(s, buf, index, count) < 0 ? -EBADMSG : 1;
}

/* Cut @len bytes of UTF-8 at FP_TAG_MAX, on a character's start. */
static size_t
tag_cut(const char *text, size_t len)
{
	if (len <= FP_TAG_MAX)
		return len;
	len = FP_TAG_MAX;
	while (len && ((unsigned char)text[len] & 0xc0) == 0x80)
		len--;
	return len;
}

/* Well-formed UTF-8 without control characters: an Elixir string
 * written as it is (overlong forms and surrogates count as binary). */
static bool
printable_utf8(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = p[i], len, cp;

		if (c < 0x20 || c == 0x7f)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
		if (!len || c >= 0xf5 || n - i < len)
			return false;
		cp = c & (0xff >> (len + 1));
		for (unsigned k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += len;
	}
	return true;
}

/* ei prints "{a, 1}": drop the space after each comma outside quotes,
 * so that a label reads as Erlang's io_lib:format("~w") writes it. */
static void
compact_printed(char *text)
{
	char quote = 0, *out = text;

	for (const char *p = text; *p; p++) {
		if (quote) {
			if (*p == '\\' && p[1]) {
				*out++ = *p++;
			} else if (*p == quote) {
				quote = 0;
			}
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == ' ' && p > text && p[-1] == ',') {
			continue;
		}
		*out++ = *p;
	}
	*out = '\0';
}

/* Terms larger than this are named by their size, not printed. */
enum { TAG_PRINT_MAX = 64 * 1024 };

/*
 * A value as text: atoms, integers and printable UTF-8 binaries (Elixir
 * strings) as they are, anything else as Erlang prints it. NULL for
 * undefined (no label, no such key) and [] (no callers). The caller owns
 * the result.
 */
static char *
render_tag(const struct fp_sampler *s, const char *buf, struct tag_span span)
{
	char atom[MAXATOMLEN_UTF8], *out = NULL, *printed = NULL;
	int index = (int)span.at, type, size;
	long long ll;

	if (guard(s, buf, index) < 0 || ei_get_type(buf, &index, &type, &size) < 0)
		return NULL;
	if (is_atom_type(type)) {
		if (etf_decode_atom(buf, &index, atom) < 0 ||
		    strcmp(atom, "undefined") == 0)
			return NULL;
		return xstrdup(atom);
	}
	if (type == ERL_NIL_EXT)
		return NULL;
	if ((type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT ||
	     type == ERL_SMALL_BIG_EXT) &&
	    ei_decode_longlong(buf, &index, &ll) == 0) {
		out = xzalloc(24);
		snprintf(out, 24, "%lld", ll);
		return out;
	}
	if (type == ERL_BINARY_EXT && size >= 0 && span.end - span.at == 5u + (unsigned)size &&
	    printable_utf8((const unsigned char *)buf + span.at + 5, (size_t)size)) {
		size_t n = tag_cut(buf + span.at + 5, (size_t)size);

		out = xzalloc(n + 1);
		memcpy(out, buf + span.at + 5, n);
		return out;
	}
	if (span.end - span.at > TAG_PRINT_MAX) {
		out = xzalloc(48);
		snprintf(out, 48, "#term<%u bytes>", span.end - span.at);
		return out;
	}
	index = (int)span.at;
	if (ei_s_print_term(&printed, buf, &index) < 0 || !printed) {
		free(printed);
		return NULL;
	}
	compact_printed(printed);
	printed[tag_cut(printed, strlen(printed))] = '\0';
	return printed;
}

/* '$callers', a list of pids: "<0.1.2>,<0.3.4>" as far as fits. */
static char *
render_callers(const struct fp_sampler *s, const char *buf, struct tag_span span)
{
	char text[FP_TAG_MAX + 1];
	int index = (int)span.at, count, type, size;
	size_t len = 0;

	text[0] = '\0';
	if (guard(s, buf, index) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_LIST_EXT ||
	    ei_decode_list_header(buf, &index, &count) < 0)
		return NULL;
	for (int i = 0; i < count; i++) {
		struct fp_pid pid;
		char one[48];
		int n;

		if (ei_get_type(buf, &index, &type, &size) < 0)
			break;
		if (type != ERL_PID_EXT && type != ERL_NEW_PID_EXT) {
			if (etf_skip_term(buf, &index) < 0)
				break;
			continue;
		}
		if (etf_decode_pid(buf, &index, &pid) < 0)
			break;
		n = snprintf(one, sizeof(one), "%s<0.%u.%u>", len ? "," : "",
			     pid.num, pid.serial);
		if (n < 0 || len + (size_t)n > FP_TAG_MAX)
			break;
		memcpy(text + len, one, (size_t)n + 1);
		len += (size_t)n;
	}
	return len ? xstrdup(text) : NULL;
}

/* Logger key @k of the metadata map at @span into @memo's text. */
static void
render_logger_key(const struct fp_sampler *s, const char *buf,
		  struct tag_span span, const char *key, struct tag_memo *memo)
{
	char atom[MAXATOMLEN_UTF8];
	int index = (int)span.at, type, size, arity;

	free(memo->text);
	memo->text = NULL;
	if (!span.end || guard(s, buf, index) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_MAP_EXT ||
	    ei_decode_map_header(buf, &index, &arity) < 0)
		return;
	for (int i = 0; i < arity; i++) {
		bool match = false;
		int at;

		if (ei_get_type(buf, &index, &type, &size) < 0)
			return;
		if (is_atom_type(type)) {
			if (etf_decode_atom(buf, &index, atom) < 0)
				return;
			match = strcmp(atom, key) == 0;
		} else if (etf_skip_term(buf, &index) < 0) {
			return;
		}
		at = index;
		if (etf_skip_term(buf, &index) < 0)
			return;
		if (match) {
			struct tag_span v = { (uint32_t)at, (uint32_t)index };

			memo->text = render_tag(s, buf, v);
			return;
		}
	}
}

/* Whether @memo still holds the value at @span; if not, it takes it. */
static bool
memo_same(struct tag_memo *memo, const char *buf, struct tag_span span)
{
	size_t len = span.end - span.at;

	if (memo->raw && memo->len == len &&
	    memcmp(memo->raw, buf + span.at, len) == 0)
		return true;
	free(memo->raw);
	memo->raw = NULL;
	memo->len = len;
	if (len <= TAG_RAW_MAX) {
		memo->raw = xzalloc(len + 1);
		memcpy(memo->raw, buf + span.at, len);
	}
	return false;
}

/*
 * The label, callers and keys of sample @i: rendered from the reply where
 * they changed since the process's last sample, else its last text; a
 * reused probe, which asked none of them, keeps its last.
 */
static void
apply_tags(struct fp_sampler *s, const char *buf, size_t i,
	   struct proc_state *st, bool reused)
{
	struct fp_sample *smp = &s->samples[i];
	const struct tag_span *spans = &s->tag_spans[i * s->nspans];
	size_t nk = s->nkeys + s->nlogger, map = TAG_KEYS + s->nkeys;
	const char **keys = &s->key_text[i * nk];

	if (!st->tags)
		st->tags = xzalloc(s->ntags * sizeof(*st->tags));
	if (!reused) {
		for (size_t k = 0; k < s->nspans; k++) {
			struct tag_memo *m = &st->tags[k];

			if (!spans[k].end) {
				free(m->raw);
				free(m->text);
				m->raw = NULL;
				m->text = NULL;
				if (k == map) {
					for (size_t l = 0; l < s->nlogger; l++) {
						free(st->tags[s->nspans + l].text);
						st->tags[s->nspans + l].text = NULL;
					}
				}
				continue;
			}
			if (memo_same(m, buf, spans[k]))
				continue;
			if (k == map) {
				for (size_t l = 0; l < s->nlogger; l++)
					render_logger_key(s, buf, spans[k],
							  s->key_names[s->nkeys + l],
							  &st->tags[s->nspans + l]);
				continue;
			}
			free(m->text);
			m->text = k == TAG_CALLERS ? render_callers(s, buf, spans[k]) :
						     render_tag(s, buf, spans[k]);
		}
	}
	smp->label = st->tags[TAG_LABEL].text;
	smp->callers = st->tags[TAG_CALLERS].text;
	for (size_t k = 0; k < s->nkeys; k++)
		keys[k] = st->tags[TAG_KEYS + k].text;
	for (size_t l = 0; l < s->nlogger; l++)
		keys[s->nkeys + l] = st->tags[s->nspans + l].text;
	smp->keys = nk ? keys : NULL;
	smp->nkeys = (uint32_t)nk;
}

static void
apply_history(struct fp_sampler *s, const char *buf, size_t i,
	      const struct cached_stack *stack, bool reused)
{
	struct fp_sample *smp = &s->samples[i];
	int64_t reds = smp->value[FP_METRIC_REDUCTIONS];
	struct proc_state *st;
	bool created;

	st = pidmap_insert(&s->procs, fp_pid_key(smp->pid), &created);
	apply_tags(s, buf, i, st, reused);
	st->last_stack = stack;
	st->last_gen = s->cache_gen;
	st->idle = reused || (st->have_prev && reds == st->expect_reds);
	/* a full sample is a signal the process answered after reading its
	 * reductions; a reused one read them without */
	st->expect_reds = reused ? reds : reds + 1;
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
	 * process; proc_lib's answer, once we have it, is the useful one
	 * (remembered while the process lives, in the set or not). */
	if (smp->has_initial_call && !st->ic_from_proc_lib) {
		const struct ic_memo *memo = pidmap_find(&s->ic_memo,
							 fp_pid_key(smp->pid));

		if (memo && memo->module) {
			set_initial_call(st, memo->module, memo->function,
					 memo->arity);
			st->ic_from_proc_lib = true;
		} else {
			set_initial_call(st, smp->initial_call.module,
					 smp->initial_call.function,
					 smp->initial_call.arity);
		}
	}
	if (st->ic_module) {
		smp->has_initial_call = true;
		smp->initial_call.module = st->ic_module;
		smp->initial_call.function = st->ic_function;
		smp->initial_call.arity = st->ic_arity;
		smp->initial_call.file = NULL;
		smp->initial_call.line = 0;
	}
}

/*
 * A probe of a process that has not run since its last sample: the
 * reductions where that sample left them, nothing that running or
 * receiving changes moved, and the stack still cached. Then the sample is
 * the old one with the fresh values.
 */
static bool
reuse_probe(struct fp_sampler *s, const struct proc_state *st,
	    struct fp_sample *smp, const struct cached_stack **used)
{
	static const enum fp_metric same[] = {
		FP_METRIC_MESSAGE_QUEUE_LEN, FP_METRIC_HEAP_SIZE,
		FP_METRIC_STACK_SIZE, FP_METRIC_MINOR_GCS,
	};
	static const enum fp_metric kept[] = {
		FP_METRIC_MEMORY, FP_METRIC_TOTAL_HEAP_SIZE,
		FP_METRIC_BINARY_BYTES,
	};

	if (!st || !st->have_prev || !st->last_stack ||
	    st->last_gen != s->cache_gen)
		return false;
	if (smp->status != FP_STATUS_WAITING && smp->status != FP_STATUS_RUNNABLE &&
	    smp->status != FP_STATUS_SUSPENDED)
		return false;
	if (smp->value[FP_METRIC_REDUCTIONS] != st->expect_reds)
		return false;
	for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
		if (smp->value[same[k]] != st->prev[same[k]])
			return false;
	}
	for (size_t k = 0; k < sizeof(kept) / sizeof(kept[0]); k++)
		smp->value[kept[k]] = st->prev[kept[k]];
	copy_stack(s, st->last_stack, smp, used);
	return true;
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

	s->nsamples = 0;
	s->nframes = 0;
	s->gone = 0;
	s->nstale = 0;
	s->reused = 0;
	s->running = 0;
	s->len = reply->len;
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
			} else if (reuse_probe(s, st, smp,
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
		s->nsamples++;
	}
	if (read_tail(s, buf, &index, count) < 0)
		goto fail;
	/* an unchecked result must end the message, as a checked one does */
	if (!s->trusted && (size_t)index != s->len)
		goto fail;

	/* Only now, with the whole reply understood, touch the history. */
	for (size_t i = 0; i < s->nsamples; i++) {
		s->samples[i].frames = s->samples[i].nframes ?
				       s->frames + s->frame_start[i] : NULL;
		apply_history(s, buf, i, s->sample_stack[i], s->sample_reused[i]);
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

bool
fp_sampler_idle(const struct fp_sampler *s, struct fp_pid pid)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	return st && st->idle && st->last_stack && st->last_gen == s->cache_gen;
}

const struct fp_sample *
fp_sampler_samples(const struct fp_sampler *s, size_t *n)
{
	*n = s->nsamples;
	return s->samples;
}

void
fp_sampler_drop_caches(struct fp_sampler *s)
{
	intern_clear(&s->stack_cache);
	intern_clear(&s->frame_cache);
	s->cache_gen++;		/* every last_stack is gone */
	s->stats.clears++;
}

void
fp_sampler_cache_stats(const struct fp_sampler *s, struct fp_cache_stats *stats)
{
	*stats = s->stats;
}

size_t
fp_sampler_gone(const struct fp_sampler *s)
{
	return s->gone;
}
