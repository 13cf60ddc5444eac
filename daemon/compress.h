/*
 * flame_profd — compression of output segments (compress.c): one
 * segment of a file is one zstd frame or gzip member (fp/perf-file.h
 * reads them back).
 */
#pragma once

#include <stddef.h>

#include "fp/perf-file.h"

enum fpd_compress {
	FPD_COMPRESS_NONE = FP_PERF_PLAIN,
	FPD_COMPRESS_GZIP = FP_PERF_GZIP,
	FPD_COMPRESS_ZSTD = FP_PERF_ZSTD,
};

struct fpd_compressor;

/** A compressor of @kind at @level; the caller frees it with
 * fpd_compressor_destroy(). */
struct fpd_compressor *
fpd_compressor_new(enum fpd_compress kind, int level);

/** NULL is a no-op. */
void
fpd_compressor_destroy(struct fpd_compressor *c);

/**
 * Compress @len bytes into one self-contained frame (zstd) or member
 * (gzip); with FPD_COMPRESS_NONE the data is passed through.
 * @return 0 with *out and *outlen valid until the next call, or -EIO.
 */
int
fpd_compress_segment(struct fpd_compressor *c, const void *data, size_t len,
		     const void **out, size_t *outlen);
