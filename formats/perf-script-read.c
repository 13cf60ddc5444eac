/*
 * flame_profd — streaming perf-script reader: the grammar.
 *
 * The grammar is checked field by field: a renderer that silently skipped
 * a malformed line would draw a flame graph of something else (a file
 * from stock perf, a file cut short by a full disk). The error names the
 * file and line so the user can look.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp/perf-script.h"
#include "perf-script-read-private.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"

static const char *const status_names[] = {
	"running", "runnable", "waiting", "garbage_collecting",
	"suspended", "exiting", "free", "unknown", "cpu", "traced",
};

/* ---- field parsers over [p, end) ---- */

struct cursor {
	const char *p, *end;
};

static bool
eat(struct cursor *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
		return false;
	c->p += n;
	return true;
}

static bool
is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool
parse_u64(struct cursor *c, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = c->p;

	while (c->p < c->end && is_digit(*c->p)) {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
		c->p++;
	}
	*out = v;
	return c->p > start;
}

static bool
parse_i64(struct cursor *c, int64_t *out)
{
	bool neg = eat(c, "-");
	uint64_t v;

	if (!parse_u64(c, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX,
		       &v))
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}


static bool
is_upper_hex(char ch)
{
	return is_digit(ch) || (ch >= 'A' && ch <= 'F');
}

static bool
parse_atom(struct cursor *c)
{
	const char *end = fp_name_scan_atom(c->p, c->end);

	if (!end)
		return false;
	c->p = end;
	return true;
}

bool
fp_perf_is_written_atom(const char *text)
{
	struct cursor c = { text, text + strlen(text) };

	return parse_atom(&c) && c.p == c.end;
}

char *
fp_perf_convert_name(const char *text, bool erlang_names)
{
	const char *end = text + strlen(text);
	struct fp_text t = { 0 };

	if (fp_name_scan_process(text, end) != end)
		return NULL;
	fp_name_convert_process(&t, text, end, !erlang_names);
	fp_text_putc(&t, '\0');
	return t.buf;
}

static bool
parse_mfa(struct cursor *c, struct fp_name_mfa *mfa)
{
	const char *end = fp_name_scan_mfa(c->p, c->end, mfa);

	if (!end)
		return false;
	c->p = end;
	return true;
}

static size_t
arena_put(struct fp_perf_reader *r, const char *s, size_t n)
{
	/* parse_frame() checks MAX_SAMPLE_BYTES first; an event line is
	 * below MAX_LINE */
	return fp_text_put_str(&r->arena, s, n);
}

/* An MFA (with what follows it up to @stop: ":LINE") into the arena, in
 * the form the reader hands over. */
static size_t
arena_put_mfa(struct fp_perf_reader *r, const char *start, const char *stop,
	      const struct fp_name_mfa *mfa, const char *mfa_end)
{
	if (!fp_name_mfa_other_form(mfa, !r->erlang_names))
		return arena_put(r, start, (size_t)(stop - start));
	r->conv.len = 0;
	fp_name_convert_mfa(&r->conv, mfa, !r->erlang_names);
	fp_text_put(&r->conv, mfa_end, (size_t)(stop - mfa_end));
	return arena_put(r, r->conv.buf, r->conv.len);
}

static size_t
arena_put_process(struct fp_perf_reader *r, const char *start,
		  const char *stop)
{
	/* the common case: a bare atom, the same in both forms */
	if (*start != '\'' && !(*start >= 'A' && *start <= 'Z'))
		return arena_put(r, start, (size_t)(stop - start));
	r->conv.len = 0;
	fp_name_convert_process(&r->conv, start, stop, !r->erlang_names);
	return arena_put(r, r->conv.buf, r->conv.len);
}

static unsigned
hex_value(char ch)
{
	return ch >= 'A' ? (unsigned)(ch - 'A' + 10) : (unsigned)(ch - '0');
}

/* TEXT of a label, key or callers field, up to the next tab or the end,
 * unescaped (\xHH) into the arena; \x00 as FP_NUL_CARRIER. */
static int
parse_tag_text(struct fp_perf_reader *r, struct cursor *c, size_t *off)
{
	const char *start = c->p;

	r->conv.len = 0;
	while (c->p < c->end && *c->p != '\t') {
		unsigned char ch = (unsigned char)*c->p;

		if (ch == '\\') {
			if (c->end - c->p < 4 || c->p[1] != 'x' ||
			    !is_upper_hex(c->p[2]) || !is_upper_hex(c->p[3]))
				return -1;
			ch = (unsigned char)(hex_value(c->p[2]) << 4 | hex_value(c->p[3]));
			c->p += 4;
		} else if (ch < 0x20 || ch == 0x7f) {
			return -1;
		} else {
			c->p++;
		}
		/* a NUL stays in the C string as the model carries it */
		if (ch == '\0')
			fp_text_put(&r->conv, FP_NUL_CARRIER, 2);
		else
			fp_text_put(&r->conv, (const char *)&ch, 1);
	}
	if (c->p == start)
		return -1;
	*off = arena_put(r, r->conv.buf, r->conv.len);
	return 0;
}

