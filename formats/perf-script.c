/*
 * flame_profd — perf-script text writer.
 *
 * Stock Flamescope reads these lines with three regular expressions: the
 * event line must hold " SECONDS.MICROS: EVENT:", the text before the
 * first digit becomes the top frame (the process status), and frame lines
 * are "\t<hex> NAME (FILE)" with NAME cut at the first '+' and split at
 * "->". The escaping of frame-names.c keeps every name, in the Erlang
 * and in the Elixir form, whole under those rules and under the
 * folded-stack tools (no ';').
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "frame-names-private.h"
#include "util-hash.h"
#include "fp/perf-script.h"
#include "util-escape.h"
#include "util-mem.h"

/*
 * Text already made for a frame or a whole stack, by the decoder's id
 * (fp_frame.id, fp_sample.stack_id: unique in the process, never reused,
 * so an entry can never be stale). Bounded: when the text would outgrow
 * the arena the whole cache is dropped and refills from what recurs.
 */
struct text_slot {
	uint64_t id;		/* 0: empty */
	uint32_t off, len;
};

struct text_cache {
	struct text_slot *slots;
	size_t capacity, count;	/* capacity: power of two */
	char *arena;
	size_t used, size;
};

enum {
	FRAME_TEXT_BYTES = 1024 * 1024,
	STACK_TEXT_BYTES = 4 * 1024 * 1024,
};

struct fp_perf_writer {
	struct fp_perf_options options;
	struct fp_text t;		/* the text of the FILE calls */
	struct fp_text *dst;		/* where the text is being made */
	struct text_cache frames, stacks;
	/* "\tmetric_erlang_NAME: " per metric */
	char metric_prefix[FP_METRIC_COUNT][48];
	uint8_t metric_prefix_len[FP_METRIC_COUNT];
};

/* Where the probe for @id starts (ids are sequential: spread them). */
static inline size_t
text_slot_home(uint64_t id, size_t capacity)
{
	return (size_t)(id * 0x9e3779b97f4a7c15ULL >> 20) & (capacity - 1);
}

static void
text_cache_init(struct text_cache *c, size_t size)
{
	c->capacity = 4096;
	c->slots = xzalloc(c->capacity * sizeof(*c->slots));
	c->size = size;
	c->arena = xzalloc(size);
}

static void
text_cache_release(struct text_cache *c)
{
	free(c->slots);
	free(c->arena);
}

static bool
text_cache_find(const struct text_cache *c, uint64_t id, const char **text,
		size_t *len)
{
	size_t mask = c->capacity - 1;

	for (size_t i = text_slot_home(id, c->capacity);; i = (i + 1) & mask) {
		const struct text_slot *e = &c->slots[i];

		if (e->id == id) {
			*text = c->arena + e->off;
			*len = e->len;
			return true;
		}
		if (!e->id)
			return false;
	}
}

static void
text_cache_add(struct text_cache *c, uint64_t id, const char *text,
	       size_t len)
{
	struct text_slot *slots;
	size_t mask, i;

	if (len > c->size / 16)
		return;		/* a monster stack: not worth a slot */
	if (c->size - c->used < len) {
		memset(c->slots, 0, c->capacity * sizeof(*c->slots));
		c->count = 0;
		c->used = 0;
	}
	if ((c->count + 1) * 4 > c->capacity * 3) {
		size_t capacity = c->capacity * 2;

		slots = xzalloc(capacity * sizeof(*slots));
		for (size_t k = 0; k < c->capacity; k++) {
			if (!c->slots[k].id)
				continue;
			for (i = text_slot_home(c->slots[k].id, capacity);
			     slots[i].id; i = (i + 1) & (capacity - 1))
				;
			slots[i] = c->slots[k];
		}
		free(c->slots);
		c->slots = slots;
		c->capacity = capacity;
	}
	mask = c->capacity - 1;
	for (i = text_slot_home(id, c->capacity); c->slots[i].id;
	     i = (i + 1) & mask)
		;
	memcpy(c->arena + c->used, text, len);
	c->slots[i] = (struct text_slot){ id, (uint32_t)c->used, (uint32_t)len };
	c->used += len;
	c->count++;
}

struct fp_perf_writer *
fp_perf_writer_new(const struct fp_perf_options *options)
{
	struct fp_perf_writer *w = xnew(struct fp_perf_writer);

	if (options)
		w->options = *options;
	fp_text_reserve(&w->t, 16384);
	w->dst = &w->t;
	text_cache_init(&w->frames, FRAME_TEXT_BYTES);
	text_cache_init(&w->stacks, STACK_TEXT_BYTES);
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		int n = snprintf(w->metric_prefix[m], sizeof(w->metric_prefix[m]),
				 "\tmetric_erlang_%s: ",
				 fp_metric_name((enum fp_metric)m));

		w->metric_prefix_len[m] = (uint8_t)n;
	}
	return w;
}

