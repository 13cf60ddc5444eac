/*
 * flame_profd — unit tests: the perf sample source (--perf) and its
 * symbol tables, on this very process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fp-test.h"
#include "../daemon/perf-pid.h"
#include "../daemon/perf-symbols.h"
#include "../daemon/perf-events.h"

static const struct {
	const char *name;
	const char *module, *function;
	uint32_t arity;
} jit_names[] = {
	{ "$lists:seq/2", "lists", "seq", 2 },
	{ "$lists:seq_loop/3-CodeInfoPrologue", "lists", "seq_loop", 3 },
	{ "$fid_wl:'-busy/1-fun-0-'/1", "fid_wl", "-busy/1-fun-0-", 1 },
	{ "$init:'-collect/2-lc$^0/1-0-'/2-CodeInfoPrologue", "init",
	  "-collect/2-lc$^0/1-0-", 2 },
	{ "$'Elixir.Fid.Wl':call_work/2", "Elixir.Fid.Wl", "call_work", 2 },
	{ "$'a:b':'c\\'d'/0", "a:b", "c'd", 0 },
	{ "$global::apply_fun_shared", "$global", "apply_fun_shared", 0 },
	{ "$zlib::codeHeader", "$zlib", "codeHeader", 0 },
	{ "erts_beamasm:emit", "[jit]", "erts_beamasm:emit", 0 },
	{ "$m:f/x", "[jit]", "$m:f/x", 0 },
};

START_TEST(split_jit)
{
	char buf[128];
	struct fp_frame f;

	snprintf(buf, sizeof(buf), "%s", jit_names[_i].name);
	fpd_symbols_split_jit(buf, &f);
	fp_assert_str_eq(f.module, jit_names[_i].module);
	fp_assert_str_eq(f.function, jit_names[_i].function);
	fp_assert_int_eq(f.arity, jit_names[_i].arity);
}
END_TEST

__attribute__((noinline)) uint64_t fp_test_spin(uint64_t n);

__attribute__((noinline)) uint64_t
fp_test_spin(uint64_t n)
{
	volatile uint64_t x = 0;

	for (uint64_t i = 0; i < n; i++)
		x += i * i;
	return x;
}

/* A perf map of our own, in a directory of its own; the ELF symbols of
 * the test binary; an address nothing maps. */
START_TEST(symbols)
{
	char dir[] = "/tmp/fp-test-perfmap-XXXXXX", path[128];
	struct fpd_symbols *syms;
	struct fp_frame f;
	FILE *map;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
	map = fopen(path, "w");
	fp_assert_ptr_nonnull(map);
	fprintf(map, "0x1000 100 $fid_wl:call_work/2\n");
	fclose(map);

	syms = fpd_symbols_new(getpid(), dir);
	fpd_symbols_lookup(syms, 0x1000 + 0x20, &f);
	fp_assert_str_eq(f.module, "fid_wl");
	fp_assert_str_eq(f.function, "call_work");
	fp_assert_int_eq(f.arity, 2);

	/* the map grows as modules load: read again on a miss */
	map = fopen(path, "a");
	fprintf(map, "0x2000 10 $fid_wl:cast_work/2\n");
	fclose(map);
	fpd_symbols_lookup(syms, 0x2004, &f);
	fp_assert_str_eq(f.function, "cast_work");

	fpd_symbols_lookup(syms, (uint64_t)(uintptr_t)fp_test_spin + 4, &f);
	fp_assert_str_eq(f.function, "fp_test_spin");
	fp_assert_str_eq(f.module, "test-perf-events");
	fp_assert_int_eq(f.arity, 0);

	fpd_symbols_lookup(syms, 0x10, &f);
	fp_assert_str_eq(f.module, "[unknown]");
	fpd_symbols_destroy(syms);

	unlink(path);
	rmdir(dir);
}
END_TEST

static volatile int spinning;

/*
 * Called through a pointer the compiler cannot see through: at -O3 gcc
 * would otherwise clone fp_test_spin() for the constant argument
 * (fp_test_spin.constprop.0), and the samples would name the clone.
 */
