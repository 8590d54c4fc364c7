/* Kiln: status codes, dtypes, shapes, host tensors, the RNG and logging.
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_CORE_H
#define KILN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every part opens and closes its declarations with these: C linkage for
   C++, and default visibility (the library is built with hidden symbols,
   so what the public headers declare is all that libkiln.so exports). */
#ifdef __cplusplus
#define KILN_EXTERN_C_BEGIN extern "C" {
#define KILN_EXTERN_C_END }
#else
#define KILN_EXTERN_C_BEGIN
#define KILN_EXTERN_C_END
#endif
#if defined(__GNUC__)
#define KILN_DECLS_BEGIN                                                       \
    KILN_EXTERN_C_BEGIN _Pragma("GCC visibility push(default)")
#define KILN_DECLS_END _Pragma("GCC visibility pop") KILN_EXTERN_C_END
#else
#define KILN_DECLS_BEGIN KILN_EXTERN_C_BEGIN
#define KILN_DECLS_END KILN_EXTERN_C_END
#endif

KILN_DECLS_BEGIN

/* ---------------------------------------------- basics */

#define KILN_MAX_DIMS 8
/* Largest element count of any shape (2^40); counting zero dimensions as 1,
   the product of a shape's dimensions never exceeds it, so no element count,
   stride or byte size can overflow. */
#define KILN_MAX_NUMEL ((int64_t)1 << 40)

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_ARG,    /* bad argument: NULL, wrong shape, wrong dtype */
    KILN_ERR_SHAPE,  /* shapes do not agree */
    KILN_ERR_DTYPE,  /* dtypes do not agree or are unsupported */
    KILN_ERR_STATE,  /* call made in the wrong state (e.g. grad before backward)
                      */
    KILN_ERR_MEMORY, /* out of memory or workspace */
    KILN_ERR_IO,     /* file missing, unreadable, truncated or corrupt */
    KILN_ERR_NOTFOUND, /* a name that does not exist */
    KILN_ERR_NUMERIC,  /* NaN or infinity found, gradient check failed */
    KILN_ERR_UNSUPPORTED, /* valid input Kiln cannot handle (an ONNX op,
                             attribute value or dtype; a missing feature) */
} kiln_status;

typedef enum kiln_dtype {
    KILN_F32 = 0,
    KILN_I32 = 1,
    KILN_F16 = 2,  /* reserved */
    KILN_BF16 = 3, /* reserved */
    KILN_F64 = 4,  /* reserved */
    KILN_U8 = 5,   /* reserved */
} kiln_dtype;

/* A tensor shape: ndim dimensions (0 for a scalar), each >= 0.  sym marks
   (KILN_AXIS bits) the axes whose size is a graph's symbolic size, such as
   the batch (see kiln_input_sym); node shapes carry it through the ops, and
   comparisons of shapes ignore it.  0 in KILN_SHAPE and in tensors. */
typedef struct kiln_shape {
    int ndim;
    int64_t d[KILN_MAX_DIMS];
    unsigned sym;
} kiln_shape;

/* KILN_SHAPE(128, 784) builds a kiln_shape; KILN_SCALAR is the 0-d shape. */
#define KILN_SHAPE(...)                                                        \
    ((kiln_shape){                                                             \
        .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),     \
        .d = {__VA_ARGS__}})
#define KILN_SCALAR ((kiln_shape){.ndim = 0, .d = {0}})

/* Axis sets are bit masks: KILN_AXIS(0) | KILN_AXIS(2). */
#define KILN_AXIS(i) (1u << (i))
#define KILN_ALL_AXES 0xFFu

/* Name of a status code, e.g. "shape error". Never NULL. */
const char *kiln_status_str(kiln_status st);
/* Bytes per element of a dtype (0 for an unknown dtype). */
size_t kiln_dtype_size(kiln_dtype dt);
/* Name of a dtype: "f32", "i32", ... ("?" for an unknown dtype). */
const char *kiln_dtype_name(kiln_dtype dt);
/* Number of elements of a shape (1 for a scalar); -1 for an invalid shape
   (ndim outside [0, KILN_MAX_DIMS], a negative dimension, or a product of
   dimensions above KILN_MAX_NUMEL). */