/* "\tlabel: ", "\tkey.NAME: ", "\tcallers: " fields, in that order. */
static int
parse_tags(struct fp_perf_reader *r, struct cursor *c)
{
	r->label_off = r->callers_off = SIZE_MAX;
	r->nkey_offs = 0;
	if (eat(c, "\tlabel: ") && parse_tag_text(r, c, &r->label_off) < 0)
		return fp_perf_reader_bad(r, "bad label");
	while (eat(c, "\tkey.")) {
		const char *name = c->p;

		while (c->p < c->end && *c->p > 0x20 && *c->p != ':' &&
		       *c->p != 0x7f)
			c->p++;
		if (c->p == name || !eat(c, ": "))
			return fp_perf_reader_bad(r, "bad key field (expected key.NAME: TEXT)");
		FP_GROW(r->key_offs, r->key_offs_cap, r->nkey_offs + 2);
		r->key_offs[r->nkey_offs++] = arena_put(r, name,
						       (size_t)(c->p - 2 - name));
		if (parse_tag_text(r, c, &r->key_offs[r->nkey_offs++]) < 0)
			return fp_perf_reader_bad(r, "bad key value");
	}
	if (eat(c, "\tcallers: ") && parse_tag_text(r, c, &r->callers_off) < 0)
		return fp_perf_reader_bad(r, "bad callers");
	return 0;
}

static int
parse_event(struct fp_perf_reader *r, const char *line, size_t len)
{
	struct cursor c = { line, line + len };
	struct fp_perf_record *rec = &r->rec;
	const char *sp = memchr(line, ' ', len);
	uint64_t num, serial, sec, usec;
	const char *frac;
	bool found = false;

	if (!sp)
		return fp_perf_reader_bad(r, "expected an event line "
					     "\"STATUS PID [000] TIME: cpu-clock:...\"");
	for (int i = 0; i < (int)(sizeof(status_names) / sizeof(status_names[0])); i++) {
		if (strlen(status_names[i]) == (size_t)(sp - line) &&
		    memcmp(status_names[i], line, (size_t)(sp - line)) == 0) {
			rec->status = fp_status_from_name(status_names[i]);
			found = true;
		}
	}
	if (!found)
		return fp_perf_reader_bad(r, "unknown process status \"%.*s\"",
					  (int)((sp - line) > 40 ? 40 : (sp - line)), line);
	c.p = sp + 1;
	/* N/S for <0.N.S>; files of earlier versions have 0.N.S */
	if (eat(&c, "0.")) {
		if (!parse_u64(&c, UINT32_MAX, &num) || !eat(&c, ".") ||
		    !parse_u64(&c, UINT32_MAX, &serial))
			return fp_perf_reader_bad(r, "bad pid (expected N/S or 0.N.S)");
	} else if (!parse_u64(&c, UINT32_MAX, &num) || !eat(&c, "/") ||
		   !parse_u64(&c, UINT32_MAX, &serial)) {
		return fp_perf_reader_bad(r, "bad pid (expected N/S or 0.N.S)");
	}
	rec->pid = (struct fp_pid){ (uint32_t)num, (uint32_t)serial };
	if (!eat(&c, " [000] "))
		return fp_perf_reader_bad(r, "expected \" [000] \" after the pid");
	if (!parse_u64(&c, UINT64_MAX / 1000000 - 1, &sec) || !eat(&c, "."))
		return fp_perf_reader_bad(r, "bad time (expected SECONDS.MICROSECONDS)");
	frac = c.p;
	if (!parse_u64(&c, 999999, &usec) || c.p - frac != 6)
		return fp_perf_reader_bad(r, "bad time (expected six digits of microseconds)");
	rec->time_us = sec * 1000000 + usec;
	if (!eat(&c, ": cpu-clock:"))
		return fp_perf_reader_bad(r, "expected \": cpu-clock:\" after the time");
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		const char *name = fp_metric_name((enum fp_metric)m);

		if (!eat(&c, "\tmetric_erlang_") || !eat(&c, name) ||
		    !eat(&c, ": "))
			return fp_perf_reader_bad(r, "expected metric_erlang_%s", name);
		if (!parse_i64(&c, &rec->value[m]) || !eat(&c, ", ") ||
		    !parse_i64(&c, &rec->delta[m]))
			return fp_perf_reader_bad(r, "bad value of metric_erlang_%s", name);
	}
	r->has_regname = false;
	r->has_initcall = false;
	if (eat(&c, "\tregistered_name: ")) {
		const char *start = c.p;

		c.p = fp_name_scan_process(c.p, c.end);
		if (!c.p)
			return fp_perf_reader_bad(r, "bad registered_name (expected an atom or "
						     "an alias)");
		r->regname_off = arena_put_process(r, start, c.p);
		r->has_regname = true;
	}
	if (eat(&c, "\tinitial_call: ")) {
		const char *start = c.p;
		struct fp_name_mfa mfa;

		if (!parse_mfa(&c, &mfa))
			return fp_perf_reader_bad(r, "bad initial_call (expected module:function/arity "
						     "or Module.function/arity)");
		r->initcall_off = arena_put_mfa(r, start, c.p, &mfa, c.p);
		r->has_initcall = true;
	}
	if (parse_tags(r, &c) < 0)
		return -EBADMSG;
	rec->idle = eat(&c, FP_PERF_IDLE_FIELD);
	if (c.p != c.end)
		return fp_perf_reader_bad(r, "unexpected text after the metrics");
	return 0;
}

