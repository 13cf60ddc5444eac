/*
 * flame_profd — --perf auto: whether the OS pid a node tells is that
 * node's process on this host, and whether it can be read with perf.
 *
 * A node answers os:getpid/0 in its own pid namespace: in a container
 * on this host that number names another process here, or none. So the
 * pid is used only when the process here holds the node's end of our
 * connection, or, where that cannot be seen (another network namespace,
 * files we may not read), was started with the node's name on its
 * command line, as erl, elixir and releases pass it.
 */
#pragma once

#include <sys/types.h>

enum fpd_perf_pid_state {
	FPD_PERF_PID_OK = 0,
	FPD_PERF_PID_NONE,	/* no such process in our pid namespace */
	FPD_PERF_PID_OTHER,	/* its command line does not name the node */
	FPD_PERF_PID_NO_MAP,	/* the node, without a perf map (+JPperf) */
	FPD_PERF_PID_STALE_MAP,	/* a map older than the process: another's */
	FPD_PERF_PID_FOREIGN_MAP, /* a map fpd_perf_map_open() refuses */
};

/**
 * Check @pid against @node (NAME@HOST, the name the node answers to),
 * reached over the connected TCP socket @conn_fd (-1: none):
 * @proc_dir/PID must hold the node's end of that connection (found
 * through @proc_dir/net/tcp and tcp6 and @proc_dir/PID/fd); when that
 * cannot be told, @proc_dir/PID/cmdline must carry "-sname X" or
 * "-name X" before any "-extra" (the last one given is the one in
 * force), X being @node or, without a host part, @node's name part.
 * Then @map_dir/perf-PID.map must exist, be one fpd_perf_map_open()
 * accepts for the owner of @proc_dir/PID, and not be older than the
 * process (@proc_dir/PID/stat with @proc_dir/stat's btime).
 * @proc_dir NULL is /proc, @map_dir NULL is /tmp.
 */
enum fpd_perf_pid_state
fpd_perf_pid_check(const char *proc_dir, const char *map_dir, pid_t pid,
		   const char *node, int conn_fd);