int64_t kiln_shape_numel(kiln_shape s);
/* Writes "[128,784]" into buf (always terminated); returns buf. */
char *kiln_shape_str(kiln_shape s, char *buf, size_t n);
/* Message of the last error raised by a call with no object to hold it
   (constructors returning NULL, a NULL object, file readers; see the error
   model in kiln.h).  Thread-local, never cleared by a success; never
   NULL. */
const char *kiln_last_error(void);

/* ---------------------------------------------- tensors */

/* A host tensor: dtype, shape, contiguous row-major data, owned or wrapping
   caller memory. */
typedef struct kiln_tensor kiln_tensor;

/* New zero-filled tensor owning its data; NULL (kiln_last_error) on a bad
   shape, dtype or out of memory. */
kiln_tensor *kiln_tensor_new(kiln_dtype dt, kiln_shape shape);
/* Tensor wrapping caller memory (not freed by kiln_tensor_free); NULL on bad
   arguments. */
kiln_tensor *kiln_tensor_wrap(kiln_dtype dt, kiln_shape shape, void *data);
/* New owned f32 tensor copied from values (numel(shape) floats). */
kiln_tensor *kiln_tensor_from_f32(kiln_shape shape, const float *values);
/* Frees the tensor (and its data when owned).  NULL is a no-op. */
void kiln_tensor_free(kiln_tensor *t);
kiln_dtype kiln_tensor_dtype(const kiln_tensor *t);
kiln_shape kiln_tensor_shape(const kiln_tensor *t);
int64_t kiln_tensor_numel(const kiln_tensor *t);
/* Pointer to the data (NULL for a NULL tensor). */
void *kiln_tensor_data(const kiln_tensor *t);
/* Typed data pointers: NULL when t is NULL or of another dtype. */
float *kiln_tensor_f32(const kiln_tensor *t);
int32_t *kiln_tensor_i32(const kiln_tensor *t);

/* ---------------------------------------------- RNG */

/* A small seeded generator (PCG32); the same seed gives the same stream on
   every machine. */
typedef struct kiln_rng {
    uint64_t state, inc;
} kiln_rng;

/* Seeds r (a NULL r is ignored). */
void kiln_rng_seed(kiln_rng *r, uint64_t seed);
/* Next 32 random bits (0 for a NULL r). */
uint32_t kiln_rng_u32(kiln_rng *r);
/* Uniform in [0, 1). */
double kiln_rng_uniform(kiln_rng *r);
/* Standard normal (Box-Muller). */
double kiln_rng_normal(kiln_rng *r);

/* ---------------------------------------------- logging */

/* Logging.  Lines look like Marian's:
     [2026-11-21 15:10:51] [memory] Reserving 256 MB, device cpu0
   Warnings and errors carry "[warn] " / "[error] " after the time.  The
   level and the callback are process-wide; set them before starting
   threads (see the thread notes at the top of kiln.h). */
typedef enum kiln_logging_level {
    KILN_LOGGING_DEBUG,
    KILN_LOGGING_INFO, /* the default */
    KILN_LOGGING_WARN,
    KILN_LOGGING_ERROR,
    KILN_LOGGING_OFF,
} kiln_logging_level;
/* Receives each formatted line (no trailing newline; debug output may hold
   several lines). */
typedef void (*kiln_logging_fn)(kiln_logging_level level, const char *line,
                                void *user);
/* Messages below level are dropped.  An unknown level is ignored. */
void kiln_set_logging_level(kiln_logging_level level);
kiln_logging_level kiln_get_logging_level(void);
/* Sends every line to fn (NULL restores the default: stderr). */
void kiln_set_logging_callback(kiln_logging_fn fn, void *user);
/* Logs a printf-style message under a category ("memory", "training"; NULL
   for none).  A NULL fmt is ignored. */
void kiln_logging_printf(kiln_logging_level level, const char *category,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

KILN_DECLS_END
#endif /* KILN_CORE_H */
