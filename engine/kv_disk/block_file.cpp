#include "engine/kv_disk/block_file.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tandem::kv_disk {

namespace {

constexpr char kMagic[8] = {'T', 'K', 'V', 'B', 'L', 'K', '0', '1'};
constexpr size_t kChecksumAt = 48;

template <class T>
void put(std::byte* at, T v) {
  std::memcpy(at, &v, sizeof v);
}

template <class T>
T get(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// XXH3-64 of the file with the checksum's own bytes read as zeros.
uint64_t checksum_of(std::span<const std::byte> file) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, file.data(), kChecksumAt);
  const uint64_t zero = 0;
  XXH3_64bits_update(st, &zero, sizeof zero);
  XXH3_64bits_update(st, file.data() + kHeaderBytes, file.size() - kHeaderBytes);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

}  // namespace

uint64_t kv_layout::identity() const {
  // Fixed-width fields, a format version first: a change of the file format is a new identity.
  const uint64_t fields[] = {1, model, dtype, n_layer, n_head_kv, head_dim, block_tokens, block_bytes};
  return XXH64(fields, sizeof fields, 0x4b564449534b3031ull) | 1;
}

uint64_t file_bytes(const kv_layout& layout) {
  return kHeaderBytes + uint64_t{layout.block_tokens} * sizeof(token_id) + layout.block_bytes;
}

uint64_t name_id_of(uint64_t identity, uint64_t hash) { return XXH64(&hash, sizeof hash, identity) | 1; }

std::string file_name(uint64_t identity, uint64_t hash) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx.kvb", static_cast<unsigned long long>(name_id_of(identity, hash)));
  return buf;
}

uint64_t name_id(std::string_view name) {
  if (name.size() != 20 || name.substr(16) != ".kvb") return 0;
  uint64_t v = 0;
  for (char c : name.substr(0, 16)) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return 0;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

std::vector<std::byte> encode(uint64_t identity, const block_key& key, std::span<const std::byte> payload) {
  const size_t token_bytes = key.tokens.size() * sizeof(token_id);
  std::vector<std::byte> out(kHeaderBytes + token_bytes + payload.size());
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put<uint64_t>(out.data() + 8, identity);
  put<uint64_t>(out.data() + 16, key.hash);
  put<uint64_t>(out.data() + 24, key.parent);
  put<uint32_t>(out.data() + 32, static_cast<uint32_t>(key.tokens.size()));
  put<uint32_t>(out.data() + 36, 0);
  put<uint64_t>(out.data() + 40, payload.size());
  put<uint64_t>(out.data() + kChecksumAt, 0);
  if (token_bytes > 0) std::memcpy(out.data() + kHeaderBytes, key.tokens.data(), token_bytes);
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes + token_bytes, payload.data(), payload.size());
  put<uint64_t>(out.data() + kChecksumAt, checksum_of(out));
  return out;
}

read_status decode(std::span<const std::byte> file, const kv_layout& layout, const block_key& key,
                   std::vector<std::byte>& payload) {
  if (file.size() != file_bytes(layout)) return read_status::corrupt;
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return read_status::corrupt;
  if (get<uint64_t>(file.data() + kChecksumAt) != checksum_of(file)) return read_status::corrupt;
  // A sound file: is it the block asked for, of this model and shape?
  if (get<uint64_t>(file.data() + 8) != layout.identity()) return read_status::foreign;
  if (get<uint64_t>(file.data() + 16) != key.hash || get<uint64_t>(file.data() + 24) != key.parent) {
    return read_status::foreign;
  }
  if (get<uint32_t>(file.data() + 32) != key.tokens.size() || key.tokens.size() != layout.block_tokens ||
      get<uint64_t>(file.data() + 40) != layout.block_bytes) {
    return read_status::foreign;
  }
  const size_t token_bytes = key.tokens.size() * sizeof(token_id);
  if (std::memcmp(file.data() + kHeaderBytes, key.tokens.data(), token_bytes) != 0) return read_status::foreign;
  const auto body = file.subspan(kHeaderBytes + token_bytes);
  payload.assign(body.begin(), body.end());
  return read_status::ok;
}

}  // namespace tandem::kv_disk
