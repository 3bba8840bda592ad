#pragma once
// Devices, contexts, device memory, streams and events over the runtime-loaded driver (driver_api.h).
// flexattn uses each device's primary context, the one the CUDA runtime (and so PyTorch) uses too.
#include <cstdint>
#include <functional>
#include <string>

#include "jit/driver_api.h"

namespace flexattn::jit {

struct DeviceProps {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;
  std::string arch;  // NVRTC target: "sm_80", "sm_86", "sm_89", "sm_90a"
  int sm_count = 0;
  int64_t smem_per_block_optin = 0;  // largest dynamic + static smem a block may opt into
  int64_t smem_per_sm = 0;
  int64_t total_mem = 0;
  int64_t l2_bytes = 0;
};

// The NVRTC target for a compute capability. Hopper gets "sm_90a" because its kernels use wgmma/TMA,
// which exist only for the arch-specific target; other archs get the portable "sm_XY".
std::string arch_for(int major, int minor);

// Number of devices; throws flexattn::Error (driver() message) when there is no usable driver.
int device_count();
// Queried once per device (a dozen driver calls), then served from a cache: launches ask for it.
const DeviceProps& device_props(int device);

// Makes `device`'s primary context current on this thread (retained once per device, for the process).
// Throws Error naming `device` and the valid range when it does not exist.
CUcontext use_device(int device);

// Waits for all work of the current context (cuCtxSynchronize); throws Error with the driver's message.
void device_synchronize();

// RAII device allocation in the current context.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) { o.ptr_ = 0, o.size_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(ptr_); }
  size_t size() const { return size_; }
  // Copies `bytes` at offset 0; throws Error when bytes > size().
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void zero();

 private:
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void synchronize() const;

 private:
  CUstream s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream stream = nullptr);
  void synchronize() const;
  // Milliseconds between two recorded events.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  CUevent e_ = nullptr;
};

// Median of `reps` CUDA-event timings (legacy stream) of `call`, after `warmup` untimed calls; each
// timing brackets one call on an idle stream, so it includes the call's host cost.
double median_event_ms(int reps, int warmup, const std::function<void()>& call);

}  // namespace flexattn::jit