void
fp_perf_writer_destroy(struct fp_perf_writer *w)
{
	if (!w)
		return;
	text_cache_release(&w->frames);
	text_cache_release(&w->stacks);
	free(w->t.buf);
	free(w);
}

static inline void
put(struct fp_perf_writer *w, const char *s, size_t n)
{
	fp_text_put(w->dst, s, n);
}

static inline void
puts_(struct fp_perf_writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static inline void
putc_(struct fp_perf_writer *w, char c)
{
	fp_text_putc(w->dst, c);
}

static void
put_u64(struct fp_perf_writer *w, uint64_t v)
{
	fp_text_put_u64(w->dst, v);
}

static void
put_i64(struct fp_perf_writer *w, int64_t v)
{
	if (v < 0) {
		putc_(w, '-');
		put_u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(w, (uint64_t)v);
	}
}

static size_t
copy_out(char *dst, size_t size, struct fp_text *t)
{
	size_t n = t->len;

	if (size) {
		size_t c = n < size - 1 ? n : size - 1;

		memcpy(dst, t->buf, c);
		dst[c] = '\0';
	}
	free(t->buf);
	return n;
}

size_t
fp_perf_format_atom(char *dst, size_t size, const char *atom)
{
	struct fp_text t = { 0 };

	fp_name_put_atom(&t, atom, strlen(atom));
	return copy_out(dst, size, &t);
}

size_t
fp_perf_format_name(char *dst, size_t size, const char *atom,
		    bool erlang_names)
{
	struct fp_text t = { 0 };

	fp_name_put_process(&t, atom, strlen(atom), !erlang_names);
	return copy_out(dst, size, &t);
}

static void
put_mfa(struct fp_perf_writer *w, const struct fp_frame *f)
{
	fp_name_put_mfa(w->dst, f->module, strlen(f->module), f->function,
			strlen(f->function), f->arity, !w->options.erlang_names);
}

/* FILE part: whatever the node says, minus what would end the field or
 * be taken for something else. A space could make a frame line look like
 * an event line (" 1.5: x:") to Flamescope, which tries every line. */
static void
put_file(struct fp_perf_writer *w, const char *file)
{
	const unsigned char *p;

	if (!file || !*file) {
		puts_(w, "unknown");
		return;
	}
	/* most paths need no escape: copy them whole */
	for (p = (const unsigned char *)file; *p; p++) {
		if (*p <= 0x20 || *p >= 0x7f || *p == '(' || *p == ')' || *p == '\\')
			break;
	}
	if (!*p) {
		put(w, file, (size_t)(p - (const unsigned char *)file));
		return;
	}
	fp_text_puts_escaped(w->dst, file, " ()");
}

/*
 * A label, key value or callers list: under the rule for node text
 * (util-escape.h), and a space escaped too: a field never holds one, so
 * a reader that cuts at white space finds it whole (docs/FORMAT.md
 * "Labels and keys").
 */
static void
put_tag(struct fp_perf_writer *w, const char *field, size_t flen,
	const char *name, const char *text)
{
	putc_(w, '\t');
	put(w, field, flen);
	if (name)
		puts_(w, name);
	put(w, ": ", 2);
	fp_text_puts_escaped(w->dst, text, " ");
}

static void
put_frame(struct fp_perf_writer *w, const struct fp_frame *f)
{
	static const char hex[] = "0123456789abcdef";
	size_t addr_at, name_at;
	uint64_t h;

	putc_(w, '\t');
	addr_at = w->dst->len;
	put(w, "0000000000000000 ", 17);
	name_at = w->dst->len;
	put_mfa(w, f);
	if (w->options.lines && f->line) {
		putc_(w, ':');
		put_u64(w, f->line);
	}
	/* A stable pseudo-address per name: tools that key on addresses
	 * see one function as one symbol. */
	h = fnv1a_update(FNV1A_BASIS, w->dst->buf + name_at, w->dst->len - name_at);
	for (int i = 15; i >= 0; i--, h >>= 4)
		w->dst->buf[addr_at + (size_t)i] = hex[h & 15];
	put(w, " (", 2);
	put_file(w, f->file);
	put(w, ")\n", 2);
}

/* The FILE calls make their text in the writer's own buffer, then
 * write it with one fwrite. */
static int
flush_to(struct fp_perf_writer *w, FILE *out)
{
	size_t n = w->t.len;

	w->t.len = 0;
	if (fwrite(w->t.buf, 1, n, out) != n || ferror(out))
		return errno ? -errno : -EIO;
	return 0;
}

/* The frame lines of a sample, from the caches when the decoder has seen
 * the stack or the frames before. */
static void
put_stack(struct fp_perf_writer *w, const struct fp_sample *s)
{
	size_t start = w->dst->len, len;
	const char *text;

	if (s->stack_id && text_cache_find(&w->stacks, s->stack_id, &text, &len)) {
		put(w, text, len);
		return;
	}
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct fp_frame *f = &s->frames[i];
		size_t at = w->dst->len;

		if (f->id && text_cache_find(&w->frames, f->id, &text, &len)) {
			put(w, text, len);
			continue;
		}
		put_frame(w, f);
		if (f->id)
			text_cache_add(&w->frames, f->id, w->dst->buf + at, w->dst->len - at);
	}
	if (s->stack_id)
		text_cache_add(&w->stacks, s->stack_id, w->dst->buf + start,
			       w->dst->len - start);
}

