/*
 * flame_profd — stacktraces: decoded once, then found again by their bytes.
 *
 * Frames and whole stacktraces are cached by the bytes the node sent for
 * them (struct fp_sampler, sampler-private.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "sampler-private.h"
#include "util-escape.h"
#include "util-hash.h"
#include "util-buf.h"
#include "util-mem.h"

/* Ids of cached frames and stacks: unique in the process, never reused,
 * so a writer keying its own cache on them can never see a stale entry. */
static uint64_t
next_cache_id(void)
{
	static uint64_t last;

	return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
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

				if (c == 0) {
					memcpy(u + len, FP_NUL_CARRIER, 2);
					len += 2;
				} else if (c < 0x80) {
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
			if (cp == 0) {
				memcpy(tmp + len, FP_NUL_CARRIER, 2);
				len += 2;
			} else if (cp < 0x80) {
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
	FP_GROW(s->frames, s->frames_cap, s->nframes + 1);
	memset(&s->frames[s->nframes], 0, sizeof(*s->frames));
	return &s->frames[s->nframes++];
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
		FP_GROW(s->spans, s->spans_cap, i + 1);
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

void
sampler_copy_stack(struct fp_sampler *s, const struct cached_stack *cs,
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
	sampler_copy_stack(s, cs, smp, used);
	s->stats.stack_hits++;
}

/*
 * [{M, F, ArityOrArgs, Location}]: the whole list from the cache when its
 * bytes were seen before, else frame by frame. @prev is the process's
 * stack at its last sample: a process still where it was sends the same
 * bytes, and since an encoded term determines its own length, bytes equal
 * to a whole earlier term *are* that term — one memcmp, no walk.
 */
int
sampler_decode_stack(struct fp_sampler *s, const char *buf, int *index,
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

