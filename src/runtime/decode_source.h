#pragma once
// Generated source of the decode kernel family (kernels/decode): two row tiles of the split-KV kernel
// and the combine kernel, for one variant / dtype / head dims.
#include <string>
#include <vector>

#include "flexattn/codegen.h"
#include "runtime/kernel_set.h"

namespace flexattn::runtime {

std::string kernel_source_decode(const codegen::GeneratedVariant& variant, const KernelSetKey& key);

// Entry names of the set for head dims (d, dv), in the order the source defines them.
std::vector<std::string> decode_kernel_names(int d, int dv);

// The entry for a row tile (decode_block_m): "flexattn_decode_m16" or "flexattn_decode_m64".
std::string decode_entry_for(int block_m);

}  // namespace flexattn::runtime
