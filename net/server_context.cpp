#include "net/server_context.h"

#include <cstdio>
#include <random>

#include "engine/tokenizer/tokenizer.h"
#include "tandem/runtime.h"

namespace tandem::net {

api_limits server_context::limits() const {
  api_limits l;
  if (const runtime* r = rt.load()) {
    l.vocab_size = r->tok().vocab_size();
    l.max_model_len = r->max_model_len();
  }
  return l;
}

std::string server_context::new_id(const char* prefix) {
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08llx%08llx", prefix, static_cast<unsigned long long>(salt & 0xffffffffu),
                static_cast<unsigned long long>(next_id.fetch_add(1)));
  return buf;
}

}  // namespace tandem::net
