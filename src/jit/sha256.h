#pragma once
// SHA-256 (FIPS 180-4). The JIT cache keys entries by it and checks cubins against it; collisions
// or a weak avalanche would silently hand back the wrong kernel, so a real cryptographic hash is used.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flexattn::jit {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Length-prefixed field: hashing ("ab","c") and ("a","bc") must differ.
  Sha256& field(std::string_view s);
  std::array<uint8_t, 32> digest();  // finishes; the object must not be updated afterwards
  std::string hex();                 // 64 lowercase hex digits of digest()

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace flexattn::jit