static uint64_t (*volatile spin_fn)(uint64_t) = fp_test_spin;

static void *
spinner(void *arg)
{
	pid_t *tid = arg;

	*tid = (pid_t)syscall(SYS_gettid);
	while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
		spin_fn(100000);
	return NULL;
}

struct seen {
	unsigned samples, in_spin, bad;
	pid_t tid;
	uint64_t last_us;
};

static int
count(void *data, const struct fp_sample *s)
{
	struct seen *seen = data;

	seen->samples++;
	if (s->status != FP_STATUS_CPU || s->pid.num != 0 || !s->label ||
	    s->time_us < seen->last_us)
		seen->bad++;
	seen->last_us = s->time_us;
	for (uint32_t i = 0; i < s->nframes; i++) {
		if (strcmp(s->frames[i].function, "fp_test_spin") == 0 &&
		    s->pid.serial == (uint32_t)seen->tid) {
			seen->in_spin++;
			break;
		}
	}
	return 0;
}

/* The thread starts after the source: found by the rescan. */
START_TEST(live)
{
	struct fpd_perf_events_config c = { .pid = getpid(), .freq = 999 };
	struct fpd_perf_events *src;
	struct seen seen = { 0 };
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	pthread_t th;
	int rc;

	rc = fpd_perf_events_new(&c, &src);
	if (rc == -EACCES || rc == -EPERM || rc == -ENOSYS || rc == -ENOENT ||
	    rc == -EOPNOTSUPP) {
		fprintf(stderr, "live: perf events unavailable here (%s): not run\n",
			strerror(-rc));
		return;
	}
	fp_assert_int_eq(rc, 0);
	fp_assert(fpd_perf_events_fd(src) >= 0);
	unsigned before = fpd_perf_events_threads(src);

	spinning = 1;
	fp_assert_int_eq(pthread_create(&th, NULL, spinner, &seen.tid), 0);
	/* 1.2 s: the rescan (once a second) opens the new thread */
	for (int i = 0; i < 24; i++) {
		nanosleep(&pause, NULL);
		rc = fpd_perf_events_read(src, 0, count, &seen);
		fp_assert_int_ge(rc, 0);
		if (i == 11)
			fp_assert_int_eq(fpd_perf_events_threads(src), before + 1);
	}
	spinning = 0;
	pthread_join(th, NULL);
	fp_assert_int_eq(seen.bad, 0);
	/* ~1 s of one spinning thread at 999 Hz */
	fp_assert_int_ge(seen.in_spin, 200);
	fpd_perf_events_destroy(src);
}
END_TEST

START_TEST(refused)
{
	struct fpd_perf_events_config c = { .pid = getpid(), .freq = 0 };
	struct fpd_perf_events *src;

	fp_assert_int_eq(fpd_perf_events_new(&c, &src), -EINVAL);
	fp_assert_ptr_null(src);
	c = (struct fpd_perf_events_config){ .pid = 0x3ffffff, .freq = 99 };
	fp_assert_int_eq(fpd_perf_events_new(&c, &src), -ESRCH);
	fpd_perf_events_destroy(NULL);
}
END_TEST

/* Command lines as /proc gives them (arguments NUL-separated, spaces
 * here), the node's name, whether it has a perf map. */
