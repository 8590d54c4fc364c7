/* Atomic file replacement: write a temporary file next to the target, fsync
   it, then rename() it over the target, so readers see the old file or the
   new one, never a half-written one. */
#ifndef KILN_IO_ATOMIC_FILE_H
#define KILN_IO_ATOMIC_FILE_H

#include "io/io_util.h"

typedef struct io_atomic {
    char *path; /* the target */
    char *tmp;  /* "<path>.tmp.XXXXXX", in the target's directory */
    int fd;     /* open on tmp after begin, -1 once closed */
} io_atomic;

/* Creates the temporary file (mkstemp).  -1 with a message on error. */
int io_atomic_begin(io_atomic *a, const char *path, io_err *e);
/* Closes a->fd if still open, fsyncs the temporary file (which may have been
   replaced by path since begin), gives it the mode a new file would get,
   renames it over the target and fsyncs the directory.  On error the
   temporary file is removed and the target is left as it was. */
int io_atomic_commit(io_atomic *a, io_err *e);
/* Removes the temporary file and releases a.  Safe after commit. */
void io_atomic_abort(io_atomic *a);

#endif
