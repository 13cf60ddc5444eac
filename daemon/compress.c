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

static int
append(char **plain, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*cap ? *cap * 2 : 65536);
		char *p;

		while (ncap < *len + n + 1)
			ncap *= 2;
		p = realloc(*plain, ncap);
		if (!p)
			return -ENOMEM;
		*plain = p;
		*cap = ncap;
	}
	memcpy(*plain + *len, data, n);
	*len += n;
	(*plain)[*len] = '\0';
	return 0;
}

static ssize_t
zstd_prefix(const unsigned char *data, size_t len, char **plain,
	    size_t *plainlen)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	size_t off = 0, cap = 0, outcap = ZSTD_DStreamOutSize();
	char *tmp = malloc(outcap);
	ssize_t rc = 0;

	*plain = NULL;
	*plainlen = 0;
	if (!dctx || !tmp)
		abort();
	while (off < len) {
		size_t fsize = ZSTD_findFrameCompressedSize(data + off, len - off);
		ZSTD_inBuffer in;
		size_t ret;

		size_t frame_plain = *plainlen;

		if (ZSTD_isError(fsize))
			break;	/* an incomplete frame: the cut */
		in = (ZSTD_inBuffer){ data + off, fsize, 0 };
		ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
		do {
			ZSTD_outBuffer o = { tmp, outcap, 0 };

			ret = ZSTD_decompressStream(dctx, &o, &in);
			if (ZSTD_isError(ret)) {
				/* a damaged frame: none of it counts */
				*plainlen = frame_plain;
				if (*plain)
					(*plain)[*plainlen] = '\0';
				goto done;
			}
			if (append(plain, plainlen, &cap, tmp, o.pos) < 0)
				abort();
		} while (ret != 0);
		off += fsize;
	}
done:
	if (off == 0 && len >= 4 &&
	    !(data[0] == 0x28 && data[1] == 0xb5 && data[2] == 0x2f && data[3] == 0xfd))
		rc = -EBADMSG;
	else
		rc = (ssize_t)off;
	ZSTD_freeDCtx(dctx);
	free(tmp);
	return rc;
}

static ssize_t
gzip_prefix(const unsigned char *data, size_t len, char **plain,
	    size_t *plainlen)
{
	unsigned char tmp[65536];
	size_t off = 0, cap = 0;

	*plain = NULL;
	*plainlen = 0;
	if (len >= 2 && !(data[0] == 0x1f && data[1] == 0x8b))
		return -EBADMSG;
	while (off < len) {
		z_stream z = { 0 };
		size_t member_plain = *plainlen;
		int ret = Z_OK;

		if (inflateInit2(&z, 15 + 16) != Z_OK)
			abort();
		z.next_in = (Bytef *)(uintptr_t)(data + off);
		z.avail_in = (uInt)(len - off);
		while (ret == Z_OK) {
			z.next_out = tmp;
			z.avail_out = sizeof(tmp);
			ret = inflate(&z, Z_NO_FLUSH);
			if (ret == Z_OK || ret == Z_STREAM_END) {
				if (append(plain, plainlen, &cap, tmp,
					   sizeof(tmp) - z.avail_out) < 0)
					abort();
			}
			if (ret == Z_BUF_ERROR && z.avail_in == 0)
				break;	/* truncated */
		}
		if (ret != Z_STREAM_END) {
			/* incomplete member: drop what it gave */
			*plainlen = member_plain;
			if (*plain)
				(*plain)[*plainlen] = '\0';
			inflateEnd(&z);
			break;
		}
		off = (size_t)(z.next_in - data);
		inflateEnd(&z);
	}
	return (ssize_t)off;
}

ssize_t
fpd_compress_valid_prefix(enum fpd_compress kind, const void *data,
			  size_t len, char **plain, size_t *plainlen)
{
	size_t cap = 0;

	switch (kind) {
	case FPD_COMPRESS_ZSTD:
		return zstd_prefix(data, len, plain, plainlen);
	case FPD_COMPRESS_GZIP:
		return gzip_prefix(data, len, plain, plainlen);
	default:
		*plain = NULL;
		*plainlen = 0;
		if (append(plain, plainlen, &cap, data, len) < 0)
			abort();
		return (ssize_t)len;
	}
}
