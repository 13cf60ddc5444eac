/*
 * flame_profd — streaming perf-script reader.
 *
 * The grammar is checked field by field: a renderer that silently skipped
 * a malformed line would draw a flame graph of something else (a file
 * from stock perf, a file cut short by a full disk). The error names the
 * file and line so the user can look.
 *
 * Text is decompressed into one growing line buffer; a sample spans
 * several lines, so the strings of the sample being read are copied into
 * a per-sample arena before the buffer is refilled.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "frame-names-private.h"
#include "fp/perf-script-read.h"
#include "util-mem.h"

#define RAW_SIZE (256 * 1024)
#define TEXT_SIZE (1024 * 1024)
/* A frame line is short and an event line a few hundred bytes: a
 * "line" bigger than this is not perf-script text. */
#define MAX_LINE (16 * 1024 * 1024)
/* flame_profd writes at most --backtrace-depth frames, 10000 at most:
 * a sample with more is not its file. Without the bound a compressed
 * file of one endless sample (a few MB of zstd, 80 GB of text) would
 * be held whole. */
#define MAX_FRAMES 10000
/* The names of one sample: 10000 frames of the longest escaped atoms
 * and file names the daemon writes stay far below this. Together with
 * MAX_LINE it bounds what the reader holds for any file. */
#define MAX_SAMPLE_BYTES (64 * 1024 * 1024)

enum compression {
	COMP_PLAIN,
	COMP_GZIP,
	COMP_ZSTD,
};

struct fp_perf_reader {
	char *path;
	int fd;
	enum compression comp;
	uint64_t size;
	uint64_t consumed;

	unsigned char *raw;
	size_t raw_pos, raw_len;
	bool raw_eof;
	z_stream z;
	bool z_init;
	bool z_end;		/* the last gzip member ended */
	ZSTD_DStream *zs;
	size_t zs_hint;		/* 0 when a zstd frame just ended */

	char *buf;
	size_t start, end, cap;
	bool eof;
	uint64_t lineno;

	char err[1024];

	/* the sample being read */
	struct fp_perf_record rec;
	char *arena;
	size_t arena_len, arena_cap;
	size_t *offs;		/* name, file offset pairs */
	size_t noffs, offs_cap;
	const char **ptrs;
	size_t ptrs_cap;
	size_t regname_off, initcall_off;
	bool has_regname, has_initcall;
	/* label, callers and keys: arena offsets, SIZE_MAX when absent */
	size_t label_off, callers_off;
	size_t *key_offs;	/* name, value pairs */
	size_t nkey_offs, key_offs_cap;
	const char **key_ptrs;

	bool erlang_names;	/* hand names over in the Erlang form */
	struct fp_text conv;	/* a name being rewritten in that form */
};

static const char *const status_names[] = {
	"running", "runnable", "waiting", "garbage_collecting",
	"suspended", "exiting", "free", "unknown",
};

static int
bad(struct fp_perf_reader *r, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static int
bad(struct fp_perf_reader *r, const char *format, ...)
{
	char what[512];
	va_list args;

	va_start(args, format);
	vsnprintf(what, sizeof(what), format, args);
	va_end(args);
	snprintf(r->err, sizeof(r->err), "%s:%llu: %s%s", r->path,
		 (unsigned long long)r->lineno,
		 r->lineno <= 1 ? "not a flame_profd perf-script file: " : "",
		 what);
	return -EBADMSG;
}

static int
io_error(struct fp_perf_reader *r, int err)
{
	snprintf(r->err, sizeof(r->err), "%s: read error after line %llu: %s",
		 r->path, (unsigned long long)r->lineno, strerror(err));
	return -err;
}

static ssize_t
read_some(int fd, void *dst, size_t n)
{
	ssize_t got;

	do {
		got = read(fd, dst, n);
	} while (got < 0 && errno == EINTR);
	return got;
}

static int
fill_raw(struct fp_perf_reader *r)
{
	ssize_t n;

	if (r->raw_pos < r->raw_len || r->raw_eof)
		return 0;
	n = read_some(r->fd, r->raw, RAW_SIZE);
	if (n < 0)
		return io_error(r, errno);
	r->raw_pos = 0;
	r->raw_len = (size_t)n;
	r->consumed += (uint64_t)n;
	if (n == 0)
		r->raw_eof = true;
	return 0;
}

int
fp_perf_reader_open(const char *path, struct fp_perf_reader **out)
{
	struct fp_perf_reader *r;
	struct stat st;
	int fd, rc;

	*out = NULL;
	if (strcmp(path, "-") == 0) {
		fd = STDIN_FILENO;
	} else {
		/* O_NONBLOCK: opening a FIFO without a writer would wait
		 * for one forever; it is refused below instead */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			return -errno;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto close_fd;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto close_fd;
	}
	if (fd != STDIN_FILENO) {
		if (!S_ISREG(st.st_mode)) {
			rc = -EINVAL;
			goto close_fd;
		}
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
			rc = -errno;
			goto close_fd;
		}
	}

	r = xnew(struct fp_perf_reader);
	r->path = xstrdup(path);
	r->fd = fd;
	r->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	r->raw = xzalloc(RAW_SIZE);
	r->cap = TEXT_SIZE;
	r->buf = xzalloc(r->cap);
	r->arena_cap = 4096;
	r->arena = xzalloc(r->arena_cap);

	/* Sniff the compression from the first bytes. */
	rc = fill_raw(r);
	if (rc < 0) {
		fp_perf_reader_destroy(r);
		return rc;
	}
	if (r->raw_len >= 2 && r->raw[0] == 0x1f && r->raw[1] == 0x8b) {
		r->comp = COMP_GZIP;
		/* 15 + 16: gzip wrapper only */
		if (inflateInit2(&r->z, 15 + 16) != Z_OK)
			abort();
		r->z_init = true;
	} else if (r->raw_len >= 4 && r->raw[0] == 0x28 && r->raw[1] == 0xb5 &&
		   r->raw[2] == 0x2f && r->raw[3] == 0xfd) {
		r->comp = COMP_ZSTD;
		r->zs = ZSTD_createDStream();
		if (!r->zs)
			abort();
		ZSTD_initDStream(r->zs);
		r->zs_hint = 1;
	} else {
		r->comp = COMP_PLAIN;
	}
	*out = r;
	return 0;

close_fd:
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}

