/* Session checkpoints with some variables replaced: what data-parallel
   training (src/dist/) writes and reads when each rank holds only a shard
   of the optimiser state. */
#ifndef KILN_TRAIN_CHECKPOINT_H
#define KILN_TRAIN_CHECKPOINT_H

#include "kiln.h"

/* kiln_session_save, leaving out the variables for which skip(ctx, name)
   is nonzero (skip NULL: none) and writing the tensors of extra (NULL:
   none) beside the others. */
kiln_status kiln_session_save_with(kiln_session *s, const char *path,
                                   int (*skip)(void *ctx, const char *name),
                                   void *ctx, const kiln_tensor_list *extra);
/* kiln_session_load of the tensors of l, read from path (named in
   messages); l stays the caller's. */
kiln_status kiln_session_load_list(kiln_session *s, const kiln_tensor_list *l,
                                   const char *path);
/* The checks of kiln_session_load_list alone: KILN_OK when l would load
   (the session's error otherwise); nothing changes either way. */
kiln_status kiln_session_check_list(kiln_session *s, const kiln_tensor_list *l,
                                    const char *path);

#endif
