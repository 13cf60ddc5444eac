/*
 * flame_profd — the whole segments of flame_profd's files.
 *
 * The writer (daemon/compress.c) makes each segment one zstd frame or gzip
 * member ending between two samples; a file's whole segments are its
 * prefix up to the end of its last complete frame or member (for plain
 * text, its last complete sample).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "fp/perf-file.h"
#include "fp/perf-script-read.h"
#include "util-buf.h"
#include "util-mem.h"

/*
 * Reading a file back (recovery at the next start) is a stream in bounded
 * memory, whatever the file holds: a segment's text is kept only until it
 * is complete, and no segment of ours is larger than text_max, so one
 * that grows past it (a decompression bomb, another program's file) ends
 * the scan there.
 */
struct scan {
	int fd;
	off_t pos;		/* next byte to read */
	unsigned char in[65536];
	size_t inlen, inpos;
	bool eof;
	struct fp_text text;	/* decoded, not yet handed on */
	size_t text_max;
	fp_perf_segment_fn fn;
	void *data;
};

static int
scan_fill(struct scan *s)
{
	ssize_t n;

	if (s->inpos < s->inlen || s->eof)
		return 0;
	do {
		n = pread(s->fd, s->in, sizeof(s->in), s->pos);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	s->inlen = (size_t)n;
	s->inpos = 0;
	s->pos += n;
	s->eof = n == 0;
	return 0;
}

/* the file offset of the next unread input byte */
static off_t
scan_offset(const struct scan *s)
{
	return s->pos - (off_t)(s->inlen - s->inpos);
}

/* false when the text would pass text_max */
static bool
scan_text_add(struct scan *s, const void *data, size_t n)
{
	if (n == 0)
		return true;	/* a read that gave no text yet: text may be NULL */
	if (s->text.len + n > s->text_max)
		return false;
	fp_text_reserve_first(&s->text, n, 65536);
	fp_text_put(&s->text, data, n);
	return true;
}

static void
scan_emit(struct scan *s, size_t len)
{
	s->fn(s->data, s->text.buf, len);
	if (s->text.len > len)
		memmove(s->text.buf, s->text.buf + len, s->text.len - len);
	s->text.len -= len;
}

static ssize_t
scan_zstd(struct scan *s)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t outcap = ZSTD_DStreamOutSize();
	char *out = xzalloc(outcap);
	off_t good = s->pos;
	bool started = false;
	ssize_t rc;

	if (!dctx)
		abort();
	for (;;) {
		ZSTD_inBuffer in;
		ZSTD_outBuffer o = { out, outcap, 0 };
		size_t ret;

		if ((rc = scan_fill(s)) < 0)
			goto out;
		if (s->inpos == s->inlen)
			break;	/* the end, maybe inside a frame: the cut */
		if (!started) {
			started = true;
			if (s->inlen < 4 || memcmp(s->in, "\x28\xb5\x2f\xfd", 4) != 0) {
				rc = -EBADMSG;
				goto out;
			}
		}
		in = (ZSTD_inBuffer){ s->in, s->inlen, s->inpos };
		ret = ZSTD_decompressStream(dctx, &o, &in);
		s->inpos = in.pos;
		if (ZSTD_isError(ret) || !scan_text_add(s, out, o.pos))
			break;	/* damaged or not ours: none of this frame counts */
		if (ret == 0) {
			/* a frame ended: one whole segment */
			good = scan_offset(s);
			scan_emit(s, s->text.len);
		}
	}
	rc = (ssize_t)good;
out:
	ZSTD_freeDCtx(dctx);
	free(out);
	return rc;
}

static ssize_t
scan_gzip(struct scan *s)
{
	unsigned char out[65536];
	z_stream z = { 0 };
	off_t good = s->pos;
	bool started = false;
	ssize_t rc;

	if (inflateInit2(&z, 15 + 16) != Z_OK)
		abort();
	for (;;) {
		int ret;

		if ((rc = scan_fill(s)) < 0)
			goto out;
		if (s->inpos == s->inlen)
			break;
		if (!started) {
			started = true;
			if (s->inlen < 2 || s->in[0] != 0x1f || s->in[1] != 0x8b) {
				rc = -EBADMSG;
				goto out;
			}
		}
		z.next_in = s->in + s->inpos;
		z.avail_in = (uInt)(s->inlen - s->inpos);
		z.next_out = out;
		z.avail_out = sizeof(out);
		ret = inflate(&z, Z_NO_FLUSH);
		s->inpos = s->inlen - z.avail_in;
		if ((ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) ||
		    !scan_text_add(s, out, sizeof(out) - z.avail_out))
			break;
		if (ret == Z_STREAM_END) {
			/* a member ended: one whole segment */
			good = scan_offset(s);
			scan_emit(s, s->text.len);
			if (inflateReset(&z) != Z_OK)
				break;
		}
	}
	rc = (ssize_t)good;
out:
	inflateEnd(&z);
	return rc;
}