static int
parse_frame(struct fp_perf_reader *r, const char *line, size_t len)
{
	struct cursor c = { line, line + len };
	const char *name, *name_end, *mfa_end, *file;
	struct fp_name_mfa mfa;
	uint64_t lineno;

	if (!eat(&c, "\t"))
		return fp_perf_reader_bad(r, "expected a frame line or a blank line");
	for (int i = 0; i < 16; i++, c.p++) {
		if (c.p >= c.end ||
		    !(is_digit(*c.p) || (*c.p >= 'a' && *c.p <= 'f')))
			return fp_perf_reader_bad(r, "bad frame address (expected 16 lowercase "
						     "hex digits)");
	}
	if (!eat(&c, " "))
		return fp_perf_reader_bad(r, "expected a space after the frame address");
	name = c.p;
	if (!parse_mfa(&c, &mfa))
		return fp_perf_reader_bad(r, "bad frame name (expected module:function/arity "
					     "or Module.function/arity)");
	mfa_end = c.p;
	if (eat(&c, ":") && !parse_u64(&c, UINT32_MAX, &lineno))
		return fp_perf_reader_bad(r, "bad line number in frame name");
	name_end = c.p;
	if (!eat(&c, " ("))
		return fp_perf_reader_bad(r, "expected \" (FILE)\" after the frame name");
	file = c.p;
	while (c.p < c.end && *c.p != ')') {
		unsigned char ch = (unsigned char)*c.p;

		if (ch == '\\') {
			if (c.end - c.p < 4 || c.p[1] != 'x' ||
			    !is_upper_hex(c.p[2]) || !is_upper_hex(c.p[3]))
				return fp_perf_reader_bad(r, "bad escape in frame file");
			c.p += 4;
			continue;
		}
		if (ch <= 0x20 || ch == 0x7f || ch == '(')
			return fp_perf_reader_bad(r, "unescaped byte 0x%02x in frame file", ch);
		c.p++;
	}
	if (c.p == file || c.p + 1 != c.end)
		return fp_perf_reader_bad(r, "bad frame file (expected \"(FILE)\" at the end "
					     "of the line)");

	if (r->noffs / 2 >= MAX_FRAMES)
		return fp_perf_reader_bad(r, "more than %d frames in the sample of line %llu "
					     "(flame_profd writes at most %d)", MAX_FRAMES,
					  (unsigned long long)r->rec.line, MAX_FRAMES);
	if (r->arena.len + (size_t)(c.p - name) + 2 > MAX_SAMPLE_BYTES)
		return fp_perf_reader_bad(r, "the sample of line %llu holds more than %d MiB "
					     "of names", (unsigned long long)r->rec.line,
					  MAX_SAMPLE_BYTES / (1024 * 1024));
	FP_GROW(r->offs, r->offs_cap, r->noffs + 2);
	r->offs[r->noffs++] = arena_put_mfa(r, name, name_end, &mfa, mfa_end);
	r->offs[r->noffs++] = arena_put(r, file, (size_t)(c.p - file));
	return 0;
}

/* What the header says of the node and the rate; other comments, and
 * values that do not parse, are passed over (readers ignore comment
 * text they do not know). */
static void
header_comment(struct fp_perf_reader *r, const char *line, size_t len)
{
	static const char node[] = "# node: ", options[] = "# options: ";
	const char *p, *end = line + len;

	if (!r->node && len > sizeof(node) - 1 &&
	    memcmp(line, node, sizeof(node) - 1) == 0) {
		size_t n = len - (sizeof(node) - 1);

		r->node = xzalloc(n + 1);
		memcpy(r->node, line + sizeof(node) - 1, n);
		return;
	}
	if (len < sizeof(options) - 1 ||
	    memcmp(line, options, sizeof(options) - 1) != 0)
		return;
	for (p = line + sizeof(options) - 1; p < end; p++) {
		char num[32], *stop;
		size_t n = 0;
		double v;

		if ((p[-1] != ' ') || end - p < 5 || memcmp(p, "rate=", 5) != 0)
			continue;
		for (p += 5; p < end && *p != ' ' && n < sizeof(num) - 1; p++)
			num[n++] = *p;
		num[n] = '\0';
		v = strtod(num, &stop);
		if (n && !*stop && v > 0 && v <= 1e6)
			r->rate = v;
		return;
	}
}

