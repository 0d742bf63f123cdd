// A grammar bound to a vocabulary: what a request's matcher shares with every other request
// using the same grammar (immutable, plus a lazily filled per-state table that several
// threads may fill at once without a lock: each slot is published by compare-and-swap).
//
// The mask of a matcher state is computed per stack from its top state alone, as far as
// that state's rule goes (XGrammar's context-independent tokens):
//
//   local(top) : walk the vocabulary trie from `top` with the bottom unknown
//                 - token bytes all read inside the rule (or ending exactly where the rule
//                   ends)                          -> allowed, whatever lies below
//                 - the rule ends with bytes left  -> the trie node there is a
//                   `continuation`: the rest is read against the stack below, at mask time
//                 - a byte the rule cannot read    -> rejected
//
//   mask(state) = OR over stacks [.., c, top]:  local(top).allowed
//                 | walk(continuation nodes, expand([.., c]))      (usually a few tokens)
//                 | end-of-generation ids if the state accepts
//
// local(top) is filled once per state. Its walk is pruned where `top` starts a chain: one
// class of bytes C leads from it along states c1, c2, ... (every byte of C to the same next
// state; inside a JSON string, the printable bytes; in an email, [a-zA-Z0-9._%+-]):
//
//   top --C--> c1 --C--> c2 ... cL   (cL reads no byte of C, or L is the longest token)
//
//   a trie subtree whose bytes are all in C -> not walked: its tokens of <= L bytes are
//       allowed (the plain ones at once: vocabulary::plain_upto(L), less the bitsets
//       plain_with(b) of the plain bytes b that C lacks, if few)
//   the rest (a byte outside C on the way: `"`, `\`, UTF-8, ...) -> walked as above
//
// so a string state costs a walk of the few subtrees holding other bytes, not of the whole
// trie. Where the path leaves C (`The` from [A-Z][a-z]*), the state it reaches may start a
// chain of its own, pruned the same way below that node (tokens added by subtree ranges).
// reference_local() is the unpruned walk, kept as the oracle of the tests.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/stack_set.h"
#include "engine/grammar/vocabulary.h"

namespace tandem::grammar {

// A mask over the vocabulary: bit id % 64 of word id / 64 set = the token is allowed.
using token_bitset = std::vector<uint64_t>;

// Scratch space of one mask computation (one per matcher; not shared between threads).
struct mask_workspace {
  std::vector<stack_set> levels;  // [trie depth]
  std::vector<int32_t> scratch;
  stack_set parent;
};

class compiled_grammar {
 public:
  compiled_grammar(grammar g, std::shared_ptr<const vocabulary> vocab);
  ~compiled_grammar();
  compiled_grammar(const compiled_grammar&) = delete;
  compiled_grammar& operator=(const compiled_grammar&) = delete;

  const grammar& automata() const { return g_; }
  const vocabulary& vocab() const { return *vocab_; }
  const std::shared_ptr<const vocabulary>& vocab_ptr() const { return vocab_; }

  // The initial state (the root rule's start, expanded).
  const stack_set& initial() const { return initial_; }

  // Computed on first use (pruned walk), then shared.
  const local_mask& local(int32_t top) const;
  // The same by the full walk of the trie, computed afresh (the oracle of the tests).
  local_mask reference_local(int32_t top) const;
  // ORs the tokens the state allows into `mask` (mask_words() words, zeroed by the caller).
  void add_mask(const stack_set& state, std::span<uint64_t> mask, mask_workspace& ws) const;
  // How many states have their local mask computed (for the benchmark and tests).
  size_t locals_computed() const { return n_locals_.load(std::memory_order_relaxed); }

 private:
  // Walks the trie below `node` from `at` (the set after the node's bytes).
  template <typename OnToken, typename OnContinuation>
  void walk(uint32_t node, size_t depth, bool base_unknown, mask_workspace& ws, OnToken&& on_token,
            OnContinuation&& on_continuation) const;
  struct chain {
    byte_set bytes{};                    // C
    int length = -1;                     // L; -1: the state starts no chain
    std::vector<uint8_t> plain_missing;  // the plain bytes not in C
    bool plain = false;                  // few of them: plain tokens of C taken from bitsets
  };
  static constexpr size_t kMaxPlainMissing = 16;
  // The chain `state` starts, followed for at most `cap` bytes.
  chain chain_of(int32_t state, size_t cap) const;
  // Chains one local walk found, by state (a deque: pointers to them stay valid as it grows).
  struct chain_store {
    std::deque<chain> chains;
    std::unordered_map<int32_t, std::pair<size_t, size_t>> by_state;  // state -> (index, cap followed)
  };
  const chain* chain_at(int32_t state, size_t cap, chain_store& store) const;
  // How a walk prunes: the path since depth `base` runs along `ch` (subtrees of C only are
  // not walked); plain_path: the whole path from the root is plain bytes of a chain from the
  // root. Where the path leaves the chain, a node with many tokens below looks for a chain
  // from the state reached (store: null when the walk is not pruned).
  struct pruning {
    const chain* ch = nullptr;
    size_t base = 0;
    bool plain_path = false;
    chain_store* store = nullptr;
  };
  static constexpr uint32_t kChainMinTokens = 16;
  // The same for one stack, `below` + [top], while each byte leads to a simple state (the
  // common case: inside a string or a literal), without copying the stack.
  template <typename OnToken, typename OnContinuation>
  void walk_single(uint32_t node, size_t depth, int32_t top, std::span<const int32_t> below, bool base_unknown,
                   pruning prune, mask_workspace& ws, OnToken&& on_token, OnContinuation&& on_continuation) const;
  local_mask compute_local(int32_t top, bool prune) const;

  grammar g_;
  std::shared_ptr<const vocabulary> vocab_;
  stack_set initial_;
  std::unique_ptr<std::atomic<const local_mask*>[]> locals_;  // owned: deleted with the grammar
  mutable std::atomic<size_t> n_locals_{0};
};

}  // namespace tandem::grammar
