/*
 * flame_profd — the files flame_profd writes, as docs/FORMAT.md ("Files",
 * "Segments", "Leftovers") describes them: their names, and what the
 * whole segments of a file hold.
 *
 * A finished file is NODE.YYYYMMDDTHHMMSS.mmmZ.perf[.gz|.zst], NODE the
 * node name made file-name safe and the time the UTC time the file was
 * opened; it is written as the hidden .NAME.partial. A file is the
 * concatenation of segments, each a run of whole samples and, when
 * compressed, one complete zstd frame or gzip member: a file cut anywhere
 * is good up to its last whole segment.
 *
 * The daemon names, finishes, recovers and deletes its files with these
 * functions; flame_prof finds the files and their times with them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum fp_perf_compress {
	FP_PERF_PLAIN = 0,
	FP_PERF_GZIP,
	FP_PERF_ZSTD,
};

/* Room for a finished name and its NUL: node names of up to 289 bytes
 * (Erlang's are at most 255). */
#define FP_PERF_NAME_MAX 320
/* Room for ".NAME.partial" and its NUL. */
#define FP_PERF_PARTIAL_MAX (FP_PERF_NAME_MAX + 9)
/* The writer ends a segment once its text passes this ... */
#define FP_PERF_SEGMENT_MAX (4u << 20)
/* ... so no segment of flame_profd's holds more text than this: reading
 * stops at one that does (a decompression bomb, another program's file). */
#define FP_PERF_SEGMENT_TEXT_MAX (4 * FP_PERF_SEGMENT_MAX)

/**
 * @node made file-name safe: every byte outside [A-Za-z0-9._@-] becomes
 * '_', and so does a leading '.'.
 * @return a string the caller frees.
 */
char *
fp_perf_node_name(const char *node);

/** ".gz", ".zst" or "" for @kind. A static string. */
const char *
fp_perf_compress_suffix(enum fp_perf_compress kind);

/**
 * Whether @name ends in .perf, .perf.gz or .perf.zst (and is longer),
 * and if so (and @kind is not NULL) its compression in *@kind.
 */
bool
fp_perf_name_kind(const char *name, enum fp_perf_compress *kind);

/**
 * Write the finished name of a file of @node_s opened at @epoch_ms into
 * @buf.
 * @return 0, or -ENAMETOOLONG if it does not fit in @size.
 */
int
fp_perf_name_format(char *buf, size_t size, const char *node_s,
		    uint64_t epoch_ms, enum fp_perf_compress kind);

/* A finished name taken apart. */
struct fp_perf_name {
	size_t node_len;		/* NODE is the first node_len bytes */
	uint64_t epoch_ms;		/* the time in the name */
	enum fp_perf_compress kind;
};

/**
 * Take the finished name @name (no directory) apart: the whole name must
 * be NODE.YYYYMMDDTHHMMSS.mmmZ.perf[.gz|.zst] with a valid UTC time.
 * @return whether it is one; @parsed (may be NULL) is set only then.
 */
bool
fp_perf_name_parse(const char *name, struct fp_perf_name *parsed);

/** Whether @name is a finished name of the node @node_s. */
bool
fp_perf_name_is_of(const char *name, const char *node_s);

/**
 * ".NAME.partial", the name @name is written under, into @buf.
 * @return 0, or -ENAMETOOLONG if it does not fit in @size.
 */
int
fp_perf_partial_format(char *buf, size_t size, const char *name);

/**
 * The finished name in the partial name @partial followed by @tail (""
 * for the partial name itself, or what is appended to a partial name set
 * aside) into @name (at least FP_PERF_NAME_MAX bytes).
 * @return whether @partial is ".NAME.partial" + @tail with NAME a finished
 *         name of @node_s.
 */
bool
fp_perf_partial_parse(const char *partial, const char *tail,
		      const char *node_s, char *name);

/** Called with the text of each whole segment, in file order. */
typedef void (*fp_perf_segment_fn)(void *data, const char *text, size_t len);

/**
 * Read a file of @kind from @fd (from offset 0, with pread(2)) as a
 * stream, in memory bounded by @text_max: @fn gets the text of each whole
 * segment (zstd frame, gzip member; for plain text, each run of whole
 * samples). The scan ends at the first segment that is incomplete,
 * damaged, or whose text would pass @text_max.
 *
 * @return the file offset after the last whole segment (0: none), or
 *         -EBADMSG if the file does not start as @kind, or a negative
 *         errno of pread(2).
 */
ssize_t
fp_perf_segments_scan(enum fp_perf_compress kind, int fd, size_t text_max,
		      fp_perf_segment_fn fn, void *data);

/**
 * The same from @offset, the end of a whole segment (or 0), to the end of
 * the file as it is now: what a reader following a file being written
 * calls again with the offset it returned, each segment handed over
 * once.
 *
 * @return the file offset after the last whole segment (@offset: none
 *         past it), or -EBADMSG if the bytes at @offset do not start a
 *         segment of @kind, or a negative errno of pread(2).
 */
ssize_t
fp_perf_segments_scan_at(enum fp_perf_compress kind, int fd, off_t offset,
			 size_t text_max, fp_perf_segment_fn fn, void *data);

/* What the whole segments of a file hold. */
struct fp_perf_summary {
	uint64_t samples;
	uint64_t first_us, last_us;	/* sample times, when samples > 0 */
	off_t size;			/* the file's size */
};

/**
 * Count the samples in the whole segments of the file at @path (of
 * @kind: a partial file's name says it, not its bytes), each checked
 * against the grammar by the perf-script reader (fp/perf-script-read.h);
 * the count ends at the first sample that does not follow it. The file is
 * read as a stream, segments of at most FP_PERF_SEGMENT_TEXT_MAX.
 *
 * @return the bytes the whole segments take (0: none is whole), with
 *         @summary set; or a negative errno: -EINVAL if @path is not a
 *         regular file, -ELOOP if it is a link (never followed), -EBADMSG
 *         if it does not start as @kind, or that of open(2)/read(2).
 */
ssize_t
fp_perf_file_summarize(const char *path, enum fp_perf_compress kind,
		       struct fp_perf_summary *summary);
