#include "jit/device.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "flexattn/error.h"

namespace flexattn::jit {

std::string arch_for(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  return major == 9 && minor == 0 ? arch + "a" : arch;
}

int device_count() {
  int n = 0;
  cu_check(driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

namespace {

DeviceProps query_device_props(int device) {
  const DriverApi& d = driver();
  int n = device_count();
  check(device >= 0 && device < n,
        "device: expected an index in [0, " + std::to_string(n) + "), got " + std::to_string(device));
  CUdevice dev;
  cu_check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    cu_check(d.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  DeviceProps p;
  p.index = device;
  char name[256] = {};
  cu_check(d.cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  p.name = name;
  p.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p.arch = arch_for(p.major, p.minor);
  p.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p.smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p.smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  size_t mem = 0;
  cu_check(d.cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
  p.total_mem = int64_t(mem);
  return p;
}

}  // namespace

const DeviceProps& device_props(int device) {
  static std::mutex mu;
  static std::map<int, DeviceProps> cache;  // std::map nodes never move: references stay valid
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it == cache.end()) it = cache.emplace(device, query_device_props(device)).first;
  return it->second;
}

CUcontext use_device(int device) {
  static std::mutex mu;
  static std::vector<CUcontext> retained;
  const DriverApi& d = driver();
  int n = device_count();
  check(device >= 0 && device < n,
        "device: expected an index in [0, " + std::to_string(n) + "), got " + std::to_string(device));
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (retained.size() < size_t(n)) retained.resize(size_t(n), nullptr);
    if (!retained[size_t(device)]) {
      CUdevice dev;
      cu_check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
      cu_check(d.cuDevicePrimaryCtxRetain(&retained[size_t(device)], dev), "cuDevicePrimaryCtxRetain");
    }
    ctx = retained[size_t(device)];
  }
  cu_check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

void device_synchronize() { cu_check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  // A zero-byte request still gets a real allocation so ptr() is a valid, distinct address.
  cu_check(driver().cuMemAlloc(&ptr_, bytes ? bytes : 1),
           "cuMemAlloc of " + std::to_string(bytes) + " bytes");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = o.ptr_, size_ = o.size_;
    o.ptr_ = 0, o.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  check(bytes <= size_, "DeviceBuffer::upload: bytes must be <= buffer size " + std::to_string(size_) +
                            ", got " + std::to_string(bytes));
  if (bytes) cu_check(driver().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  check(bytes <= size_, "DeviceBuffer::download: bytes must be <= buffer size " + std::to_string(size_) +
                            ", got " + std::to_string(bytes));
  if (bytes) cu_check(driver().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::zero() {
  if (size_) cu_check(driver().cuMemsetD8(ptr_, 0, size_), "cuMemsetD8");
}

Stream::Stream() {
  constexpr unsigned kNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
  cu_check(driver().cuStreamCreate(&s_, kNonBlocking), "cuStreamCreate");
}
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void Stream::synchronize() const { cu_check(driver().cuStreamSynchronize(s_), "cuStreamSynchronize"); }

Event::Event() { cu_check(driver().cuEventCreate(&e_, 0), "cuEventCreate"); }
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(CUstream stream) { cu_check(driver().cuEventRecord(e_, stream), "cuEventRecord"); }
void Event::synchronize() const { cu_check(driver().cuEventSynchronize(e_), "cuEventSynchronize"); }
float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  cu_check(driver().cuEventElapsedTime(&ms, start.e_, end.e_), "cuEventElapsedTime");
  return ms;
}

double median_event_ms(int reps, int warmup, const std::function<void()>& call) {
  std::vector<double> ms;
  Event a, b;
  for (int i = 0; i < reps + warmup; ++i) {
    a.record();
    call();
    b.record();
    b.synchronize();
    if (i >= warmup) ms.push_back(Event::elapsed_ms(a, b));
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

}  // namespace flexattn::jit
