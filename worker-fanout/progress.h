/*
 * worker-fanout: what the fan-out knows of the copies it made (progress.c).
 * Internal to the fan-out's room.
 */
#ifndef COTAL_FANOUT_PROGRESS_H
#define COTAL_FANOUT_PROGRESS_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

/* At set-up, once `fanout` is bound: both seeded from the broker. */
void progress_open(jsCtx *js, const char *chat, const char *inbox);
void progress_close(void);

/* Before a fetch: false when the worker stops serving while it waits for
 * the reader. */
bool progress_may_fetch(void);
/* A batch of posts copied, its highest INBOX sequence (0: none copied). */
void progress_copied(uint64_t inbox_seq, int posts);

/* A post acked, by its CHAT sequence. */
void progress_acked(uint64_t chat_seq);
/* Was the post at chat_seq acked before (its copies stored)? */
bool progress_acked_before(uint64_t chat_seq);
/*
 * Does INBOX still reach the highest sequence a copy of ours got? When it
 * does not (a store that lost what it acknowledged, or was made anew), what
 * was acked is forgotten and copied again. False too when INBOX cannot be
 * asked.
 */
bool progress_store_intact(void);

#endif