void
fp_perf_format_sample(struct fp_perf_writer *w, struct fp_text *dst,
		      const struct fp_sample *s)
{
	uint64_t usec = s->time_us % 1000000;
	char frac[6];

	w->dst = dst;
	puts_(w, fp_status_name(s->status));
	/* <0.N.S> as perf's "PID/TID": the readers of perf script text
	 * (stackcollapse-perf.pl, speedscope) take digits there */
	putc_(w, ' ');
	put_u64(w, s->pid.num);
	putc_(w, '/');
	put_u64(w, s->pid.serial);
	put(w, " [000] ", 7);
	put_u64(w, s->time_us / 1000000);
	putc_(w, '.');
	for (int i = 5; i >= 0; i--, usec /= 10)
		frac[i] = (char)('0' + usec % 10);
	put(w, frac, 6);
	put(w, ": cpu-clock:", 12);

	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		put(w, w->metric_prefix[m], w->metric_prefix_len[m]);
		put_i64(w, s->value[m]);
		put(w, ", ", 2);
		put_i64(w, s->delta[m]);
	}
	if (s->registered_name) {
		puts_(w, "\tregistered_name: ");
		fp_name_put_process(w->dst, s->registered_name,
				    strlen(s->registered_name),
				    !w->options.erlang_names);
	}
	if (s->has_initial_call) {
		puts_(w, "\tinitial_call: ");
		put_mfa(w, &s->initial_call);
	}
	if (s->label)
		put_tag(w, "label", 5, NULL, s->label);
	for (size_t k = 0; k < s->nkeys && k < w->options.nkeys; k++) {
		if (s->keys[k])
			put_tag(w, "key.", 4, w->options.key_names[k], s->keys[k]);
	}
	if (s->callers)
		put_tag(w, "callers", 7, NULL, s->callers);
	if (fp_sample_is_idle(s))
		put(w, FP_PERF_IDLE_FIELD, sizeof(FP_PERF_IDLE_FIELD) - 1);
	putc_(w, '\n');
	put_stack(w, s);
	putc_(w, '\n');
	w->dst = &w->t;
}

int
fp_perf_write_sample(struct fp_perf_writer *w, FILE *out,
		     const struct fp_sample *s)
{
	w->t.len = 0;
	fp_perf_format_sample(w, &w->t, s);
	return flush_to(w, out);
}

void
fp_perf_vformat_comment(struct fp_perf_writer *w, struct fp_text *dst,
			const char *format, va_list args)
{
	va_list again;
	char *text;
	int n;

	(void)w;
	va_copy(again, args);
	n = vsnprintf(NULL, 0, format, again);
	va_end(again);
	if (n < 0)
		n = 0;
	fp_text_reserve(dst, (size_t)n + 4);
	text = dst->buf + dst->len;
	memcpy(text, "# ", 2);
	vsnprintf(text + 2, (size_t)n + 1, format, args);
	for (int i = 0; i < n; i++) {
		if (text[2 + i] == '\n' || text[2 + i] == '\r')
			text[2 + i] = ' ';
	}
	text[2 + n] = '\n';
	dst->len += (size_t)n + 3;
}

void
fp_perf_format_comment(struct fp_perf_writer *w, struct fp_text *dst,
		       const char *format, ...)
{
	va_list args;

	va_start(args, format);
	fp_perf_vformat_comment(w, dst, format, args);
	va_end(args);
}

int
fp_perf_write_comment(struct fp_perf_writer *w, FILE *out,
		      const char *format, ...)
{
	va_list args;

	w->t.len = 0;
	va_start(args, format);
	fp_perf_vformat_comment(w, &w->t, format, args);
	va_end(args);
	return flush_to(w, out);
}
