/*
 * flame_profd — the names of the code a --perf sample was taken in: JIT
 * code from the node's perf map (/tmp/perf-OSPID.map, written under
 * +JPperf true), C code from the ELF symbols of the files mapped there.
 */
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include "fp/term.h"

/* Bytes of a perf map read at most in a run; what is past them is not
 * read (a warning says so). */
#define FPD_PERF_MAP_MAX (64u << 20)

/* The longest perf map line taken (a name of two quoted atoms of 255
 * characters, each byte escaped, fits); longer ones are skipped. */
#define FPD_PERF_MAP_LINE_MAX 4096

/**
 * Open @path, a process's perf map, for reading if it can be the map of a
 * process of user @uid: not a symbolic link, a regular file of one
 * link, owned by @uid or root, not writable by others (Linux perf's own
 * reading of /tmp/perf-PID.map refuses one its user does not own). Never
 * blocks: a FIFO is opened non-blocking and refused.
 *
 * @param[out] st  the file's status (when it was opened)
 * @return an open descriptor the caller closes, or -ENOENT (no such
 *         file), -ELOOP (a symbolic link), -EINVAL (not a regular file),
 *         -EPERM (owned by another user), -EACCES (writable by others),
 *         -EMLINK (more than one link), or another negative errno of
 *         open(2)
 */
int
fpd_perf_map_open(const char *path, uid_t uid, struct stat *st);

/**
 * Why fpd_perf_map_open() refused a map, for a message: "is a symbolic
 * link" for -ELOOP, and so on; strerror() for an errno of open(2).
 */
const char *
fpd_perf_map_why(int rc);

struct fpd_symbols;

/**
 * Symbols of process @pid, its perf map being @map_dir/perf-PID.map
 * (@map_dir NULL: /tmp). The map is read as fpd_perf_map_open() allows
 * for the user the process runs as, at most FPD_PERF_MAP_MAX bytes in
 * all; a map refused or cut short is logged once as a warning, and its
 * JIT code stays unnamed. The caller owns the result
 * (fpd_symbols_destroy()).
 */
struct fpd_symbols *
fpd_symbols_new(pid_t pid, const char *map_dir);

void
fpd_symbols_destroy(struct fpd_symbols *syms);

/**
 * Name the code at @addr in the process: from the ELF symbols of the file
 * mapped there (/proc/PID/maps, read again at most once a second when
 * the address is in none), else from the perf map (read again when it
 * has grown), else '[unknown]'. The map names only addresses in no file
 * mapping, where the JIT's code is: a line of the map cannot rename the
 * VM's own code. The frame's strings belong to @syms and stay valid
 * until it is destroyed.
 */
void
fpd_symbols_lookup(struct fpd_symbols *syms, uint64_t addr,
		   struct fp_frame *frame);

/**
 * Parse one perf map line (without its newline), "HEXADDR HEXSIZE NAME"
 * as the JIT writes it (each number with an optional 0x, one space
 * between fields), shorter than FPD_PERF_MAP_LINE_MAX: the range must
 * be one user-space code can have (not empty, no larger than 64 MiB,
 * between 64 KiB and 2^56), NAME not empty and without NUL. Returns whether the line is one; @name then points
 * into @line.
 */
bool
fpd_perf_map_line(const char *line, size_t len, uint64_t *start,
		  uint64_t *size, const char **name, size_t *name_len);

/**
 * Make @s[0..@len) well-formed UTF-8 in place: each byte of an invalid
 * sequence (a stray continuation byte, a cut or overlong sequence, a
 * surrogate, a code point past U+10FFFF) becomes '?'. Returns how many
 * bytes were replaced.
 */
size_t
fpd_utf8_fix(char *s, size_t len);

/**
 * Split a perf map name the way the JIT writes it into @frame (strings
 * point into @buf, which it rewrites): "$M:F/A" and
 * "$M:F/A-CodeInfoPrologue" are M:F/A, "$M::NAME" (the VM's shared code
 * and module headers) is '$M':NAME/0, anything else NAME as
 * '[jit]':NAME/0.
 */
void
fpd_symbols_split_jit(char *buf, struct fp_frame *frame);
