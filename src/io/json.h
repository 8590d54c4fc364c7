/* A small strict JSON (RFC 8259) pull parser, enough for safetensors
   headers: the caller walks the document with the calls below, and
   json_skip validates and steps over values it does not need. */
#ifndef KILN_IO_JSON_H
#define KILN_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct json_cursor {
    const char *begin, *s, *end;
    int depth;
    char err[160]; /* first error, with its byte offset */
} json_cursor;

void json_init(json_cursor *c, const char *text, size_t n);
/* Skips whitespace and returns the next byte, or -1 at the end. */
int json_peek(json_cursor *c);
/* Consumes the byte ch (after whitespace); -1 with an error otherwise. */
int json_expect(json_cursor *c, char ch);
/* Parses a string into a new NUL-terminated UTF-8 buffer (*out, free it);
   "\u0000" is refused since the result is a C string. */
int json_string(json_cursor *c, char **out);
/* Parses a number that must be an integer in [0, INT64_MAX]. */
int json_uint(json_cursor *c, int64_t *out);
/* Validates and skips one value of any type. */
int json_skip(json_cursor *c);
/* After the top-level value: only whitespace may remain. */
int json_finish(json_cursor *c);
/* Each of "{" ... "}" / "[" ... "]" is walked as: open; then while
   json_next(c, close, &first) returns 1, one member; the commas between
   members are handled by json_next.  Returns 0 at the close, -1 on error. */
int json_next(json_cursor *c, char close, int *first);

#endif