void
fp_perf_reader_destroy(struct fp_perf_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0 && r->fd != STDIN_FILENO)
		close(r->fd);
	if (r->z_init)
		inflateEnd(&r->z);
	ZSTD_freeDStream(r->zs);
	free(r->raw);
	free(r->buf);
	free(r->arena);
	free(r->offs);
	free(r->ptrs);
	free(r->key_offs);
	free(r->key_ptrs);
	free(r->conv.buf);
	free(r->path);
	free(r);
}

void
fp_perf_reader_set_erlang_names(struct fp_perf_reader *r, bool erlang_names)
{
	r->erlang_names = erlang_names;
}

const char *
fp_perf_reader_error(const struct fp_perf_reader *r)
{
	return r->err;
}

const char *
fp_perf_reader_path(const struct fp_perf_reader *r)
{
	return r->path;
}

void
fp_perf_reader_progress(const struct fp_perf_reader *r, uint64_t *done,
			uint64_t *total)
{
	*done = r->consumed;
	*total = r->size;
}

/* Decompress (or copy) more text behind r->end. Returns bytes added, 0 at
 * the end of the stream, or a negative errno. */
static int
fill_gzip(struct fp_perf_reader *r, size_t *added)
{
	int rc, zr;

	while (*added == 0 && !r->z_end) {
		rc = fill_raw(r);
		if (rc < 0)
			return rc;
		/* inflate() may hold output back for a full buffer: call it
		 * even without new input before calling the stream cut. */
		r->z.next_in = r->raw + r->raw_pos;
		r->z.avail_in = (uInt)(r->raw_len - r->raw_pos);
		r->z.next_out = (Bytef *)r->buf + r->end;
		r->z.avail_out = (uInt)(r->cap - r->end);
		zr = inflate(&r->z, Z_NO_FLUSH);
		r->raw_pos = r->raw_len - r->z.avail_in;
		*added = r->cap - r->end - r->z.avail_out;
		r->end += *added;
		if (zr == Z_STREAM_END) {
			/* gzip allows concatenated members (cat a.gz b.gz) */
			rc = fill_raw(r);
			if (rc < 0)
				return rc;
			if (r->raw_pos == r->raw_len && r->raw_eof)
				r->z_end = true;
			else
				inflateReset(&r->z);
		} else if (zr == Z_BUF_ERROR || zr == Z_OK) {
			if (*added == 0 && r->raw_pos == r->raw_len &&
			    r->raw_eof)
				return bad(r, "gzip stream truncated");
		} else {
			return bad(r, "corrupt gzip data (%s)",
				   r->z.msg ? r->z.msg : "inflate failed");
		}
	}
	return 0;
}

