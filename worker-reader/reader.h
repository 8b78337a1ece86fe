/* worker-reader: the trusted reader (see reader.c). */
#ifndef COTAL_READER_H
#define COTAL_READER_H

#include "worker/worker.h"

extern const struct worker_role reader_role;

#endif
