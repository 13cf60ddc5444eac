/*
 * flame_profd — perf-script text writer.
 *
 * Stock Flamescope reads these lines with three regular expressions: the
 * event line must hold " SECONDS.MICROS: EVENT:", the text before the
 * first digit becomes the top frame (the process status), and frame lines
 * are "\t<hex> NAME (FILE)" with NAME cut at the first '+' and split at
 * "->". The escaping below keeps every Erlang name whole under those rules
 * and under the folded-stack tools (no ';').
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "atom-private.h"
#include "util-hash.h"
#include "fp/perf-script.h"
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
	char *buf;
	size_t len, cap;
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
	w->cap = 16384;
	w->buf = xzalloc(w->cap);
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
	free(w->buf);
	free(w);
}

static inline void
reserve(struct fp_perf_writer *w, size_t more)
{
	if (w->len + more <= w->cap)
		return;
	while (w->len + more > w->cap)
		w->cap *= 2;
	w->buf = xrealloc(w->buf, w->cap);
}

static inline void
put(struct fp_perf_writer *w, const char *s, size_t n)
{
	reserve(w, n);
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static inline void
puts_(struct fp_perf_writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static inline void
putc_(struct fp_perf_writer *w, char c)
{
	reserve(w, 1);
	w->buf[w->len++] = c;
}

static void
put_u64(struct fp_perf_writer *w, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(w, tmp + sizeof(tmp) - n, n);
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

static void
put_hex_escape(struct fp_perf_writer *w, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

	put(w, e, 4);
}

static const char *const reserved_words[] = {
	"after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl",
	"bsr", "bxor", "case", "catch", "cond", "div", "else", "end", "fun",
	"if", "let", "maybe", "not", "of", "or", "orelse", "receive", "rem",
	"try", "when", "xor",
};

bool
fp_atom_is_reserved(const char *word, size_t len)
{
	/* Every atom of every frame comes through here: reserved words are
	 * 2 to 7 letters long, so most atoms leave at once. */
	if (len < 2 || len > 7)
		return false;
	for (size_t i = 0; i < sizeof(reserved_words) / sizeof(reserved_words[0]); i++) {
		if (reserved_words[i][0] == word[0] &&
		    strlen(reserved_words[i]) == len &&
		    memcmp(reserved_words[i], word, len) == 0)
			return true;
	}
	return false;
}

/* Also gives the length of a bare atom (the common case) in *len. */
static bool
atom_needs_quotes(const char *a, size_t *len)
{
	const char *p;

	if (!(a[0] >= 'a' && a[0] <= 'z'))
		return true;
	for (p = a; *p; p++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '@'))
			return true;
	}
	*len = (size_t)(p - a);
	return fp_atom_is_reserved(a, *len);
}

static bool
needs_escape(const unsigned char *p, const unsigned char *start)
{
	unsigned char c = *p;

	if (c < 0x20 || c == 0x7f || c == ' ' || c == ';' || c == '+' ||
	    c == '\'' || c == '\\')
		return true;
	/* "->" splits a frame in Flamescope (inlined-frame notation) */
	return c == '>' && p > start && p[-1] == '-';
}

static void
put_atom(struct fp_perf_writer *w, const char *atom)
{
	const unsigned char *start = (const unsigned char *)atom;
	size_t len;

	if (!atom_needs_quotes(atom, &len)) {
		put(w, atom, len);
		return;
	}
	putc_(w, '\'');
	for (const unsigned char *p = start; *p; p++) {
		if (needs_escape(p, start))
			put_hex_escape(w, *p);
		else
			putc_(w, (char)*p);
	}
	putc_(w, '\'');
}

size_t
fp_perf_format_atom(char *dst, size_t size, const char *atom)
{
	struct fp_perf_writer w = { .cap = 256 };
	size_t n;

	w.buf = xzalloc(w.cap);
	put_atom(&w, atom);
	n = w.len;
	if (size) {
		size_t c = n < size - 1 ? n : size - 1;

		memcpy(dst, w.buf, c);
		dst[c] = '\0';
	}
	free(w.buf);
	return n;
}

static void
put_mfa(struct fp_perf_writer *w, const struct fp_frame *f)
{
	put_atom(w, f->module);
	putc_(w, ':');
	put_atom(w, f->function);
	putc_(w, '/');
	put_u64(w, f->arity);
}

