/*
 * flame_profd — the names of the code a --perf sample was taken in: JIT
 * code from the node's perf map (/tmp/perf-OSPID.map, written under
 * +JPperf true), C code from the ELF symbols of the files mapped there.
 */
#pragma once

#include <sys/types.h>

#include "fp/term.h"

struct fpd_symbols;

struct fpd_symbols *
fpd_symbols_new(pid_t pid, const char *map_dir);

void
fpd_symbols_destroy(struct fpd_symbols *syms);

/**
 * Name the code at @addr in the process: from the perf map (read again
 * when it has grown), else from the ELF symbols of the file mapped there
 * (/proc/PID/maps, read again when the address is in none), else
 * '[unknown]'. The frame's strings belong to @syms.
 */
void
fpd_symbols_lookup(struct fpd_symbols *syms, uint64_t addr,
		   struct fp_frame *frame);

/**
 * Split a perf map name the way the JIT writes it into @frame (strings
 * point into @buf, which it rewrites): "$M:F/A" and
 * "$M:F/A-CodeInfoPrologue" are M:F/A, "$M::NAME" (the VM's shared code
 * and module headers) is '$M':NAME/0, anything else NAME as
 * '[jit]':NAME/0.
 */
void
fpd_symbols_split_jit(char *buf, struct fp_frame *frame);
