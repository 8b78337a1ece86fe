/*
 * The delivery metadata JetStream puts in a consumer message's reply
 * subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>,
 * or the newer form with <domain>.<account hash> after $JS.ACK and a random
 * token at the end; and the PubAck a publish gets. Pure parsing: both are
 * the broker's bytes.
 */
#ifndef COTAL_JSACK_H
#define COTAL_JSACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JS_ACK_SUBJECT_MAX 512

struct js_ack_meta {
	uint64_t delivered;  /* how often this message was delivered */
	uint64_t sseq;       /* stream sequence, > 0 */
	uint64_t dseq;       /* consumer sequence, > 0 */
	int64_t ts_ns;       /* when the broker stored it */
	uint64_t pending;    /* messages still to come for this consumer */
};

/* false when reply is no such subject (NULL, too long, a field that is not
 * a decimal number). */
bool js_ack_meta(const char *reply, struct js_ack_meta *out);

/*
 * A PubAck, JetStream's answer to a publish: 0 with the stream sequence
 * (a duplicate's too), or -1 with why (the broker's error and its code, or
 * what is wrong with the answer). The common answer is read in place.
 */
int js_puback_parse(const char *data, size_t len, uint64_t *seq, char *why, size_t whylen);
/* That common answer, as each broker lays it out, read in place: 0 with
 * *seq, or -1 (js_puback_parse then decodes it in full). */
int js_puback_in_place(const char *data, size_t len, uint64_t *seq);

#endif
