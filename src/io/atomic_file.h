/* Atomic file replacement: write a temporary file next to the target, fsync
   it, then rename() it over the target, so readers see the old file or the
   new one, never a half-written one.

   The temporary is ".<start of name>.<hash of name>.<random>.tmp" in the
   directory of the file a symlink chain ends at (the link stays a link and
   its target gets the new content), short enough for any legal name.  The
   writer holds an flock on it until the end; a later save of the same
   target removes temporaries nobody holds (left by a killed process). */
#ifndef KILN_IO_ATOMIC_FILE_H
#define KILN_IO_ATOMIC_FILE_H

#include "io/io_util.h"

typedef struct io_atomic {
    char *path; /* the file replaced: the target with symlinks followed */
    char *tmp;  /* the temporary file, in path's directory */
    int fd;     /* open on tmp for the writer; it may close it (-1) */
    int hold;   /* a second descriptor holding tmp's lock until the end */
} io_atomic;

/* Creates the temporary file.  -1 with a message on error. */
int io_atomic_begin(io_atomic *a, const char *path, io_err *e);
/* Closes a->fd if still open, gives the temporary file the mode of the file
   it replaces (a new one keeps 0666 less the umask, applied by open),
   fsyncs it, renames it over the target, fsyncs the directory and removes
   stale temporaries of the same target.  On error the temporary file is
   removed and the target is left as it was. */
int io_atomic_commit(io_atomic *a, io_err *e);
/* Removes the temporary file and releases a.  Safe after commit. */
void io_atomic_abort(io_atomic *a);
/* Checks, without writing anything, that path could be saved: its
   directory exists and is writable and path is not a directory.  -1 with a
   message otherwise. */
int io_atomic_check(const char *path, io_err *e);

#endif
