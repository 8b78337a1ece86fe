/*
 * worker-fanout: how far the fan-out is ahead of the reader (lead.c).
 * Internal to the fan-out's room.
 */
#ifndef COTAL_FANOUT_LEAD_H
#define COTAL_FANOUT_LEAD_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

/* At set-up: what INBOX holds past the reader's ack floor counts in full. */
void lead_open(jsCtx *js, const char *inbox);
void lead_close(void);
/* A batch copied: its highest INBOX sequence (0: none copied), its posts. */
void lead_copied(uint64_t inbox_seq, int posts);
/* Wait while the reader is too far behind; false when the worker stops
 * serving meanwhile. */
bool lead_wait(void);

#endif
