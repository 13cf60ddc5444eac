/*
 * flame_profd — what a sample is, independent of how it was decoded.
 *
 * The ground layer: no Erlang dependency, shared by libsample (which fills
 * these structs from replies), formats/ (which writes and reads them) and
 * flame_prof.
 *
 * Strings in these structs are UTF-8 as the node sent them (atoms are not
 * quoted or escaped here; the writers do that), but for a NUL, which is
 * held as the pair 0xC0 0x80 (FP_NUL_CARRIER, util/util-escape.h) so that
 * an atom 'a\0b' is not cut to 'a'. They are owned by whoever
 * filled the struct: the fp_sampler that decoded a sample, until its next
 * decode (fp/sample.h), or the reader that parsed it from a file
 * (fp/perf-script-read.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * A pid local to the profiled node: <0.num.serial>. The node's creation
 * lives in struct fp_node; a pid never outlives the connection it came
 * from (after a node restart the same numbers name another process).
 */
struct fp_pid {
	uint32_t num;
	uint32_t serial;
};

static inline uint64_t
fp_pid_key(struct fp_pid pid)
{
	return ((uint64_t)pid.num << 32) | pid.serial;
}

/**
 * Parse "<0.123.0>" or "0.123.0". The first number must be 0: the
 * daemon can only sample processes of the node it is attached to.
 *
 * @return 0, or -EINVAL if @str is not such a pid.
 */
int
fp_pid_parse(const char *str, struct fp_pid *pid);

/**
 * The same, and also the form rabbitmqctl and observer print for a pid of
 * another node: "<alive@host.Creation.Number.Serial>". Only the syntax is
 * checked: whether the node is the one profiled and accepts those numbers
 * is the node's to say (fp_node_check_pids()).
 *
 * @param[out] node     the node name of the remote form ("" otherwise),
 *                      room for @nodelen bytes
 * @param[out] creation its creation (0 otherwise)
 * @return 0 for a local form, 1 for the remote form, -EINVAL otherwise.
 */
int
fp_pid_parse_full(const char *str, struct fp_pid *pid, char *node,
		  size_t nodelen, uint32_t *creation);

/* Room for a registered name's atom text (atoms hold 255 characters;
 * names are limited to 255 bytes). */
#define FP_NAME_MAX 256

/**
 * The atoms a --name can mean: an Elixir alias (RwEx.Counter) is the atom
 * 'Elixir.RwEx.Counter', tried first, then the atom as written; Elixir's
 * atom syntax (:foo, :"foo bar") is that atom; anything else is the atom
 * as written (Elixir.RwEx.Counter, foo).
 *
 * @return the number of candidates written (1 or 2), or -EINVAL when
 *         the name is empty or too long.
 */
int
fp_name_candidates(const char *given, char cand[2][FP_NAME_MAX]);

/** Process status as process_info(Pid, status) returns it. */
enum fp_status {
	FP_STATUS_UNKNOWN = 0,
	FP_STATUS_RUNNING,
	FP_STATUS_RUNNABLE,
	FP_STATUS_WAITING,
	FP_STATUS_GARBAGE_COLLECTING,
	FP_STATUS_SUSPENDED,
	FP_STATUS_EXITING,
	FP_STATUS_FREE,
	/* not a process status: a sample of the node's OS threads on a
	 * CPU, read with perf (no Erlang process is known) */
	FP_STATUS_CPU,
	/* not a process status: time of a traced process (--trace), its
	 * count in proportion to that time (docs/FORMAT.md) */
	FP_STATUS_TRACED,
	FP_STATUS_COUNT,
};

/* The leaf frame of a traced sample whose time the process spent off a
 * scheduler (eflame's SLEEP): 'SLEEP':scheduled_out/0. */
#define FP_SLEEP_MODULE "SLEEP"
#define FP_SLEEP_FUNCTION "scheduled_out"

/** Static string; "unknown" for FP_STATUS_UNKNOWN. */
const char *
fp_status_name(enum fp_status status);