/* FILE part: whatever the node says, minus what would end the field or
 * be taken for something else. */
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
		if (*p <= 0x20 || *p == 0x7f || *p == '(' || *p == ')' || *p == '\\')
			break;
	}
	if (!*p) {
		put(w, file, (size_t)(p - (const unsigned char *)file));
		return;
	}
	for (p = (const unsigned char *)file; *p; p++) {
		unsigned char c = *p;

		/* A space could make a frame line look like an event line
		 * (" 1.5: x:") to Flamescope, which tries every line. */
		if (c <= 0x20 || c == 0x7f || c == '(' || c == ')' || c == '\\')
			put_hex_escape(w, c);
		else
			putc_(w, (char)c);
	}
}

static void
put_frame(struct fp_perf_writer *w, const struct fp_frame *f)
{
	static const char hex[] = "0123456789abcdef";
	size_t addr_at, name_at;
	uint64_t h;

	putc_(w, '\t');
	addr_at = w->len;
	put(w, "0000000000000000 ", 17);
	name_at = w->len;
	put_mfa(w, f);
	if (w->options.lines && f->line) {
		putc_(w, ':');
		put_u64(w, f->line);
	}
	/* A stable pseudo-address per name: tools that key on addresses
	 * see one function as one symbol. */
	h = fnv1a_update(FNV1A_BASIS, w->buf + name_at, w->len - name_at);
	for (int i = 15; i >= 0; i--, h >>= 4)
		w->buf[addr_at + (size_t)i] = hex[h & 15];
	put(w, " (", 2);
	put_file(w, f->file);
	put(w, ")\n", 2);
}

static int
flush_to(struct fp_perf_writer *w, FILE *out)
{
	size_t n = w->len;

	w->len = 0;
	if (fwrite(w->buf, 1, n, out) != n || ferror(out))
		return errno ? -errno : -EIO;
	return 0;
}

/* The frame lines of a sample, from the caches when the decoder has seen
 * the stack or the frames before. */
static void
put_stack(struct fp_perf_writer *w, const struct fp_sample *s)
{
	size_t start = w->len, len;
	const char *text;

	if (s->stack_id && text_cache_find(&w->stacks, s->stack_id, &text, &len)) {
		put(w, text, len);
		return;
	}
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct fp_frame *f = &s->frames[i];
		size_t at = w->len;

		if (f->id && text_cache_find(&w->frames, f->id, &text, &len)) {
			put(w, text, len);
			continue;
		}
		put_frame(w, f);
		if (f->id)
			text_cache_add(&w->frames, f->id, w->buf + at, w->len - at);
	}
	if (s->stack_id)
		text_cache_add(&w->stacks, s->stack_id, w->buf + start,
			       w->len - start);
}

int
fp_perf_write_sample(struct fp_perf_writer *w, FILE *out,
		     const struct fp_sample *s)
{
	uint64_t usec = s->time_us % 1000000;
	char frac[6];

	w->len = 0;
	puts_(w, fp_status_name(s->status));
	put(w, " 0.", 3);
	put_u64(w, s->pid.num);
	putc_(w, '.');
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
		put_atom(w, s->registered_name);
	}
	if (s->has_initial_call) {
		puts_(w, "\tinitial_call: ");
		put_mfa(w, &s->initial_call);
	}
	putc_(w, '\n');
	put_stack(w, s);
	putc_(w, '\n');

	return flush_to(w, out);
}

int
fp_perf_write_comment(struct fp_perf_writer *w, FILE *out,
		      const char *format, ...)
{
	va_list args;
	int n;

	va_start(args, format);
	n = vsnprintf(NULL, 0, format, args);
	va_end(args);
	if (n < 0)
		return -EINVAL;

	w->len = 0;
	reserve(w, (size_t)n + 4);
	memcpy(w->buf, "# ", 2);
	va_start(args, format);
	vsnprintf(w->buf + 2, (size_t)n + 1, format, args);
	va_end(args);
	for (int i = 0; i < n; i++) {
		if (w->buf[2 + i] == '\n' || w->buf[2 + i] == '\r')
			w->buf[2 + i] = ' ';
	}
	w->len = (size_t)n + 2;
	w->buf[w->len++] = '\n';
	return flush_to(w, out);
}
