/* engine_tok.h - the tokenizer an engine loaded from its model's GGUF, for the
 * layers above (serve, tools) that encode prompts for it and render its
 * tokens, so they share one vocabulary without loading it twice.
 *
 * Invariant: the tokenizer belongs to the engine (immutable, thread-safe) and
 * lives exactly as long as it: never use it after cinfer_engine_destroy(). */
#ifndef CINFER_ENGINE_ENGINE_TOK_H
#define CINFER_ENGINE_ENGINE_TOK_H

#include "cinfer/engine.h"
#include "text/tokenizer.h"

const tokenizer *cinfer_engine_tokenizer(const cinfer_engine *e);

#endif