static int
parse_comment(struct fp_perf_reader *r, const char *line, size_t len)
{
	if (len > 1 && line[1] != ' ')
		return fp_perf_reader_bad(r, "a comment is \"#\" or \"# TEXT\"");
	if (memchr(line, '\0', len))
		return fp_perf_reader_bad(r, "NUL byte in a comment");
	if (!r->header_done)
		header_comment(r, line, len);
	if (r->comment_fn)
		r->comment_fn(r->comment_data, len > 1 ? line + 2 : line + len,
			      len > 1 ? len - 2 : 0);
	return 0;
}

static int
emit(struct fp_perf_reader *r, fp_perf_record_fn fn, void *data)
{
	struct fp_perf_record *rec = &r->rec;
	size_t nframes = r->noffs / 2;

	/* never NULL, also for a sample without frames: callers may do
	 * pointer arithmetic on frames and files */
	FP_GROW(r->ptrs, r->ptrs_cap, r->noffs + 1);
	for (size_t i = 0; i < nframes; i++) {
		r->ptrs[i] = r->arena.buf + r->offs[2 * i];
		r->ptrs[nframes + i] = r->arena.buf + r->offs[2 * i + 1];
	}
	rec->frames = r->ptrs;
	rec->files = r->ptrs + nframes;
	rec->nframes = (uint32_t)nframes;
	rec->registered_name = r->has_regname ? r->arena.buf + r->regname_off : NULL;
	rec->initial_call = r->has_initcall ? r->arena.buf + r->initcall_off : NULL;
	rec->label = r->label_off != SIZE_MAX ? r->arena.buf + r->label_off : NULL;
	rec->callers = r->callers_off != SIZE_MAX ? r->arena.buf + r->callers_off : NULL;
	rec->nkeys = (uint32_t)(r->nkey_offs / 2);
	FP_GROW(r->key_ptrs, r->key_ptrs_cap, r->nkey_offs + 1);
	for (size_t i = 0; i < rec->nkeys; i++) {
		r->key_ptrs[i] = r->arena.buf + r->key_offs[2 * i];
		r->key_ptrs[rec->nkeys + i] = r->arena.buf + r->key_offs[2 * i + 1];
	}
	rec->key_names = r->key_ptrs;
	rec->key_values = r->key_ptrs + rec->nkeys;
	rec->node = r->node;
	return fn(data, rec);
}

void
fp_perf_reader_set_comment_fn(struct fp_perf_reader *r, fp_perf_comment_fn fn,
			      void *data)
{
	r->comment_fn = fn;
	r->comment_data = data;
}

const char *
fp_perf_reader_node(const struct fp_perf_reader *r)
{
	return r->node;
}

double
fp_perf_reader_rate(const struct fp_perf_reader *r)
{
	return r->rate;
}

int
fp_perf_read(struct fp_perf_reader *r, fp_perf_record_fn fn, void *data)
{
	bool in_sample = false;
	const char *line = NULL;
	size_t len = 0;
	int rc;

	for (;;) {
		rc = fp_perf_reader_next_line(r, &line, &len);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		if (len > 0 && line[len - 1] == '\r')
			return fp_perf_reader_bad(r, "CR LF line ending");

		if (in_sample) {
			if (len == 0) {
				in_sample = false;
				rc = emit(r, fn, data);
				if (rc != 0)
					return rc;
				continue;
			}
			if (line[0] == '#')
				return fp_perf_reader_bad(r, "comment inside a sample "
							     "(samples end with a blank line)");
			rc = parse_frame(r, line, len);
			if (rc < 0)
				return rc;
			continue;
		}

		if (len == 0)
			return fp_perf_reader_bad(r, "blank line outside a sample");
		if (line[0] == '#') {
			rc = parse_comment(r, line, len);
			if (rc < 0)
				return rc;
			continue;
		}
		r->arena.len = 0;
		r->noffs = 0;
		r->header_done = true;
		rc = parse_event(r, line, len);
		if (rc < 0)
			return rc;
		r->rec.line = r->lineno;
		in_sample = true;
	}
	if (in_sample) {
		r->lineno++;
		return fp_perf_reader_bad(r, "the file ends inside a sample (truncated?)");
	}
	return 0;
}
