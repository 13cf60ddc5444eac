/*
 * flame_profd — compression of output segments.
 *
 * Each segment (about a second of samples, ending between two samples) is
 * compressed as one complete zstd frame or gzip member; a file is their
 * concatenation, which zstd, gzip, Python's gzip module and zstandard all
 * read as one stream. So a file cut anywhere (SIGKILL, a full disk) is
 * valid up to its last complete segment, and that segment ends with a
 * complete sample: the next start can finish it by cutting at the last
 * frame boundary, without decompressing and compressing again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>

#include "flame_profd.h"
#include "util-mem.h"

struct fpd_compressor {
	enum fpd_compress kind;
	int level;
	ZSTD_CCtx *zstd;
	z_stream z;
	bool z_ready;
	unsigned char *buf;
	size_t cap;
};

struct fpd_compressor *
fpd_compressor_new(enum fpd_compress kind, int level)
{
	struct fpd_compressor *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->kind = kind;
	c->level = level;
	if (kind == FPD_COMPRESS_ZSTD) {
		c->zstd = ZSTD_createCCtx();
		if (!c->zstd)
			abort();
		ZSTD_CCtx_setParameter(c->zstd, ZSTD_c_compressionLevel, level);
		ZSTD_CCtx_setParameter(c->zstd, ZSTD_c_checksumFlag, 1);
	} else if (kind == FPD_COMPRESS_GZIP) {
		/* windowBits 15 + 16: a gzip header and trailer */
		if (deflateInit2(&c->z, level, Z_DEFLATED, 15 + 16, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		c->z_ready = true;
	}
	return c;
}

void
fpd_compressor_destroy(struct fpd_compressor *c)
{
	if (!c)
		return;
	ZSTD_freeCCtx(c->zstd);
	if (c->z_ready)
		deflateEnd(&c->z);
	free(c->buf);
	free(c);
}

const char *
fpd_compress_suffix(enum fpd_compress kind)
{
	switch (kind) {
	case FPD_COMPRESS_GZIP: return ".gz";
	case FPD_COMPRESS_ZSTD: return ".zst";
	default: return "";
	}
}

static int
reserve(struct fpd_compressor *c, size_t need)
{
	unsigned char *p;

	if (need <= c->cap)
		return 0;
	p = realloc(c->buf, need);
	if (!p)
		return -ENOMEM;
	c->buf = p;
	c->cap = need;
	return 0;
}

int
fpd_compress_segment(struct fpd_compressor *c, const void *data, size_t len,
		     const void **out, size_t *outlen)
{
	if (c->kind == FPD_COMPRESS_NONE) {
		*out = data;
		*outlen = len;
		return 0;
	}
	if (c->kind == FPD_COMPRESS_ZSTD) {
		size_t bound = ZSTD_compressBound(len), n;

		if (reserve(c, bound) < 0)
			return -ENOMEM;
		n = ZSTD_compress2(c->zstd, c->buf, bound, data, len);
		if (ZSTD_isError(n))
			return -EIO;
		*out = c->buf;
		*outlen = n;
		return 0;
	}
	{
		uLong bound = deflateBound(&c->z, (uLong)len) + 64;

		if (reserve(c, bound) < 0)
			return -ENOMEM;
		if (deflateReset(&c->z) != Z_OK)
			return -EIO;
		c->z.next_in = (Bytef *)(uintptr_t)data;
		c->z.avail_in = (uInt)len;
		c->z.next_out = c->buf;
		c->z.avail_out = (uInt)bound;
		if (deflate(&c->z, Z_FINISH) != Z_STREAM_END)
			return -EIO;
		*out = c->buf;
		*outlen = bound - c->z.avail_out;
		return 0;
	}
}

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
	char *text;
	size_t textlen, textcap, text_max;
	fpd_segment_fn fn;
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
	if (s->textlen + n > s->text_max)
		return false;
	if (s->textlen + n > s->textcap) {
		size_t cap = s->textcap ? s->textcap : 65536;

		while (cap < s->textlen + n)
			cap *= 2;
		s->text = xrealloc(s->text, cap);
		s->textcap = cap;
	}
	memcpy(s->text + s->textlen, data, n);
	s->textlen += n;
	return true;
}

static void
scan_emit(struct scan *s, size_t len)
{
	s->fn(s->data, s->text, len);
	memmove(s->text, s->text + len, s->textlen - len);
	s->textlen -= len;
}

static ssize_t
scan_zstd(struct scan *s)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t outcap = ZSTD_DStreamOutSize();
	char *out = xzalloc(outcap);
	off_t good = 0;
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
			scan_emit(s, s->textlen);
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
	off_t good = 0;
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
			scan_emit(s, s->textlen);
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
	off_t good = 0;
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
		for (char *p = s->text; (p = memmem(p, s->textlen - (size_t)(p - s->text),
						   "\n\n", 2)); p += 2)
			cut = p + 2;
		if (cut) {
			size_t len = (size_t)(cut - s->text);

			good = scan_offset(s) - (off_t)(s->textlen - len);
			scan_emit(s, len);
		}
	}
	return (ssize_t)good;
}

ssize_t
fpd_compress_scan(enum fpd_compress kind, int fd, size_t text_max,
		  fpd_segment_fn fn, void *data)
{
	struct scan *s = xnew(struct scan);
	ssize_t rc;

	s->fd = fd;
	s->text_max = text_max;
	s->fn = fn;
	s->data = data;
	switch (kind) {
	case FPD_COMPRESS_ZSTD:
		rc = scan_zstd(s);
		break;
	case FPD_COMPRESS_GZIP:
		rc = scan_gzip(s);
		break;
	default:
		rc = scan_plain(s);
		break;
	}
	free(s->text);
	free(s);
	return rc;
}
