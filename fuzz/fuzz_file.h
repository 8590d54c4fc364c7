/* Shared by the harnesses: the readers take paths, so each input is put in
   an in-memory file (memfd) and handed over as /proc/self/fd/N.  Built
   with _GNU_SOURCE (fuzz/CMakeLists.txt) for memfd_create. */
#ifndef KILN_FUZZ_FILE_H
#define KILN_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The path of a file holding exactly data[0..size); the same file is
   rewritten for every input. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("kiln-fuzz", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 ||
        (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz_file");
        abort();
    }
    return path;
}

/* Where kiln_file_info prints. */
static inline FILE *fuzz_null(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    if (!f)
        abort();
    return f;
}

#endif
