/*
 * flame_profd — the sampler's state, shared by the files that decode
 * into it: sample.c (the reply), history.c (each process's history),
 * stack.c (the stacktraces and their caches), initial-call.c (what
 * proc_lib said a process was started as), tags.c (dictionary values as
 * text). Each calls only files after it in that list.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "etf.h"
#include "fp/sample.h"
#include "intern.h"
#include "pidmap.h"
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
	uint64_t prev_us;	/* the time of the last sample */
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
	/* The most reductions a second any sampled process did between two
	 * of its samples, halved every RATE_HALF_LIFE_US: what a process
	 * that keeps a scheduler busy does (status_before_asked()). */
	double rate_max;
	uint64_t rate_max_us;

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

static inline char *
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

static inline bool
is_atom_type(int type)
{
	return type == ERL_ATOM_EXT || type == ERL_SMALL_ATOM_EXT ||
	       type == ERL_ATOM_UTF8_EXT || type == ERL_SMALL_ATOM_UTF8_EXT;
}

/*
 * An unchecked reply (fp_reply.checked) is read by the bounds-checked
 * readers of etf.h; a term goes to ei only after guard() has walked it.
 */
static inline int
guard(const struct fp_sampler *s, const char *buf, int index)
{
	size_t p = (size_t)index;

	return s->trusted ? 0 : etf_term_skip(buf, s->len, &p);
}

/* Skip a term, checking it on the way. */
static inline int
skip(const struct fp_sampler *s, const char *buf, int *index)
{
	size_t p = (size_t)*index;

	if (etf_term_skip(buf, s->len, &p) < 0)
		return -EBADMSG;
	*index = (int)p;
	return 0;
}

/* An atom into @dst (MAXATOMLEN_UTF8 bytes), NUL-terminated. */
static inline int
read_atom(const struct fp_sampler *s, const char *buf, int *index, char *dst)
{
	size_t p = (size_t)*index, n;
	const char *name;

	/* an atom holding a NUL takes etf_decode_atom()'s FP_NUL_CARRIER */
	if (etf_atom((const unsigned char *)buf, s->len, &p, &name, &n) == 0 &&
	    !memchr(name, 0, n)) {
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
static inline int
peek_tag(const struct fp_sampler *s, const char *buf, int index)
{
	return (size_t)index < s->len ? (unsigned char)buf[index] : -1;
}

/* stack.c: [{M, F, ArityOrArgs, Location}] into the sample's frames,
 * from the caches where its bytes were seen before (@prev: the process's
 * last stack); *used: the cached stack the sample now has, if any. */
int
sampler_decode_stack(struct fp_sampler *s, const char *buf, int *index,
		     struct fp_sample *smp, const struct cached_stack *prev,
		     const struct cached_stack **used);

/* A cached stack as the sample's frames. */
void
sampler_copy_stack(struct fp_sampler *s, const struct cached_stack *cs,
		   struct fp_sample *smp, const struct cached_stack **used);

/* initial-call.c */

/* {M, F, Arity} or {M, F, Args}, arity from either; checked bytes. */
int
sampler_decode_mfa(const char *buf, int *index, char *m, char *f,
		   uint32_t *arity);

/* Remember @m:@f/@arity as the process's initial call (copied). */
void
sampler_set_initial_call(struct proc_state *st, const char *m, const char *f,
			 uint32_t arity);

/* Forget every memo. */
void
sampler_memo_clear(struct fp_sampler *s);

/* tags.c: the label, callers and keys of sample @i from their spans, as
 * text, into the sample and the process's memo @st; a @reused probe
 * keeps the last ones. */
void
sampler_apply_tags(struct fp_sampler *s, const char *buf, size_t i,
		   struct proc_state *st, bool reused);

/* history.c */

/* Free what a process's state owns. */
void
sampler_proc_release(struct proc_state *st, size_t ntags);

/* Sample @i of the decode into its process's history: deltas, tags,
 * initial call; @stack its cached stack, @reused a reused probe. */
void
sampler_apply_history(struct fp_sampler *s, const char *buf, size_t i,
		      const struct cached_stack *stack, bool reused);

/* A probe of a process that has not run since its last sample (@st)
 * becomes that sample with the fresh values: true, else false. */
bool
sampler_reuse_probe(struct fp_sampler *s, const struct proc_state *st,
		    struct fp_sample *smp, const struct cached_stack **used);
