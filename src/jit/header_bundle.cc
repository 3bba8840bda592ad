#include "jit/header_bundle.h"

#include <algorithm>

#include "jit/sha256.h"

namespace flexattn::jit {
namespace generated {
extern const BundledHeader kHeaders[];
extern const size_t kHeaderCount;
extern const char kBundleHash[];
}  // namespace generated

const std::vector<BundledHeader>& header_bundle() {
  static const std::vector<BundledHeader> bundle(generated::kHeaders, generated::kHeaders + generated::kHeaderCount);
  return bundle;
}

const std::string& header_bundle_hash() {
  static const std::string hash = generated::kBundleHash;
  return hash;
}

std::string compute_bundle_hash(const std::vector<BundledHeader>& headers) {
  Sha256 h;
  for (const auto& b : headers)
    h.update(b.path).update(" ").update(sha256_hex(std::string_view(b.data, b.size))).update("\n");
  return h.hex();
}

const BundledHeader* find_header(const std::string& path) {
  const auto& b = header_bundle();
  auto it = std::find_if(b.begin(), b.end(), [&](const BundledHeader& h) { return path == h.path; });
  return it == b.end() ? nullptr : &*it;
}

}  // namespace flexattn::jit
