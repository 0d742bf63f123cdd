#include "models/model_plan.h"

#include <algorithm>

namespace tandem {

int find_model(const std::vector<model_spec>& specs, const std::string& requested, int default_index) {
  if (requested.empty()) return default_index;
  const auto lookup = [&](const std::string& n) -> int {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].name == n) return static_cast<int>(i);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      for (const auto& a : specs[i].aliases) {
        if (a == n) return static_cast<int>(i);
      }
    }
    return -1;
  };
  if (const int i = lookup(requested); i >= 0) return i;
  const auto colon = requested.find(':');
  if (colon == std::string::npos || colon == 0) return -1;
  return lookup(requested.substr(0, colon));  // NAME:ADAPTER: the base model's runtime picks the adapter
}

bool model_allowed(const std::vector<std::string>& allowed, const std::string& name) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

uint64_t accounted_bytes(const std::vector<model_slot>& slots) {
  uint64_t sum = 0;
  for (const auto& s : slots) {
    if (s.state != model_state::unloaded) sum += s.bytes;
  }
  return sum;
}

room_plan plan_room(const std::vector<model_slot>& slots, size_t want, uint64_t need, uint64_t budget) {
  room_plan p;
  uint64_t used = 0, pinned = 0, unloading = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i == want || slots[i].state == model_state::unloaded) continue;
    used += slots[i].bytes;
    if (slots[i].pinned) pinned += slots[i].bytes;
    if (slots[i].state == model_state::unloading) unloading += slots[i].bytes;
  }
  if (used + need <= budget) {
    p.fits_now = true;
    return p;
  }
  if (pinned + need > budget) {
    p.never = true;
    return p;
  }
  // Idle loaded models, least recently used first, until what stays (the unloading ones go
  // on their own) leaves room.
  std::vector<size_t> idle;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (i != want && s.state == model_state::loaded && s.in_use == 0 && !s.pinned) idle.push_back(i);
  }
  std::stable_sort(idle.begin(), idle.end(), [&](size_t a, size_t b) { return slots[a].last_use < slots[b].last_use; });
  uint64_t staying = used - unloading;
  if (staying + need <= budget) return p;  // the unloads under way make the room: wait for them
  for (const size_t i : idle) {
    p.unload.push_back(i);
    staying -= slots[i].bytes;
    if (staying + need <= budget) return p;
  }
  // Not enough is idle: unload nothing yet, wait for requests to end.
  p.unload.clear();
  return p;
}

std::vector<size_t> expired(const std::vector<model_slot>& slots, std::chrono::steady_clock::time_point now) {
  std::vector<size_t> out;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (s.state != model_state::loaded || s.in_use > 0 || s.pinned || s.keep_alive_s < 0) continue;
    if (std::chrono::duration<double>(now - s.last_use).count() >= s.keep_alive_s) out.push_back(i);
  }
  return out;
}

}  // namespace tandem
