/*
 * flame_profd — the node's own CPU samples, read with perf_event_open(2).
 *
 * A sample source beside the process sampler: it samples the OS threads
 * of a local node at a fixed frequency while they are on a CPU, with
 * their call chains (frame pointers: a VM started with +JPperf true, or
 * +JPperf fp, keeps them in JIT code), names the JIT frames through the
 * node's perf map (/tmp/perf-OSPID.map, written under +JPperf true) and
 * the C frames through the ELF symbols of the mapped files, and hands
 * each sample over as a struct fp_sample of status FP_STATUS_CPU.
 *
 * It asks the node for nothing and loads nothing onto it; it sees what
 * process_info/2 cannot: handler code between two receives, processes
 * that live shorter than a selection, BIFs, garbage collection and the
 * VM's own work. It cannot tell which Erlang process ran: a sample
 * knows the OS thread (scheduler), not the pid.
 *
 * The interface is a file descriptor to wait on and a function that
 * reads what is there, so that the daemon's loop can poll it with its
 * other sources, or simply drain it on every tick.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "fp/term.h"

struct fpd_perf_events;

struct fpd_perf_events_config {
	pid_t pid;		/* the node's OS process */
	unsigned freq;		/* samples per second per thread on CPU */
	const char *map_dir;	/* where the perf map is; NULL: /tmp */
};

/**
 * Open a sampling event on every thread of @config->pid. Threads that
 * start later are added by fpd_perf_events_read() (it looks for them
 * once a second).
 *
 * Kernel samples are asked for (a thread in a system call is on CPU for
 * the node); where perf_event_paranoid refuses them, only user-mode
 * samples are taken (fpd_perf_events_user_only() says which).
 *
 * @param[out] out  the source; the caller owns it
 *                  (fpd_perf_events_destroy())
 * @return 0, -ESRCH if the process does not exist, -EACCES or -EPERM if
 *         the kernel refuses to sample it (perf_event_paranoid,
 *         CAP_PERFMON), -ENOSYS or -ENOENT if the kernel has no
 *         perf events, -EINVAL for a frequency of 0, or another
 *         negative errno of perf_event_open(2) or mmap(2).
 */
int
fpd_perf_events_new(const struct fpd_perf_events_config *config,
		    struct fpd_perf_events **out);

/** Closes every event; NULL is a no-op. */
void
fpd_perf_events_destroy(struct fpd_perf_events *src);

/**
 * An epoll descriptor, readable when some thread's buffer is a quarter
 * full (owned by the source; valid until it is destroyed).
 */
int
fpd_perf_events_fd(const struct fpd_perf_events *src);

/** Called for each sample, oldest first; the sample and everything it
 * points to are valid during the call only. A nonzero return stops the
 * read (it is returned). */
typedef int (*fpd_perf_emit_fn)(void *data, const struct fp_sample *sample);

/**
 * Read every sample waiting in the buffers, sort them by time and hand
 * them to @emit. A sample's time is its CLOCK_MONOTONIC time plus
 * @epoch_offset_us (the daemon's wall time minus its monotonic time, in
 * microseconds), so that it falls on the daemon's clock.
 *
 * A sample has status FP_STATUS_CPU; pid <0.0.TID> (TID the OS thread:
 * pid number 0 is init's for the node's life, so no process of the node
 * ever has that pid with another serial); label the thread's name
 * (erts_sched_1, erts_dcpus_1, ...); metrics 0; frames leaf first:
 * JIT code as module:function/arity, C code as
 * 'OBJECT':SYMBOL/0 with OBJECT the file's base name (beam.smp,
 * libc.so.6) and the file its path, an address no one names as
 * '[unknown]':'[unknown]'/0, and a sample taken in the kernel with a
 * '[kernel]':kernel/0 leaf above the user frames.
 *
 * @return the number of samples handed over, or what @emit returned.
 */
int
fpd_perf_events_read(struct fpd_perf_events *src, int64_t epoch_offset_us,
		     fpd_perf_emit_fn emit, void *data);

/** Samples the kernel dropped because a buffer was full, so far. */
uint64_t
fpd_perf_events_lost(const struct fpd_perf_events *src);

/** Threads sampled now. */
unsigned
fpd_perf_events_threads(const struct fpd_perf_events *src);

/** True when the kernel refused kernel-mode samples. */
bool
fpd_perf_events_user_only(const struct fpd_perf_events *src);