static const struct {
	const char *args;
	const char *node;
	bool map;
	enum fpd_perf_pid_state want;
} pid_cases[] = {
	/* erl -sname, as beam.smp gets it from erlexec */
	{ "/usr/lib/erlang/erts-13.1.5/bin/beam.smp -- -root /usr/lib/erlang "
	  "-progname erl -- -home /root -- -sname app -noshell",
	  "app@vm", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -sname app@vm", "app@vm", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -name app@10.0.0.5", "app@10.0.0.5", true, FPD_PERF_PID_OK },
	{ "beam.smp -- -- -name app", "app@host.example.com", true, FPD_PERF_PID_OK },
	/* elixir --sname, and a release, after the -pa lists */
	{ "beam.smp -- -- -pa /usr/lib/elixir/lib/elixir/ebin -noshell -s elixir "
	  "start_cli -sname extest -extra -e IO.puts(1)",
	  "extest@vm", true, FPD_PERF_PID_OK },
	/* no map: not started with +JPperf true */
	{ "beam.smp -- -- -sname app", "app@vm", false, FPD_PERF_PID_NO_MAP },
	/* another node, a prefix of its name, another host */
	{ "beam.smp -- -- -sname other", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname ap", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname app@elsewhere", "app@vm", true, FPD_PERF_PID_OTHER },
	/* the last name given is the one in force */
	{ "beam.smp -- -- -sname app -sname other", "app@vm", true, FPD_PERF_PID_OTHER },
	/* after -extra the words are the program's */
	{ "beam.smp -- -- -noshell -extra -sname app", "app@vm", true, FPD_PERF_PID_OTHER },
	/* no name at all (net_kernel:start/1 at run time), a flag last */
	{ "beam.smp -- -- -noshell", "app@vm", true, FPD_PERF_PID_OTHER },
	{ "beam.smp -- -- -sname", "app@vm", true, FPD_PERF_PID_OTHER },
	/* no such process */
	{ NULL, "app@vm", true, FPD_PERF_PID_NONE },
};

/* @dir/@pid/cmdline holding @args, its words separated by spaces here
 * and by NULs there, as /proc gives them. */
static void
write_cmdline(const char *dir, pid_t pid, const char *args)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	fp_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/%d/cmdline", dir, (int)pid);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	for (const char *a = args; *a; a++)
		fputc(*a == ' ' ? '\0' : *a, f);
	fputc('\0', f);
	fclose(f);
}

/* Remove a fake /proc @dir of process @pid with whatever it holds. */
static void
remove_fake_proc(const char *dir, pid_t pid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/stat", dir);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d/stat", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d/cmdline", dir, (int)pid);
	remove(path);
	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	remove(path);
	fp_assert_int_eq(rmdir(dir), 0);
}

/* A /proc of one process and a map directory, in a directory of their own. */
START_TEST(perf_pid)
{
	char dir[] = "/tmp/fp-test-perfpid-XXXXXX", path[256];
	const pid_t pid = 4242;
	FILE *f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	if (pid_cases[_i].args)
		write_cmdline(dir, pid, pid_cases[_i].args);
	if (pid_cases[_i].map) {
		snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
		f = fopen(path, "w");
		fp_assert_ptr_nonnull(f);
		fclose(f);
	}

	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, pid_cases[_i].node, -1),
			 pid_cases[_i].want);

	remove_fake_proc(dir, pid);
}
END_TEST

/* This process, through the real /proc: its command line has no node
 * name. */
START_TEST(perf_pid_self)
{
	fp_assert_int_eq(fpd_perf_pid_check(NULL, NULL, getpid(), "app@vm", -1),
			 FPD_PERF_PID_OTHER);
	fp_assert_int_eq(fpd_perf_pid_check(NULL, NULL, 0x3ffffff, "app@vm", -1),
			 FPD_PERF_PID_NONE);
}
END_TEST

/* A map file @dir/perf-@pid.map last written at @mtime (seconds since
 * the epoch). */
static void
make_map(const char *dir, pid_t pid, time_t mtime)
{
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(futimens(fd, ts), 0);
	close(fd);
}

static void
remove_map(const char *dir, pid_t pid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	fp_assert_int_eq(unlink(path), 0);
}

/* A listening loopback socket of @family and a connection to it:
 * @lfd, @cfd (the daemon's end) and @afd (the node's end). False when
 * this machine has no loopback of that family. */
