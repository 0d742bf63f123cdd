// grammar_compiler actor: compiles the grammars of constrained requests (response_format, a
// "grammar" field, a forced tool call) against the model's vocabulary and keeps the compiled
// ones by text (an LRU of 128, engine/grammar/grammar_cache.h). It runs detached, on its own
// thread: a large schema's compile (tens of milliseconds) never holds a thread the scheduler
// and the streamers share.
//
//   streamer --compile(kind, text)--> grammar_compiler --grammar_reply--> streamer
//   streamer --enqueue(sequence_request with the grammar)--> scheduler --> device worker
//   (the device worker keeps one matcher per sequence and masks its logits before sampling)
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>

#include "actors/atoms.h"
#include "engine/grammar/grammar_cache.h"

namespace tandem {

class tokenizer;

struct grammar_reply {
  std::shared_ptr<const grammar::compiled_grammar> grammar;  // null on error
  std::string error;                                         // what is wrong with the grammar
};

using grammar_compiler_actor =
    caf::typed_actor<caf::replies_to<compile_atom, grammar::grammar_kind, std::string>::with<grammar_reply>>;

// The vocabulary's trie is built on the compiler's own thread when it starts (about 30 ms for
// 49k tokens, 230 ms for Gemma's 262k), so the runtime's start-up does not wait for it; tok
// is held only until then.
grammar_compiler_actor spawn_grammar_compiler(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::grammar_reply)
