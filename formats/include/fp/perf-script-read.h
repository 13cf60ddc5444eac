/*
 * flame_profd — streaming reader of flame_profd perf-script files
 * (docs/FORMAT.md is the grammar).
 *
 * The reader checks every line against the grammar and hands each sample
 * to a callback. Names stay in their written form (quoted and \xHH-escaped
 * atoms, escaped file names): that form is already one unambiguous frame
 * for every renderer, and it is what the user sees in Flamescope. Names
 * of Elixir modules are handed over in one form whatever form the file
 * has (the Elixir form unless asked otherwise), so that files of either
 * form merge frame by frame.
 *
 * Plain text, gzip (zlib) and zstd input are read as streams; the
 * compression is recognised by its magic bytes, not by the file name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/term.h"

struct fp_perf_reader;

/**
 * One sample as written. Every pointer is owned by the reader and valid
 * only during the callback that receives the record.
 */
struct fp_perf_record {
	enum fp_status status;
	struct fp_pid pid;
	uint64_t time_us;			/* Unix epoch, microseconds */
	int64_t value[FP_METRIC_COUNT];
	int64_t delta[FP_METRIC_COUNT];
	const char *registered_name;		/* written atom or alias, or NULL */
	const char *initial_call;		/* written MFA, or NULL */
	/* label and key values: unescaped, a NUL held as FP_NUL_CARRIER
	 * (util-escape.h); show them with fp_text_put_escaped() */
	const char *label;			/* unescaped, or NULL */
	const char *callers;			/* "<0.1.2>,...", or NULL */
	const char *const *key_names;		/* "key.NAME: TEXT" fields: */
	const char *const *key_values;		/* NAME and TEXT (unescaped) */
	uint32_t nkeys;
	/* the node the file's header names (# node:), as written, or NULL:
	 * fp_perf_reader_node() */
	const char *node;
	/* the event line ends in FP_PERF_IDLE_FIELD (fp/perf-script.h):
	 * the writer found the process idle; false in files written
	 * before the field existed */
	bool idle;
	const char *const *frames;		/* MFA[:LINE], leaf first; never
						 * NULL, also with no frames */
	const char *const *files;		/* FILE field of each frame */
	uint32_t nframes;
	uint64_t line;				/* line of the event line */
};

/**
 * Called once per sample, in file order.
 *
 * @return 0 to go on, a positive value to stop reading (fp_perf_read()
 *         then returns that value), or a negative errno to fail.
 */
typedef int (*fp_perf_record_fn)(void *data, const struct fp_perf_record *rec);

/**
 * Open @path ("-" is standard input) for reading.
 *
 * @param[out] reader  on success, a reader the caller owns; free it with
 *                     fp_perf_reader_destroy()
 * @return 0, or the negative errno of open(2)/read(2) (-ENOENT, -EACCES,
 *         -EISDIR, ...); -EINVAL if @path is not a regular file (a FIFO,
 *         a device, a socket: standard input is read as "-").
 *         fp_perf_reader_error() is not available then: the caller
 *         names the file.
 */
int
fp_perf_reader_open(const char *path, struct fp_perf_reader **reader);

/**
 * As fp_perf_reader_open(), on the descriptor @fd the caller opened (the
 * reader owns it from now on, also on failure: it is closed then), for
 * a caller that opens its files its own way. @name stands for the file
 * in fp_perf_reader_error().
 */
int
fp_perf_reader_open_fd(int fd, const char *name, struct fp_perf_reader **reader);

/**
 * A reader of perf-script text in memory: @len bytes of @text (copied),
 * such as a whole segment of a file being written
 * (fp_perf_segments_scan_at()). @name stands for the file in
 * fp_perf_reader_error().
 *
 * @param[out] reader  a reader the caller owns; free it with
 *                     fp_perf_reader_destroy()
 * @return 0.
 */
int
fp_perf_reader_open_text(const char *name, const char *text, size_t len,
			 struct fp_perf_reader **reader);

/**
 * Hand names over in the Erlang form ('Elixir.Foo':bar/1) instead of the
 * Elixir form (Foo.bar/1), the default. A file written in the Elixir form
 * does not have the index of an anonymous function: its Erlang form reads
 * '-NAME/ARITY-fun-?-'. Set before fp_perf_read().
 */
void
fp_perf_reader_set_erlang_names(struct fp_perf_reader *reader,
				bool erlang_names);

/** Closes the file. NULL is a no-op. */
void
fp_perf_reader_destroy(struct fp_perf_reader *reader);

/**
 * Read every sample to the end of the file, calling @fn for each.
 *
 * @return 0 at the end of the file;
 *         a positive value returned by @fn;
 *         -EBADMSG if the file does not follow the grammar, is truncated,
 *         its compressed stream is corrupt, or it passes the bounds of
 *         what flame_profd writes (a line of 16 MiB, a sample of 10000
 *         frames or 64 MiB of names), which bound the reader's memory
 *         for any file;
 *         -EIO (or read(2)'s errno) on a read error;
 *         a negative errno returned by @fn.
 *         On -EBADMSG and read errors fp_perf_reader_error() says where.
 */
int
fp_perf_read(struct fp_perf_reader *reader, fp_perf_record_fn fn, void *data);

/**
 * Called for each comment line of the file (docs/FORMAT.md "Comments"),
 * header and notes alike, with its text after "# " (@len bytes, no LF;
 * valid during the call only).
 */
typedef void (*fp_perf_comment_fn)(void *data, const char *text, size_t len);

/** Hand every comment to @fn (NULL: none, the default). Set before
 * fp_perf_read(). */
void
fp_perf_reader_set_comment_fn(struct fp_perf_reader *reader,
			      fp_perf_comment_fn fn, void *data);

/**
 * The node the header names ("# node: NODE", docs/FORMAT.md "Comments"),
 * as written, or NULL (no such header line, or none read yet). Known
 * once fp_perf_read() has passed the header. Owned by the reader.
 */
const char *
fp_perf_reader_node(const struct fp_perf_reader *reader);

/**
 * The sampling rate the header's options line gives (rate=HZ, samples
 * per second per process), or 0 when it gives none. Known once
 * fp_perf_read() has passed the header.
 */
double
fp_perf_reader_rate(const struct fp_perf_reader *reader);

/**
 * "PATH:LINE: what is wrong" for the last error, or "" if there was
 * none. Owned by the reader.
 */
const char *
fp_perf_reader_error(const struct fp_perf_reader *reader);

/** The path the reader was opened with. Owned by the reader. */
const char *
fp_perf_reader_path(const struct fp_perf_reader *reader);

/**
 * Bytes of the (possibly compressed) file consumed so far and its size
 * (0 when unknown, e.g. a pipe). For progress reports.
 */
void
fp_perf_reader_progress(const struct fp_perf_reader *reader, uint64_t *done,
			uint64_t *total);

/**
 * Whether @text is one atom in the written form: bare, or quoted with
 * the escapes of docs/FORMAT.md.
 */
bool
fp_perf_is_written_atom(const char *text);

/**
 * A registered name as written in a file (an atom in the written form,
 * or an alias: Foo.Bar for 'Elixir.Foo.Bar') in the form the reader hands
 * it over with fp_perf_reader_set_erlang_names(@erlang_names).
 *
 * @return a string the caller frees, or NULL if @text is not a written
 *         registered name.
 */
char *
fp_perf_convert_name(const char *text, bool erlang_names);