static bool
loopback_pair(int family, int *lfd, int *cfd, int *afd)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) :
					    sizeof(struct sockaddr_in6);

	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	*lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*lfd < 0 || bind(*lfd, (struct sockaddr *)&ss, len) < 0) {
		if (*lfd >= 0)
			close(*lfd);
		return false;
	}
	fp_assert_int_eq(listen(*lfd, 1), 0);
	fp_assert_int_eq(getsockname(*lfd, (struct sockaddr *)&ss, &len), 0);
	*cfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fp_assert_int_ge(*cfd, 0);
	fp_assert_int_eq(connect(*cfd, (struct sockaddr *)&ss, len), 0);
	*afd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
	fp_assert_int_ge(*afd, 0);
	return true;
}

/* A node named at run time has no name on its command line, but holds
 * its end of our connection: a real TCP connection over loopback (IPv4,
 * then IPv6 where the machine has it), whose accepted end this process
 * holds (pid 1 does not, and its command line names no node). */
START_TEST(perf_pid_socket)
{
	static const int families[] = { AF_INET, AF_INET6 };
	char dir[] = "/tmp/fp-test-perfsock-XXXXXX";
	int lfd, cfd, afd;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	make_map(dir, getpid(), time(NULL));
	make_map(dir, 1, time(NULL));
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		if (!loopback_pair(families[f], &lfd, &cfd, &afd)) {
			fp_assert_int_eq(families[f], AF_INET6);
			continue;
		}
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", cfd),
				 FPD_PERF_PID_OK);
		/* without the connection, the command line decides */
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", -1),
				 FPD_PERF_PID_OTHER);
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, 1, "app@vm", cfd),
				 FPD_PERF_PID_OTHER);
		/* our own end is not the node's: the check looks for the
		 * peer's */
		close(afd);
		fp_assert_int_eq(fpd_perf_pid_check(NULL, dir, getpid(), "app@vm", cfd),
				 FPD_PERF_PID_OTHER);
		close(cfd);
		close(lfd);
	}
	remove_map(dir, getpid());
	remove_map(dir, 1);
	fp_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The VM leaves its map behind: a map last written before the process
 * started is an earlier process's of that pid. The fake /proc gives the
 * process's start (field 22 of stat, clock ticks after boot) and the
 * boot time (btime). */
START_TEST(perf_pid_stale_map)
{
	char dir[] = "/tmp/fp-test-perfstale-XXXXXX", path[256];
	const pid_t pid = 4242;
	const time_t boot = 1700000000;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	write_cmdline(dir, pid, "beam.smp -sname app");
	/* started 1000 s after boot; a command name with ") " in it */
	snprintf(path, sizeof(path), "%s/%d/stat", dir, (int)pid);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	fprintf(f, "%d (be) am) S 1 %d %d 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 "
		"30 0 %ld 1000 100\n", (int)pid, (int)pid, (int)pid, 1000 * hz);
	fclose(f);
	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	fprintf(f, "cpu  1 2 3 4\nintr 0\nctxt 5\nbtime %lld\nprocesses 9\n",
		(long long)boot);
	fclose(f);

	make_map(dir, pid, boot + 500);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_STALE_MAP);
	make_map(dir, pid, boot + 1000);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);
	make_map(dir, pid, boot + 5000);
	fp_assert_int_eq(fpd_perf_pid_check(dir, dir, pid, "app@vm", -1),
			 FPD_PERF_PID_OK);

	remove_fake_proc(dir, pid);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("perf-events");
	TCase *tc = tcase_create("symbols");

	tcase_add_loop_test(tc, split_jit, 0,
			    (int)(sizeof(jit_names) / sizeof(jit_names[0])));
	tcase_add_test(tc, symbols);
	suite_add_tcase(s, tc);
	tc = tcase_create("events");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, live);
	tcase_add_test(tc, refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("auto");
	tcase_add_loop_test(tc, perf_pid, 0,
			    (int)(sizeof(pid_cases) / sizeof(pid_cases[0])));
	tcase_add_test(tc, perf_pid_self);
	tcase_add_test(tc, perf_pid_socket);
	tcase_add_test(tc, perf_pid_stale_map);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
