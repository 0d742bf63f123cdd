// The tokens a grammar can allow, as byte strings in a trie, built once per model.
//
//   root --'"'--> n1 (token `"`) --','--> n2 (token `",`)
//        --'a'--> n3 (token `a`) --'b'--> n4 (tokens `ab`)       children of a node are
//                                                                  contiguous, sorted by byte
// Control tokens (<|im_start|> ...) and tokens without bytes are not in the trie: a grammar
// never allows them. The end-of-generation tokens are allowed exactly when the grammar
// accepts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace tandem {
class tokenizer;
}

namespace tandem::grammar {

// The tokens one automaton state allows as far as its rule goes (compiled_grammar.h).
struct local_mask {
  std::vector<uint64_t> bits;           // dense form (many tokens), or empty
  std::vector<int32_t> tokens;          // sparse form (few tokens)
  std::vector<uint32_t> continuations;  // trie nodes where the top's rule ended, bytes left
};

class vocabulary {
 public:
  struct node {
    uint32_t child_begin = 0, child_end = 0;  // into nodes
    uint32_t token_begin = 0, token_end = 0;  // into token ids: tokens whose bytes end here
    uint8_t byte = 0;                         // the byte that leads here from the parent
  };

  // bytes[id]: the token's bytes, empty for a token a grammar never allows.
  vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_ids);
  static std::shared_ptr<const vocabulary> from_tokenizer(const tokenizer& tok);

  size_t size() const { return bytes_.size(); }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_end(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < is_end_.size() && is_end_[id]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

  const node& at(uint32_t n) const { return nodes_[n]; }
  std::span<const int32_t> tokens(const node& n) const {
    return {token_ids_.data() + n.token_begin, n.token_end - n.token_begin};
  }
  size_t node_count() const { return nodes_.size(); }
  size_t max_token_bytes() const { return max_bytes_; }

  // Masks of states of rules that call no other rule, shared by every grammar on this
  // vocabulary (the string, number and format rules of JSON schemas recur in all of them).
  // Keyed by the rule's canonical body and the state's offset in it; bounded.
  std::shared_ptr<const local_mask> shared_local(const std::string& key) const;
  std::shared_ptr<const local_mask> share_local(const std::string& key, std::shared_ptr<const local_mask> m) const;
  static constexpr size_t kMaxSharedLocals = 4096;

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<char> is_end_;
  std::vector<node> nodes_;  // nodes_[0] is the root
  std::vector<int32_t> token_ids_;
  size_t max_bytes_ = 0;
  mutable std::mutex shared_mutex_;
  mutable std::map<std::string, std::shared_ptr<const local_mask>> shared_;
};

}  // namespace tandem::grammar
