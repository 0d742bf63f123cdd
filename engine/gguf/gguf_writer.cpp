#include "engine/gguf/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tandem::gguf {
namespace {

class byte_sink {
 public:
  template <class T>
  void put(T x) {
    // resize + memcpy: GCC 12 misreads a vector insert of sizeof(T) bytes as an overflow.
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &x, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    put_bytes(std::as_bytes(std::span(s)));
  }
  void put_bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void pad_to(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(std::byte{0});
  }
  std::vector<std::byte> take() { return std::move(out_); }

  void put_value(const value& v) {
    std::visit(
        [this](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<T, array_value>) {
            put<uint32_t>(static_cast<uint32_t>(x.elem_type));
            put<uint64_t>(x.items.size());
            for (const auto& item : x.items) {
              if (item.type() != x.elem_type) throw std::invalid_argument("gguf writer: mixed array element types");
              put_value(item);
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<T>(x);
          }
        },
        v.data);
  }

 private:
  std::vector<std::byte> out_;
};

}  // namespace

writer::writer(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw std::invalid_argument("gguf writer: alignment must be a power of two");
  }
  if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void writer::set(std::string key, value v) {
  for (auto& [k, old] : metadata_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(v));
}

void writer::set_string_array(std::string key, const std::vector<std::string>& items) {
  set_array(std::move(key), value_type::string, items);
}

void writer::add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape, std::vector<std::byte> data) {
  if (shape.empty() || shape.size() > 4) throw std::invalid_argument("gguf writer: 1 to 4 dimensions");
  const auto tr = traits_of(type);
  if (shape[0] % tr.block_size != 0) {
    throw std::invalid_argument("gguf writer: row length of " + name + " is not a multiple of the block size");
  }
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  if (data.size() != row_bytes(type, shape[0]) * static_cast<size_t>(rows)) {
    throw std::invalid_argument("gguf writer: data size of " + name + " does not match its shape");
  }
  tensors_.push_back({std::move(name), type, std::move(shape), std::move(data)});
}

std::vector<std::byte> writer::serialize_header() const {
  byte_sink s;
  s.put<uint32_t>(0x46554747);  // "GGUF"
  s.put<uint32_t>(3);
  s.put<uint64_t>(tensors_.size());
  s.put<uint64_t>(metadata_.size());
  for (const auto& [k, v] : metadata_) {
    s.put_string(k);
    s.put<uint32_t>(static_cast<uint32_t>(v.type()));
    s.put_value(v);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    s.put_string(t.name);
    s.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto d : t.shape) s.put<uint64_t>(static_cast<uint64_t>(d));
    s.put<uint32_t>(static_cast<uint32_t>(t.type));
    s.put<uint64_t>(offset);
    offset += padded(t.data.size());
  }
  s.pad_to(alignment_);
  return s.take();
}

std::vector<std::byte> writer::serialize() const {
  auto out = serialize_header();
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(out.size() + padded(t.data.size()) - t.data.size(), std::byte{0});
  }
  return out;
}

void writer::write(const std::filesystem::path& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  const auto put = [&out](const std::byte* p, size_t n) {
    out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  const auto header = serialize_header();
  put(header.data(), header.size());
  const std::vector<std::byte> zeros(alignment_);
  for (const auto& t : tensors_) {
    put(t.data.data(), t.data.size());
    put(zeros.data(), padded(t.data.size()) - t.data.size());
  }
  if (!out.flush()) throw std::runtime_error("write failed: " + path.string());
}

}  // namespace tandem::gguf
