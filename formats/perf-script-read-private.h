/*
 * flame_profd — the perf-script reader's state, shared by its input side
 * (perf-script-read-input.c: files, decompression, lines) and its
 * grammar (perf-script-read.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zlib.h>
#include <zstd.h>

#include "frame-names-private.h"
#include "fp/perf-script-read.h"

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
	struct fp_text arena;	/* the sample's names, NUL-terminated each */
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
	size_t key_ptrs_cap;

	bool erlang_names;	/* hand names over in the Erlang form */

	/* the header comments (docs/FORMAT.md "Comments") */
	bool header_done;	/* a sample was read: no header past it */
	char *node;		/* "# node: NODE", or NULL */
	double rate;		/* rate=HZ of "# options: ", or 0 */
	fp_perf_comment_fn comment_fn;
	void *comment_data;
	struct fp_text conv;	/* a name being rewritten in that form */
};

/* Record "PATH:LINE: what" as the reader's error; returns -EBADMSG. */
int
fp_perf_reader_bad(struct fp_perf_reader *r, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/* The next line without its LF (valid until the next call): 1, 0 at the
 * end of the file, or a negative errno (the error recorded). */
int
fp_perf_reader_next_line(struct fp_perf_reader *r, const char **line,
			 size_t *len);
