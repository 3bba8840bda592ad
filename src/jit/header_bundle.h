#pragma once
// The headers under kernels/ (*.h, *.cuh, *.inc), embedded into the library at build time by
// cmake/embed_headers.cmake, so NVRTC can compile kernels without any file on disk.
#include <cstddef>
#include <string>
#include <vector>

namespace flexattn::jit {

struct BundledHeader {
  const char* path;  // relative to kernels/, '/'-separated: the name kernels #include
  const char* data;  // contents, NUL-terminated (size excludes the NUL)
  size_t size;
};

// Sorted by path.
const std::vector<BundledHeader>& header_bundle();
// SHA-256 of the bundle as the generator computed it: over "<path> <sha256 of contents>\n" per file.
const std::string& header_bundle_hash();
// The same hash recomputed from `headers` (tests compare it with header_bundle_hash()).
std::string compute_bundle_hash(const std::vector<BundledHeader>& headers);
// nullptr when no bundled header has this path.
const BundledHeader* find_header(const std::string& path);

}  // namespace flexattn::jit
