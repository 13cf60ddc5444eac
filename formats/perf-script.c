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

struct fp_perf_writer {
	struct fp_perf_options options;
	char *buf;
	size_t len, cap;
};

struct fp_perf_writer *
fp_perf_writer_new(const struct fp_perf_options *options)
{
	struct fp_perf_writer *w = xnew(struct fp_perf_writer);

	if (options)
		w->options = *options;
	w->cap = 16384;
	w->buf = xzalloc(w->cap);
	return w;
}

void
fp_perf_writer_destroy(struct fp_perf_writer *w)
{
	if (!w)
		return;
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

int
fp_perf_write_sample(struct fp_perf_writer *w, FILE *out,
		     const struct fp_sample *s)
{
	char ts[64];
	int n;

	w->len = 0;
	puts_(w, fp_status_name(s->status));
	putc_(w, ' ');
	puts_(w, "0.");
	put_u64(w, s->pid.num);
	putc_(w, '.');
	put_u64(w, s->pid.serial);
	n = snprintf(ts, sizeof(ts), " [000] %llu.%06llu: cpu-clock:",
		     (unsigned long long)(s->time_us / 1000000),
		     (unsigned long long)(s->time_us % 1000000));
	put(w, ts, (size_t)n);

	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		puts_(w, "\tmetric_erlang_");
		puts_(w, fp_metric_name((enum fp_metric)m));
		put(w, ": ", 2);
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

	for (uint32_t i = 0; i < s->nframes; i++)
		put_frame(w, &s->frames[i]);
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
