/* Kiln: tensor files (npz, npy, safetensors, .bin, IDX).
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_IO_H
#define KILN_IO_H

#include "kiln/core.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- files */

/* An ordered list of (name, tensor) pairs, as stored in .npz and
   .safetensors files.  The list owns its tensors (a wrapped tensor's memory
   stays the caller's). */
typedef struct kiln_tensor_list kiln_tensor_list;

/* New empty list; NULL (kiln_last_error) when out of memory. */
kiln_tensor_list *kiln_tensor_list_new(void);
/* Frees the list and every tensor in it.  NULL is a no-op. */
void kiln_tensor_list_free(kiln_tensor_list *l);
/* Number of entries (0 for NULL). */
int kiln_tensor_list_count(const kiln_tensor_list *l);
/* Name / tensor of the i-th entry, in insertion order (NULL when out of
   range).  The tensor stays owned by the list. */
const char *kiln_tensor_list_name(const kiln_tensor_list *l, int i);
kiln_tensor *kiln_tensor_list_get(const kiln_tensor_list *l, int i);
/* The tensor named name, or NULL when there is none. */
kiln_tensor *kiln_tensor_list_find(const kiln_tensor_list *l, const char *name);
/* Appends t under a copy of name and takes ownership of t.  KILN_ERR_ARG
   (kiln_last_error) for a NULL or empty argument, a duplicate name or a
   tensor already added to a list (this or another); on error the caller
   keeps t. */
kiln_status kiln_tensor_list_add(kiln_tensor_list *l, const char *name,
                                 kiln_tensor *t);

/* Writes the list as a numpy .npz archive (one "<name>.npy" member per
   tensor, f32 as '<f4', i32 as '<i4'), deflated when compress is non-zero.
   Atomic: a temporary file is renamed over path, so on any error an existing
   file at path is untouched; a symlink at path stays and its target gets
   the new content, and stale temporaries of path are removed.  KILN_ERR_ARG,
   KILN_ERR_DTYPE or KILN_ERR_IO with kiln_last_error. */
kiln_status kiln_npz_write(const char *path, const kiln_tensor_list *l,
                           int compress);
/* Reads a .npz archive (np.savez or np.savez_compressed).  '<f4' and '<f8'
   load as f32; '<i4', '<i8' (range-checked), '|u1' and '|b1' as i32.  NULL
   (kiln_last_error) on a missing, truncated or corrupt file or an
   unsupported array (Fortran order, big-endian, other dtypes). */
kiln_tensor_list *kiln_npz_read(const char *path);

/* Reads one numpy .npy array (np.save), dtypes as kiln_npz_read.  NULL
   (kiln_last_error) on a missing, truncated or corrupt file or an
   unsupported array. */
kiln_tensor *kiln_npy_read(const char *path);

/* Writes the list as .safetensors (F32 / I32 tensors), atomically as
   kiln_npz_write. */
kiln_status kiln_safetensors_write(const char *path, const kiln_tensor_list *l);
/* Reads a .safetensors file in data order, skipping __metadata__.  F32 and
   F64 load as f32; I32, I64 (range-checked) and U8 as i32.  NULL
   (kiln_last_error) on a bad header, out-of-range offsets or sizes that do
   not match the shapes. */
kiln_tensor_list *kiln_safetensors_read(const char *path);

/* Reads an IDX file (MNIST), plain or gzip-compressed: unsigned-byte data
   of 1 to 4 dimensions, converted to as (KILN_F32, values 0..255, or
   KILN_I32).  NULL (kiln_last_error) on a bad magic, a file shorter or
   longer than its header says, or an unsupported element type. */
kiln_tensor *kiln_idx_read(const char *path, kiln_dtype as);

/* Prints one line per tensor of a .npz, .safetensors or Kiln .bin file
   (detected from its first bytes): "W0  f32  [784,600]", with "(stored <f8)"
   when the file's type differs.  Reads headers only (a .bin is read whole
   to check its checksum).  KILN_ERR_IO (kiln_last_error) as the readers. */
kiln_status kiln_file_info(const char *path, FILE *out);
/* Reads a .npz, .safetensors or .bin file, whichever its first bytes say it
   is.  NULL (kiln_last_error) as the readers. */
kiln_tensor_list *kiln_file_read(const char *path);
/* Writes l as .safetensors or .bin when path ends so, otherwise as an
   uncompressed .npz; atomic like the writers.  Errors as the writers. */
kiln_status kiln_file_write(const char *path, const kiln_tensor_list *l);
/* Checks, writing nothing, that a file could be saved at path (as the
   writers do: through symlinks to their target): its directory exists and
   is writable and path is not a directory.  KILN_ERR_IO (kiln_last_error)
   otherwise, KILN_ERR_ARG for NULL.  Lets a program fail before long work. */
kiln_status kiln_file_check_writable(const char *path);

/* ---------------------------------------------- the .bin format */

/* Kiln's .bin format (what kiln_session_save writes for a ".bin" path):
   a 64-byte header (magic "KILNBIN\0", version, tensor count, table and
   data sizes, CRC32s), a table of entries (name, dtype, shape, offset,
   size, CRC32 of the data), then the data, little-endian, every tensor
   starting at a 64-byte aligned file offset so the file can be
   memory-mapped.  Writing is atomic as kiln_npz_write.  KILN_ERR_ARG,
   KILN_ERR_DTYPE or KILN_ERR_IO with kiln_last_error. */
typedef struct kiln_tensor_list kiln_tensor_list;
kiln_status kiln_bin_write(const char *path, const kiln_tensor_list *l);
/* Reads a .bin file, checking everything (magic, version, sizes against
   the file's, names, dtypes, shapes, alignment, every CRC) before returning
   it.  NULL (kiln_last_error) on a missing, truncated or corrupt file. */
kiln_tensor_list *kiln_bin_read(const char *path);

KILN_DECLS_END
#endif /* KILN_IO_H */