static int
fill_zstd(struct fp_perf_reader *r, size_t *added)
{
	int rc;

	while (*added == 0) {
		ZSTD_inBuffer in;
		ZSTD_outBuffer out;
		size_t zr;
		bool at_eof;

		rc = fill_raw(r);
		if (rc < 0)
			return rc;
		at_eof = r->raw_pos == r->raw_len && r->raw_eof;
		if (at_eof && r->zs_hint == 0)
			return 0;
		in = (ZSTD_inBuffer){ r->raw, r->raw_len, r->raw_pos };
		out = (ZSTD_outBuffer){ r->buf, r->cap, r->end };
		zr = ZSTD_decompressStream(r->zs, &out, &in);
		if (ZSTD_isError(zr))
			return bad(r, "corrupt zstd data (%s)",
				   ZSTD_getErrorName(zr));
		r->zs_hint = zr;
		r->raw_pos = in.pos;
		*added = out.pos - r->end;
		r->end = out.pos;
		if (*added == 0 && at_eof && zr != 0)
			return bad(r, "zstd stream truncated");
	}
	return 0;
}

static int
fill_text(struct fp_perf_reader *r)
{
	size_t added = 0;
	int rc = 0;

	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end == r->cap) {
		if (r->cap >= MAX_LINE)
			return bad(r, "line %llu longer than %d bytes",
				   (unsigned long long)r->lineno + 1, MAX_LINE);
		r->cap *= 2;
		r->buf = xrealloc(r->buf, r->cap);
	}

	switch (r->comp) {
	case COMP_PLAIN:
		if (r->raw_pos < r->raw_len) {
			added = r->raw_len - r->raw_pos;
			if (added > r->cap - r->end)
				added = r->cap - r->end;
			memcpy(r->buf + r->end, r->raw + r->raw_pos, added);
			r->raw_pos += added;
		} else {
			ssize_t n = read_some(r->fd, r->buf + r->end,
					      r->cap - r->end);

			if (n < 0)
				return io_error(r, errno);
			added = (size_t)n;
			r->consumed += added;
		}
		r->end += added;
		break;
	case COMP_GZIP:
		rc = fill_gzip(r, &added);
		break;
	case COMP_ZSTD:
		rc = fill_zstd(r, &added);
		break;
	}
	if (rc < 0)
		return rc;
	if (added == 0)
		r->eof = true;
	return 0;
}

