// Writes GGUF v3 files: metadata and tensors, tensor data aligned to `general.alignment`.
// Used by `tandem gen-model` for synthetic models, and by tests to build (and then damage)
// files byte by byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace tandem::gguf {

class writer {
 public:
  explicit writer(uint64_t alignment = 32);

  // Sets (or replaces) a metadata entry. Entries keep the order of their first set().
  void set(std::string key, value v);
  void set_string(std::string key, std::string s) { set(std::move(key), value{std::move(s)}); }
  void set_u32(std::string key, uint32_t x) { set(std::move(key), value{x}); }
  void set_f32(std::string key, float x) { set(std::move(key), value{x}); }
  void set_bool(std::string key, bool x) { set(std::move(key), value{x}); }
  void set_string_array(std::string key, const std::vector<std::string>& items);
  template <class T>
  void set_array(std::string key, value_type elem_type, const std::vector<T>& items) {
    array_value a{elem_type, {}};
    a.items.reserve(items.size());
    for (const auto& x : items) a.items.push_back(value{x});
    set(std::move(key), value{std::move(a)});
  }

  // Adds a tensor; `data` must hold exactly row_bytes(type, ne[0]) * rows bytes.
  // Shape is given innermost first (ne[0] = row length), as GGUF stores it.
  void add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape, std::vector<std::byte> data);

  std::vector<std::byte> serialize() const;
  // Streams the file without building it in memory; throws std::runtime_error on I/O failure.
  void write(const std::filesystem::path& path) const;

 private:
  struct pending_tensor {
    std::string name;
    tensor_type type;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };
  std::vector<std::byte> serialize_header() const;  // up to the aligned start of the data
  uint64_t padded(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  uint64_t alignment_;
  std::vector<std::pair<std::string, value>> metadata_;
  std::vector<pending_tensor> tensors_;
};

}  // namespace tandem::gguf
