/*
 * bench/datapath: the data path measured, shared by bench/fanout (which
 * reports) and bench/guard (which checks a bound): see datapath.c.
 */
#ifndef COTAL_BENCH_DATAPATH_H
#define COTAL_BENCH_DATAPATH_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/harness/harness.h"

#define LAT_MAX 4

extern struct mesh mesh;
extern struct daemon dmn;
extern struct conn prov;
extern bool on_cluster;      /* 3 nodes, every stream with 3 replicas (set before bench_up) */
extern double lat_at[LAT_MAX]; /* latency measured at these fractions of the round's copies/s */
extern int nlat;

/* One round: M members, copies / M posts. */
struct result {
	const char *code;    /* "after" (this build), "before" (--before) */
	int members, posts, other_rows;
	double copies_s, raw_s, daemon_us, broker_us, fanout_us, reader_us, raw_broker_us;
	double raw_consume_us;
	double p50[LAT_MAX], p99[LAT_MAX];
	double posts_per_batch, entries_per_batch, api_per_kcopy;
};

struct lc {
	char actor[40], uid[27];
};

/* The mesh (sync: the store's sync_interval, "always" or "default"), the
 * posters and the daemon of this build; and all of it down again. */
void bench_up(const char *sync);
void bench_down(void);
/* The daemon stopped and started again: bin (NULL: this build's), with
 * --metrics at metrics_addr when not NULL; its durables bound. */
void daemon_restart(const char *bin, const char *metrics_addr);

/* A round of copies (lat_posts paced posts per latency fraction; 0 none). */
void run_round(int m, int copies, int other_rows, int lat_posts, struct result *r);

int64_t now_ns(void);
void die(const char *what, const char *err) __attribute__((noreturn));
/* Clock ticks of the daemon's tree; the fan-out's and the reader's in role. */
uint64_t daemon_ticks(uint64_t role[2]);
uint64_t broker_ticks(void);
uint64_t worker_counter(const char *role, const char *name);
uint64_t stream_last_seq(const char *stream);
void random_token(char *out, size_t n, const char *alphabet);
/* n synthetic members of channel joined at join (malloc'd). */
struct lc *add_members(const char *channel, int n, uint64_t join);
void post_burst(const char *channel, int n, int gap_us);
double wait_copies(uint64_t target, int64_t t0, const char *what);

#endif
