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

#include "compress.h"
#include "util-buf.h"
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
	struct fpd_compressor *c = xnew(struct fpd_compressor);

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

/* Room for @need bytes of output: the first segment's bound, doubled
 * when a later one needs more. */
static void
reserve(struct fpd_compressor *c, size_t need)
{
	fp_grow((void **)&c->buf, &c->cap, need, 1, need);
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

		reserve(c, bound);
		n = ZSTD_compress2(c->zstd, c->buf, bound, data, len);
		if (ZSTD_isError(n))
			return -EIO;
		*out = c->buf;
		*outlen = n;
		return 0;
	}
	{
		uLong bound = deflateBound(&c->z, (uLong)len) + 64;

		reserve(c, bound);
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