/* Next line without its LF: 1, 0 at the end of the file, or an error. */
static int
next_line(struct fp_perf_reader *r, const char **line, size_t *len)
{
	size_t scanned = 0;
	int rc;

	for (;;) {
		char *nl = memchr(r->buf + r->start + scanned, '\n',
				  r->end - r->start - scanned);

		if (nl) {
			*line = r->buf + r->start;
			*len = (size_t)(nl - *line);
			r->start += *len + 1;
			r->lineno++;
			return 1;
		}
		if (r->eof) {
			if (r->start == r->end)
				return 0;
			r->lineno++;
			return bad(r, "no newline at the end of the file "
				      "(truncated?)");
		}
		scanned = r->end - r->start;
		rc = fill_text(r);
		if (rc < 0)
			return rc;
	}
}

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
	size_t at = r->arena_len;

	/* parse_frame() checks MAX_SAMPLE_BYTES first; an event line is
	 * below MAX_LINE */
	if (r->arena_len + n + 1 > r->arena_cap) {
		while (r->arena_len + n + 1 > r->arena_cap)
			r->arena_cap *= 2;
		r->arena = xrealloc(r->arena, r->arena_cap);
	}
	memcpy(r->arena + at, s, n);
	r->arena[at + n] = '\0';
	r->arena_len += n + 1;
	return at;
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
 * unescaped (\xHH) into the arena. */
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
		if (ch == '\0')
			return -1;
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
		return bad(r, "bad label");
	while (eat(c, "\tkey.")) {
		const char *name = c->p;

		while (c->p < c->end && *c->p > 0x20 && *c->p != ':' &&
		       *c->p != 0x7f)
			c->p++;
		if (c->p == name || !eat(c, ": "))
			return bad(r, "bad key field (expected key.NAME: TEXT)");
		if (r->nkey_offs + 2 > r->key_offs_cap) {
			r->key_offs_cap = r->key_offs_cap ? r->key_offs_cap * 2 : 8;
			r->key_offs = xrealloc(r->key_offs,
					       r->key_offs_cap * sizeof(*r->key_offs));
		}
		r->key_offs[r->nkey_offs++] = arena_put(r, name,
						       (size_t)(c->p - 2 - name));
		if (parse_tag_text(r, c, &r->key_offs[r->nkey_offs++]) < 0)
			return bad(r, "bad key value");
	}
	if (eat(c, "\tcallers: ") && parse_tag_text(r, c, &r->callers_off) < 0)
		return bad(r, "bad callers");
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
		return bad(r, "expected an event line "
			      "\"STATUS PID [000] TIME: cpu-clock:...\"");
	for (int i = 0; i < (int)(sizeof(status_names) / sizeof(status_names[0])); i++) {
		if (strlen(status_names[i]) == (size_t)(sp - line) &&
		    memcmp(status_names[i], line, (size_t)(sp - line)) == 0) {
			rec->status = fp_status_from_name(status_names[i]);
			found = true;
		}
	}
	if (!found)
		return bad(r, "unknown process status \"%.*s\"",
			   (int)((sp - line) > 40 ? 40 : (sp - line)), line);
	c.p = sp + 1;
	if (!eat(&c, "0.") || !parse_u64(&c, UINT32_MAX, &num) ||
	    !eat(&c, ".") || !parse_u64(&c, UINT32_MAX, &serial))
		return bad(r, "bad pid (expected 0.N.N)");
	rec->pid = (struct fp_pid){ (uint32_t)num, (uint32_t)serial };
	if (!eat(&c, " [000] "))
		return bad(r, "expected \" [000] \" after the pid");
	if (!parse_u64(&c, UINT64_MAX / 1000000 - 1, &sec) || !eat(&c, "."))
		return bad(r, "bad time (expected SECONDS.MICROSECONDS)");
	frac = c.p;
	if (!parse_u64(&c, 999999, &usec) || c.p - frac != 6)
		return bad(r, "bad time (expected six digits of microseconds)");
	rec->time_us = sec * 1000000 + usec;
	if (!eat(&c, ": cpu-clock:"))
		return bad(r, "expected \": cpu-clock:\" after the time");
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		const char *name = fp_metric_name((enum fp_metric)m);

		if (!eat(&c, "\tmetric_erlang_") || !eat(&c, name) ||
		    !eat(&c, ": "))
			return bad(r, "expected metric_erlang_%s", name);
		if (!parse_i64(&c, &rec->value[m]) || !eat(&c, ", ") ||
		    !parse_i64(&c, &rec->delta[m]))
			return bad(r, "bad value of metric_erlang_%s", name);
	}
	r->has_regname = false;
	r->has_initcall = false;
	if (eat(&c, "\tregistered_name: ")) {
		const char *start = c.p;

		c.p = fp_name_scan_process(c.p, c.end);
		if (!c.p)
			return bad(r, "bad registered_name (expected an atom or "
				      "an alias)");
		r->regname_off = arena_put_process(r, start, c.p);
		r->has_regname = true;
	}
	if (eat(&c, "\tinitial_call: ")) {
		const char *start = c.p;
		struct fp_name_mfa mfa;

		if (!parse_mfa(&c, &mfa))
			return bad(r, "bad initial_call (expected module:function/arity "
				      "or Module.function/arity)");
		r->initcall_off = arena_put_mfa(r, start, c.p, &mfa, c.p);
		r->has_initcall = true;
	}
	if (parse_tags(r, &c) < 0)
		return -EBADMSG;
	if (c.p != c.end)
		return bad(r, "unexpected text after the metrics");
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
		return bad(r, "expected a frame line or a blank line");
	for (int i = 0; i < 16; i++, c.p++) {
		if (c.p >= c.end ||
		    !(is_digit(*c.p) || (*c.p >= 'a' && *c.p <= 'f')))
			return bad(r, "bad frame address (expected 16 lowercase "
				      "hex digits)");
	}
	if (!eat(&c, " "))
		return bad(r, "expected a space after the frame address");
	name = c.p;
	if (!parse_mfa(&c, &mfa))
		return bad(r, "bad frame name (expected module:function/arity "
			      "or Module.function/arity)");
	mfa_end = c.p;
	if (eat(&c, ":") && !parse_u64(&c, UINT32_MAX, &lineno))
		return bad(r, "bad line number in frame name");
	name_end = c.p;
	if (!eat(&c, " ("))
		return bad(r, "expected \" (FILE)\" after the frame name");
	file = c.p;
	while (c.p < c.end && *c.p != ')') {
		unsigned char ch = (unsigned char)*c.p;

		if (ch == '\\') {
			if (c.end - c.p < 4 || c.p[1] != 'x' ||
			    !is_upper_hex(c.p[2]) || !is_upper_hex(c.p[3]))
				return bad(r, "bad escape in frame file");
			c.p += 4;
			continue;
		}
		if (ch <= 0x20 || ch == 0x7f || ch == '(')
			return bad(r, "unescaped byte 0x%02x in frame file", ch);
		c.p++;
	}
	if (c.p == file || c.p + 1 != c.end)
		return bad(r, "bad frame file (expected \"(FILE)\" at the end "
			      "of the line)");

	if (r->noffs / 2 >= MAX_FRAMES)
		return bad(r, "more than %d frames in the sample of line %llu "
			      "(flame_profd writes at most %d)", MAX_FRAMES,
			   (unsigned long long)r->rec.line, MAX_FRAMES);
	if (r->arena_len + (size_t)(c.p - name) + 2 > MAX_SAMPLE_BYTES)
		return bad(r, "the sample of line %llu holds more than %d MiB "
			      "of names", (unsigned long long)r->rec.line,
			   MAX_SAMPLE_BYTES / (1024 * 1024));
	if (r->noffs + 2 > r->offs_cap) {
		r->offs_cap = r->offs_cap ? r->offs_cap * 2 : 128;
		r->offs = xrealloc(r->offs, r->offs_cap * sizeof(*r->offs));
	}
	r->offs[r->noffs++] = arena_put_mfa(r, name, name_end, &mfa, mfa_end);
	r->offs[r->noffs++] = arena_put(r, file, (size_t)(c.p - file));
	return 0;
}