/* The status a name stands for, or FP_STATUS_UNKNOWN. */
enum fp_status
fp_status_from_name(const char *name);

/**
 * Per-sample metrics. Counters only grow while a process lives, but the
 * VM resets some of them (minor_gcs at every full sweep); gauges go up
 * and down and their deltas are signed.
 */
enum fp_metric {
	FP_METRIC_REDUCTIONS = 0,	/* counter */
	FP_METRIC_MEMORY,		/* gauge, bytes */
	FP_METRIC_MESSAGE_QUEUE_LEN,	/* gauge */
	FP_METRIC_TOTAL_HEAP_SIZE,	/* gauge, words */
	FP_METRIC_HEAP_SIZE,		/* gauge, words */
	FP_METRIC_STACK_SIZE,		/* gauge, words */
	FP_METRIC_BINARY_BYTES,		/* gauge, bytes of off-heap binaries */
	FP_METRIC_MINOR_GCS,		/* counter, reset by full sweeps */
	FP_METRIC_COUNT,
};

/** Static string, e.g. "message_queue_len". */
const char *
fp_metric_name(enum fp_metric metric);

/* Whether a metric only grows over a process's life (its delta is what
 * a sample adds), as reductions do. */
bool
fp_metric_is_counter(enum fp_metric metric);

/**
 * One stack frame, or an initial call (then file is NULL and line 0).
 */
struct fp_frame {
	const char *module;
	const char *function;
	uint32_t arity;
	uint32_t line;		/* 0 when unknown */
	const char *file;	/* NULL when unknown */
	uint64_t id;		/* 0, or unique in the process to this frame:
				 * equal ids are equal frames (writers cache
				 * what they make of one by it) */
};

struct fp_sample {
	struct fp_pid pid;
	uint64_t time_us;		/* Unix epoch, microseconds */
	enum fp_status status;
	int64_t value[FP_METRIC_COUNT];
	int64_t delta[FP_METRIC_COUNT];
	/* delta is the change since the previous sample of this process;
	 * false for its first sample (and the first after it re-enters the
	 * selection), whose delta is 0 for want of a baseline, and for
	 * samples that have no process (FP_STATUS_CPU) */
	bool has_delta;
	const char *registered_name;	/* NULL when not registered */
	bool has_initial_call;
	struct fp_frame initial_call;
	const struct fp_frame *frames;	/* leaf first */
	uint32_t nframes;
	uint64_t stack_id;		/* 0, or unique in the process to this
					 * list of frames, as fp_frame.id */
	/* What the process dictionary said (fp_node_set_extras()), as
	 * text of at most FP_TAG_MAX bytes; NULL where the process has
	 * none or it was not asked. */
	const char *label;		/* proc_lib's label */
	const char *callers;		/* '$callers': "<0.1.2>,<0.3.4>" */
	const char *const *keys;	/* nkeys: the dictionary keys, then
					 * the Logger metadata keys, in the
					 * order fp_extras gives them */
	uint32_t nkeys;
};

/* The longest text a label or key value is written as (bytes, UTF-8). */
#define FP_TAG_MAX 200

/**
 * Whether @sample shows its process idle: parked, not working and not
 * asking for a scheduler. The writer marks such samples on their event
 * line (docs/FORMAT.md, "Idle samples") so that stock Flamescope leaves
 * them out of its heat map, whose density then follows the node's work.
 *
 * The one place the rule lives: it may use the status, the metrics and
 * their deltas (sample->has_delta says whether a delta is meaningful).
 * `waiting` (parked in receive) and `suspended` are idle; `running`,
 * `runnable`, `garbage_collecting` and `exiting` are work or demand for
 * it; a `cpu` sample (--perf) is a thread on a CPU and never idle; a
 * `traced` sample is idle when its leaf is the SLEEP frame (time off a
 * scheduler), else it is time on one.
 */
bool
fp_sample_is_idle(const struct fp_sample *sample);
