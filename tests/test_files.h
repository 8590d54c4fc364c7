/* Helpers for tests that read and write files: one temporary directory per
   test binary (setup_dir / teardown_dir as cmocka group fixtures), paths in
   it, counting and message checks; write_bytes is in test_helpers.h. */
#ifndef KILN_TEST_FILES_H
#define KILN_TEST_FILES_H

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln.h"
#include "test_helpers.h"

static char tmp_dir[64];

/* tmp_dir/name; four buffers in turn, so a call may use up to four. */
static inline const char *tmp_path(const char *name)
{
    static char buf[4][600];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", tmp_dir, name);
    return p;
}

static inline void assert_has(const char *msg, const char *phrase)
{
    if (!strstr(msg, phrase))
        fail_msg("error \"%s\" lacks \"%s\"", msg, phrase);
}

static inline void assert_error_has(const char *phrase)
{
    assert_has(kiln_last_error(), phrase);
}

/* Entries of tmp_dir but "." and ".."; with dot_files 0, those starting
   with a dot (writers' temporary files) are not counted. */
static inline int count_entries(int dot_files)
{
    DIR *d = opendir(tmp_dir);
    int n = 0;
    assert_non_null(d);
    for (struct dirent *ent; (ent = readdir(d));)
        n += dot_files ? strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")
                       : ent->d_name[0] != '.';
    closedir(d);
    return n;
}

static inline void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *ent; (ent = readdir(d));) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
            continue;
        char p[1024];
        if (snprintf(p, sizeof p, "%s/%s", dir, ent->d_name) >= (int)sizeof p)
            continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline int setup_dir(void **state)
{
    (void)state;
    strcpy(tmp_dir, "/tmp/kiln_test_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static inline int teardown_dir(void **state)
{
    (void)state;
    remove_tree(tmp_dir);
    return 0;
}

#endif