static int
parse_comment(struct fp_perf_reader *r, const char *line, size_t len)
{
	if (len > 1 && line[1] != ' ')
		return bad(r, "a comment is \"#\" or \"# TEXT\"");
	if (memchr(line, '\0', len))
		return bad(r, "NUL byte in a comment");
	return 0;
}

static int
emit(struct fp_perf_reader *r, fp_perf_record_fn fn, void *data)
{
	struct fp_perf_record *rec = &r->rec;
	size_t nframes = r->noffs / 2;

	/* never NULL, also for a sample without frames: callers may do
	 * pointer arithmetic on frames and files */
	if (!r->ptrs || r->noffs > r->ptrs_cap) {
		r->ptrs_cap = r->noffs ? r->noffs : 2;
		r->ptrs = xrealloc(r->ptrs, r->ptrs_cap * sizeof(*r->ptrs));
	}
	for (size_t i = 0; i < nframes; i++) {
		r->ptrs[i] = r->arena + r->offs[2 * i];
		r->ptrs[nframes + i] = r->arena + r->offs[2 * i + 1];
	}
	rec->frames = r->ptrs;
	rec->files = r->ptrs + nframes;
	rec->nframes = (uint32_t)nframes;
	rec->registered_name = r->has_regname ? r->arena + r->regname_off : NULL;
	rec->initial_call = r->has_initcall ? r->arena + r->initcall_off : NULL;
	rec->label = r->label_off != SIZE_MAX ? r->arena + r->label_off : NULL;
	rec->callers = r->callers_off != SIZE_MAX ? r->arena + r->callers_off : NULL;
	rec->nkeys = (uint32_t)(r->nkey_offs / 2);
	r->key_ptrs = xrealloc(r->key_ptrs, (r->nkey_offs + 1) * sizeof(*r->key_ptrs));
	for (size_t i = 0; i < rec->nkeys; i++) {
		r->key_ptrs[i] = r->arena + r->key_offs[2 * i];
		r->key_ptrs[rec->nkeys + i] = r->arena + r->key_offs[2 * i + 1];
	}
	rec->key_names = r->key_ptrs;
	rec->key_values = r->key_ptrs + rec->nkeys;
	return fn(data, rec);
}

int
fp_perf_read(struct fp_perf_reader *r, fp_perf_record_fn fn, void *data)
{
	bool in_sample = false;
	const char *line = NULL;
	size_t len = 0;
	int rc;

	for (;;) {
		rc = next_line(r, &line, &len);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		if (len > 0 && line[len - 1] == '\r')
			return bad(r, "CR LF line ending");

		if (in_sample) {
			if (len == 0) {
				in_sample = false;
				rc = emit(r, fn, data);
				if (rc != 0)
					return rc;
				continue;
			}
			if (line[0] == '#')
				return bad(r, "comment inside a sample "
					      "(samples end with a blank line)");
			rc = parse_frame(r, line, len);
			if (rc < 0)
				return rc;
			continue;
		}

		if (len == 0)
			return bad(r, "blank line outside a sample");
		if (line[0] == '#') {
			rc = parse_comment(r, line, len);
			if (rc < 0)
				return rc;
			continue;
		}
		r->arena_len = 0;
		r->noffs = 0;
		rc = parse_event(r, line, len);
		if (rc < 0)
			return rc;
		r->rec.line = r->lineno;
		in_sample = true;
	}
	if (in_sample) {
		r->lineno++;
		return bad(r, "the file ends inside a sample (truncated?)");
	}
	return 0;
}
