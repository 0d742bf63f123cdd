#include "engine/chat/tool_call_list.h"

#include <random>

namespace tandem {

tool_call_list::tool_call_list(std::function<std::string()> make_id)
    : make_id_(make_id ? std::move(make_id) : random_id) {}

std::string tool_call_list::random_id() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[pick(rng)]);
  return id;
}

void tool_call_list::begin(std::vector<tool_call_delta>& out, std::string name, std::string id) {
  chat_tool_call c;
  c.id = id.empty() ? make_id_() : std::move(id);
  c.name = std::move(name);
  tool_call_delta d;
  d.index = calls_.size();
  d.id = c.id;
  d.name = c.name;
  calls_.push_back(std::move(c));
  out.push_back(std::move(d));
  open_ = true;
}

void tool_call_list::append(std::vector<tool_call_delta>& out, std::string_view text) {
  if (text.empty() || !open_) return;
  calls_.back().arguments.append(text);
  const size_t index = calls_.size() - 1;
  if (!out.empty() && out.back().index == index) {
    out.back().arguments.append(text);
  } else {
    tool_call_delta d;
    d.index = index;
    d.arguments = std::string(text);
    out.push_back(std::move(d));
  }
}

void tool_call_list::end(std::vector<tool_call_delta>& out) {
  if (!open_) return;
  if (calls_.back().arguments.empty()) append(out, "{}");
  open_ = false;
}

}  // namespace tandem
