// `flexattn info`: what the JIT found on this machine. Never throws; absences are reported.
#include <sstream>

#include "flexattn/jit.h"
#include "jit/device.h"
#include "jit/driver_api.h"
#include "jit/header_bundle.h"
#include "jit/nvrtc.h"

#ifndef FLEXATTN_VERSION
#define FLEXATTN_VERSION "unknown"
#endif

namespace flexattn::jit {

JitInfo jit_info() {
  JitInfo info;
  info.library_version = FLEXATTN_VERSION;
  if (const DriverApi* d = try_driver(&info.driver_error)) {
    info.driver_found = true;
    info.driver_path = d->path;
    d->cuDriverGetVersion(&info.driver_version);
    try {
      int n = device_count();
      for (int i = 0; i < n; ++i) {
        DeviceProps p = device_props(i);
        info.devices.push_back({p.index, p.name, p.arch, p.sm_count, p.smem_per_block_optin, p.total_mem});
      }
    } catch (const std::exception& e) {
      info.driver_error = e.what();
    }
  }
  if (const NvrtcApi* n = try_nvrtc(&info.nvrtc_error)) {
    info.nvrtc_found = true;
    info.nvrtc_path = n->path;
    info.nvrtc_version = n->version();
  }
  info.cache_dir = cache_dir();
  for (const auto& e : cache_list()) info.cache_entries++, info.cache_bytes += e.bytes;
  info.header_count = int(header_bundle().size());
  info.header_bundle_hash = header_bundle_hash();
  return info;
}

std::string format_jit_info(const JitInfo& info) {
  std::ostringstream o;
  o << "flexattn " << info.library_version << "\n";
  if (info.driver_found) {
    o << "CUDA driver: " << info.driver_path << " (CUDA " << info.driver_version / 1000 << "."
      << (info.driver_version % 1000) / 10 << ")\n";
    if (!info.driver_error.empty()) o << "  " << info.driver_error << "\n";
    if (info.devices.empty() && info.driver_error.empty()) o << "  no CUDA devices\n";
    for (const auto& d : info.devices)
      o << "  device " << d.index << ": " << d.name << ", " << d.arch << ", " << d.sm_count << " SMs, "
        << d.smem_per_block_optin / 1024 << " KiB smem per block, " << d.total_mem / (1024 * 1024) << " MiB\n";
  } else {
    o << "CUDA driver: not available (" << info.driver_error << ")\n";
  }
  if (info.nvrtc_found)
    o << "NVRTC: " << info.nvrtc_version << " (" << info.nvrtc_path << ")\n";
  else
    o << "NVRTC: not available\n" << info.nvrtc_error << "\n";
  o << "kernel cache: " << info.cache_dir << " (" << info.cache_entries << " entries, " << info.cache_bytes / 1024
    << " KiB)\n";
  o << "embedded kernel headers: " << info.header_count << " (bundle " << info.header_bundle_hash.substr(0, 16)
    << ")\n";
  return o.str();
}

}  // namespace flexattn::jit