/* plain text: whole samples end with a blank line */
static ssize_t
scan_plain(struct scan *s)
{
	off_t good = s->pos;
	ssize_t rc;

	for (;;) {
		size_t n;
		char *cut = NULL;

		if ((rc = scan_fill(s)) < 0)
			return rc;
		if (s->inpos == s->inlen)
			break;
		n = s->inlen - s->inpos;
		if (!scan_text_add(s, s->in + s->inpos, n))
			break;
		s->inpos = s->inlen;
		for (char *p = s->text.buf;
		     (p = memmem(p, s->text.len - (size_t)(p - s->text.buf), "\n\n", 2));
		     p += 2)
			cut = p + 2;
		if (cut) {
			size_t len = (size_t)(cut - s->text.buf);

			good = scan_offset(s) - (off_t)(s->text.len - len);
			scan_emit(s, len);
		}
	}
	return (ssize_t)good;
}

ssize_t
fp_perf_segments_scan(enum fp_perf_compress kind, int fd, size_t text_max,
		  fp_perf_segment_fn fn, void *data)
{
	return fp_perf_segments_scan_at(kind, fd, 0, text_max, fn, data);
}

ssize_t
fp_perf_segments_scan_at(enum fp_perf_compress kind, int fd, off_t offset,
			 size_t text_max, fp_perf_segment_fn fn, void *data)
{
	struct scan *s = xnew(struct scan);
	ssize_t rc;

	s->fd = fd;
	s->pos = offset;
	s->text_max = text_max;
	s->fn = fn;
	s->data = data;
	switch (kind) {
	case FP_PERF_ZSTD:
		rc = scan_zstd(s);
		break;
	case FP_PERF_GZIP:
		rc = scan_gzip(s);
		break;
	default:
		rc = scan_plain(s);
		break;
	}
	fp_text_free(&s->text);
	free(s);
	return rc;
}

/* The lines of text the whole segments hold: a sample the reader hands
 * over from a later line is not in them. */
static void
count_lines(void *data, const char *text, size_t len)
{
	uint64_t *lines = data;

	if (!len)
		return;		/* an empty frame: text may be NULL */
	for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text)));
	     p++)
		(*lines)++;
}

struct tally {
	uint64_t lines;
	struct fp_perf_summary *summary;
};

static int
tally_sample(void *data, const struct fp_perf_record *rec)
{
	struct tally *t = data;
	struct fp_perf_summary *s = t->summary;

	if (rec->line > t->lines)
		return 1;
	if (!s->samples || rec->time_us < s->first_us)
		s->first_us = rec->time_us;
	if (rec->time_us > s->last_us)
		s->last_us = rec->time_us;
	s->samples++;
	return 0;
}

ssize_t
fp_perf_file_summarize(const char *path, enum fp_perf_compress kind,
		       struct fp_perf_summary *summary)
{
	struct tally t = { 0, summary };
	struct fp_perf_reader *reader;
	struct stat st;
	ssize_t whole;
	int fd, rc;

	memset(summary, 0, sizeof(*summary));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	summary->size = st.st_size;
	whole = fp_perf_segments_scan(kind, fd, FP_PERF_SEGMENT_TEXT_MAX,
				      count_lines, &t.lines);
	close(fd);
	if (whole <= 0)
		return whole;
	rc = fp_perf_reader_open(path, &reader);
	if (rc < 0)
		return rc;
	/* Whatever stops the reader past the whole segments (the cut of a
	 * killed run) or inside them (a sample off the grammar) ends the
	 * count there: what came before is counted. */
	fp_perf_read(reader, tally_sample, &t);
	fp_perf_reader_destroy(reader);
	return whole;
}
