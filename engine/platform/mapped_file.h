// A read-only memory mapping of a whole file. Weights are used in place, never copied.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tandem {

class mapped_file {
 public:
  mapped_file() = default;
  // Maps the file read-only; throws std::runtime_error naming the path on failure.
  explicit mapped_file(const std::filesystem::path& path);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem
