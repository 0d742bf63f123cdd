#include "actors/grammar_compiler.h"

#include <exception>

#include "actors/atoms.h"
#include "engine/grammar/vocabulary.h"

namespace tandem {
namespace {

struct grammar_compiler_state {
  std::unique_ptr<grammar::grammar_cache> cache;
  static inline const char* name = "tandem.grammar_compiler";
};

grammar_compiler_actor::behavior_type grammar_compiler(
    grammar_compiler_actor::stateful_pointer<grammar_compiler_state> self, std::shared_ptr<const tokenizer> tok) {
  self->state.cache = std::make_unique<grammar::grammar_cache>(grammar::vocabulary::from_tokenizer(*tok));
  return {
      [self](compile_atom, grammar::grammar_kind kind, const std::string& text) -> grammar_reply {
        try {
          return {self->state.cache->get(kind, text), ""};
        } catch (const std::exception& e) {
          return {nullptr, e.what()};
        }
      },
  };
}

}  // namespace

grammar_compiler_actor spawn_grammar_compiler(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok) {
  return sys.spawn<caf::detached>(grammar_compiler, std::move(tok));
}

}  // namespace tandem
