/*
 * flame_profd — the --perf source as the loop sees it: the node's CPU
 * samples (perf-events.c), read when a buffer fills and before every
 * tick, and written through the recorder into the node's files.
 */
#pragma once

#include "options.h"
#include "source.h"

struct fpd_perf_source;

/**
 * Open the events on the threads of o->perf_pid (before root is
 * dropped: opening them is what needs it). *@out is NULL without --perf;
 * the caller frees it with fpd_perf_source_destroy().
 * @return 0, or a negative errno with the reason logged (fpd_fatal()):
 *         -ESRCH for a process that does not exist, -EACCES or -EPERM
 *         when the kernel refuses, another for anything else.
 */
int
fpd_perf_source_open(const struct fpd_options *o, struct fpd_perf_source **out);

struct fpd_recorder;

/** Where its samples go (@rec, not owned), from before the loop runs. */
void
fpd_perf_source_attach(struct fpd_perf_source *feed, struct fpd_recorder *rec);

/** The feed as the loop's source (owned by @feed). */
struct fpd_source *
fpd_perf_source_source(struct fpd_perf_source *feed);

/** After the loop: what is left in the buffers is written, and the
 * samples the kernel dropped are told. NULL is a no-op. */
void
fpd_perf_source_finish(struct fpd_perf_source *feed);

/** NULL is a no-op. */
void
fpd_perf_source_destroy(struct fpd_perf_source *feed);
