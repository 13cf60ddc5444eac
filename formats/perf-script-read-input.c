/*
 * flame_profd — the perf-script reader's input: the file (or standard
 * input), its compression recognised by magic bytes, and lines.
 *
 * Text is decompressed into one growing line buffer; a sample spans
 * several lines, so perf-script-read.c copies the strings of the sample
 * being read into a per-sample arena before the buffer is refilled.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf-script-read-private.h"
#include "util-buf.h"
#include "util-mem.h"

int
fp_perf_reader_bad(struct fp_perf_reader *r, const char *format, ...)
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
	int fd;

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
	return fp_perf_reader_open_fd(fd, path, out);
}

int
fp_perf_reader_open_fd(int fd, const char *name, struct fp_perf_reader **out)
{
	struct fp_perf_reader *r;
	struct stat st;
	int rc;

	*out = NULL;
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
	r->path = xstrdup(name);
	r->fd = fd;
	r->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	r->raw = xzalloc(RAW_SIZE);
	r->cap = TEXT_SIZE;
	r->buf = xzalloc(r->cap);
	fp_text_reserve_first(&r->arena, 1, 4096);

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

int
fp_perf_reader_open_text(const char *name, const char *text, size_t len,
			 struct fp_perf_reader **out)
{
	struct fp_perf_reader *r = xnew(struct fp_perf_reader);

	/* the text is the whole input: read from raw, never from a file */
	r->path = xstrdup(name);
	r->fd = -1;
	r->comp = COMP_PLAIN;
	r->size = len;
	r->consumed = len;
	r->raw = xzalloc(len ? len : 1);
	if (len)
		memcpy(r->raw, text, len);
	r->raw_len = len;
	r->raw_eof = true;
	r->cap = TEXT_SIZE;
	r->buf = xzalloc(r->cap);
	fp_text_reserve_first(&r->arena, 1, 4096);
	*out = r;
	return 0;
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
	fp_text_free(&r->arena);
	free(r->offs);
	free(r->ptrs);
	free(r->key_offs);
	free(r->key_ptrs);
	fp_text_free(&r->conv);
	free(r->node);
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
				return fp_perf_reader_bad(r, "gzip stream truncated");
		} else {
			return fp_perf_reader_bad(r, "corrupt gzip data (%s)",
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
			return fp_perf_reader_bad(r, "corrupt zstd data (%s)",
				   ZSTD_getErrorName(zr));
		r->zs_hint = zr;
		r->raw_pos = in.pos;
		*added = out.pos - r->end;
		r->end = out.pos;
		if (*added == 0 && at_eof && zr != 0)
			return fp_perf_reader_bad(r, "zstd stream truncated");
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
			return fp_perf_reader_bad(r, "line %llu longer than %d bytes",
				   (unsigned long long)r->lineno + 1, MAX_LINE);
		FP_GROW(r->buf, r->cap, r->cap + 1);
	}

	switch (r->comp) {
	case COMP_PLAIN:
		if (r->raw_pos < r->raw_len) {
			added = r->raw_len - r->raw_pos;
			if (added > r->cap - r->end)
				added = r->cap - r->end;
			memcpy(r->buf + r->end, r->raw + r->raw_pos, added);
			r->raw_pos += added;
		} else if (r->fd < 0) {
			added = 0;	/* text in memory: its end */
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

int
fp_perf_reader_next_line(struct fp_perf_reader *r, const char **line, size_t *len)
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
			return fp_perf_reader_bad(r, "no newline at the end of the file "
				      "(truncated?)");
		}
		scanned = r->end - r->start;
		rc = fill_text(r);
		if (rc < 0)
			return rc;
	}
}
